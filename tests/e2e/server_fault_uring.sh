#!/usr/bin/env bash
# io_uring completions that come back short or as -EAGAIN: with the test hook
# LF_TEST_URING_FAULTS=20,SEED lf-server fakes them on a fifth of the
# completions that read something, and its reader must resubmit the rest of
# each block. The streams (batch lines and per-batch tensor digests, the
# token bytes checked against the shards by the clients) are byte-identical
# to --io=pread's; the summary shows the hook fired on >= 10% of the
# completions. With LF_TEST_URING_FAULTS=stuck no read ever returns a byte:
# the server gives up after a bounded number of resubmissions and exits 1
# naming the shard file and offset, and the clients get that error (no
# hang). A malformed hook value is refused at start-up.
source "$(dirname "$0")/server_lib.sh"
need_uring

make_dataset "$WORK/ds"
PLAN=(--data "$WORK/ds" --seed 3 --epochs 2 --budget 400000 --world 2)

start_server "${PLAN[@]}" --io pread
run_clients pread 2 --verify "$WORK/ds" --pad-id 0
wait_server

# A small cache, so blocks are read again and there are more completions:
# 6.5 MB beyond what the server needs before its rings (its own resident
# memory among it: ~7.5 MB here, 19 MB under ASan), the rings' 2.6 MB
# among the 6.5.
need=$(memory_need "${PLAN[@]}" --io uring)
LF_TEST_URING_FAULTS=20,5 start_server "${PLAN[@]}" --io uring --memory-limit $((need + 6500000))
run_clients faults 2 --verify "$WORK/ds" --pad-id 0
wait_server
check_no_leftovers
[[ "$(stream_of faults)" == "$(stream_of pread)" ]] || fail "batch lines differ from pread's"
[[ "$(digests_of faults)" == "$(digests_of pread)" ]] || fail "tensor digests differ from pread's"
check_exactly_once faults 2000 2

read -r retries injected < <(sed -n 's/.*io_uring: \([0-9]*\) reads resubmitted.*, \([0-9]*\) of them injected.*/\1 \2/p' "$WORK/server.log")
blocks=$(sed -n 's/.* in \([0-9]*\) blocks, decoded.*/\1/p' "$WORK/server.log")
[[ -n "$retries" && -n "$blocks" ]] || fail "no io_uring line in the summary: $(cat "$WORK/server.log")"
# Every completion either finished a block or was resubmitted.
completions=$((blocks + retries))
[[ $((injected * 10)) -ge $completions ]] ||
  fail "the hook faked $injected of $completions completions (< 10%)"
[[ $retries -ge $injected ]] || fail "$injected faults injected, only $retries resubmitted"
echo "io_uring with $injected of $completions completions faked (short/-EAGAIN): streams == pread: ok"

LF_TEST_URING_FAULTS=stuck start_server --data "$WORK/ds" --world 1 --io uring
rc=0
"$LF_BIN/lf-rank-loop" --endpoint "$EP" --rank 0 --world 1 --timeout-ms 20000 \
  >"$WORK/stuck.r0.log" 2>&1 || rc=$?
wait_exit 30 "the server that cannot read" "$SERVER_PID"
[[ $EXIT_RC -ne 0 ]] || fail "the server served a dataset it could not read"
[[ $rc -ne 0 ]] || fail "the client got no error from a server that could not read"
grep -q "error: read: $WORK/ds/shard-[0-9]*\.lfs at byte [0-9]*: Resource temporarily unavailable 1000 times in a row, nothing read" \
  "$WORK/server.log" || fail "no clear read error: $(cat "$WORK/server.log")"
grep -q "server: read: .*shard-.*nothing read" "$WORK/stuck.r0.log" ||
  fail "the client did not get the server's reason: $(cat "$WORK/stuck.r0.log")"
check_no_leftovers
echo "reads that never progress: the server stops with the file and offset, the client gets it: ok"

if LF_TEST_URING_FAULTS=abc "$LF_BIN/lf-server" "${PLAN[@]}" --endpoint "$EP" >"$WORK/bad.log" 2>&1; then
  fail "a malformed LF_TEST_URING_FAULTS was accepted"
fi
grep -q "LF_TEST_URING_FAULTS" "$WORK/bad.log" || fail "no message for a malformed hook: $(cat "$WORK/bad.log")"
echo "malformed hook refused: ok"
