#!/usr/bin/env bash
# Resume: two ranks save their state after K batches, clients and server
# stop, a new server and new clients restore; the two pieces, end to end,
# equal an uninterrupted run batch for batch and byte for byte. K is taken
# mid-epoch, exactly at the first epoch's end, and inside the second epoch.
# A state restored against another plan (another seed, micro-batch cuts or
# cost per micro-batch) is refused.
source "$(dirname "$0")/server_lib.sh"

make_dataset "$WORK/ds"
SRV=(--data "$WORK/ds" --world 2 --seed 5 --epochs 2 --budget 400000 --slots 3)

start_server "${SRV[@]}"
run_clients full 2 --verify "$WORK/ds"
wait_server
steps0=$(awk '$1 == 0' "$WORK/full.r0.txt" | wc -l)
total=$(wc -l <"$WORK/full.r0.txt")
[[ $steps0 -gt 20 && $total -gt $steps0 ]] || fail "unexpected plan: $steps0 of $total steps in epoch 0"

for k in 17 "$steps0" $((steps0 + 9)); do
  resume_equals_full "$k" 2 "$WORK/ds"
  check_no_leftovers
  echo "resume after $k batches: ok"
done

# The baselines' orders, drawn as they go (order version 2), resume too: a
# cut inside epoch 0's second sorted mega-batch (50 steps of 2 x 4) and one
# in epoch 1.
for sampler in naive sorted; do
  SRV=(--data "$WORK/ds" --world 2 --seed 5 --epochs 2 --sampler "$sampler" --batch-per-rank 4
       --slots 3)
  start_server "${SRV[@]}"
  run_clients full 2 --verify "$WORK/ds"
  wait_server
  steps0=$(awk '$1 == 0' "$WORK/full.r0.txt" | wc -l)
  [[ $steps0 -gt 60 ]] || fail "$sampler: $steps0 steps in epoch 0"
  for k in 61 $((steps0 + 7)); do
    resume_equals_full "$k" 2 "$WORK/ds"
    check_no_leftovers
    echo "$sampler: resume after $k batches: ok"
  done
done
SRV=(--data "$WORK/ds" --world 2 --seed 5 --epochs 2 --budget 400000 --slots 3)

# A saved state belongs to its plan: another seed refuses it, and so does
# anything else that changes the stream: the micro-batch cuts (their
# overhead and cap) and the cost per micro-batch, d, which moves samples
# between ranks (these three once restored into the other plan).
refuses_state() {   # STATE SERVER-ARGS...: the server must refuse the state
  local state=$1; shift
  start_server "${SRV[@]}" "$@"
  if "$LF_BIN/lf-rank-loop" --endpoint "$EP" --rank 0 --world 2 --restore "$state" \
      >"$WORK/other.log" 2>&1; then fail "a state of another plan ($*) was accepted"; fi
  grep -q "saved state" "$WORK/other.log" || fail "other plan ($*): $(cat "$WORK/other.log")"
  kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
}
refuses_state "$WORK/state.17.0" --seed 6
refuses_state "$WORK/state.17.0" --micro-overhead 20000
refuses_state "$WORK/state.17.0" --micro-max-padded 3000
start_server "${SRV[@]}" --cost 1,0.0001,10,0
run_clients d0 2 --max-batches 17 --save "$WORK/state.d0.{r}"
wait_server
refuses_state "$WORK/state.d0.0" --cost 1,0.0001,10,5000
check_no_leftovers
echo "state of another plan refused: ok"
