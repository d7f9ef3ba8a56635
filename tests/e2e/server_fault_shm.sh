#!/usr/bin/env bash
# Shared memory that runs out: the rings are memfds whose pages are reserved
# (posix_fallocate) and mapped at start-up, so a limit is met there, as a
# clear error and exit 1, never as a SIGBUS during delivery. Made to fail
# safely here with a file-size limit (ulimit -f: shmem's fallocate honours
# RLIMIT_FSIZE) below one ring; and a --memory-limit below the rings is
# refused before any is made: one the process is over already, before it
# plans (issue #35: at 10^9 samples that was 12 minutes in). Nothing is
# left behind.
source "$(dirname "$0")/server_lib.sh"

make_dataset "$WORK/ds"
ARGS=(--data "$WORK/ds" --seed 3 --budget 400000 --world 2 --endpoint "$EP")

expect_refusal() {   # TAG PATTERN: the last command's output in $WORK/TAG.log
  local tag=$1 pat=$2
  grep -q "$pat" "$WORK/$tag.log" || fail "$tag: no message matching '$pat': $(cat "$WORK/$tag.log")"
  check_no_leftovers
  echo "$tag: $(grep -m1 "$pat" "$WORK/$tag.log")"
}

# 1 MiB file-size limit; a ring here is 4 slots of ~1 MiB.
rc=0
(ulimit -f 1024; exec timeout 20 "$LF_BIN/lf-server" "${ARGS[@]}") >"$WORK/fsize.log" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || fail "fsize: lf-server exited $rc, want 1 (a signal or a hang is a failure): $(cat "$WORK/fsize.log")"
expect_refusal fsize "cannot reserve [0-9]* bytes of shared memory for rank 0's ring"

rc=0
timeout 20 "$LF_BIN/lf-server" "${ARGS[@]}" --memory-limit 1M >"$WORK/limit.log" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || fail "limit: lf-server exited $rc, want 1: $(cat "$WORK/limit.log")"
expect_refusal limit "memory-limit [0-9]* is below rings"
grep -q "below rings 0 .*, before planning: the rings are sized by the plan" "$WORK/limit.log" ||
  fail "limit: 1M, which the process is over before it plans, was not refused before planning: $(cat "$WORK/limit.log")"

# The same limit with rings that fit it (2 slots, a small batch): served.
(ulimit -f 2048; exec "$LF_BIN/lf-server" "${ARGS[@]}" --slots 2 --budget 100000) >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
PIDS+=("$SERVER_PID")
wait_until 20 "the server to start (its socket $EP)" -- test -S "$EP"
run_clients fits 2 --verify "$WORK/ds"
wait_server
check_exactly_once fits 2000 1
check_no_leftovers
echo "rings within the file-size limit: served, exactly once: ok"
