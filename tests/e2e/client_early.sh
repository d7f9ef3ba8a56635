#!/usr/bin/env bash
# A client started before its server, with the default connect timeout
# and the default endpoint of its job (issue 29, must hold: "a client
# started 30 s before a server ... connects and trains"): two ranks of job
# 55 (SLURM_JOB_ID) wait 12 s for a server that is not there yet, then it
# starts on the same job's default endpoint and both train the epoch,
# every sample once. (Before: the default timeout was 10 s, and the
# clients gave up with "no lf-server at ... welcomed rank" before the
# server started.) The server's own start-up planning, a minute for a
# large dataset, is e2e/server_startup's: its answers restart the wait.
source "$(dirname "$0")/server_lib.sh"

make_dataset "$WORK/ds"
export XDG_RUNTIME_DIR="$WORK/xdg" SLURM_JOB_ID=55
mkdir -m 700 "$XDG_RUNTIME_DIR"
EP=$XDG_RUNTIME_DIR/levelfeed/ctl-55
cpids=()
for r in 0 1; do
  "$LF_BIN/lf-rank-loop" --rank $r --world 2 --out "$WORK/early.r$r.txt" \
    >"$WORK/early.r$r.log" 2>&1 &
  cpids+=($!)
done
PIDS+=("${cpids[@]}")
sleep 12
ended "${cpids[@]}" && { show_logs +1 "$WORK"/early.r?.log; fail "the clients did not wait 12 s"; }
"$LF_BIN/lf-server" --data "$WORK/ds" --world 2 >"$WORK/server.log" 2>&1 &   # no --endpoint
SERVER_PID=$!
PIDS+=("$SERVER_PID")
wait_each 60 "early rank" "$WORK/early.r%d.log" "${cpids[@]}"
[[ ${RCS[0]} == 0 && ${RCS[1]} == 0 ]] ||
  { show_logs +1 "$WORK"/early.r?.log; fail "the early clients exited ${RCS[*]}"; }
wait_server
check_exactly_once early 2000 1
grep -qF "serving 2 rank(s) on ipc://$EP," "$WORK/server.log" ||
  fail "the server did not serve on the job's default endpoint: $(cat "$WORK/server.log")"
echo "two ranks started 12 s before their server, default timeout and endpoint: trained the epoch: ok"
