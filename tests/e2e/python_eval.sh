#!/usr/bin/env bash
# loader.eval_batches() (lf-server --eval-data, issue #33): two ranks, each
# a Python process iterating its epochs and running an evaluation pass at
# training steps drawn at random (seeded; one before the first batch, one
# left early with `break`, whose rest the generator takes when closed).
# Every full pass yields the same batches (ids in order) on each rank, as
# many as loader.eval_len, every held-out sample once over the two ranks;
# state_dict() after a pass is what it was before it; and the training
# batches equal, batch for batch, those of the same server without
# --eval-data. Where torch sees a GPU, the same ranks with device="cuda:0"
# (device tensors, the passes through the client's device path) must give
# exactly the host ranks' batches, training and eval; without one that part
# is skipped (it says so; e2e/client_gpu_fake tests the C side of it
# everywhere). Exit 77 without numpy.
source "$(dirname "$0")/server_lib.sh"

source "$(dirname "$0")/python_lib.sh"
python_loads_lib || { echo "skip: a ThreadSanitizer build's library cannot be loaded by Python"; exit 77; }
need_python_module numpy

make_dataset "$WORK/all"
"$LF_BIN/lf-shard" split "$WORK/all" --fraction 0.1 --seed 3 --out-train "$WORK/tr" \
  --out-eval "$WORK/ev" >"$WORK/split.log" 2>&1 || { cat "$WORK/split.log" >&2; fail "split"; }
SRV=(--data "$WORK/tr" --world 2 --seed 5 --epochs 2 --budget 300000 --slots 3)

cat >"$WORK/rank.py" <<'PYEOF'
import json, sys
import levelfeed
ep, rank, out, at = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
device = sys.argv[5] if len(sys.argv) > 5 else None
at = [int(k) for k in at.split(",")] if at else []
lo = levelfeed.Loader(endpoint=ep, rank=rank, world_size=2, device=device,
                      tensors="torch" if device else "numpy")
res = {"train": [], "eval": [], "eval_len": lo.eval_len, "partial": []}

def ids(b):
    t = b["sample_ids"]
    assert not device or t.is_cuda, "a host tensor from a device loader"
    return [int(x) for x in t.tolist()]

def evaluate(k):
    before = lo.state_dict()
    if k == 1:   # the second pass is left early: two batches, then break
        for i, b in enumerate(lo.eval_batches()):
            res["partial"].append(ids(b))
            del b
            if i == 1:
                break
    else:
        res["eval"].append([[b.step] + ids(b) for b in lo.eval_batches()])
    assert lo.state_dict() == before, "an eval pass moved the training position"

done = passes = 0
while not lo.finished:
    for b in lo:
        while at and at[0] == done:     # with this step's training batch held
            evaluate(passes)
            passes += 1
            at.pop(0)
        res["train"].append([b.epoch, b.step] + ids(b))
        del b
        done += 1
lo.close()
json.dump(res, open(out, "w"))
PYEOF

run_ranks() {   # TAG EVAL-AT [DEVICE]
  local pids=() r
  for r in 0 1; do
    "$PY" "$WORK/rank.py" "$EP" "$r" "$WORK/$1.r$r.json" "$2" ${3:+"$3"} >"$WORK/$1.r$r.log" 2>&1 &
    pids+=($!)
  done
  PIDS+=("${pids[@]}")
  for r in 0 1; do wait_ok 120 "python rank $r of $1" "${pids[$r]}" "$WORK/$1.r$r.log"; done
}

start_server "${SRV[@]}"
run_ranks ref ""
wait_server
total=$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["train"]))' "$WORK/ref.r0.json")
RANDOM=7
steps="0,$(printf '%s\n' $((RANDOM % total)) $((RANDOM % total)) $((RANDOM % total)) | sort -n | paste -sd,)"

start_server "${SRV[@]}" --eval-data "$WORK/ev"
run_ranks ev "$steps"
wait_server
NEVAL=$("$LF_BIN/lf-shard" inspect "$WORK/ev" | sed -n 's/^samples: \([0-9]*\).*/\1/p')
"$PY" - "$WORK" "$NEVAL" <<'PYEOF' || fail "eval passes at training steps $steps"
import collections, json, sys
work, neval = sys.argv[1], int(sys.argv[2])
got = [json.load(open("%s/ev.r%d.json" % (work, r))) for r in (0, 1)]
ref = [json.load(open("%s/ref.r%d.json" % (work, r))) for r in (0, 1)]
for r in (0, 1):
    g = got[r]
    assert g["train"] == ref[r]["train"], "rank %d: training batches differ with eval passes" % r
    assert len(g["eval"]) == 3, "rank %d: %d full passes, not 3" % (r, len(g["eval"]))
    assert all(p == g["eval"][0] for p in g["eval"]), "rank %d: the passes differ" % r
    assert len(g["eval"][0]) == g["eval_len"] == got[0]["eval_len"] > 0, \
        "rank %d: %d batches a pass, eval_len %s" % (r, len(g["eval"][0]), g["eval_len"])
    assert [s[0] for s in g["eval"][0]] == list(range(g["eval_len"])), "rank %d: steps" % r
    assert len(g["partial"]) == 2 and g["partial"] == [s[1:] for s in g["eval"][0][:2]], \
        "rank %d: the pass left early did not start as the others" % r
    assert all(len(s) > 1 for s in g["eval"][0]), "rank %d: an empty eval batch" % r
ids = collections.Counter(i for g in got for s in g["eval"][0] for i in s[1:])
assert sorted(ids) == list(range(neval)) and set(ids.values()) == {1}, \
    "a pass does not hold each of the %d held-out samples once" % neval
print("python: 3 passes + 1 left early at steps of %d: ok" % len(got[0]["train"]))
PYEOF

if "$PY" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
  start_server "${SRV[@]}" --eval-data "$WORK/ev"
  run_ranks dev "$steps" cuda:0
  wait_server
  for r in 0 1; do
    cmp -s "$WORK/ev.r$r.json" "$WORK/dev.r$r.json" ||
      fail "rank $r: device=cuda:0 gave other batches (training or eval) than host memory"
  done
  echo "device=cuda:0: the same training and eval batches as host memory"
else
  echo "device=cuda:0: skipped, torch sees no GPU here"
fi
check_python_leftovers
echo "eval_batches(): the same every pass, each held-out sample once, training unchanged: ok"
