#!/usr/bin/env bash
# levelfeed.Loader's plan fingerprint check (issue 29, item 1): with
# torch.distributed initialised, a Loader all-gathers its server's plan
# fingerprint (Loader.plan_id) and raises, on every rank, before any batch,
# when a rank's server plans another sequence, naming the rank, its node
# and both fingerprints; when all agree it serves as usual.
#  1. A stand-in two-rank torch.distributed (a namespace whose
#     all_gather_object gives this rank's entry and a peer's): runs without
#     torch. The Loader's world comes from the environment (none: the
#     server does not check it). A Loader of world 1 in that group is not
#     the job's (a rank reading through a private server, as
#     examples/torch_ddp.py does) and checks nothing: its peers construct no
#     Loader, so the collective would wait for them for ever.
#  2. Where the interpreter has torch: two real ranks in a gloo group, each
#     on a server of its own ("nodes"): with --seed 1 on node 1 both ranks
#     raise before any batch; with the same flags both train the epoch.
source "$(dirname "$0")/server_lib.sh"

source "$(dirname "$0")/python_lib.sh"
need_python_module numpy

make_dataset "$WORK/ds"
start_server --data "$WORK/ds" --world 1
fp=$(sed -n 's/^lf-server: plan fingerprint \([0-9a-f]*\) .*/\1/p' "$WORK/server.log")
[[ -n $fp ]] || fail "no fingerprint printed: $(cat "$WORK/server.log")"

cat >"$WORK/check.py" <<'PYEOF'
import socket
import sys
import types

import levelfeed
from levelfeed import LevelfeedError

ep, fp, case = sys.argv[1], int(sys.argv[2], 16), sys.argv[3]


def group(peer):
    """A two-rank torch.distributed, this process rank 0, the peer's entry given."""
    def all_gather_object(out, mine):
        out[0], out[1] = mine, peer
    dist = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True,
                                 get_world_size=lambda: 2, all_gather_object=all_gather_object)
    return types.SimpleNamespace(distributed=dist)


if case == "differ":
    levelfeed.loader.torch = group((fp ^ 1, "node-b"))
    try:
        levelfeed.Loader(endpoint=ep, rank=0, tensors="numpy")
        sys.exit("a peer with another fingerprint: the Loader did not raise")
    except LevelfeedError as e:
        want = ("the ranks' servers plan different sequences: rank 1 (node node-b) has plan "
                "fingerprint %016x, rank 0 (node %s) %016x" % (fp ^ 1, socket.gethostname(), fp))
        if want not in str(e):
            sys.exit("error %r lacks %r" % (str(e), want))
        print("a peer's server differs: %s" % e)
else:
    # private: the peer differs, but a Loader of world 1 is not the group's
    levelfeed.loader.torch = group((fp ^ (case == "private"), "node-b"))
    world = 1 if case == "private" else None
    with levelfeed.Loader(endpoint=ep, rank=0, world_size=world, tensors="numpy") as lo:
        if lo.plan_id != fp:
            sys.exit("Loader.plan_id %016x, the server printed %016x" % (lo.plan_id, fp))
        n = sum(b.nsamples for b in lo)
    if n != 2000:
        sys.exit("agreeing peers: %d samples, want 2000" % n)
    print("%s: plan_id %016x, the epoch's 2000 samples served"
          % ("a Loader of world 1 in a group of 2" if case == "private" else "agreeing peers", fp))
PYEOF

"$PY" "$WORK/check.py" "$EP" "$fp" agree || fail "agreeing peers"
wait_server
start_server --data "$WORK/ds" --world 1
"$PY" "$WORK/check.py" "$EP" "$fp" differ || fail "a differing peer"
wait_server
start_server --data "$WORK/ds" --world 1
"$PY" "$WORK/check.py" "$EP" "$fp" private || fail "a Loader of world 1 in a group of 2"
wait_server

"$PY" -c 'import torch.distributed' 2>/dev/null || { check_python_leftovers; exit 0; }
cat >"$WORK/rank.py" <<'PYEOF'
import os
import sys

import torch.distributed as dist

import levelfeed
from levelfeed import LevelfeedError

dist.init_process_group("gloo")
rank = dist.get_rank()
try:
    lo = levelfeed.Loader(endpoint=sys.argv[1] % rank, tensors="numpy")
except LevelfeedError as e:
    print("rank %d: %s" % (rank, e))
    sys.exit(3)
n = sum(b.nsamples for b in lo)
print("rank %d: plan_id %016x, %d samples" % (rank, lo.plan_id, n))
lo.close()
PYEOF
# Two ranks of world 2, rank r on node r's server; the ranks' exit statuses
# in RANK_RC[r].
ranks() {    # TAG NODE1-SERVER-ARGS...
  local tag=$1 port r n
  shift
  for n in 0 1; do
    rm -rf "$WORK/node$n"
    mkdir -m 700 "$WORK/node$n"
    EP="$WORK/node$n/ctl"
    if ((n == 0)); then args=(); else args=("$@"); fi
    "$LF_BIN/lf-server" --endpoint "$EP" --data "$WORK/ds" --world 2 --ranks $n "${args[@]}" \
      >"$WORK/$tag.node$n.log" 2>&1 &
    PIDS+=($!)
    NODE_PID[n]=$!
    wait_until 20 "node $n's server" "$WORK/$tag.node$n.log" -- serving
  done
  port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$PY" "$WORK/rank.py" "$WORK/node%d/ctl" >"$WORK/$tag.r$r.log" 2>&1 &
    RANK_PID[r]=$!
    PIDS+=($!)
  done
  wait_each 60 rank "$WORK/$tag.r%d.log" "${RANK_PID[@]}"
  RANK_RC=("${RCS[@]}")
  for n in 0 1; do wait_exit 20 "node $n's server" "${NODE_PID[n]}" "$WORK/$tag.node$n.log"; done
}
fp_of() { sed -n 's/^lf-server: plan fingerprint \([0-9a-f]*\) .*/\1/p' "$1"; }

ranks differ --seed 1
f0=$(fp_of "$WORK/differ.node0.log") f1=$(fp_of "$WORK/differ.node1.log")
for r in 0 1; do
  [[ ${RANK_RC[r]} -eq 3 ]] && grep -q "rank 1 (node [^)]*) has plan fingerprint $f1, rank 0 (node [^)]*) $f0" "$WORK/differ.r$r.log" ||
    fail "--seed 1 on node 1: rank $r exited ${RANK_RC[r]}: $(cat "$WORK/differ.r$r.log")"
done
echo "torch.distributed, --seed 1 on node 1: both ranks raised: $(tail -1 "$WORK/differ.r0.log")"
ranks agree
for r in 0 1; do
  [[ ${RANK_RC[r]} -eq 0 ]] && grep -q "samples" "$WORK/agree.r$r.log" ||
    fail "agreeing nodes: rank $r exited ${RANK_RC[r]}: $(cat "$WORK/agree.r$r.log")"
done
echo "torch.distributed, agreeing nodes: $(cat "$WORK/agree.r0.log" "$WORK/agree.r1.log" | tr '\n' ' ')"
RT=$WORK/node0 check_python_leftovers
