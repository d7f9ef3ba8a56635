#!/usr/bin/env bash
# The levelfeed Python package used as a PyTorch user would (issue #30):
# in-place edits of a batch (labels[labels == 0] = -100) work on the rank's
# own slot instead of killing the process; batches kept in a list stay as
# they arrived while later ones come, and torch.stack takes them; keeping
# more batches than the ring has slots is a clear error naming --slots;
# a batch freed on another thread is given back by the loader's own;
# Loader(copy=True) hands out owned copies (kept beyond the slot count);
# a batch pickles as its values; each `for` yields one epoch, the next
# `for` the next, set_epoch checks the server's epoch, a `for` after the
# last epoch says the plan is over; len(loader) is the number of batches
# each `for` yields, on both ranks of a balanced plan, in the pad,
# micro-batch and pack layouts, and a TypeError once the plan is over (or
# the loader closed); a state_dict saved at an epoch's end
# resumes at the next epoch's first batch; a refused restore names the
# field that differs; a connect timeout names the endpoint and what to start.
# Exit 77 without torch.
source "$(dirname "$0")/server_lib.sh"

source "$(dirname "$0")/python_lib.sh"
need_python_module torch

make_dataset "$WORK/ds" --samples 96 --len-median 20 --len-max 64 --vocab 1000
# Fixed 4 samples a batch (naive sampler): sample_ids stack across batches.
SRV=(--data "$WORK/ds" --world 1 --sampler naive --batch-per-rank 4 --slots 3 --epochs 2 --seed 1)

start_server "${SRV[@]}"
"$PY" - "$EP" "$WORK" <<'PYEOF' || fail "batches as tensors"
import pickle
import sys
import threading
import torch
import levelfeed
from levelfeed import LevelfeedError

ep, work = sys.argv[1], sys.argv[2]
lo = levelfeed.Loader(endpoint=ep, rank=0, world_size=1)

# In place, the usual language-model idiom: no SIGSEGV, and it took.
it = iter(lo)
b = next(it)
labels = b["tokens"]
labels[labels == 0] = -100
assert (labels != 0).all() and (labels == -100).any(), "in-place masking did not take"
b.close()

# A batch freed on another thread (autograd's free saved tensors) is given
# back by the thread that takes batches, at its next batch.
holder = [next(it)]
th = threading.Thread(target=holder.clear)
th.start()
th.join()
assert len(lo._later) == 1, "a batch freed on another thread was not queued"

# Kept batches stay as they arrived while the next ones come (2 kept of 3 slots).
kept, first_ids = [], []
for _ in range(2):
    k = next(it)
    kept.append(k)
    first_ids.append(k["sample_ids"].clone())
stacked = torch.stack([k["sample_ids"] for k in kept])
assert stacked.shape == (2, 4), stacked.shape
assert all(torch.equal(k["sample_ids"], f) for k, f in zip(kept, first_ids)), "kept batch changed"

# A batch pickles as its values and attributes; the original stays usable.
copy = pickle.loads(pickle.dumps(kept[0]))
assert torch.equal(copy["tokens"], kept[0]["tokens"]) and copy.step == kept[0].step
assert copy.epoch == kept[0].epoch and type(copy) is levelfeed.Batch

# A tensor alone keeps its slot too; holding all 3 (2 batches and a
# tensor) makes the next batch a clear error.
tok = next(it)["tokens"]
try:
    next(it)
    sys.exit("a 4th batch came with every slot held")
except LevelfeedError as e:
    assert "--slots" in str(e) and "copy=True" in str(e), str(e)
assert all(torch.equal(k["sample_ids"], f) for k, f in zip(kept, first_ids)), "kept batch changed"
del kept, tok, copy, stacked, labels, b, k
n0 = 5 + sum(1 for _ in it)                 # the rest of epoch 0
assert n0 == 24, "epoch 0: %d batches" % n0
print("in-place masking, 2 batches kept and stacked, pickled; all slots held: clear error")

# Epochs: the next `for` is epoch 1; set_epoch is checked.
try:
    lo.set_epoch(5)
    sys.exit("set_epoch(5) accepted")
except LevelfeedError as e:
    assert "set_epoch(5)" in str(e) and "epoch 1" in str(e), str(e)
lo.set_epoch(1)
state = lo.state_dict()                       # at epoch 0's end: resumes at epoch 1's start
ids1 = [(b.epoch, b["sample_ids"].tolist()) for b in lo]
assert len(ids1) == 24 and all(e == 1 for e, _ in ids1), ids1[:3]
try:
    for b in lo:
        pass
    sys.exit("a `for` after the last epoch ran")
except LevelfeedError as e:
    assert "plan is over" in str(e), str(e)
lo.close()
torch.save({"state": state, "ids1": ids1}, work + "/epoch_end.pt")
print("one `for` per epoch (24 + 24 batches), set_epoch checked, the end said")
PYEOF
wait_server

# copy=True: every batch of both epochs kept, more than the 3 slots; and
# the state saved at epoch 0's end resumes with epoch 1's batches.
start_server "${SRV[@]}"
"$PY" - "$EP" "$WORK" <<'PYEOF' || fail "copy=True and resume at an epoch's end"
import sys
import torch
import levelfeed

ep, work = sys.argv[1], sys.argv[2]
saved = torch.load(work + "/epoch_end.pt")
with levelfeed.Loader(endpoint=ep, rank=0, world_size=1, copy=True) as lo:
    lo.load_state_dict(saved["state"])
    kept = list(lo)
ids1 = [(b.epoch, b["sample_ids"].tolist()) for b in kept]
assert ids1 == saved["ids1"], "resumed at the epoch's end: %s vs %s" % (ids1[:2], saved["ids1"][:2])
print("copy=True: %d batches kept past 3 slots; the epoch-end state resumed at epoch 1" % len(kept))
PYEOF
wait_server

# len(loader) against what each `for` yields: two ranks, two epochs of a
# balanced plan (steps differ by epoch), each layout; a rank's thread each,
# as the planner serves the ranks in lock-step. "scout": pad with epoch 0
# counted by the planner's scout while served, as on a dataset past
# start-up's prefix, its count 1.5 s late: len() before the first batch
# waits for it (saying so on stderr: every 0.3 s here) instead of failing.
for layout in pad micro pack scout; do
  case $layout in
    pad) extra=() ;;
    micro) extra=(--micro-batches) ;;
    pack) extra=(--layout pack --seq-len 64) ;;
    scout) extra=(); export LF_TEST_SCOUT_EPOCH0=1 LF_TEST_SCOUT_DELAY_MS=1500 ;;
  esac
  start_server --data "$WORK/ds" --world 2 --samples-per-rank 3 --slots 3 --epochs 2 \
    --seed 4 "${extra[@]}"
  unset LF_TEST_SCOUT_EPOCH0 LF_TEST_SCOUT_DELAY_MS
  "$PY" - "$EP" "$layout" 2>"$WORK/len_$layout.err" <<'PYEOF' ||
import sys
import threading
import levelfeed
import levelfeed.loader

ep, layout = sys.argv[1], sys.argv[2]
seen, errors = {}, []
if layout == "scout":
    levelfeed.loader.COUNT_NOTE_S = 0.3


def rank(r):
    try:
        with levelfeed.Loader(endpoint=ep, rank=r, world_size=2, copy=True) as lo:
            got = []
            for _ in range(2):
                n = len(lo)
                k = 0
                for b in lo:
                    k += 1
                    assert len(lo) == n, "len() changed inside epoch %d" % b.epoch
                got.append((b.epoch, n, k))
            assert lo, "a Loader is false once its plan is over"
            try:
                len(lo)
                raise AssertionError("len() after the last epoch")
            except TypeError as e:
                assert "plan is over" in str(e), str(e)
        try:
            len(lo)
            raise AssertionError("len() of a closed loader")
        except TypeError as e:
            assert "closed" in str(e), str(e)
        seen[r] = got
    except BaseException as e:  # noqa: BLE001  reported by the main thread
        errors.append("rank %d: %r" % (r, e))


threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
for r in range(2):
    for epoch, n, k in seen[r]:
        assert n == k, "%s, rank %d, epoch %d: len() %d, the `for` yielded %d" % (
            layout, r, epoch, n, k)
assert seen[0] == seen[1], "ranks differ: %s" % seen
assert [e for e, _, _ in seen[0]] == [0, 1], seen[0]
print("%s: len() = batches yielded, epochs (epoch, len, yielded) %s on both ranks"
      % (layout, seen[0]))
PYEOF
    fail "len(loader) in the $layout layout: $(cat "$WORK/len_$layout.err")"
  wait_server
  if [[ $layout == scout ]]; then
    grep -q "^levelfeed: len(): waiting for the server to count this epoch's batches" \
      "$WORK/len_$layout.err" || fail "scout: len() did not say it waits for the count:" \
      "$(cat "$WORK/len_$layout.err")"
    grep -q "^lf-server: plan: start-up walked [0-9]* sample(s) or piece(s), 0 of the run's 2 epoch(s)$" \
      "$WORK/server.log" || fail "scout: start-up counted epoch 0: $(grep walked "$WORK/server.log")"
  fi
done
echo "len() waits for an epoch counted while served, saying so: ok"

# A refused restore names the field; a connect timeout the endpoint.
start_server "${SRV[@]}" --seed 2
"$PY" - "$EP" "$WORK" <<'PYEOF' || fail "errors that say what to do"
import sys
import torch
import levelfeed
from levelfeed import LevelfeedError

ep, work = sys.argv[1], sys.argv[2]
state = torch.load(work + "/epoch_end.pt")["state"]


lo = levelfeed.Loader(endpoint=ep, rank=0, world_size=1)


def refused(st, words):
    try:
        lo.load_state_dict(st)
        sys.exit("state accepted: %r" % words)
    except LevelfeedError as e:
        assert words in str(e), str(e)
        print("refused:", e)


refused(state, "plan differs")
raw = bytearray(state["levelfeed"]["state"])
raw[4] = 7                                    # the rank field, its checksum not redone
refused(dict(state, levelfeed=dict(state["levelfeed"], state=bytes(raw))), "checksum")
refused(dict(state, levelfeed=dict(state["levelfeed"], state=b"x" * 8)), "8 bytes")
nowhere = work + "/nowhere/ctl"
try:
    levelfeed.Loader(endpoint=nowhere, rank=0, world_size=1, timeout=0.5)
    sys.exit("no server, no error")
except LevelfeedError as e:
    assert nowhere in str(e) and "lf-server" in str(e) and "lf-launch" in str(e), str(e)
    print("no server:", e)
n = sum(1 for _ in lo) + sum(1 for _ in lo)      # the refusals left the loader as it was
lo.close()
assert n == 48, n
PYEOF
wait_server
check_python_leftovers
echo "python batches ok"
