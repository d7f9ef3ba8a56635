#!/usr/bin/env bash
# levelfeed.Loader's plan fingerprint check (issue 29, item 1): with
# torch.distributed initialised, a Loader all-gathers its server's plan
# fingerprint (Loader.plan_id) and raises, on every rank, before any batch,
# when a rank's server plans another sequence, naming the rank, its node
# and both fingerprints; when all agree it serves as usual. The process
# group is a stand-in (this machine's interpreter has no torch): a two-rank
# torch.distributed whose all_gather_object gives this rank's entry and a
# peer's, as a real group would; torch's own all-gather is not exercised here.
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
        levelfeed.Loader(endpoint=ep, rank=0, world_size=1, tensors="numpy")
        sys.exit("a peer with another fingerprint: the Loader did not raise")
    except LevelfeedError as e:
        want = ("the ranks' servers plan different sequences: rank 1 (node node-b) has plan "
                "fingerprint %016x, rank 0 (node %s) %016x" % (fp ^ 1, socket.gethostname(), fp))
        if want not in str(e):
            sys.exit("error %r lacks %r" % (str(e), want))
        print("a peer's server differs: %s" % e)
else:
    levelfeed.loader.torch = group((fp, "node-b"))
    with levelfeed.Loader(endpoint=ep, rank=0, world_size=1, tensors="numpy") as lo:
        if lo.plan_id != fp:
            sys.exit("Loader.plan_id %016x, the server printed %016x" % (lo.plan_id, fp))
        n = sum(b.nsamples for b in lo)
    if n != 2000:
        sys.exit("agreeing peers: %d samples, want 2000" % n)
    print("agreeing peers: plan_id %016x, the epoch's 2000 samples served" % fp)
PYEOF

"$PY" "$WORK/check.py" "$EP" "$fp" agree || fail "agreeing peers"
wait_server
start_server --data "$WORK/ds" --world 1
"$PY" "$WORK/check.py" "$EP" "$fp" differ || fail "a differing peer"
wait_server
check_python_leftovers
