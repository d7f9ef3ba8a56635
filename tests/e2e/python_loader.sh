#!/usr/bin/env bash
# The levelfeed Python package against a live lf-server (one rank, one
# epoch): host tensors are views of the ring, not copies (their data
# pointers lie in the client's mapping of the rank's ring memfd, which
# /proc/self/maps names; a clone, checked the same way, is caught); numpy
# views keep the exact dtypes and are writable (the rank's own slot); the epoch's sample ids are
# each sample once and rows are padded after their length; library errors
# arrive as exceptions with the library's or the server's words. Device
# tensors (torch): with a GPU, a whole epoch on cuda:0, each sample once and
# rows padded; without one, "cuda" and "cuda:0" are refused before
# connecting, and a host Loader for the rank then gets the whole epoch. A
# view outlives the caller's last reference to its Loader: the ring stays
# mapped while it lives, and goes with it.
# Exit 77 when the interpreter (python_lib.sh) lacks numpy (torch-only parts
# are skipped without torch).
source "$(dirname "$0")/server_lib.sh"

source "$(dirname "$0")/python_lib.sh"
need_python_module numpy

"$LF_BIN/lf-shard" synth tokens --out "$WORK/ds" --samples 300 --seed 3 --threads 1 \
  --len-median 20 --len-max 64 --vocab 1000 >"$WORK/synth.log" 2>&1 ||
  { cat "$WORK/synth.log" >&2; fail "lf-shard synth"; }
start_server --data "$WORK/ds" --world 1 --samples-per-rank 6 --slots 3 --token-dtype i64
fp=$(sed -n 's/^lf-server: plan fingerprint \([0-9a-f]*\) .*/\1/p' "$WORK/server.log")

"$PY" - "$EP" "$WORK" 300 "$fp" <<'PYEOF' || fail "python checks"
import sys
import numpy as np
import levelfeed
from levelfeed import LevelfeedError

ep, work, nsamples = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    import torch
except ImportError:
    torch = None
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def ring_ranges():
    """Address ranges this process maps from rank 0's ring memfd."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            if "memfd:levelfeed-rank-0" in line:
                lo, hi = line.split()[0].split("-")
                out.append((int(lo, 16), int(hi, 16)))
    return out


def in_ring(addr, nbytes):
    return any(lo <= addr and addr + nbytes <= hi for lo, hi in ring_ranges())


def raises(fn, words, code=None):
    try:
        fn()
    except (LevelfeedError, NotImplementedError) as e:
        ok = words in str(e) and (code is None or getattr(e, "code", None) == code)
        check(ok, "error %r lacks %r (code %s)" % (str(e), words, getattr(e, "code", None)))
        return
    check(False, "no error where one was due: %r" % words)


# Errors: no server there; a device name that is none; (below) a rank this
# server does not serve.
raises(lambda: levelfeed.Loader(endpoint=work + "/nowhere/ctl", rank=0, world_size=1, timeout=0.5),
       "timed out waiting for the server", levelfeed._capi.E_TIMEOUT)
try:
    levelfeed.Loader(endpoint=ep, rank=0, device="gpu0")
    check(False, "device='gpu0' accepted")
except ValueError as e:
    check("cuda:N" in str(e), "device='gpu0': %s" % e)
raises(lambda: levelfeed.Loader(endpoint=ep, rank=3, world_size=1), "not served")
# Numbers the C int cannot hold are refused, not wrapped (rank 2**32+1
# joined as rank 1, a timeout of 49.7 days became 1 ms).
for kw in ({"rank": 2**32 + 1}, {"rank": -2}, {"world_size": 0}, {"world_size": 2**31},
           {"timeout": -1}, {"device_depth": 0}):
    args = dict(endpoint=ep, rank=0, world_size=1, timeout=0.5)
    args.update(kw)
    try:
        levelfeed.Loader(**args)
        check(False, "%r accepted" % (kw,))
    except ValueError as e:
        check(list(kw)[0] in str(e), "%r: %s" % (kw, e))
check(levelfeed.loader._timeout_ms(4294967.297) == -1, "a timeout past an int is not forever")

seen, batches = [], 0
with levelfeed.Loader(endpoint=ep, rank=0, world_size=1, tensors="numpy") as lo:
    check("%016x" % lo.plan_id == sys.argv[4],
          "Loader.plan_id %016x, the server printed '%s'" % (lo.plan_id, sys.argv[4]))
    for b in lo:
        batches += 1
        ids, tok, lens = b["sample_ids"], b["tokens"], b["lengths"]
        check(ids.dtype == np.uint64 and tok.dtype == np.int64, "dtypes %s %s" % (ids.dtype, tok.dtype))
        check(tok.flags.writeable, "numpy view read-only")
        check(b.nsamples == len(ids) == tok.shape[0] == len(lens), "batch sizes disagree")
        # one rank: the step's global tokens are this batch's
        check(b.step_tokens == int(lens.sum()), "step_tokens %d, lengths sum to %d"
              % (b.step_tokens, int(lens.sum())))
        for name, a in b.items():
            check(a.size == 0 or in_ring(a.__array_interface__["data"][0], a.nbytes),
                  "numpy %s not in the ring" % name)
        for row, n in zip(tok, lens):
            check(n > 0 and not row[n:].any(), "row not padded with 0 after its length")
        seen.extend(int(i) for i in ids)
        if batches == 1:
            raises(lambda: lo.load_state_dict(lo.state_dict()), "", levelfeed._capi.E_ORDER)
            raises(lambda: lo.load_state_dict({"levelfeed": {"version": 9}}), "not a levelfeed")
check(sorted(seen) == list(range(nsamples)), "epoch: %d ids, %d distinct" % (len(seen), len(set(seen))))
print("numpy: %d batches, %d samples once each, views of the ring" % (batches, len(seen)))
sys.exit(1 if failures else 0)
PYEOF
wait_server

# A view outlives the caller's last reference to its Loader: the ring stays
# mapped while the view lives (reading it used to crash: SIGSEGV), and goes
# when the last view does.
start_server --data "$WORK/ds" --world 1 --samples-per-rank 6 --slots 3
"$PY" - "$EP" <<'PYEOF' || fail "a view that outlives its Loader"
import gc
import sys
import levelfeed


def ring_mapped():
    with open("/proc/self/maps") as f:
        return any("memfd:levelfeed-rank-0" in line for line in f)


b = next(iter(levelfeed.Loader(endpoint=sys.argv[1], rank=0, world_size=1, tensors="numpy")))
gc.collect()
assert ring_mapped(), "the ring was unmapped under a live view"
total = int(b["tokens"].sum()) + int(b["sample_ids"].sum())
del b
gc.collect()
assert not ring_mapped(), "the ring stayed mapped after the last view"
print("a view keeps its Loader's ring mapped (token+id sum %d); the ring goes with the last view"
      % total)
PYEOF
wait_server

if "$PY" -c 'import torch' 2>/dev/null; then
  start_server --data "$WORK/ds" --world 1 --samples-per-rank 6 --slots 3
  "$PY" - "$EP" <<'PYEOF' || fail "torch checks"
import sys
import torch
import levelfeed

ep = sys.argv[1]


def ring_ranges():
    with open("/proc/self/maps") as f:
        return [tuple(int(x, 16) for x in line.split()[0].split("-"))
                for line in f if "memfd:levelfeed-rank-0" in line]


def in_ring(t):
    p, n = t.data_ptr(), t.numel() * t.element_size()
    return any(lo <= p and p + n <= hi for lo, hi in ring_ranges())


n = 0
with levelfeed.Loader(endpoint=ep, rank=0, world_size=1) as lo:
    for b in lo:
        tok = b["tokens"]
        assert isinstance(tok, torch.Tensor) and tok.dtype == torch.int32, tok.dtype
        assert b["sample_ids"].dtype == torch.int64
        if tok.numel():
            assert in_ring(tok) and in_ring(b["sample_ids"]), "torch tensor is not a view of the ring"
            assert not in_ring(tok.clone()), "the zero-copy check cannot tell a copy"
        lo.report_step(0.001)
        n += 1
print("torch: %d batches, tensors are views of the ring (a clone is told apart)" % n)
PYEOF
  wait_server

  # --micro-batches: micro_batches() gives 2-D views, rows padded after their
  # length, every sample once; fewer padded cells than the longest-of-all.
  start_server --data "$WORK/ds" --world 1 --samples-per-rank 6 --slots 3 --micro-batches
  "$PY" - "$EP" 300 <<'PYEOF' || fail "micro-batch checks"
import sys
import torch
import levelfeed

ep, nsamples = sys.argv[1], int(sys.argv[2])
seen, cells, whole = [], 0, 0
with levelfeed.Loader(endpoint=ep, rank=0, world_size=1) as lo:
    for b in lo:
        mbs = b.micro_batches()
        for mb in mbs:
            tok, lens = mb["tokens"], mb["lengths"]
            assert tok.dim() == 2 and tok.shape[0] == len(lens), tok.shape
            for row, n in zip(tok, lens):
                assert n > 0 and not row[n:].any(), "row not padded after its length"
            seen.extend(mb["sample_ids"].tolist())
        cells += b["tokens"].numel()
        whole += b.nsamples * int(b["lengths"].max())
assert sorted(seen) == list(range(nsamples)), "micro epoch: %d ids" % len(seen)
assert cells < whole, (cells, whole)
print("micro-batches: %d samples once each, %d cells against %d for one batch a step"
      % (len(seen), cells, whole))
PYEOF
  wait_server

  start_server --data "$WORK/ds" --world 1 --samples-per-rank 6 --slots 3 --token-dtype i64
  "$PY" - "$EP" 300 <<'PYEOF' || fail "device checks"
import sys
import torch
import levelfeed
from levelfeed import LevelfeedError

ep, nsamples = sys.argv[1], int(sys.argv[2])
if not torch.cuda.is_available():
    # Refused before connecting, so a host Loader can follow for the rank.
    for name in ("cuda:0", "cuda"):
        try:
            levelfeed.Loader(endpoint=ep, rank=0, world_size=1, device=name)
            sys.exit("device: %s accepted without a GPU" % name)
        except LevelfeedError as e:
            assert "no CUDA device" in str(e), str(e)
            print("device: no GPU here, %s refused: %s" % (name, e))
    with levelfeed.Loader(endpoint=ep, rank=0, world_size=1, timeout=10) as lo:
        seen = [i for b in lo for i in b["sample_ids"].tolist()]
    assert sorted(seen) == list(range(nsamples)), "host after device: %d ids" % len(seen)
    print("device: a host Loader after the refusals got every sample once")
    sys.exit(0)
seen = []
with levelfeed.Loader(endpoint=ep, rank=0, world_size=1, device="cuda:0") as lo:
    for b in lo:
        tok, lens, ids = b["tokens"], b["lengths"], b["sample_ids"]
        assert tok.is_cuda and ids.is_cuda and tok.dtype == torch.int64, (tok.device, tok.dtype)
        for row, n in zip(tok.cpu(), lens.cpu()):
            assert n > 0 and not row[n:].any(), "row not padded after its length"
        seen.extend(ids.cpu().tolist())
assert sorted(seen) == list(range(nsamples)), "device epoch: %d ids" % len(seen)
print("device: %d samples once each on %s" % (len(seen), tok.device))
PYEOF
  wait_server
fi
check_python_leftovers
echo "python loader ok"
