"""levelfeed.calibrate: the planner's cost model for the user's own model.

    import levelfeed, torch

    def step(lengths):                  # one batch: len(lengths) sequences
        x = torch.randint(0, vocab, (len(lengths), max(lengths)), device="cuda")
        model(x).sum().backward()       # forward + backward, as in training

    fit = levelfeed.calibrate(step, path="model.cost")
    # then: lf-server --cost-file model.cost ...   (lf-plan, lf-train too)

It times step_fn over a design that separates the terms of
c(L) = a*L + b*L^2 + c0 per sample + d per batch, fits them, and writes the
cost file the C programs read (common/cost_file.h; balancer/README.md,
"Cost file"). The method is lf-train --calibrate's (tools/harness/calibrate.c):

- lengths spread geometrically from min_length to max_length, each in
  batches of batch_sizes samples (1, 2, 4: c0 per sample apart from d);
- one untimed warm-up round, then `repeats` rounds, each a fresh shuffle;
  every timing is followed by one of a fixed reference batch, and a point's
  value is the median of its time over the reference's, times the
  reference's median time: the machine's drift divides out pair by pair;
- least squares on relative error (weights 1/t^2); a term whose estimate
  is not 3 standard errors above 0 is one the data cannot separate from
  noise: it is fixed at 0 (fit.fixed says which, with its t) and the rest
  refitted, weakest first; a is never fixed.

Times are wall clock (or `clock`) around step_fn and `sync()`; with CUDA in
use the default sync is torch.cuda.synchronize, so the GPU's work is inside
the time. Pure Python; torch only for that default.
"""
import dataclasses
import math
import random
import statistics
import sys
import time

COST_PER_UNIT = 16           # cost units per token of linear work (LF_PLAN_COST_PER_UNIT)
TERMS = ("a", "b", "c0", "d")
T_MIN = 3.0


@dataclasses.dataclass
class CostFit:
    """A calibration: coefficients in ns (ns_*) and in cost units (a, b, c0, d)."""
    ns: dict                 # term -> ns per token / token^2 / sample / batch (0: fixed)
    se: dict                 # term -> standard error in ns (None: fixed)
    fixed: dict              # term -> the t it had when fixed at 0
    r2: float
    rms_relative: float      # root mean square relative residual
    points: int
    a: float = 0.0
    b: float = 0.0
    c0: float = 0.0
    d: float = 0.0
    ns_per_unit: float = 0.0

    def cost_flags(self):
        return f"--cost {self.a:.9g},{self.b:.9g},{self.c0:.9g},{self.d:.9g}"


def _features(length, count):
    return (count * length, count * length * length, count, 1.0)


def _invert(m):
    k = len(m)
    a = [row[:] + [1.0 if i == j else 0.0 for j in range(k)] for i, row in enumerate(m)]
    for c in range(k):
        p = max(range(c, k), key=lambda r: abs(a[r][c]))
        if abs(a[p][c]) < 1e-12:
            raise ValueError("the design cannot determine the terms")
        a[c], a[p] = a[p], a[c]
        piv = a[c][c]
        a[c] = [v / piv for v in a[c]]
        for r in range(k):
            if r != c:
                f = a[r][c]
                a[r] = [x - f * y for x, y in zip(a[r], a[c])]
    return [row[k:] for row in a]


def _solve(points, times, free):
    """Weighted least squares over the free terms; columns scaled first."""
    idx = [j for j in range(4) if free[j]]
    if len(points) <= len(idx):
        raise ValueError("fewer points than terms")
    xs = [_features(*p) for p in points]
    w = [1.0 / (t * t) for t in times]
    scale = [math.sqrt(sum(wi * x[j] ** 2 for wi, x in zip(w, xs))) for j in idx]
    ata = [[sum(wi * x[i] * x[j] for wi, x in zip(w, xs)) / (si * sj)
            for j, sj in zip(idx, scale)] for i, si in zip(idx, scale)]
    aty = [sum(wi * x[i] * t for wi, x, t in zip(w, xs, times)) / si
           for i, si in zip(idx, scale)]
    inv = _invert(ata)
    coef = [0.0] * 4
    for a, j in enumerate(idx):
        coef[j] = sum(inv[a][b] * aty[b] for b in range(len(idx))) / scale[a]
    res = [t - sum(c * x for c, x in zip(coef, xf)) for t, xf in zip(times, xs)]
    wres = sum(r * r / (t * t) for r, t in zip(res, times))
    s2 = wres / (len(points) - len(idx))
    se = [None] * 4
    for a, j in enumerate(idx):
        se[j] = math.sqrt(s2 * inv[a][a]) / scale[a]
    mean = sum(times) / len(times)
    tot = sum((t - mean) ** 2 for t in times)
    r2 = 1 - sum(r * r for r in res) / tot if tot > 0 else 0.0
    return coef, se, r2, math.sqrt(wres / len(points))


def _t(coef, se, j):
    if se[j] is None:
        return 0.0
    return coef[j] / se[j] if se[j] > 0 else (math.inf if coef[j] > 0 else 0.0)


def fit(points, times):
    """Fits c = a*n*L + b*n*L^2 + c0*n + d to (L, n) points and their times
    (ns), fixing at 0 the terms the data cannot separate. Returns a CostFit
    (coefficients in ns and in cost units); ValueError when a (the cost per
    token) is not measurable."""
    free = [True] * 4
    fixed = {}
    while True:
        coef, se, r2, rms = _solve(points, times, free)
        weak = [j for j in range(1, 4) if free[j] and _t(coef, se, j) < T_MIN]
        if not weak:
            break
        j = min(weak, key=lambda j: _t(coef, se, j))
        fixed[TERMS[j]] = _t(coef, se, j)
        free[j] = False
    if _t(coef, se, 0) < T_MIN:
        raise ValueError("the timings do not determine a (the cost per token): "
                         "widen the lengths or raise repeats")
    unit = coef[0] / COST_PER_UNIT
    units = [c / unit for c in coef]
    return CostFit(ns=dict(zip(TERMS, coef)), se=dict(zip(TERMS, se)), fixed=fixed,
                   r2=r2, rms_relative=rms, points=len(points), a=units[0], b=units[1],
                   c0=units[2], d=units[3], ns_per_unit=unit)


def write_cost_file(path, f, source="levelfeed.calibrate"):
    """Writes f as a cost file (the format lf-plan, lf-server and lf-train
    read with --cost-file)."""
    lines = ["# levelfeed cost model: c(L) = a*L + b*L^2 + c0 per sample, plus d per",
             "# micro-batch, in cost units (format: balancer/README.md, \"Cost file\").",
             "# Read by lf-plan, lf-server and lf-train with --cost-file.",
             "levelfeed-cost 1"]
    lines += [f"{k} {getattr(f, k):.9g}" for k in TERMS]
    lines.append(f"ns_per_unit {f.ns_per_unit:.9g}")
    lines.append(f"# fit by {source}:")
    for k in TERMS:
        if k in f.fixed:
            lines.append(f"# {k} = 0: the data cannot separate it from noise "
                         f"(t = {f.fixed[k]:.2g}, under {T_MIN:g}): fixed at 0")
        else:
            lines.append(f"# {k} = {f.ns[k]:.4g} ns, standard error {f.se[k]:.2g}")
    lines.append(f"# R^2 {f.r2:.5f}, rms relative residual {100 * f.rms_relative:.2f} % "
                 f"over {f.points} points")
    with open(path, "w") as out:
        out.write("\n".join(lines) + "\n")


def _default_sync():
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.synchronize
    return lambda: None


def _design(lengths, batch_sizes, nlen=8):
    """(min, max): nlen lengths spread geometrically; 3 or more: those."""
    lengths = [int(v) for v in lengths]
    if len(lengths) == 2:
        lo, hi = lengths
        if not 2 <= lo < hi:
            raise ValueError("want 2 <= min < max lengths")
        ratio = (hi / lo) ** (1 / (nlen - 1))
        lengths = [round(lo * ratio ** i) for i in range(nlen)]
    lengths = sorted(set(lengths))
    if len(lengths) < 3 or lengths[0] < 2:
        raise ValueError("want (min, max) or 3 or more lengths, each at least 2")
    return [(L, n) for L in lengths for n in batch_sizes]


def calibrate(step_fn, lengths=None, *, batch_sizes=(1, 2, 4), repeats=9, path=None,
              sync=None, clock=time.perf_counter, seed=27, verbose=True):
    """Times step_fn (forward + backward of one batch; it receives the list
    of the batch's sequence lengths) over `lengths`, a (min, max) pair
    spread geometrically over 8 lengths (default (16, 1024)) or a list of 3
    or more, in batches of `batch_sizes` samples,
    `repeats` times each, fits the cost model and, with `path`, writes the
    cost file. `clock` reads seconds: wall clock by default (a GPU's work is
    not this process's CPU time); for a model on the CPU in one thread
    (torch.set_num_threads(1)), time.thread_time leaves out the time other
    processes take from the core. Returns the CostFit."""
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    points = _design(lengths if lengths is not None else (16, 1024), tuple(batch_sizes))
    ref = (points[len(points) // 2][0], 1)     # a middle length, one sample
    sync = sync or _default_sync()

    def timed(p):
        t0 = clock()
        step_fn([p[0]] * p[1])
        sync()
        return (clock() - t0) * 1e9

    rng = random.Random(seed)
    ratios = {p: [] for p in points}
    refs = []
    for r in range(repeats + 1):                # round 0: warm-up, not kept
        order = points[:]
        rng.shuffle(order)
        for p in order:
            t, t_ref = timed(p), timed(ref)
            if r:
                ratios[p].append(t / t_ref)
                refs.append(t_ref)
    scale = statistics.median(refs)
    times = [statistics.median(ratios[p]) * scale for p in points]
    f = fit(points, times)
    if path:
        write_cost_file(path, f)
    if verbose:
        terms = ", ".join(f"{k} = 0 (fixed, t = {f.fixed[k]:.2g})" if k in f.fixed else
                          f"{k} = {f.ns[k]:.4g} ns ± {100 * f.se[k] / f.ns[k]:.1f} %"
                          for k in TERMS)
        print(f"levelfeed.calibrate: {terms}; R^2 {f.r2:.4f}; {f.cost_flags()}"
              + (f"; cost file {path}" if path else ""))
    return f
