#!/usr/bin/env bash
# A rank that stalls under lf-launch (#28 F4 as one command per node runs
# it). lf-server --stall-ms stops the run and gives every rank "rank 1
# stalled" as its error; then the job must end, not hang, and leave nothing
# (no server, no runtime directory, nothing in /dev/shm).
# - slow: rank 1 holds each batch 4 s (a trainer stuck for a while): both
#   ranks get the error (rank 1 when it asks for its next batch), the
#   trainer fails on its own, lf-launch exits 1 with it.
# - hung: rank 1 holds its third batch for good (--hang-after 3): rank 0
#   gets the error; rank 1 never ends by itself, so lf-launch ends the
#   trainer --stop-timeout after its server failed under it, and exits
#   non-zero. Before, lf-launch waited for that trainer for ever.
# The stall limit (1.5 s) and hung's --stop-timeout (2 s) are short for the
# test; the deadlines are hang guards, not timings. slow's --stop-timeout is
# 20 s, well past rank 1's 4 s hold: with 2 s, lf-launch ended the trainer
# at about 1.5 + 2 s, and where the server took longer than that margin to
# start serving both ranks (once under ASan in CI), rank 1 was ended in its
# hold before it could ask and print the error.
source "$(dirname "$0")/launch_lib.sh"

make_dataset "$WORK/ds"
SRV=(--data "$WORK/ds" --world 2 --seed 4 --slots 2 --heartbeat-ms 200 --stall-ms 1500)
STALLED="server: rank 1 stalled: its client has held the batch of epoch"

# TAG: lf-launch ended non-zero, the server's log and rank 0 name the stall.
stall_reported() {
  wait_exit 60 "lf-launch" "$LAUNCH_PID" "$WORK/$1.launch"
  [[ $EXIT_RC -ne 0 ]] || { show_logs +1 "$WORK/$1.launch"; fail "$1: lf-launch exited 0"; }
  grep -q "^lf-server: rank 1 stalled: its client has held the batch of epoch .* (--stall-ms 1500)" \
    "$WORK/$1.launch" || { show_logs +1 "$WORK/$1.launch"; fail "$1: the server's log names no stall"; }
  grep -qF "lf-launch: lf-server exited with status 1 while the trainer runs" "$WORK/$1.launch" ||
    { show_logs +1 "$WORK/$1.launch"; fail "$1: lf-launch does not say its server failed"; }
  grep -qF "$STALLED" "$WORK/$1.r0.log" ||
    { show_logs +1 "$WORK/$1.r0.log"; fail "$1: rank 0's error does not name the stalled rank"; }
  check_launch_leftovers "$1"
}

export LAUNCH_ARGS_R1="--compute-us 4000000"
start_launch slow "${SRV[@]}" --stop-timeout 20 -- "$TRAINER" slow 2 --timeout-ms 60000
stall_reported slow
[[ $EXIT_RC -eq 1 ]] || { show_logs +1 "$WORK/slow.launch"; fail "slow: lf-launch exited $EXIT_RC, not the trainer's 1"; }
grep -qF "$STALLED" "$WORK/slow.r1.log" ||
  { show_logs +1 "$WORK/slow.r1.log"; fail "slow: rank 1's error does not name the stall"; }
echo "slow: $EXIT_RC; rank 0: $(grep -o 'server: rank 1 stalled' "$WORK/slow.r0.log"); rank 1: $(grep -o 'server: rank 1 stalled' "$WORK/slow.r1.log")"

export LAUNCH_ARGS_R1="--hang-after 3"
start_launch hung "${SRV[@]}" --stop-timeout 2 -- "$TRAINER" hung 2 --timeout-ms 60000
stall_reported hung
grep -q "lf-launch: the trainer still runs 2.0 s after lf-server failed under it" "$WORK/hung.launch" ||
  { show_logs +1 "$WORK/hung.launch"; fail "hung: lf-launch does not say it ends the trainer"; }
grep -qF "lf-launch: the trainer was killed by signal 15" "$WORK/hung.launch" ||
  { show_logs +1 "$WORK/hung.launch"; fail "hung: lf-launch does not say how the trainer ended"; }
echo "hung: lf-launch exit $EXIT_RC: $(grep -o 'lf-launch: the trainer still runs[^;]*' "$WORK/hung.launch")"
echo "a rank stalling under lf-launch: every rank's error, the job ends non-zero, nothing left: ok"
