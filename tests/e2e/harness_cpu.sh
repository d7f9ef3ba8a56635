#!/usr/bin/env bash
# lf-train on the CPU under mpirun, against lf-servers it starts itself:
#  - 2 ranks, pad layout, a few hundred steps: the loss falls (first vs
#    last 10% of steps); each rank's batches equal the server's plan
#    (lf-server --print-plan); the report has exactly the documented keys;
#    the trace and chart are well formed; --calibrate fits;
#  - 3 ranks, pack layout: the batches equal the plan too;
#  - a planted fault (one rank's parameter nudged after step 10) must fail
#    the run with the cross-rank parameter check's message;
#  - nothing is left behind: /dev/shm, runtime directories, processes.
source "$(dirname "$0")/server_lib.sh"

command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
[[ -x "$LF_BIN/lf-train" ]] || { echo "SKIP: lf-train not built (MPI=0)"; exit 77; }

# Open MPI in a container: root allowed, shared memory only, more ranks than cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
TMP="$WORK/tmp"               # lf-train's server runtime directories go here
mkdir -p "$TMP"

"$LF_BIN/lf-shard" synth tokens --out "$WORK/ds" --samples 1500 --seed 7 --threads 1 \
  --vocab 256 --len-median 32 --len-max 256 --len-min 8 >"$WORK/synth.log" 2>&1 ||
  { cat "$WORK/synth.log" >&2; fail "lf-shard synth"; }

COST=16,0.0003,0,0
MODEL=(--vocab 256 --dim 16 --hidden 32 --cost "$COST" --log-every 0 --tmpdir "$TMP")

train() {   # TAG NP [lf-train args...]; output in $WORK/TAG.out
  local tag=$1 np=$2; shift 2
  mpirun -np "$np" "$LF_BIN/lf-train" --data "$WORK/ds" "${MODEL[@]}" "$@" >"$WORK/$tag.out" 2>&1
}

check_plan() {   # TAG NP SAMPLER [server args...]: batch logs == lf-server --print-plan
  local tag=$1 np=$2 sampler=$3; shift 3
  "$LF_BIN/lf-server" --data "$WORK/ds" --world "$np" --sampler "$sampler" --seed 0 \
    --epochs 1 --cost "$COST" --pad-id 0 "$@" --print-plan | sort -k1,1n -k2,2n -k3,3n \
    >"$WORK/$tag.plan"
  [[ -s "$WORK/$tag.plan" ]] || fail "$tag: empty plan"
  for ((r = 0; r < np; r++)); do [[ -s "$WORK/$tag.r$r.txt" ]] || fail "$tag: rank $r got nothing"; done
  diff <(cat "$WORK/$tag".r*.txt | sort -k1,1n -k2,2n -k3,3n) "$WORK/$tag.plan" >/dev/null ||
    fail "$tag: the batches the ranks received differ from the plan"
}

# 1. two ranks, pad layout
train pad 2 --batches "$WORK/pad" --report "$WORK/report.json" --trace "$WORK/trace.json" \
  --chart "$WORK/chart.svg" --calibrate -- --samples-per-rank 1 ||
  { cat "$WORK/pad.out" >&2; fail "lf-train (2 ranks, pad) failed"; }
check_plan pad 2 balanced --samples-per-rank 1
read -r steps first last < <(sed -n 's/^balanced: \([0-9]*\) steps.*loss \([0-9.]*\) -> \([0-9.]*\)$/\1 \2 \3/p' "$WORK/pad.out")
[[ -n "${steps:-}" ]] || fail "no summary line: $(cat "$WORK/pad.out")"
[[ $steps -ge 200 ]] || fail "only $steps steps"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }' ||
  fail "the loss did not fall: $first -> $last"
grep -q "R^2 = " "$WORK/pad.out" || fail "--calibrate printed no fit"
grep -q "lf-server --cost 16," "$WORK/pad.out" || fail "--calibrate printed no flags"
/usr/bin/python3 - "$WORK/report.json" "$WORK/trace.json" <<'PY' || fail "report or trace malformed"
import json, sys
r = json.load(open(sys.argv[1]))
want = ["sampler", "ranks", "steps", "tokens_per_s", "step_ms", "sync_wait_fraction",
        "data_wait_fraction", "compute_max_over_mean", "device"]
assert list(r) == want, list(r)
assert r["sampler"] == "balanced" and r["ranks"] == 2 and r["device"] == "cpu"
assert set(r["step_ms"]) == {"p50", "p99"} and set(r["compute_max_over_mean"]) == {"p50", "p99"}
assert 0 <= r["sync_wait_fraction"] < 1 and 0 <= r["data_wait_fraction"] < 1
t = json.load(open(sys.argv[2]))["traceEvents"]
assert {e["tid"] for e in t if e["ph"] == "X"} == {0, 1}
assert {"data wait", "compute", "all-reduce"} <= {e["name"] for e in t}
PY
grep -q '^<svg' "$WORK/chart.svg" && grep -q '</svg>' "$WORK/chart.svg" || fail "chart.svg"
echo "2 ranks, pad: $steps steps, loss $first -> $last, batches == plan, report ok"

# 2. three ranks, pack layout (rows of 512 tokens, cu_seqlens)
PACK=(--layout pack --seq-len 512 --samples-per-rank 2)
train pack 3 --sampler sorted --batches "$WORK/pack" -- "${PACK[@]}" ||
  { cat "$WORK/pack.out" >&2; fail "lf-train (3 ranks, pack) failed"; }
check_plan pack 3 sorted "${PACK[@]}"
echo "3 ranks, pack: batches == plan"

# 3. a planted fault must be caught by the parameter check
if train fault 2 --sampler naive --fault-step 10 --fault-rank 1 -- --samples-per-rank 1; then
  fail "a perturbed parameter went unnoticed"
fi
grep -q "parameters differ after step 10: rank 1" "$WORK/fault.out" ||
  fail "fault run: $(cat "$WORK/fault.out")"
echo "planted fault: caught"

check_no_leftovers
[[ -z "$(ls -A "$TMP")" ]] || fail "runtime directories left: $(ls "$TMP")"
! pgrep -f "$WORK/ds" >/dev/null || fail "processes left: $(pgrep -af "$WORK/ds")"
echo "harness cpu ok"
