#!/usr/bin/env bash
# lf-plan on a real `lf-shard synth tokens` dataset: the JSON report has the
# documented shape for every sampler, every sample is placed once per
# sampler, balanced beats naive on max/mean by a wide margin, pad's
# micro-batches trade padding against --micro-overhead, pack's padding is
# no lower than its floor, the split's floor bounds max/mean from below
# (8/7 for 28 equal samples on 8 ranks; 1.1692, the optimum, for 900, 500,
# 500, 500 tokens on 2), the text report and --help work, bad
# arguments are usage errors (exit 2), and costs summing past 2^64 (in
# FLOPs, or d per micro-batch) give the same fill and max/mean, and pad cuts
# documents too long for the step bound by default.
set -u
B=${LF_BIN:?LF_BIN is set by tests/run.sh}
PY=/usr/bin/python3
[[ -x "$B/lf-shard" ]] || { echo "skip: lf-shard is not built"; exit 77; }
[[ -x "$PY" ]] || { echo "skip: /usr/bin/python3 is needed"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lf_plan_e2e.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$B/lf-shard" synth tokens --out "$tmp/ds" --samples 6000 --seed 3 --threads 2 \
  --block-size 32K >/dev/null 2>&1 || fail "lf-shard synth tokens"

"$B/lf-plan" "$tmp/ds" --world 8 --json >"$tmp/out.json" || fail "lf-plan --json"
"$PY" - "$tmp/out.json" 6000 <<'PYEOF' || fail "JSON report"
import json, sys
doc = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
assert (doc["samples"], doc["world"], doc["layout"]) == (n, 8, "pad"), doc
assert doc["budget"] > 0, doc
s = doc["samplers"]
assert set(s) == {"balanced", "naive", "sorted"}, s.keys()
for name, r in s.items():
    for k in ("max_over_mean", "max_over_mean_full", "delay_steps", "outlier_delay_steps",
              "step_tokens_to_median", "step_cost_to_median"):
        assert set(r[k]) == {"p50", "p99", "max"}, (name, k, r[k])
    for k in ("padding_fraction", "padding_floor", "micro_per_rank", "budget_fill",
              "plan_ms_per_step", "plan_cpu_ms_per_step", "epoch_s", "create_s",
              "epoch_cpu_s", "steps", "tail_steps", "samples", "samples_per_step",
              "rejected_outliers", "rejected_cap", "outliers"):
        assert isinstance(r[k], (int, float)), (name, k)
    assert ("batch_per_rank" in r) == (name != "balanced"), (name, r)
    assert 0 <= r["tail_steps"] <= r["steps"], (name, r["tail_steps"])
    assert r["create_s"] <= r["epoch_s"], (name, r["create_s"], r["epoch_s"])
    assert r["samples"] == n, (name, r["samples"])
    assert 0 <= r["padding_fraction"] < 1
    assert r["micro_per_rank"] >= 1, (name, r["micro_per_rank"])
    assert r["max_over_mean"]["p50"] <= r["max_over_mean"]["p99"] <= r["max_over_mean"]["max"]
    # every step counts, the tail too: the epoch's figure and the steps' sizes
    assert r["measured_steps"] == r["steps"], (name, r["measured_steps"], r["steps"])
    assert 1 <= r["epoch_max_over_mean"] <= r["max_over_mean"]["max"], (name, r)
    assert r["max_over_mean"]["max"] >= r["max_over_mean_full"]["max"], (name, r)
    assert r["step_tokens_to_median"]["p50"] == 1 and r["step_cost_to_median"]["p50"] == 1
    assert 0 < r["step_tokens_min_to_median"] <= 1, (name, r)
    assert r["dropped_tokens"] == 0, (name, r["dropped_tokens"])
    # the split's floor: a lower bound on every step's max/mean (d is 0 here,
    # so the mean is the samples' alone), so on each percentile and the epoch
    f = r["split_bound"]
    assert 1 <= f["p50"] <= f["p99"] <= f["max"], (name, f)
    for k in ("p50", "p99", "max"):
        assert f[k] <= r["max_over_mean"][k] + 1e-6, (name, k, f, r["max_over_mean"])
    assert 1 <= r["epoch_split_bound"] <= r["epoch_max_over_mean"] + 1e-6, (name, r)
b, nv = s["balanced"], s["naive"]
assert b["max_over_mean"]["p99"] < 1.01, b
assert nv["max_over_mean"]["p50"] > 1.1, nv
assert b["max_over_mean"]["max"] < nv["max_over_mean"]["p50"], (b, nv)
assert b["budget_fill"] > 0.99, b
assert b["padding_fraction"] < 0.10, b      # one batch a rank padded 70-80 %
# the baselines move as many samples per step as balanced
assert abs(nv["steps"] - b["steps"]) <= 0.05 * b["steps"], (nv["steps"], b["steps"])
print("balanced p99 %.5f, naive p99 %.5f" % (b["max_over_mean"]["p99"], nv["max_over_mean"]["p99"]))
PYEOF

# a cheaper micro-batch buys less padding with more micro-batches; pack's
# padding is no lower than the floor any split of its steps has
for args in "--micro-overhead 16" "--micro-overhead 4096" "--layout pack --seq-len 16384"; do
  "$B/lf-plan" "$tmp/ds" --world 8 --sampler balanced $args --json >"$tmp/${args// /_}.json" \
    || fail "lf-plan $args"
done
"$PY" - "$tmp" <<'PYEOF' || fail "micro-batch trade-off or pack floor"
import json, sys
get = lambda a: json.load(open(sys.argv[1] + "/" + a + ".json"))["samplers"]["balanced"]
lo, hi, pack = get("--micro-overhead_16"), get("--micro-overhead_4096"), get("--layout_pack_--seq-len_16384")
assert lo["padding_fraction"] < hi["padding_fraction"], (lo, hi)
assert lo["micro_per_rank"] > hi["micro_per_rank"], (lo, hi)
assert 0 < pack["padding_floor"] <= pack["padding_fraction"], pack
print("pad padding %.4f at overhead 16, %.4f at 4096; pack %.4f (floor %.4f)" % (
    lo["padding_fraction"], hi["padding_fraction"], pack["padding_fraction"], pack["padding_floor"]))
PYEOF

"$B/lf-plan" "$tmp/ds" --world 4 --sampler balanced --layout pack --seq-len 4096 \
  >"$tmp/out.txt" || fail "lf-plan pack text report"
grep -q "^balanced:" "$tmp/out.txt" || fail "text report has no balanced section"
grep -q "padding fraction" "$tmp/out.txt" || fail "text report has no padding line"
! grep -q "^naive:" "$tmp/out.txt" || fail "--sampler balanced printed naive"

out=$("$B/lf-plan" --help) || fail "--help: exit $?"
[[ "$out" == *"Usage: lf-plan"* ]] || fail "--help: no usage line"
"$B/lf-plan" "$tmp/ds" >/dev/null 2>&1; [[ $? -eq 2 ]] || fail "missing --world is not exit 2"
"$B/lf-plan" "$tmp/ds" --world 0 >/dev/null 2>&1; [[ $? -eq 2 ]] || fail "--world 0 is not exit 2"
"$B/lf-plan" "$tmp/ds" --world 4 --sampler bogus >/dev/null 2>&1; [[ $? -eq 2 ]] || fail "bad --sampler"
"$B/lf-plan" "$tmp/nope" --world 4 >/dev/null 2>&1; [[ $? -eq 1 ]] || fail "missing dataset is not exit 1"
for v in " 4" 4x -1 0x; do   # numbers are whole numbers: a usage error naming the flag
  "$B/lf-plan" "$tmp/ds" --world "$v" 2>"$tmp/err" >/dev/null; rc=$?
  [[ $rc -eq 2 ]] && grep -q -- "--world" "$tmp/err" || fail "--world '$v': exit $rc: $(cat "$tmp/err")"
done
"$B/lf-plan" "$tmp/ds" --world 4 --cost -1,0,0,0 2>"$tmp/err" >/dev/null
[[ $? -eq 2 ]] && grep -q -- "--cost" "$tmp/err" || fail "--cost -1,0,0,0: $(cat "$tmp/err")"
# The planner's refusals a user can cause, each named.
refused() {   # WORDS ARGS...: exit 1 with a message containing WORDS
  local words=$1; shift
  "$B/lf-plan" "$@" 2>"$tmp/err" >/dev/null; local rc=$?
  [[ $rc -eq 1 ]] && grep -qF -- "$words" "$tmp/err" || fail "lf-plan $*: exit $rc: $(cat "$tmp/err")"
}
refused "every sample costs 0" "$tmp/ds" --world 4 --cost 0,0,0,0
refused "is above the step budget" "$tmp/ds" --world 4 --outlier-cost 999999999999
refused "above the planner's limit 2^52" "$tmp/ds" --world 8 --cost 4.2e10,0,0,0
refused "is less than one row (--seq-len 4096)" "$tmp/ds" --world 4 --layout pack --seq-len 4096 \
  --max-padded 100
# outliers at 2^52 (L >= 2048) released 4096 at once: the step's budget
# wrapped past 2^64 (exit 0, budget fill 250 %)
refused "an outlier step would cost 2^63 or more" "$tmp/ds" --world 2 --sampler balanced \
  --cost 2.2e12,0,0,0 --budget 4503599627370496 --outlier-cost 2251799813685248 --outlier-group 4096

# The baselines are planned without balanced's caps, --micro-max-padded too
# (it once left every naive sample "over a cap"), over the pieces the cap
# cuts, as balanced (they once planned whole documents beside balanced's
# pieces); a report that cannot be written fails.
"$B/lf-plan" "$tmp/ds" --world 8 --sampler all --micro-max-padded 10 --json >"$tmp/naive.json" ||
  fail "lf-plan naive --micro-max-padded"
"$PY" -c 'import json, sys; s = json.load(open(sys.argv[1]))["samplers"]
r, b = s["naive"], s["balanced"]
assert r["samples"] == b["samples"] > 6000 and r["rejected_cap"] == 0, (r, b["samples"])
assert r["dropped_tokens"] == 0, r' "$tmp/naive.json" ||
  fail "naive with --micro-max-padded lost samples, or planned other pieces than balanced"
if "$B/lf-plan" "$tmp/ds" --world 8 --steps 1 >/dev/full 2>"$tmp/full.err"; then
  fail "lf-plan exit 0 with its report lost"
fi
grep -q "cannot write" "$tmp/full.err" || fail "lf-plan /dev/full: $(cat "$tmp/full.err")"
# Costs whose sum passes 2^64 (FLOP units): the default budget is still 16
# samples' worth (it wrapped to a garbage budget of one sample a step).
"$B/lf-plan" --synth 100000 --world 1 --cost 0,0,2e14,0 --sampler balanced --steps 1 --json \
  >"$tmp/wrap.json" || fail "lf-plan with costs past 2^64 in sum"
"$PY" -c 'import json, sys; b = json.load(open(sys.argv[1]))["budget"]
assert b == 16 * 2 * 10**14, b' "$tmp/wrap.json" || fail "budget with costs past 2^64: $(cat "$tmp/wrap.json")"
# The same plan in FLOPs (2^41 a token, a budget of 2^52) and in units 2^21
# times smaller: the epoch's cost sums past 2^64 only in FLOPs, and the
# budget fill is the same (summed in 64 bits it printed 0.956 for 0.981).
for unit in 2199023255552,0,0,0:4503599627370496 1048576,0,0,0:2147483648; do
  "$B/lf-plan" --synth 24000 --len-min 100 --len-max 1000 --world 2 --sampler balanced \
    --cost "${unit%:*}" --budget "${unit#*:}" --json >"$tmp/fill_${unit%%,*}.json" ||
    fail "lf-plan --cost ${unit%:*} --budget ${unit#*:}"
done
"$PY" - "$tmp/fill_2199023255552.json" "$tmp/fill_1048576.json" <<'PYEOF' || fail "budget fill in FLOPs"
import json, sys
flop, small = (json.load(open(f))["samplers"]["balanced"] for f in sys.argv[1:3])
assert flop["steps"] == small["steps"], (flop["steps"], small["steps"])
assert abs(flop["budget_fill"] - small["budget_fill"]) < 1e-6, (flop["budget_fill"], small["budget_fill"])
assert flop["budget_fill"] > 0.97, flop["budget_fill"]
print("budget fill %.6f in FLOPs, %.6f in small units" % (flop["budget_fill"], small["budget_fill"]))
PYEOF
# d = 2^52 a micro-batch, 4000 one-token micro-batches a rank: each rank
# costs just under 2^64, the two past it, and max/mean is about 1 (summed
# in 64 bits it printed 2.05).
"$B/lf-plan" --synth 24000 --len-min 1 --len-max 1 --world 2 --sampler balanced \
  --cost 1,0,0,4503599627370496 --budget 8000 --json >"$tmp/overhead.json" ||
  fail "lf-plan --cost 1,0,0,2^52"
"$PY" -c 'import json, sys; r = json.load(open(sys.argv[1]))["samplers"]["balanced"]
assert r["samples_per_step"] > 7900 and r["max_over_mean"]["max"] < 1.001, r' "$tmp/overhead.json" ||
  fail "max/mean with rank costs past 2^64: $(cat "$tmp/overhead.json")"
# pad's default cut (issue #27 item 2): documents up to 600k tokens made
# one step hold many of them, uncut (4 steps, epoch sum-max/sum-mean 1.29,
# a step of 2.31x the median's tokens); pad now cuts them as pack rows them,
# says so at start-up, and keeps the bound with every token placed.
"$B/lf-plan" --synth 3000 --len-sigma 2 --len-max 600000 --world 8 --sampler balanced \
  --json >"$tmp/cut.json" 2>"$tmp/cut.err" || fail "lf-plan with 600k-token samples"
grep -q -- "--micro-max-padded 8192 (default" "$tmp/cut.err" ||
  fail "pad's default cut not said: $(cat "$tmp/cut.err")"
"$PY" -c 'import json, sys; r = json.load(open(sys.argv[1]))["samplers"]["balanced"]
assert r["step_tokens_to_median"]["max"] <= 1.25 and r["epoch_max_over_mean"] <= 1.002, r
assert r["dropped_tokens"] == 0, r' "$tmp/cut.json" || fail "pad's default cut: $(cat "$tmp/cut.json")"
# The split's floor where it is known: 2000 samples of 1000 tokens (c =
# 16,325), a budget of 28 of them at 8 ranks: every step but the last holds
# 28, some rank 4, the mean 3.5, so no split does better than 8/7, and
# balanced reaches it.
"$B/lf-plan" --synth 2000 --len-median 1000 --len-sigma 0 --len-min 1000 --len-max 1000 \
  --world 8 --sampler balanced --budget 457112 --json >"$tmp/floor.json" ||
  fail "lf-plan, samples of one length"
"$PY" -c 'import json, sys; r = json.load(open(sys.argv[1]))["samplers"]["balanced"]
assert r["samples_per_step"] > 27.9 and abs(r["split_bound"]["p50"] - 8 / 7) < 1e-5, r
assert abs(r["max_over_mean"]["p50"] - 8 / 7) < 1e-5, r' "$tmp/floor.json" ||
  fail "the split floor of equal samples is not 8/7: $(cat "$tmp/floor.json")"
# Where counting cannot see it: one sample of 900 tokens (c = 14,664) and
# three of 500 (8,081) on 2 ranks in one step: the best split is 900 + 500
# against 500 + 500, 22,745 ÷ the mean 19,453.5 = 1.1692; the pigeonhole
# alone says 1.0. A small step gets its optimum (score.c, best_split).
"$PY" -c 'import json
for n in (900, 500, 500, 500): print(json.dumps({"tokens": [7] * n}))' >"$tmp/four.jsonl"
"$B/lf-shard" create tokens --in "$tmp/four.jsonl" --out "$tmp/four" >/dev/null 2>&1 ||
  fail "lf-shard create tokens (four samples)"
"$B/lf-plan" "$tmp/four" --world 2 --sampler balanced --budget 40000 --json >"$tmp/four.json" ||
  fail "lf-plan, four samples"
"$PY" -c 'import json, sys; r = json.load(open(sys.argv[1]))["samplers"]["balanced"]
assert r["steps"] == 1 and r["split_bound_exact_steps"] == 1, r
assert abs(r["split_bound"]["max"] - 22745 / 19453.5) < 1e-4, r
assert abs(r["max_over_mean"]["max"] - r["split_bound"]["max"]) < 1e-6, r' "$tmp/four.json" ||
  fail "the split floor of 900, 500, 500, 500 on 2 ranks is not 1.1692: $(cat "$tmp/four.json")"
echo "ok"
