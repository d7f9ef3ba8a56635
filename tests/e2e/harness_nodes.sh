#!/usr/bin/env bash
# lf-train on many nodes (issue 29, item 5 and must hold): the first rank
# of each node starts that node's lf-server for the node's ranks; here
# --fake-nodes 2 splits 4 ranks into two "nodes" of two on this machine
# (MPI's shared-memory split would find one). The job trains an epoch with
# two servers, and reports per rank as on one node: each rank's batches,
# all four together equal to the plan of one lf-server --world 4; the
# report and trace have a track per rank; both servers plan the same
# (the fingerprint check passed, or the job would have stopped); nothing is
# left. --fake-nodes 3 of 4 ranks is refused. (Before: lf-train --data
# started one server, on rank 0, for every rank.)
source "$(dirname "$0")/harness_lib.sh"

train nodes 4 --fake-nodes 2 --batches "$WORK/nodes" --report "$WORK/report.json" \
  --trace "$WORK/trace.json" -- --samples-per-rank 1 ||
  { cat "$WORK/nodes.out" >&2; fail "lf-train (4 ranks, 2 fake nodes) failed"; }
check_plan nodes 4 balanced --samples-per-rank 1
check_report "$WORK/report.json" "$WORK/trace.json" 4 cpu
for k in 0 1; do
  grep -q "^lf-train: node $k of 2 (ranks $((2 * k)),$((2 * k + 1))): lf-server pid [0-9]* on " "$WORK/nodes.out" ||
    fail "node $k started no server of its own: $(cat "$WORK/nodes.out")"
done
eps=$(sed -n 's/^lf-train: node [01] of 2 .* on \(.*\)$/\1/p' "$WORK/nodes.out" | sort -u | wc -l)
[[ $eps == 2 ]] || fail "want two servers' endpoints, got $eps: $(cat "$WORK/nodes.out")"
grep -q "^balanced: [0-9]* steps" "$WORK/nodes.out" || fail "no summary: $(cat "$WORK/nodes.out")"
check_clean
echo "4 ranks on 2 fake nodes, a server each: batches == plan, per-rank report and trace: ok"

rc=0
train bad 4 --fake-nodes 3 || rc=$?
[[ $rc != 0 ]] && grep -q "lf-train: --fake-nodes 3 does not divide the 4 ranks" "$WORK/bad.out" ||
  fail "--fake-nodes 3 of 4: exit $rc: $(cat "$WORK/bad.out")"
check_clean
echo "--fake-nodes 3 of 4 ranks: refused: ok"
