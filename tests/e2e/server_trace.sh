#!/usr/bin/env bash
# The trainers' own run as lf-train draws it (#31 item 3): lf_client_trace
# and Loader(trace=, chart=) have the node's lf-server write one Chrome
# trace and one SVG chart (common/timeline.c, lf-train's writer) holding
# every local rank's steps and the server's own stages.
#  1. Two lf-rank-loop ranks, computing 20 and 40 ms a step, each with
#     --trace/--chart: the trace parses, has pids 1 and 2 for the ranks and
#     3 for the server, a track per rank and per stage thread, read,
#     decode, assemble and ring wait slices, no overlapping slices on any
#     track (e2e/check_timeline.py); each rank's track has a step per batch
#     it got, paired with the batch's planned cost and samples; the server
#     assembled every batch; the chart is an SVG with a panel a rank
#     (rendered by rsvg-convert where present). Both ranks get the answer
#     only once both asked: the files exist when lf-rank-loop returns.
#  2. Two Python ranks with Loader(trace=, chart=) given relative paths
#     (resolved in the trainer's directory), no report_step of their own:
#     the loader reports each step, and the files exist as the last
#     epoch's `for` ends, with the same checks.
#  3. A server that serves ranks 2-3 of a world of 4 (one node of two)
#     writes its files with ".ranks2-3" in their names, its tracks named
#     for ranks 2 and 3.
# Before, lf-rank-loop had no --trace, Loader no trace=, lf_client_trace
# did not exist, and the server kept no stage intervals.
source "$(dirname "$0")/server_lib.sh"
source "$(dirname "$0")/python_lib.sh"

make_dataset "$WORK/ds"

# Ranks FIRST..LAST of lf-rank-loop with the server at $EP, each with ARGS
# and its rank's compute (COMPUTE x (its place + 1) us), to their end.
rank_loops() {     # TAG WORLD FIRST LAST COMPUTE ARGS...
  local tag=$1 world=$2 first=$3 last=$4 compute=$5 r
  shift 5
  for ((r = first; r <= last; r++)); do
    "$LF_BIN/lf-rank-loop" --endpoint "$EP" --world "$world" --rank "$r"       --out "$WORK/$tag.r$r.txt" --compute-us $((compute * (r - first + 1))) "$@"       >"$WORK/$tag.r$r.log" 2>&1 &
    PIDS+=($!)
    cpid[r]=$!
  done
  for ((r = first; r <= last; r++)); do wait_ok 60 "rank $r" "${cpid[r]}" "$WORK/$tag.r$r.log"; done
}

# 1. two C ranks
start_server --data "$WORK/ds" --world 2 --seed 4 --slots 2 --epochs 1
rank_loops c 2 0 1 20000 --trace "$WORK/c.json" --chart "$WORK/c.svg"
wait_server
grep "^lf-server: trace $WORK/c.json, chart $WORK/c.svg: 2 ranks" "$WORK/server.log" ||
  { show_logs 5 "$WORK/server.log"; fail "the server did not say it wrote the trace"; }
check_trace "$WORK/c.json" 2 server
check_chart "$WORK/c.svg" 2
"$PY" - "$WORK/c.json" "$(wc -l <"$WORK/c.r0.txt")" "$(wc -l <"$WORK/c.r1.txt")" <<'PY' ||
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
for r in (0, 1):
    steps = [e for e in ev if e["pid"] == r + 1 and e["name"] == "compute"]
    assert len(steps) == int(sys.argv[2 + r]), ("rank %d: %d steps" % (r, len(steps)), sys.argv)
    assert all(e["args"]["planned_cost"] > 0 and e["args"]["samples"] > 0 for e in steps), steps[:3]
batches = int(sys.argv[2]) + int(sys.argv[3])
assembled = sum(e["name"] == "assemble" for e in ev)
assert assembled == batches, (assembled, batches)
print("c: a step a batch on each rank, each with its planned cost; %d batches assembled" % batches)
PY
  fail "the trace's steps do not match the batches"

# 2. two Python ranks, Loader(trace=, chart=)
if python_loads_lib; then
  need_python_module numpy
  start_server --data "$WORK/ds" --world 2 --seed 4 --slots 2 --epochs 2
  cat >"$WORK/rank.py" <<'PYEOF'
import os, sys, time
import levelfeed
rank = int(sys.argv[2])
loader = levelfeed.Loader(endpoint=sys.argv[1], rank=rank, world_size=2, tensors="numpy",
                          trace="py.json", chart="py.svg")
steps = 0
while not loader.finished:
    for batch in loader:
        time.sleep(0.005 * (rank + 1))
        steps += 1
assert os.path.exists("py.json") and os.path.exists("py.svg"), "not written at the end"
loader.close()
print("rank %d: %d steps" % (rank, steps))
PYEOF
  for r in 0 1; do
    (cd "$WORK" && "$PY" "$WORK/rank.py" "$EP" "$r") >"$WORK/py$r.log" 2>&1 &
    PIDS+=($!)
    cpid[r]=$!
  done
  for r in 0 1; do wait_ok 240 "python rank $r" "${cpid[r]}" "$WORK/py$r.log"; done
  wait_server
  check_trace "$WORK/py.json" 2 server
  check_chart "$WORK/py.svg" 2
  "$PY" - "$WORK/py.json" "$WORK/py0.log" <<'PY' || fail "the Python trace lacks a rank's steps"
import json, sys
steps = int(open(sys.argv[2]).read().split()[2])
ev = json.load(open(sys.argv[1]))["traceEvents"]
n = sum(e["ph"] == "X" and e["pid"] == 1 and e["name"] == "compute" for e in ev)
assert n == steps, (n, steps)
print("py: rank 0's %d steps on its track" % n)
PY
else
  echo "part 2 (Python) skipped: a ThreadSanitizer build's library cannot be loaded into Python"
fi

# 3. one node of two: the files named for its ranks
start_server --data "$WORK/ds" --world 4 --ranks 2-3 --seed 4 --epochs 1
rank_loops n 4 2 3 1000 --trace "$WORK/n.json" --chart "$WORK/n.svg"
wait_server
[[ -s "$WORK/n.ranks2-3.json" && -s "$WORK/n.ranks2-3.svg" && ! -e "$WORK/n.json" ]] ||
  fail "ranks 2-3 of 4: $(ls "$WORK")"
"$PY" - "$WORK/n.ranks2-3.json" "$WORK/n.ranks2-3.svg" <<'PY' || fail "ranks 2-3: misnamed tracks"
import json, sys
names = {e["pid"]: e["args"]["name"] for e in json.load(open(sys.argv[1]))["traceEvents"]
         if e["name"] == "process_name"}
assert names[1].endswith(": rank 2") and names[2].endswith(": rank 3"), names
assert "rank 2" in open(sys.argv[2]).read()
print("ranks 2-3 of 4: n.ranks2-3.json, n.ranks2-3.svg, tracks named rank 2 and rank 3")
PY
check_python_leftovers
echo "trace and chart of the trainers' own run: ok"
