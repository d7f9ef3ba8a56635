#!/usr/bin/env bash
# Start-up independent of the epoch count for every kind of plan (issue #35
# item 2), not only balanced tokens (e2e/server_plan_ahead): the baselines
# (--sampler naive|sorted: tokens, images, frames) size their slots from
# the bound the plan guarantees (batch_per_rank, one more in the step an
# epoch's rest joins, x the longest sample, padded as they pad), balanced
# frames from the padded cap as tokens, balanced images from a cap on
# images a rank; none walks an epoch for it. Each kind: start-up walks the
# first epoch alone for --epochs 1 and for 4 (the epochs are small: it
# counts it for WELCOME), and with LF_TEST_SCOUT_EPOCH0=1 (as on a dataset
# past the prefix) no epoch, so the slots are the bound's alone; then the
# 4-epoch stream equals --print-plan, every sample once an epoch, each
# epoch's batches as many as the server told (EPOCH, lf-rank-loop checks),
# and no batch outgrew its slot (the server stops on one that does). The
# datasets make the rest join a last step (2000 tokens at world 3 and 37 a
# rank, 121 images or frames at world 2 and 4 a rank), where a rank gets
# one more than --batch-per-rank; balanced images run with
# LF_TEST_CAP_PERMILLE=800, so their cap binds and the slots are tight.
source "$(dirname "$0")/server_lib.sh"

make_dataset "$WORK/tok"
"$LF_BIN/lf-shard" synth images --out "$WORK/img" --samples 121 --seed 4 --min-side 48 \
  --max-side 160 --threads 1 >"$WORK/synth.log" 2>&1 || { cat "$WORK/synth.log" >&2; fail "synth images"; }
"$LF_BIN/lf-shard" synth frames --out "$WORK/fr" --samples 121 --seed 4 --len-median 40 \
  --len-max 300 --width 8 --threads 1 >"$WORK/synth.log" 2>&1 || { cat "$WORK/synth.log" >&2; fail "synth frames"; }

walked() {   # "SAMPLES EPOCHS RUN-EPOCHS": start-up's count, from server.log
  sed -n "s/^lf-server: plan: start-up walked \([0-9]*\) sample(s) or piece(s), \([0-9]*\) of the run's \([0-9]*\) epoch(s)$/\1 \2 \3/p" \
    "$WORK/server.log"
}

slot() { sed -n 's/.*slots of \([0-9]*\) bytes.*/\1/p' "$WORK/server.log"; }

# kind TAG SAMPLES WORLD ARGS...: the checks above for one kind of plan
kind() {
  local tag=$1 n=$2 world=$3 one four e
  shift 3
  local plan=(--world "$world" --seed 5 "$@")
  for e in 1 4; do
    start_server "${plan[@]}" --epochs $e
    kill -INT "$SERVER_PID"
    wait "$SERVER_PID" || true   # stopped by the signal: exit 1
    read -r w we wr < <(walked)
    [[ "$we $wr" == "1 $e" ]] && ((w >= n)) ||
      fail "$tag, --epochs $e: start-up walked '$w' sample(s), '$we' of '$wr' epoch(s), want the first alone: $(grep 'plan:' "$WORK/server.log")"
    [[ $e == 1 ]] && one=$(slot) || four=$(slot)
  done
  [[ -n "$one" && "$one" == "$four" ]] || fail "$tag: slots of '$one' bytes for 1 epoch, '$four' for 4"
  "$LF_BIN/lf-server" "${plan[@]}" --epochs 4 --print-plan 2>"$WORK/print.log" | sort -k1,1n -k2,2n -k3,3n >"$WORK/$tag.plan"
  LF_TEST_SCOUT_EPOCH0=1 start_server "${plan[@]}" --epochs 4
  read -r w we wr < <(walked)
  [[ "$we $wr" == "0 4" ]] && ((w <= n)) ||
    fail "$tag, scout: start-up walked '$w' sample(s), '$we' of '$wr' epoch(s), want none: $(grep 'plan:' "$WORK/server.log")"
  [[ "$(slot)" == "$one" ]] || fail "$tag, scout: slots of $(slot) bytes, walked: $one (the bound, not a walk)"
  run_clients "$tag" "$world"
  wait_server
  grep -q "^lf-server: plan: epoch 0, every step counted: " "$WORK/server.log" ||
    fail "$tag, scout: epoch 0's report was not printed: $(grep 'plan:' "$WORK/server.log")"
  diff <(stream_of "$tag") "$WORK/$tag.plan" >/dev/null || fail "$tag: stream differs from --print-plan"
  check_exactly_once "$tag" "$n" 4
  check_no_leftovers
  echo "$tag: start-up walks epoch 0 alone for 1 and 4 epochs, none by the scout, slots $one bytes (the bound); 4 epochs as planned, each sample once: ok"
}

kind naive-tok 2000 3 --data "$WORK/tok" --sampler naive --batch-per-rank 37
kind sorted-tok 2000 3 --data "$WORK/tok" --sampler sorted --batch-per-rank 37
kind naive-img 121 2 --data "$WORK/img" --sampler naive --batch-per-rank 4 --image-size 32x24
kind naive-fr 121 2 --data "$WORK/fr" --sampler naive --batch-per-rank 4
# lf-plan caps its balanced plan as the server does (plan_cli_later_cap):
# epoch 0 as many steps as the server's --print-plan, the server's cap
# (JSON KEY; the server's line says it in UNIT), for TAG's plan (ARGS).
like_lf_plan() {   # TAG KEY UNIT ARGS...
  local tag=$1 key=$2 unit=$3 cap steps out
  shift 3
  cap=$(sed -n "s/^lf-server: plan: every epoch planned while serving, a rank's step capped at \([0-9]*\) $unit .*/\1/p" \
    "$WORK/server.log")
  steps=$(awk '$1 == 0 { print $2 }' "$WORK/$tag.plan" | sort -u | wc -l)
  out=$("$LF_BIN/lf-plan" --world 2 --seed 5 "$@" --sampler balanced --json) || fail "lf-plan, $tag"
  [[ -n "$cap" && $out == *"\"steps\": $steps,"* && $out == *"\"$key\": $cap,"* ]] ||
    fail "lf-plan, $tag: not the server's $steps steps in epoch 0 and cap of '$cap' $unit: $out"
  echo "$tag: lf-plan plans the server's $steps steps, capped at $cap $unit: ok"
}

kind balanced-fr 121 2 --data "$WORK/fr" --samples-per-rank 4
like_lf_plan balanced-fr rank_padded_cap "padded frames" --data "$WORK/fr" --samples-per-rank 4
export LF_TEST_CAP_PERMILLE=800
kind balanced-img 121 2 --data "$WORK/img" --samples-per-rank 4 --image-size 32x24
grep -Eq "^lf-server: plan: every epoch planned while serving, a rank's step capped at [0-9]+ images \(the most in epoch 0's first [0-9]+ samples, [0-9]+, x 0\.800\), the ring slots sized for it$" \
  "$WORK/server.log" || fail "balanced images: no cap line: $(grep 'plan:' "$WORK/server.log")"
like_lf_plan balanced-img rank_samples_cap images --data "$WORK/img" --samples-per-rank 4
unset LF_TEST_CAP_PERMILLE
echo "every kind of plan starts without walking a later epoch: ok"
