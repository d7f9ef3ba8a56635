#!/usr/bin/env bash
# levelfeed.torch.instrument in a real DDP job (#31 items 1 and 5): two
# ranks in a gloo group, each a DistributedDataParallel model fed by a
# levelfeed.Loader and instrumented with one line. Rank 1 computes about 60 ms a
# step, rank 0 next to nothing, so rank 0 waits for rank 1 in DDP's
# all-reduce every step. lf-stat must name rank 1 the slowest rank
# (compute) and show rank 0's wait as sync wait, measured by the hook, not
# as data wait (polled, with a deadline against a hang; the shared reading
# of e2e/server_observe). Rank 1's compute is in proportion to its batch's
# tokens, so the server's end-of-run report (#31 item 4) must find it
# following the planned cost (correlation 0.5 or more: the naive sampler
# serves, so step costs vary ~2x and every step carries the correlation; a
# balanced plan's steps cost nearly the same, its few uneven steps carried
# it, and one step a loaded machine stalled sank it below 0.5), and name rank 1 the
# late rank, rank 0's time mostly sync wait; each rank's Loader.report()
# gives its own at the end (and refuses before it). Before, Python could report no
# sync wait and there was no levelfeed.torch.
source "$(dirname "$0")/server_lib.sh"
source "$(dirname "$0")/python_lib.sh"
need_python_module torch
export CUDA_VISIBLE_DEVICES=""   # gloo on the CPU even where GPUs are

make_dataset "$WORK/ds"
start_server --data "$WORK/ds" --world 2 --seed 4 --slots 2 --epochs 1 --samples-per-rank 8 --sampler naive
cat >"$WORK/rank.py" <<'PYEOF'
import sys, time
import torch
import torch.distributed as dist
import levelfeed
import levelfeed.torch

dist.init_process_group("gloo")
ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
loader = levelfeed.Loader(endpoint=sys.argv[1])
levelfeed.torch.instrument(ddp, loader)
try:
    loader.report()
    sys.exit("a report before the end")
except levelfeed.LevelfeedError as e:
    assert e.code == -20007, str(e)    # LF_E_ORDER: not at the end yet
pause = float(sys.argv[2])
steps = 0
for batch in loader:
    loss = ddp(torch.full((4, 8), float(batch.nsamples))).square().mean()
    # this rank's compute, before its all-reduce: in proportion to its tokens
    time.sleep(pause * float(batch["lengths"].sum()) / 5440)
    loss.backward()
    opt.step()
    opt.zero_grad()
    steps += 1
print(loader.report())
loader.close()
dist.destroy_process_group()
print("rank %d: %d steps" % (dist.get_rank() if dist.is_initialized() else -1, steps))
PYEOF
port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for r in 0 1; do
  RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$PY" "$WORK/rank.py" "$EP" "$(( r * 60 ))e-3" >"$WORK/r$r.log" 2>&1 &
  PIDS+=($!)
  cpid[r]=$!
done
# 240 s: a deadline against a hang; under AddressSanitizer torch's start
# alone takes most of a minute, and its steps crawl.
wait_until 240 "lf-stat to name rank 1 the slowest and rank 0 waiting in sync" \
  "$WORK/r0.log" "$WORK/r1.log" -- observe_reading sync
echo "$SEEN"
for r in 0 1; do wait_ok 240 "rank $r" "${cpid[r]}" "$WORK/r$r.log"; done
wait_server
grep "^lf-server: .*report" -A2 "$WORK/server.log" | grep -v "^--"
for want in "report, rank 0: [0-9]+ steps, .*; most of it sync wait \(the other ranks\)$" \
  "report, rank 1: [0-9]+ steps, .*; most of it compute$" \
  "report: rank 1 is this node's late rank"; do
  grep -Eq "^lf-server: $want" "$WORK/server.log" || fail "the server's report lacks '$want'"
done
# Rank 1's compute follows its tokens, so its planned cost: the report
# must not call the cost model stale for it.
grep -A1 "^lf-server: report, rank 1:" "$WORK/server.log" |
  grep -Eq "compute against planned cost: correlation (0\.[5-9][0-9]|1\.00) over [0-9]+ steps, compute per cost at most [0-9.]+x its mean$" ||
  fail "rank 1's compute follows its planned cost, yet the report says otherwise"
# The same report reaches each rank's own Loader at the end (Loader.report).
for r in 0 1; do
  grep -Eq "^report, rank $r: [0-9]+ steps, .*; most of it $([[ $r == 0 ]] && echo sync || echo compute)" "$WORK/r$r.log" &&
    grep -q "^  slowest steps (epoch:step): " "$WORK/r$r.log" ||
    { cat "$WORK/r$r.log" >&2; fail "rank $r's Loader.report() does not give its report"; }
done
grep -A2 "^report, rank 0" "$WORK/r0.log"
check_python_leftovers
echo "python ddp: rank 1 named the slowest (compute), rank 0 waiting for it in sync: ok"
