#!/usr/bin/env bash
# levelfeed.calibrate on a tiny torch model on the CPU whose attention makes
# its cost quadratic in the length (and an MLP linear): the fit's a and b are finite and
# positive, every term is fitted or said fixed, and the cost file it writes
# is one lf-plan and lf-server read (the C reader, common/cost_file.c).
# levelfeed.calibrate.fit on exact synthetic times recovers the
# coefficients and fixes a term that is absent (a test that needs no timing).
# Exit 77 when the interpreter (python_lib.sh) lacks torch.
source "$(dirname "$0")/server_lib.sh"
source "$(dirname "$0")/python_lib.sh"
need_python_module torch

"$PY" - "$WORK/model.cost" <<'PYEOF' || fail "python checks"
import math, sys, time
import torch
import levelfeed
from levelfeed.calibrate import fit

# exact times: a = 50, b = 0.5, c0 = 2000, d = 0 (absent)
pts = [(L, n) for L in (16, 32, 64, 128, 256, 512) for n in (1, 2, 4)]
f = fit(pts, [n * (50 * L + 0.5 * L * L + 2000) * (1 + 0.01 * ((L + n) % 3 - 1))
              for L, n in pts])
assert abs(f.ns["a"] / 50 - 1) < 0.05 and abs(f.ns["b"] / 0.5 - 1) < 0.05, f
assert abs(f.ns["c0"] / 2000 - 1) < 0.2, f
assert "d" in f.fixed and f.d == 0, f
assert abs(f.a - 16) < 1e-9 and abs(f.b - 16 * f.ns["b"] / f.ns["a"]) < 1e-9, f

torch.manual_seed(0)
torch.set_num_threads(1)
dim = 128
emb = torch.nn.Embedding(64, dim)
qkv = torch.nn.Linear(dim, 3 * dim)
mlp = torch.nn.Sequential(torch.nn.Linear(dim, 64), torch.nn.ReLU(), torch.nn.Linear(64, dim))

def step(lengths):
    x = emb(torch.randint(0, 64, (len(lengths), max(lengths))))
    q, k, v = qkv(x).chunk(3, dim=-1)
    att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(dim), dim=-1)  # L x L: quadratic
    mlp(att @ v).square().mean().backward()                   # per token: linear

f = levelfeed.calibrate(step, lengths=(16, 256), repeats=3, path=sys.argv[1],
                         clock=time.thread_time)  # one thread: CPU time, blind to load
for k in ("a", "b", "c0", "d"):
    v = getattr(f, k)
    assert math.isfinite(v) and v >= 0, (k, v)
    assert k in f.fixed or f.se[k] is not None, (k, f)
assert abs(f.a - 16) < 1e-9 and f.ns["a"] > 0 and f.b > 0 and f.ns["b"] > 0, f
text = open(sys.argv[1]).read()
assert text.splitlines()[3] == "levelfeed-cost 1", text
print(f"calibrate: b {f.b:.4g} units (b/a {f.ns['b'] / f.ns['a']:.3g}), R^2 {f.r2:.4f}, "
      f"fixed {sorted(f.fixed)}")
PYEOF

"$LF_BIN/lf-shard" synth tokens --out "$WORK/ds" --samples 300 --seed 3 --threads 1 \
  --len-median 20 --len-max 64 >"$WORK/synth.log" 2>&1 || fail "lf-shard synth: $(cat "$WORK/synth.log")"
"$LF_BIN/lf-plan" "$WORK/ds" --world 2 --cost-file "$WORK/model.cost" >"$WORK/plan.out" 2>&1 ||
  fail "lf-plan cannot read levelfeed.calibrate's cost file: $(cat "$WORK/plan.out") $(cat "$WORK/model.cost")"
"$LF_BIN/lf-server" --data "$WORK/ds" --world 2 --cost-file "$WORK/model.cost" --print-plan \
  >"$WORK/plan.txt" 2>&1 || fail "lf-server cannot read it: $(cat "$WORK/plan.txt")"
echo "python calibrate ok: the cost file plans in lf-plan and lf-server"
