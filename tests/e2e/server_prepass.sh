#!/usr/bin/env bash
# lf-server's start-up prepass walks the epochs in threads of their own (a
# share of the epochs each): the slots of a 4-epoch run fit the largest
# batch of any epoch, as large as the largest of four one-epoch servers
# started at epochs 0..3, and the 4-epoch stream equals the plan with every
# sample once per epoch. The seed is one whose largest batch falls in a
# later epoch (checked), so a prepass that kept only its first share's
# largest batch fails here.
source "$(dirname "$0")/server_lib.sh"

make_dataset "$WORK/ds"
PLAN=(--data "$WORK/ds" --world 2 --seed 4)

slot_bytes() {   # lf-server ARGS...: the slot size it serves with
  start_server "${PLAN[@]}" "$@"
  kill -INT "$SERVER_PID"
  wait "$SERVER_PID" || true   # stopped by the signal: exit 1
  sed -n 's/.*slots of \([0-9]*\) bytes.*/\1/p' "$WORK/server.log"
}

largest=0 first=
for e in 0 1 2 3; do
  b=$(slot_bytes --epoch "$e" --epochs 1)
  [[ -n "$b" ]] || fail "epoch $e: no slot size in $(cat "$WORK/server.log")"
  first=${first:-$b}
  ((b > largest)) && largest=$b
done
((largest > first)) || fail "seed 4: epoch 0 has the largest batch ($first bytes); pick another seed"
all=$(slot_bytes --epochs 4)
[[ "$all" == "$largest" ]] || fail "4 epochs: slots of $all bytes, the largest epoch needs $largest"
echo "prepass: slots of $all bytes, the largest of the epochs' (epoch 0: $first): ok"

"$LF_BIN/lf-server" "${PLAN[@]}" --epochs 4 --print-plan | sort -k1,1n -k2,2n -k3,3n >"$WORK/plan"
start_server "${PLAN[@]}" --epochs 4
run_clients four 2
wait_server
diff <(stream_of four) "$WORK/plan" >/dev/null || fail "4 epochs: stream differs from the plan"
check_exactly_once four 2000
check_no_leftovers
echo "4 epochs: plan, exactly-once, no leftovers: ok"
