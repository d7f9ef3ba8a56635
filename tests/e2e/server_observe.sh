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
source "$(dirname "$0")/server_lib.sh"
PY=/usr/bin/python3
[[ -x "$PY" ]] || { echo "skip: /usr/bin/python3 is needed"; exit 77; }

make_dataset "$WORK/ds"
start_server --data "$WORK/ds" --world 2 --seed 4 --slots 2 --epochs 4
for r in 0 1; do
  "$LF_BIN/lf-rank-loop" --endpoint "$EP" --world 2 --rank "$r" --compute-us $((20000 * (r + 1))) \
    >"$WORK/r$r.log" 2>&1 &
  PIDS+=($!)
  cpid[r]=$!
done

# lf-stat's reading, once both ranks have 30 steps reported: "ok" and what
# it showed, or what is wrong.
reading() {
  "$LF_BIN/lf-stat" "$EP" --json 2>/dev/null >"$WORK/stat.json" || { SEEN="no answer"; return 1; }
  SEEN=$("$PY" - "$WORK/stat.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
r = {x["rank"]: x for x in d["ranks"]}
if min(x["steps_reported"] for x in r.values()) < 30:
    print("fewer than 30 steps"); sys.exit()
f0, f1 = r[0]["per_step_ms"], r[1]["per_step_ms"]
bad = []
if d["slowest"] != {"rank": 1, "stage": "compute"}: bad.append("slowest %s" % d["slowest"])
if r[0]["cause"] != "held back by rank 1": bad.append("rank 0: %s" % r[0]["cause"])
if r[1]["cause"] != "compute": bad.append("rank 1: %s" % r[1]["cause"])
if not f0["held_back"] > 2 * f0["data_path"]: bad.append("rank 0 %s" % f0)
server = f0["held_back"] + f0["data_path"]
if abs(server - f0["data_wait"]) > max(5, 0.15 * f0["data_wait"]): bad.append("rank 0: client %.2f ms, server %.2f ms" % (f0["data_wait"], server))
print("; ".join(bad) if bad else "ok: rank 0 data wait %.1f ms a step (lf_next), held back %.1f ms, data path %.1f ms; rank 1 compute %.1f ms"
      % (f0["data_wait"], f0["held_back"], f0["data_path"], f1["compute"]))
PYEOF
)
  [[ $SEEN == ok* ]]
}
wait_until 60 "lf-stat to name rank 1 the slowest and rank 0 held back by it" \
  "$WORK/r0.log" "$WORK/r1.log" -- reading
echo "$SEEN"
"$LF_BIN/lf-stat" "$EP" --count 1 >"$WORK/table.txt"
grep -q "^slowest: rank 1 (compute)$" "$WORK/table.txt" &&
  grep -Eq "^ +0 running .* held back by rank 1$" "$WORK/table.txt" &&
  grep -Eq "^rank +state +epoch:step +data-wait +held-back +data-path +compute +sync" "$WORK/table.txt" ||
  { cat "$WORK/table.txt" >&2; fail "lf-stat's table does not say what its JSON says"; }
sed -n '3,6p' "$WORK/table.txt"
for r in 0 1; do wait_ok 60 "rank $r" "${cpid[r]}" "$WORK/r$r.log"; done
wait_server
grep -q "rank 0: .* data wait (lf_next) [0-9.]* s, held back [0-9.]* s, data path [0-9.]* s" "$WORK/server.log" ||
  { show_logs 5 "$WORK/server.log"; fail "the server's summary does not split rank 0's wait"; }
check_no_leftovers
echo "rank 1 named the slowest (compute), rank 0 held back by it, not waiting for data: ok"
