#!/usr/bin/env bash
# Where each rank's step goes (#31 items 2 and 5): two real clients, rank 0
# computing 20 ms a step and rank 1 40 ms (lf-rank-loop --compute-us). The
# planner walks the steps in lock-step, so rank 0 waits for rank 1 each
# step: lf-stat must name rank 1 the slowest rank (compute), and show rank
# 0's wait as held back by rank 1 (the server's time with no batch out to
# rank 0, while the planner waited for a free slot of rank 1), not as a
# wait for data; its data-path figure stays below the held-back one. The
# client's own data wait (lf_next) and the server's split measure the same
# stretch for this loop (it releases right before lf_next): they agree
# within 15 % (or 5 ms) a step. The table says the same as --json.
# lf-stat is polled until it shows this (a deadline against a hang, not a
# timing): before, it had no such figures, and showed rank 0 "wait 36 ms/step".
# Then a synchronous pair (#31 item 1): rank 0 steps 40 ms from each
# batch's arrival, computing 10 ms of it and waiting 30 ms for rank 1 in a
# stand-in all-reduce (--sync-us, reported with lf_report_step_sync); rank 1
# computes 44 ms a step, so it leads and is never held back, whichever rank
# started first (on a slow machine or under a sanitizer), and rank 0 waits
# about 4 ms a step for its next batch: rank 1 is named the
# slowest (compute), rank 0's cause is its sync wait, not data wait, and its
# sync column shows it (before, STEP had no sync field and lf-stat showed
# "-"; lf-rank-loop had no --sync-us).
# Both runs end with the server's report per rank (#31 item 4): the share
# of each wait, what most of the time went to, how far compute follows the
# planned cost (not at all here: lf-rank-loop's compute is a fixed cadence,
# whatever the batch, so the report must call the cost model stale), the
# slowest steps and why, and rank 1 named the late rank.
source "$(dirname "$0")/server_lib.sh"
PY=/usr/bin/python3
[[ -x "$PY" ]] || { echo "skip: /usr/bin/python3 is needed"; exit 77; }

make_dataset "$WORK/ds"
# One run of a pair: the server, rank 0 and rank 1 with their lf-rank-loop
# options, lf-stat polled until its reading of MODE holds; then its table
# must show rank 0's row as ROW (a regex) and the server's summary at exit
# rank 0 as SUMMARY, and its end-of-run report hold each REPORT regex.
observe_pair() {   # MODE RANK0_ARGS RANK1_ARGS ROW SUMMARY REPORT...
  local r args=("$2" "$3") want
  start_server --data "$WORK/ds" --world 2 --seed 4 --slots 2 --epochs 4
  for r in 0 1; do
    # shellcheck disable=SC2086 # each word an option
    "$LF_BIN/lf-rank-loop" --endpoint "$EP" --world 2 --rank "$r" ${args[r]} \
      >"$WORK/r$r.log" 2>&1 &
    PIDS+=($!)
    cpid[r]=$!
  done
  wait_until 60 "lf-stat's reading of the $1 pair" "$WORK/r0.log" "$WORK/r1.log" -- \
    observe_reading "$1"
  echo "$SEEN"
  "$LF_BIN/lf-stat" "$EP" --count 1 >"$WORK/table.txt"
  grep -q "^slowest: rank 1 (compute)$" "$WORK/table.txt" &&
    grep -Eq "$4" "$WORK/table.txt" &&
    grep -Eq "^rank +state +epoch:step +data-wait +held-back +data-path +compute +sync" "$WORK/table.txt" ||
    { cat "$WORK/table.txt" >&2; fail "lf-stat's table does not say what its JSON says ($1)"; }
  sed -n '3,6p' "$WORK/table.txt"
  for r in 0 1; do wait_ok 60 "rank $r" "${cpid[r]}" "$WORK/r$r.log"; done
  wait_server
  grep -q "$5" "$WORK/server.log" ||
    { show_logs 5 "$WORK/server.log"; fail "the server's summary does not show rank 0's wait ($1)"; }
  for want in "${@:6}"; do
    grep -Eq "^lf-server: $want" "$WORK/server.log" ||
      { show_logs 12 "$WORK/server.log"; fail "the server's report lacks '$want' ($1)"; }
  done
  grep "^lf-server: .*report" -A2 "$WORK/server.log" | grep -v "^--"
}

observe_pair lockstep "--compute-us 20000" "--compute-us 40000" \
  "^ +0 running .* held back by rank 1$" \
  "rank 0: .* data wait (lf_next) [0-9.]* s, held back [0-9.]* s, data path [0-9.]* s" \
  "report, rank 0: [0-9]+ steps, .*; most of it data wait \(lf_next\)$" \
  "report, rank 1: [0-9]+ steps, .*sync wait not reported; most of it compute$" \
  "report: rank 1 is this node's late rank"
echo "rank 1 named the slowest (compute), rank 0 held back by it, not waiting for data: ok"
observe_pair sync "--compute-us 40000 --sync-us 30000" "--compute-us 44000" \
  "^ +0 running .* [0-9.]+ ms +([0-9.]+|-) +[0-9]/2  sync wait$" \
  "rank 0: .* sync wait [1-9][0-9.]* s;" \
  "report, rank 0: [0-9]+ steps, .*sync wait [0-9.]+ %; most of it sync wait \(the other ranks\)$" \
  "report, rank 1: [0-9]+ steps, .*; most of it compute$" \
  "  compute against planned cost: correlation -?[0-9.]+ over [0-9]+ steps, .*: compute does not follow the planned cost, a stale cost model\?" \
  "  slowest steps \(epoch:step\): [0-9]+:[0-9]+ [0-9.]+ ms \(((data|sync) wait|compute) [0-9.]+ ms" \
  "report: rank 1 is this node's late rank"
check_no_leftovers
echo "rank 1 named the slowest (compute), rank 0 waiting for it in sync, not for data: ok"
