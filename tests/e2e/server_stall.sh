#!/usr/bin/env bash
# A client that stops releasing its batches (#28 F4): lf-rank-loop
# --hang-after 3 (a hung trainer), then a client stopped with SIGSTOP. Its
# rank holds its ring full, the planner waits for it, and the other rank's
# ring runs dry. Past --stall-ms the server names the rank, how long and
# which step in its log, lf-stat shows it "stalled", every rank gets that as
# its error (the other rank's lf_next returns LF_E_SERVER with the text,
# instead of waiting out its timeout), and the server ends with exit 1.
# Before, the other rank timed out ("timed out waiting for the server")
# and lf-stat showed the hung rank "running".
# The stall limit (1.5 s) is short for the test; the deadlines are hang
# guards, not timings.
source "$(dirname "$0")/server_lib.sh"
PY=/usr/bin/python3
[[ -x "$PY" ]] || { echo "skip: /usr/bin/python3 is needed"; exit 77; }

make_dataset "$WORK/ds"
SRV=(--data "$WORK/ds" --world 2 --seed 4 --slots 2 --heartbeat-ms 200 --stall-ms 1500)
"$LF_BIN/lf-server" "${SRV[@]}" --print-plan >"$WORK/plan.txt"

# RUN TAG RANK1-ARGS...: rank 0 runs freely, rank 1 with RANK1-ARGS; waits
# for lf-stat to show rank 1 stalled and for rank 0 and the server to end.
stall_run() {
  local tag=$1
  shift
  start_server "${SRV[@]}"
  "$LF_BIN/lf-rank-loop" --endpoint "$EP" --world 2 --rank 0 --timeout-ms 60000 \
    >"$WORK/$tag.r0.log" 2>&1 &
  R0=$!
  PIDS+=("$R0")
  "$LF_BIN/lf-rank-loop" --endpoint "$EP" --world 2 --rank 1 "$@" >"$WORK/$tag.r1.log" 2>&1 &
  R1=$!
  PIDS+=("$R1")
}

stall_seen() {
  wait_until 30 "lf-stat to show rank 1 stalled" "$WORK/$1.r0.log" -- rank_is 1 stalled
  wait_exit 30 "rank 0" "$R0" "$WORK/$1.r0.log"
  [[ $EXIT_RC -ne 0 ]] || fail "$1: rank 0 exited 0 although rank 1 stalled"
  grep -q "server: rank 1 stalled: its client has held the batch of epoch" "$WORK/$1.r0.log" ||
    { show_logs +1 "$WORK/$1.r0.log"; fail "$1: rank 0's error does not name the stalled rank"; }
  wait_exit 30 "the server" "$SERVER_PID" "$WORK/server.log"
  [[ $EXIT_RC -eq 1 ]] || { show_logs +1 "$WORK/server.log"; fail "$1: server exit $EXIT_RC, not 1"; }
  grep -q "^lf-server: rank 1 stalled: its client has held the batch of epoch .* for [0-9.]* s without releasing it (--stall-ms 1500)" "$WORK/server.log" ||
    { show_logs +1 "$WORK/server.log"; fail "$1: the server's log does not name the stall"; }
  kill -9 "$R1" 2>/dev/null || true
  { wait "$R1"; } 2>/dev/null || true
  check_no_leftovers
}

# A hung trainer: holds its third batch for good.
stall_run hang --hang-after 3
stall_seen hang
held=$(awk '$3 == 1' "$WORK/plan.txt" | sed -n 3p | awk '{print "epoch " $1 " step " $2}')
grep -q "rank 1 stalled: its client has held the batch of $held for" "$WORK/server.log" ||
  { show_logs +1 "$WORK/server.log"; fail "the server does not name rank 1's third batch ($held)"; }
echo "hang: $(grep -o -m1 'rank 1 stalled: [^;]*' "$WORK/server.log")"
echo "hang: rank 0: $(grep -o 'server: rank 1 stalled' "$WORK/hang.r0.log"), lf-stat showed rank 1 stalled, server exit 1"

# A stopped trainer (SIGSTOP), once it has batches (100 ms a step: its run
# outlasts the wait for them on a loaded machine).
stall_run stop --compute-us 100000
wait_until 30 "rank 1 to have batches" "$WORK/stop.r1.log" -- rank_is 1 running 2
kill -STOP "$R1"
stall_seen stop
echo "stop: $(grep -o -m1 'rank 1 stalled: [^;]*' "$WORK/server.log")"
echo "a rank that stops releasing is named by the server, lf-stat and every rank's error: ok"
