#!/usr/bin/env bash
# Start-up independent of the epoch count (issue #35 item 2): a server of
# 4 epochs walks one epoch before it serves, as one of 1 epoch does, counted
# in samples walked (start-up's own count, not a time); it plans the later
# epochs while serving, caps them at epoch 0's most padded tokens a rank
# (and 1/8 more), tells each one's batch count (EPOCH) before its first
# batch, and delivers every epoch whole: the stream equals --print-plan,
# every sample once an epoch, and each rank's batches of an epoch as many
# as the server told (lf-rank-loop checks each batch against the count).
# With the cap made to bind (LF_TEST_CAP_PERMILLE=800: below epoch 0's
# most), epoch 0 stays the uncapped plan's, a later epoch differs from it,
# every batch still fits the slots (the server would stop on one that did
# not), and every sample is still delivered once an epoch; the fingerprint
# differs from the default's, as the rule is in it (in the plan id).
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
grep -Eq "^lf-server: plan: epochs after the first planned while serving, a rank's step in them capped at [0-9]+ padded tokens \(epoch 0's most, [0-9]+, x 1\.125\), the ring slots sized for it$" \
  "$WORK/server.log" || fail "--epochs 4: no cap line: $(grep 'plan:' "$WORK/server.log")"
diff <(stream_of four) "$WORK/plan4" >/dev/null || fail "4 epochs: stream differs from --print-plan"
check_exactly_once four 2000 4
echo "start-up walks $four samples for 4 epochs as for 1 ($one); 4 epochs delivered whole, counts as told: ok"

# The cap made to bind. Reference: each epoch planned alone (a server of one
# epoch caps nothing), the plan without the cap.
export LF_TEST_CAP_PERMILLE=800
for e in 0 1 2 3; do
  LF_TEST_CAP_PERMILLE= "$LF_BIN/lf-server" "${PLAN[@]}" --epoch "$e" --epochs 1 --print-plan
done | sort -k1,1n -k2,2n -k3,3n >"$WORK/uncapped"
"$LF_BIN/lf-server" "${PLAN[@]}" --epochs 4 --print-plan | sort -k1,1n -k2,2n -k3,3n >"$WORK/capped"
cmp -s <(awk '$1 == 0' "$WORK/capped") <(awk '$1 == 0' "$WORK/uncapped") ||
  fail "LF_TEST_CAP_PERMILLE=800: epoch 0 differs from the uncapped plan"
! cmp -s <(awk '$1 > 0' "$WORK/capped") <(awk '$1 > 0' "$WORK/uncapped") ||
  fail "LF_TEST_CAP_PERMILLE=800: the cap never bound (epochs 1-3 as uncapped)"
fp_default=$(sed -n 's/^lf-server: plan fingerprint \([0-9a-f]*\) .*/\1/p' "$WORK/server.log")
start_server "${PLAN[@]}" --epochs 4
run_clients capped 2
wait_server
fp_capped=$(sed -n 's/^lf-server: plan fingerprint \([0-9a-f]*\) .*/\1/p' "$WORK/server.log")
[[ -n "$fp_default" && "$fp_default" != "$fp_capped" ]] ||
  fail "fingerprint '$fp_capped' with the cap at 0.8, '$fp_default' at the default"
diff <(stream_of capped) "$WORK/capped" >/dev/null || fail "capped: stream differs from --print-plan"
check_exactly_once capped 2000 4
unset LF_TEST_CAP_PERMILLE
check_no_leftovers
echo "cap binding at 0.8: epoch 0 unchanged, later epochs cut, all delivered once an epoch, fingerprint $fp_capped not $fp_default: ok"
