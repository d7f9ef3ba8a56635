#!/usr/bin/env bash
# lf-launch itself killed with SIGKILL mid-run: nothing of it can run, but
# its server dies with it (PR_SET_PDEATHSIG: SIGKILL) and its trainer is
# asked to stop (SIGTERM), so neither outlives it; the rings were memfds,
# so /dev/shm is as it was. Only the runtime directory stays (nothing is
# left to remove it: docs/MULTINODE.md). The ranks hang after their second
# batch (as a stuck trainer would), so the server cannot end on its own
# and only its death signal can end it. The bound is a hang guard.
source "$(dirname "$0")/launch_lib.sh"

make_dataset "$WORK/ds"
start_launch k --data "$WORK/ds" --world 2 --seed 5 --budget 400000 --slots 2 -- \
  "$TRAINER" k 2 --hang-after 2
wait_until 30 "the trainer's ranks to start" "$WORK/k.launch" -- test -s "$WORK/k.pids"
read -ra ranks <"$WORK/k.pids"
PIDS+=("${ranks[@]}")   # hung for good: cleanup ends them
launched_server k || fail "no 'started' line: $(cat "$WORK/k.launch")"
PIDS+=("$SERVER_PID")
kill -9 "$LAUNCH_PID"
{ wait "$LAUNCH_PID"; } 2>/dev/null || true
t0=$(date +%s%N)
wait_until 20 "the server of the killed lf-launch to die" "$WORK/k.launch" -- all_gone "$SERVER_PID"
ms=$((($(date +%s%N) - t0) / 1000000))
wait_until 20 "the trainer to end" "$WORK/k.r0.log" -- all_gone "$(cat "$WORK/k.pid")"
now=$(ls /dev/shm | sort)
[[ "$now" == "$SHM_BEFORE" ]] || fail "/dev/shm changed: $(comm -13 <(echo "$SHM_BEFORE") <(echo "$now"))"
echo "lf-launch killed with SIGKILL: its server gone after $ms ms, its trainer ended, /dev/shm clean: ok"
