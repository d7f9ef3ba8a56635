#!/usr/bin/env bash
# A client killed with SIGKILL mid-epoch: the server marks its rank gone
# within 2x the heartbeat interval (polled through lf-stat, from the kill to
# "state": "gone"; its queued jobs are dropped then) and the live rank
# receives its whole planned stream. The bound is the promise of issue
# 7a; the interval is a generous 2 s so a loaded machine does not trip it.
# (A restarted client cannot rejoin: a gone rank stays gone, see server/README.md.)
source "$(dirname "$0")/server_lib.sh"
PY=/usr/bin/python3
[[ -x "$PY" ]] || { echo "skip: /usr/bin/python3 is needed"; exit 77; }

HB=2000
make_dataset "$WORK/ds"
SRV=(--data "$WORK/ds" --world 2 --seed 4 --heartbeat-ms "$HB" --slots 2)
"$LF_BIN/lf-server" "${SRV[@]}" --print-plan >"$WORK/plan.txt"

# Both ranks slowed (30 ms a batch) so rank 1 dies mid-epoch.
start_server "${SRV[@]}"
cpid=()
for r in 0 1; do
  "$LF_BIN/lf-rank-loop" --endpoint "$EP" --world 2 --rank "$r" --compute-us 30000 \
    --out "$WORK/k$r.txt" >"$WORK/k$r.log" 2>&1 &
  cpid+=($!)
  PIDS+=($!)
done
c0=${cpid[0]} c1=${cpid[1]}
wait_running 2

rank1_state() {   # prints rank 1's state from lf-stat's JSON
  "$LF_BIN/lf-stat" "$EP" --json 2>/dev/null | "$PY" -c '
import json, sys
o = json.load(sys.stdin)
print([r["state"] for r in o["ranks"] if r["rank"] == 1][0])'
}
t0=$(date +%s%N)
kill -9 "$c1"
{ wait "$c1"; } 2>/dev/null || true
state=
for _ in $(seq 400); do
  state=$(rank1_state || echo "?")
  [[ "$state" == gone ]] && break
  sleep 0.01
done
ms=$((($(date +%s%N) - t0) / 1000000))
[[ "$state" == gone ]] || fail "rank 1 not gone after the kill (state '$state')"
[[ $ms -le $((2 * HB)) ]] || fail "rank 1 marked gone after $ms ms, over 2 x $HB ms"
wait "$c0" || { cat "$WORK/k0.log" >&2; fail "rank 0 failed after rank 1 was killed"; }
wait_server
diff <(awk '$3 == 0' "$WORK/plan.txt") "$WORK/k0.txt" >/dev/null ||
  fail "rank 0's stream is not its plan after rank 1 died"
check_no_leftovers
echo "client killed: rank gone after $ms ms (<= 2 x $HB ms), the other rank got its whole plan: ok"
