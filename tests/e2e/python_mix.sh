#!/usr/bin/env bash
# A mixture in Python (issue 33): three token datasets served with
# --weight 0.5 / 0.3 / 0.2 to a levelfeed.Loader, in pad and in
# micro-batches. Every batch holds source [n] (int32, each sample's --data
# number, in the batch's sample order), equal to the dataset the sample's
# id falls in; batch.micro_batches() cuts it with its micro-batch; no id
# twice in the epoch and the tokens per source within 0.5 % of the weights.
# A state_dict() saved at epoch 0's end resumes under 0.4 / 0.4 / 0.2, epoch
# 1 following them; one saved inside epoch 0 is refused, naming both sets.
source "$(dirname "$0")/server_lib.sh"
source "$(dirname "$0")/python_lib.sh"

A=$WORK/short B=$WORK/mid C=$WORK/long
make_dataset "$A" --samples 1500 --len-median 100 --len-max 2048 --seed 1
make_dataset "$B" --samples 1000 --len-median 250 --len-max 2048 --seed 2
make_dataset "$C" --samples 500 --len-median 600 --len-max 2048 --seed 3
MIX=(--data "$A" --weight 0.5 --data "$B" --weight 0.3 --data "$C" --weight 0.2)

check() {   # LAYOUT: one epoch through the Loader
  "$PY" - "$EP" "$1" <<'PYEOF' || fail "$1: the source tensor does not match the samples"
import sys
import levelfeed

ep, layout = sys.argv[1:]
first = [0, 1500, 2500, 3000]          # the datasets' first ids, one after another
weights = [0.5, 0.3, 0.2]

def source_of(i):
    return max(s for s in range(3) if first[s] <= i)

seen, tokens = set(), [0, 0, 0]
lo = levelfeed.Loader(endpoint=ep, rank=0, world_size=1)
for b in lo:
    where = f"{layout} step {b.step}"
    ids, src = b["sample_ids"].tolist(), b["source"].tolist()
    assert str(b["source"].dtype).endswith("int32"), where
    assert len(src) == len(ids) and src == [source_of(i) for i in ids], where
    for mb in b.micro_batches():
        assert mb["source"].tolist() == [source_of(i) for i in mb["sample_ids"].tolist()], where
    lens = b["lengths"].tolist() if "lengths" in b else \
        [e - a for a, e in zip(b["cu_seqlens"].tolist(), b["cu_seqlens"].tolist()[1:])]
    for i, s, n in zip(ids, src, lens):
        assert i not in seen, f"{where}: sample {i} twice"
        seen.add(i)
        tokens[s] += n
    b.close()
lo.close()
total = sum(tokens)
shares = [t / total for t in tokens]
assert all(abs(s - w) <= 0.005 for s, w in zip(shares, weights)), f"{layout}: shares {shares}"
print(f"{layout}: {len(seen)} samples, token shares {[round(s, 4) for s in shares]}")
PYEOF
}

start_server "${MIX[@]}" --world 1 --epochs 1 --seed 3
check pad
wait_server
start_server "${MIX[@]}" --world 1 --epochs 1 --micro-batches --seed 4
check micro
wait_server

# Resume across a change of weights: epoch 0 under 0.5 / 0.3 / 0.2, its
# state_dict() at its end and one 5 batches in; a server started with
# 0.4 / 0.4 / 0.2 takes the first (epoch 1 follows the new weights) and
# refuses the second, naming both weight sets.
start_server "${MIX[@]}" --world 1 --epochs 2 --seed 3
"$PY" - "$EP" "$WORK" <<'PYEOF' || fail "saving the states"
import pickle, sys
import levelfeed

ep, work = sys.argv[1:]
lo = levelfeed.Loader(endpoint=ep, rank=0, world_size=1)
it = iter(lo)
for _ in range(5):
    next(it).close()
mid = lo.state_dict()
for b in it:
    b.close()
end = lo.state_dict()
lo.close()
assert end["levelfeed"]["version"] == 2 and len(end["levelfeed"]["state"]) == 184, end
pickle.dump({"mid": mid, "end": end}, open(work + "/states.pkl", "wb"))
PYEOF
wait_server
start_server --data "$A" --weight 0.4 --data "$B" --weight 0.4 --data "$C" --weight 0.2 \
  --world 1 --epochs 2 --seed 3
"$PY" - "$EP" "$WORK" <<'PYEOF' || fail "resume under other weights"
import pickle, sys
import levelfeed
from levelfeed import LevelfeedError

ep, work = sys.argv[1:]
states = pickle.load(open(work + "/states.pkl", "rb"))
first = [0, 1500, 2500, 3000]
lo = levelfeed.Loader(endpoint=ep, rank=0, world_size=1)
try:
    lo.load_state_dict(states["mid"])
    sys.exit("a state saved inside epoch 0 resumed under other weights")
except LevelfeedError as e:
    for words in ("mixture weights differ", "epoch 0 after 5 of its batches",
                  "weights 0.5 0.3 0.2", "server runs 0.4 0.4 0.2", "epoch boundary"):
        assert words in str(e), str(e)
    print("inside an epoch, refused:", e)
lo.load_state_dict(states["end"])
tokens = [0, 0, 0]
for b in lo:
    assert b.epoch == 1, b.epoch
    for i, n in zip(b["sample_ids"].tolist(), b["lengths"].tolist()):
        tokens[max(s for s in range(3) if first[s] <= i)] += n
    b.close()
lo.close()
shares = [t / sum(tokens) for t in tokens]
assert all(abs(s - w) <= 0.005 for s, w in zip(shares, [0.4, 0.4, 0.2])), shares
print("epoch 1 under 0.4 / 0.4 / 0.2: token shares", [round(s, 4) for s in shares])
PYEOF
wait_server
check_python_leftovers
echo "ok: the Loader's batches carry each sample's source; a state_dict at an epoch's end resumes under other weights"
