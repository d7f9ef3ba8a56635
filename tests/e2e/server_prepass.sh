#!/usr/bin/env bash
# lf-server's start-up measures epoch 0 (a balanced token plan: its first
# steps, the whole epoch here) and caps every epoch from it (server/README.md,
# *Planning ahead*): the slots are sized for the cap, the same for a run of
# one epoch or four and for a run started at a later --epoch (the cap is
# epoch 0's, whatever epoch a run starts at: a state saved in one resumes
# in the other), and the 4-epoch stream equals the plan with every sample
# once per epoch (a batch that did not fit its slot would stop the server).
# Before the cap covered every epoch, each one-epoch server sized its slots
# from its own epoch's largest batch (seed 4: epoch 0's 593,920 bytes, less
# than a later epoch's); now all say the cap's. And a server started at a later epoch plans it
# as a run from epoch 0 does, for every sampler. The server says what its
# start-up is doing (planning E epochs, in how many threads), and warns
# once when a budget far below the default makes many samples outliers that
# wait long for their group (it served such plans silently), with the count
# lf-plan reports; a default plan, or --quiet, prints no warning.
source "$(dirname "$0")/server_lib.sh"

make_dataset "$WORK/ds"
PLAN=(--data "$WORK/ds" --world 2 --seed 4)

slot_bytes() {   # lf-server ARGS...: the slot size it serves with
  start_server "${PLAN[@]}" "$@"
  kill -INT "$SERVER_PID"
  wait "$SERVER_PID" || true   # stopped by the signal: exit 1
  sed -n 's/.*slots of \([0-9]*\) bytes.*/\1/p' "$WORK/server.log"
}

all=$(slot_bytes --epochs 4)
[[ -n "$all" ]] || fail "4 epochs: no slot size in $(cat "$WORK/server.log")"
for e in 0 1 2 3; do
  b=$(slot_bytes --epoch "$e" --epochs 1)
  [[ "$b" == "$all" ]] || fail "epoch $e alone: slots of '$b' bytes, 4 epochs from 0: $all (one cap, epoch 0's)"
done
echo "prepass: slots of $all bytes, the cap's, for 4 epochs and for each epoch alone: ok"

# Each epoch's plan depends on nothing before it, for every sampler: a
# server started at --epoch 2 plans epoch 2 as one started at epoch 0. With
# 3 ranks and seed 9 the baselines' default batch measured on epoch 2 would
# be 17 samples a rank, on epoch 0 it is 16: it is measured on epoch 0.
EPOCHS=(--data "$WORK/ds" --world 3 --seed 9)
for sampler in balanced naive sorted; do
  "$LF_BIN/lf-server" "${EPOCHS[@]}" --sampler $sampler --epochs 3 --print-plan |
    awk '$1 == 2' >"$WORK/from0"
  "$LF_BIN/lf-server" "${EPOCHS[@]}" --sampler $sampler --epoch 2 --epochs 1 --print-plan >"$WORK/from2"
  [[ -s "$WORK/from2" ]] && cmp -s "$WORK/from0" "$WORK/from2" ||
    fail "$sampler: --epoch 2 plans epoch 2 otherwise than a run from epoch 0"
done
echo "--epoch 2 plans epoch 2 as a run from epoch 0 (balanced, naive, sorted): ok"

"$LF_BIN/lf-server" "${PLAN[@]}" --epochs 4 --print-plan | sort -k1,1n -k2,2n -k3,3n >"$WORK/plan"
start_server "${PLAN[@]}" --epochs 4
run_clients four 2
wait_server
grep -Eq "^lf-server: planning 1 epoch\(s\) of 2000 samples to size the rings$" \
  "$WORK/server.log" || fail "no start-up planning line: $(head -2 "$WORK/server.log")"
# the first epoch as a trainer sees it, every step counted (balancer/README.md)
grep -Eq "^lf-server: plan: epoch 0, every step counted: [0-9]+ steps, epoch sum-max/sum-mean 1\.[0-9]{5}, worst step 1\.[0-9]{5}; step tokens 0\.[0-9]{3}-[0-9.]+x the median step's; 0 empty rank-step\(s\); nothing dropped: 0 samples, 0 tokens \(0 % of the tokens\)$" \
  "$WORK/server.log" || fail "no start-up balance line: $(grep 'plan:' "$WORK/server.log")"
! grep -q "warning" "$WORK/server.log" || fail "default budget: $(grep warning "$WORK/server.log")"
diff <(stream_of four) "$WORK/plan" >/dev/null || fail "4 epochs: stream differs from the plan"
check_exactly_once four 2000 4
check_no_leftovers
echo "4 epochs: plan, exactly-once, no leftovers: ok"

# A budget a twelfth of the default (515198 here): 457 of the 2000 samples
# (23 %) are outliers, waiting about half the epoch for their group. The
# warning says so once (of epoch 0, the one start-up walks) with lf-plan's count and
# longest wait for the same flags; --quiet keeps the warning (and only it).
# Outliers wait for a group only unbounded (--step-bound none); bounded, they
# go at their place in the order and start-up's note names the fix instead.
"$LF_BIN/lf-plan" "$WORK/ds" --world 2 --seed 4 --budget 40000 --step-bound none --sampler balanced \
  >"$WORK/tiny.plan" || fail "lf-plan --budget 40000"
read -r n waited < <(sed -n 's/^  outliers *\([0-9]*\) released in groups, .* max \([0-9]*\) steps$/\1 \2/p' \
  "$WORK/tiny.plan")
[[ -n "$n" ]] && ((n > 100)) || fail "lf-plan --budget 40000: few outliers: $(cat "$WORK/tiny.plan")"
slot_bytes --budget 40000 --step-bound none --epochs 2 >/dev/null
grep -q "^lf-server: warning: epoch 0 holds back $n of its 2000 samples ([0-9.]*%) as outliers, .*, at most $waited, of the epoch's [0-9]*$" \
  "$WORK/server.log" || fail "budget 40000: no warning of $n outliers waiting up to $waited steps: $(cat "$WORK/server.log")"
[[ $(grep -c "warning" "$WORK/server.log") == 1 ]] && grep -q -- "raise --budget (now 40000;" "$WORK/server.log" ||
  fail "budget 40000: not one warning naming --budget: $(cat "$WORK/server.log")"
slot_bytes --budget 40000 --step-bound none --quiet >/dev/null
grep -q "^lf-server: warning: epoch 0 holds back $n " "$WORK/server.log" &&
  ! grep -v -e "^lf-server: warning: " -e "^lf-server: with that many outliers" "$WORK/server.log" ||
  fail "--quiet: not the warning alone: $(cat "$WORK/server.log")"
check_no_leftovers
echo "budget 40000: warns of $n outliers (lf-plan's count) once, --quiet too; default budget: none: ok"

# Samples the plan leaves out are never delivered: they fit no cap
# (--max-tokens 3000 --overflow drop: 99 here, each longer), or are
# outliers under --outlier reject. The server names how many (lf-plan's
# counts), their share of the tokens and the first few, once, for every
# epoch alike (it said nothing). Split, the default, leaves nothing out.
left_out() {   # lf-server and lf-plan ARGS...: sets rej and cap from lf-plan; the warning in server.log
  "$LF_BIN/lf-plan" "$WORK/ds" --world 2 --seed 4 --sampler balanced "$@" >"$WORK/left.plan" ||
    fail "lf-plan $*"
  read -r rej cap < <(sed -n 's/^  rejected *\([0-9]*\) outliers, \([0-9]*\) over a cap or row$/\1 \2/p' \
    "$WORK/left.plan")
  slot_bytes "$@" --epochs 2 >/dev/null
  [[ $(grep -c "leaves out" "$WORK/server.log") == 1 ]] || fail "$*: not one warning: $(cat "$WORK/server.log")"
}
left_out --max-tokens 3000 --overflow drop
((rej == 0 && cap > 10)) || fail "lf-plan --max-tokens 3000: $rej outliers, $cap over a cap"
grep -q "^lf-server: warning: each epoch leaves out $cap of the 2000 samples, [0-9.]* % of the tokens, never delivered: $cap that fit no cap or row (--max-tokens, .*); sample(s) [0-9, ]*, \.\.\.$" \
  "$WORK/server.log" || fail "--max-tokens 3000: no warning of $cap samples: $(cat "$WORK/server.log")"
for id in $(sed -n 's/.*; sample(s) \([0-9, ]*\), \.\.\.$/\1/p' "$WORK/server.log" | tr -d ,); do
  len=$("$LF_BIN/lf-shard" cat "$WORK/ds" "$id" | sed -n 's/.*, cost input \([0-9]*\)$/\1/p' | head -1)
  ((len > 3000)) || fail "--max-tokens 3000: sample $id named, of $len tokens"
done
left_out --max-tokens 3000 --overflow drop --budget 40000 --outlier reject
((rej > 10 && cap > 10)) || fail "lf-plan --outlier reject: $rej outliers, $cap over a cap"
grep -q "^lf-server: warning: each epoch leaves out $((rej + cap)) of the 2000 samples, [0-9.]* % of the tokens, never delivered: $rej outlier(s) (--outlier reject: .*) and $cap that fit no cap" \
  "$WORK/server.log" || fail "--outlier reject: no warning of $rej + $cap samples: $(cat "$WORK/server.log")"
"$LF_BIN/lf-plan" "$WORK/ds" --world 2 --seed 4 --max-tokens 3000 >"$WORK/split.plan" ||
  fail "lf-plan --max-tokens 3000"
grep -q "^  tokens dropped    0 (every token placed once" "$WORK/split.plan" ||
  fail "--max-tokens 3000, split: $(grep dropped "$WORK/split.plan")"
check_no_leftovers
echo "left out: $cap over --max-tokens 3000 (each named one longer), $rej outliers rejected: lf-plan's counts: ok"
