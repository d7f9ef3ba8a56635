#!/usr/bin/env bash
# A slow data path named as such (#31 item 5): two real clients that
# compute 1 ms a step, fed large JPEGs (1400-1800 px) by a server with one
# worker, so every batch waits for decoding. lf-stat must show each rank
# "waiting for data", its data-path figure well above its held-back time and
# its compute (the ranks are not holding each other back: the planner has
# their slots, the worker is the bottleneck), and name the slowest stage
# "waiting for data"; the server's end-of-run report must say that most of
# each rank's step went to data wait. The slowness is real work, not a hook:
# server_observe shows the other two causes (compute; held back and sync).
# lf-stat is polled until it shows this (a deadline against a hang).
source "$(dirname "$0")/server_lib.sh"
PY=/usr/bin/python3
[[ -x "$PY" ]] || { echo "skip: /usr/bin/python3 is needed"; exit 77; }

"$LF_BIN/lf-shard" synth images --out "$WORK/img" --samples 48 --seed 3 --min-side 1400 \
  --max-side 1800 --threads 1 >"$WORK/synth.log" 2>&1 || { cat "$WORK/synth.log" >&2; fail "synth images"; }

data_reading() {
  "$LF_BIN/lf-stat" "$EP" --json 2>/dev/null >"$WORK/stat.json" || { SEEN="no answer"; return 1; }
  SEEN=$("$PY" - "$WORK/stat.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
r = {x["rank"]: x for x in d["ranks"]}
if min(x["steps_reported"] for x in r.values()) < 20:
    print("fewer than 20 steps"); sys.exit()
bad = []
for k, x in sorted(r.items()):
    f = x["per_step_ms"]
    if x["cause"] != "waiting for data": bad.append("rank %d: %s" % (k, x["cause"]))
    if not f["data_path"] > 2 * max(f["held_back"], f["compute"]): bad.append("rank %d %s" % (k, f))
if (d["slowest"] or {}).get("stage") != "waiting for data": bad.append("slowest %s" % d["slowest"])
print("; ".join(bad) if bad else "ok: " + "; ".join(
    "rank %d data path %.1f ms a step, held back %.1f ms, compute %.1f ms"
    % (k, x["per_step_ms"]["data_path"], x["per_step_ms"]["held_back"], x["per_step_ms"]["compute"])
    for k, x in sorted(r.items())))
PYEOF
)
  [[ $SEEN == ok* ]]
}

start_server --data "$WORK/img" --world 2 --workers 1 --image-size 224x224 --samples-per-rank 4 \
  --epochs 24 --seed 2
for r in 0 1; do
  "$LF_BIN/lf-rank-loop" --endpoint "$EP" --world 2 --rank "$r" --compute-us 1000 \
    >"$WORK/r$r.log" 2>&1 &
  PIDS+=($!)
  cpid[r]=$!
done
wait_until 120 "lf-stat's reading of a slow data path" "$WORK/r0.log" "$WORK/r1.log" -- data_reading
echo "$SEEN"
"$LF_BIN/lf-stat" "$EP" --count 1 >"$WORK/table.txt"
grep -q "^slowest: rank [01] (waiting for data)$" "$WORK/table.txt" &&
  [[ $(grep -Ec "^ +[01] running .*waiting for data$" "$WORK/table.txt") == 2 ]] ||
  { cat "$WORK/table.txt" >&2; fail "lf-stat's table does not say what its JSON says"; }
for r in 0 1; do wait_ok 120 "rank $r" "${cpid[r]}" "$WORK/r$r.log"; done
wait_server
for r in 0 1; do
  grep -Eq "^lf-server: report, rank $r: [0-9]+ steps, .*; most of it data wait \(lf_next\)$" \
    "$WORK/server.log" || { show_logs 12 "$WORK/server.log"; fail "the report of rank $r"; }
done
check_no_leftovers
echo "a slow data path: both ranks waiting for data, not held back: ok"
