#!/usr/bin/env bash
# A dataset made before lf-shard checked image sizes (F2, issue 28): one
# sample's JPEG header claims 65000x65000, over the transform's pixel limit
# (tests/tools/jpeg_oversize writes such a copy of a synthetic dataset with
# the shard library, as the old lf-shard did). --on-corrupt=fail (the
# default): the server stops, naming the sample, its shard file and the two
# ways out; the clients fail. --on-corrupt=skip: two epochs complete; that
# sample is quarantined (the log line, the summary's list, lf-stat's
# quarantined_images and quarantined_image_ids, asked while a run is held)
# and every other sample
# arrives exactly once per epoch, the stream being the plan less it (its
# block's neighbours included), every rank getting as many batches as the
# plan gives it; the images match the transform of the stored JPEGs.
source "$(dirname "$0")/server_lib.sh"

BAD=17
"$LF_BIN/lf-shard" synth images --out "$WORK/img" --samples 60 --seed 4 --min-side 48 \
  --max-side 160 --threads 1 >"$WORK/synth.log" 2>&1 || { cat "$WORK/synth.log" >&2; fail "synth images"; }
"$LF_BUILD/tests/tools/jpeg_oversize" "$WORK/img" "$WORK/old" "$BAD" || fail "jpeg_oversize"
"$LF_BIN/lf-shard" verify "$WORK/old" >/dev/null || fail "the old dataset does not verify"
IMG=(--image-size 48x40 --crop random --flip 0.5 --seed 11)
# An explicit budget: the default one, from the mean cost, is inflated by
# the claimed 4.2 G pixels.
PLAN=(--data "$WORK/old" --world 2 --epochs 2 --budget 150000 "${IMG[@]}")
SHARD="$WORK/old/shard-00000.lfs"

# fail: a non-zero exit; the message names sample, shard and what to do.
start_server "${PLAN[@]}"
run_clients_failing fail 2
wait_exit 20 "the server" "$SERVER_PID" "$WORK/server.log"
[[ $EXIT_RC -ne 0 ]] || fail "--on-corrupt=fail: the server exited 0"
msg="sample $BAD ($SHARD): the JPEG transform refuses it: input exceeds a configured limit: 65000x65000 = 4225000000 pixels > limit 50000000"
grep -qF "$msg" "$WORK/server.log" || fail "--on-corrupt=fail: no '$msg': $(cat "$WORK/server.log")"
for want in "re-create it with the current lf-shard create images" "--on-corrupt skip"; do
  grep -qF -- "$want" "$WORK/server.log" || fail "--on-corrupt=fail: no '$want': $(cat "$WORK/server.log")"
done
grep -q "sample $BAD" "$WORK/fail.r0.log" "$WORK/fail.r1.log" ||
  fail "no client names the sample: $(cat "$WORK/fail.r0.log" "$WORK/fail.r1.log")"
check_no_leftovers
echo "on-corrupt=fail: $(grep -o 'error: .*' "$WORK/server.log" | head -1)"

# skip: the expected stream is the plan less the refused sample.
"$LF_BIN/lf-server" "${PLAN[@]}" --print-plan 2>/dev/null | sort -k1,1n -k2,2n -k3,3n |
  awk -v bad="$BAD" '{n = split($5, ids, ","); out = ""; k = 0
       for (i = 1; i <= n; i++) if (ids[i] != bad) {out = out (k ? "," : "") ids[i]; k++}
       print $1, $2, $3, k, out}' | sed 's/ $//' >"$WORK/skip.plan"
grep -q " $BAD\(,\|$\)" <("$LF_BIN/lf-server" "${PLAN[@]}" --print-plan 2>/dev/null) ||
  fail "the plan does not hold sample $BAD"

start_server "${PLAN[@]}" --on-corrupt skip
run_clients skip 2 --verify "$WORK/old" "${IMG[@]}"
wait_server
grep -qF "quarantined: sample $BAD ($SHARD): the JPEG transform refuses it: input exceeds a configured limit" \
  "$WORK/server.log" || fail "skip: no quarantine line in the log: $(cat "$WORK/server.log")"
[[ $(grep -c "quarantined: sample" "$WORK/server.log") -eq 1 ]] ||
  fail "skip: the sample is named more than once: $(grep "quarantined:" "$WORK/server.log")"
grep -qF "quarantined 2 samples in 0 blocks" "$WORK/server.log" ||
  fail "skip: want 2 samples left out (one an epoch): $(grep quarantined "$WORK/server.log")"
grep -qF "quarantined 1 images the JPEG transform refuses: sample $BAD ($SHARD)" "$WORK/server.log" ||
  fail "skip: the summary does not name the image: $(grep quarantined "$WORK/server.log")"
diff <(stream_of skip | sed 's/ $//') "$WORK/skip.plan" >"$WORK/skip.diff" ||
  fail "skip: stream is not the plan less sample $BAD: $(head -5 "$WORK/skip.diff")"
check_exactly_once skip 59 2
b0=$(wc -l <"$WORK/skip.r0.txt") b1=$(wc -l <"$WORK/skip.r1.txt")
[[ $b0 -eq $b1 && $b0 -gt 0 ]] || fail "skip: ranks got $b0 and $b1 batches"
check_no_leftovers

# lf-stat, while a run is held (held_until) with rank 1 stuck 3 batches
# after the step that holds sample 17 in epoch 0.
refused_shown() {
  SEEN=$("$LF_BIN/lf-stat" "$EP" --json 2>/dev/null | /usr/bin/python3 -c 'import json, sys
o = json.load(sys.stdin)
print(o["quarantined_images"], ",".join(map(str, o["quarantined_image_ids"])))' 2>/dev/null) || true
  [[ "$SEEN" == "1 $BAD" ]]
}
step=$("$LF_BIN/lf-server" "${PLAN[@]}" --print-plan 2>/dev/null |
  awk -v bad="$BAD" '$1 == 0 && $5 ~ "(^|,)" bad "(,|$)" {print $2}')
[[ -n "$step" ]] || fail "sample $BAD is in no step of epoch 0"
start_server "${PLAN[@]}" --on-corrupt skip
held_until $((step + 4)) "lf-stat to show quarantined_images 1, ids $BAD" refused_shown
check_no_leftovers
echo "on-corrupt=skip: sample $BAD quarantined (log, summary, lf-stat '1 $BAD' while held), 59 others once per epoch, $b0 batches a rank: ok"
