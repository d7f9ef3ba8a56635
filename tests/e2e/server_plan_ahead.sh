#!/usr/bin/env bash
# Start-up independent of the epoch count and of the dataset's size (issue
# #35 item 2): a balanced token plan's server measures epoch 0's first
# steps (PLAN_CLI_PREFIX_SAMPLES: here the whole epoch, which it then also
# counts and reports, as one of 1 epoch does), counted in samples walked
# (start-up's own count, not a time); it caps every epoch from epoch 0 on
# at the most padded tokens a rank held in them (and 1/8 more), plans the
# later epochs while serving, tells each one's batch count (EPOCH) before
# its first batch, and delivers every epoch whole: the stream equals
# --print-plan, every sample once an epoch, and each rank's batches of an
# epoch as many as the server told (lf-rank-loop checks each batch against
# the count once told). With LF_TEST_SCOUT_EPOCH0=1 epoch 0 is left to the
# planner's scout as on a dataset larger than the prefix: start-up walks
# no epoch, the first batches come before epoch 0's count (EPOCH; the
# scout made late with LF_TEST_SCOUT_DELAY_MS), the scout prints the
# epoch's report, and the stream is the same. With the cap
# made to bind (LF_TEST_CAP_PERMILLE=800: below epoch 0's most), every
# epoch differs from the default's, epoch 0 included (the cap applies from
# it), every batch still fits the slots (the server would stop on one that
# did not), and every sample is still delivered once an epoch; the
# fingerprint differs from the default's, as the rule is in it (in the
# plan id). lf-plan, capping its plan by the same rule, plans as many steps
# in an epoch as the server, where the cap binds and where it does not.
source "$(dirname "$0")/server_lib.sh"

make_dataset "$WORK/ds"
PLAN=(--data "$WORK/ds" --world 2 --seed 4)

walked() {   # the samples start-up walked, from server.log
  sed -n 's/^lf-server: plan: start-up walked \([0-9]*\) sample(s) or piece(s), .*/\1/p' \
    "$WORK/server.log"
}

start_server "${PLAN[@]}" --epochs 1
run_clients one 2
wait_server
one=$(walked)
[[ "$one" == 2000 ]] || fail "--epochs 1: start-up walked '$one' samples: $(cat "$WORK/server.log")"

"$LF_BIN/lf-server" "${PLAN[@]}" --epochs 4 --print-plan | sort -k1,1n -k2,2n -k3,3n >"$WORK/plan4"
start_server "${PLAN[@]}" --epochs 4
run_clients four 2
wait_server
four=$(walked)
[[ "$four" == "$one" ]] ||
  fail "--epochs 4: start-up walked '$four' samples, --epochs 1 $one: $(cat "$WORK/server.log")"
grep -q "^lf-server: plan: start-up walked 2000 sample(s) or piece(s), 1 of the run's 4 epoch(s)$" \
  "$WORK/server.log" || fail "--epochs 4: no start-up count line: $(grep walked "$WORK/server.log")"
grep -Eq "^lf-server: plan: every epoch planned while serving, a rank's step capped at [0-9]+ padded tokens \(the most in epoch 0's first [0-9]+ samples, [0-9]+, x 1\.125\), the ring slots sized for it$" \
  "$WORK/server.log" || fail "--epochs 4: no cap line: $(grep 'plan:' "$WORK/server.log")"
diff <(stream_of four) "$WORK/plan4" >/dev/null || fail "4 epochs: stream differs from --print-plan"
check_exactly_once four 2000 4
echo "start-up walks $four samples for 4 epochs as for 1 ($one); 4 epochs delivered whole, counts as told: ok"

# Epoch 0 counted by the scout while served, as past the prefix: its count
# taken mid-epoch (no delay), or once the planner has reached the epoch's
# end (the scout 1.5 s late), the clients' batches before it (lf-rank-loop
# checks the epoch against its count at its end).
for delay in 0 1500; do
  LF_TEST_SCOUT_EPOCH0=1 LF_TEST_SCOUT_DELAY_MS=$delay start_server "${PLAN[@]}" --epochs 4
  run_clients scout$delay 2
  wait_server
  grep -q "^lf-server: plan: start-up walked 2000 sample(s) or piece(s), 0 of the run's 4 epoch(s)$" \
    "$WORK/server.log" || fail "scout: no start-up count line: $(grep walked "$WORK/server.log")"
  grep -q "^lf-server: plan: epoch 0, every step counted: " "$WORK/server.log" ||
    fail "scout: epoch 0's report was not printed: $(grep 'plan:' "$WORK/server.log")"
  diff <(stream_of scout$delay) "$WORK/plan4" >/dev/null ||
    fail "scout, ${delay} ms late: stream differs from --print-plan"
  check_exactly_once scout$delay 2000 4
done
echo "epoch 0 counted by its scout while served (0 and 1.5 s late): the same stream, its report printed: ok"

# The cap made to bind, from epoch 0 on. Reference: the default plan.
export LF_TEST_CAP_PERMILLE=800
"$LF_BIN/lf-server" "${PLAN[@]}" --epochs 4 --print-plan | sort -k1,1n -k2,2n -k3,3n >"$WORK/capped"
! cmp -s <(awk '$1 == 0' "$WORK/capped") <(awk '$1 == 0' "$WORK/plan4") ||
  fail "LF_TEST_CAP_PERMILLE=800: the cap did not bind in epoch 0"
! cmp -s <(awk '$1 > 0' "$WORK/capped") <(awk '$1 > 0' "$WORK/plan4") ||
  fail "LF_TEST_CAP_PERMILLE=800: the cap never bound in epochs 1-3"
fp_default=$(sed -n 's/^lf-server: plan fingerprint \([0-9a-f]*\) .*/\1/p' "$WORK/server.log")
start_server "${PLAN[@]}" --epochs 4
run_clients capped 2
wait_server
fp_capped=$(sed -n 's/^lf-server: plan fingerprint \([0-9a-f]*\) .*/\1/p' "$WORK/server.log")
[[ -n "$fp_default" && "$fp_default" != "$fp_capped" ]] ||
  fail "fingerprint '$fp_capped' with the cap at 0.8, '$fp_default' at the default"
diff <(stream_of capped) "$WORK/capped" >/dev/null || fail "capped: stream differs from --print-plan"
check_exactly_once capped 2000 4
# lf-plan caps its balanced plan as the server does (the same rule, the
# same figure): epochs 0 and 2 as many steps as the server's, with the
# server's cap, where the cap binds as where it does not.
cap=$(sed -n "s/^lf-server: plan: every epoch planned while serving, a rank's step capped at \([0-9]*\) .*/\1/p" \
  "$WORK/server.log")
for e in 0 2; do
  for ref in capped plan4; do
    steps=$(awk -v e=$e '$1 == e { print $2 }' "$WORK/$ref" | sort -u | wc -l)
    [[ $ref == capped ]] && k=$LF_TEST_CAP_PERMILLE || k=1125
    out=$(LF_TEST_CAP_PERMILLE=$k "$LF_BIN/lf-plan" "${PLAN[@]}" --epoch $e \
      --sampler balanced --json) || fail "lf-plan --epoch $e"
    [[ $out == *"\"steps\": $steps,"* ]] ||
      fail "lf-plan --epoch $e (cap x $k/1000) plans other steps than the server's $steps: $out"
    [[ $ref == plan4 || $out == *"\"rank_padded_cap\": $cap,"* ]] ||
      fail "lf-plan's cap is not the server's $cap: $out"
  done
done
unset LF_TEST_CAP_PERMILLE
check_no_leftovers
echo "cap binding at 0.8: every epoch cut, epoch 0 too, all delivered once an epoch, fingerprint $fp_capped not $fp_default: ok"
