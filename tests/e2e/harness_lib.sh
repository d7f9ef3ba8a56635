#!/usr/bin/env bash
# Helpers for the lf-train end-to-end tests (sourced by tests/e2e/harness_*.sh,
# on top of server_lib.sh): Open MPI settings for a container, a small
# synthetic token set, a training run, and the checks the tests share.
source "$(dirname "${BASH_SOURCE[0]}")/server_lib.sh"

command -v mpirun >/dev/null || { echo "SKIP: mpirun not found"; exit 77; }
[[ -x "$LF_BIN/lf-train" ]] || { echo "SKIP: lf-train not built (MPI=0)"; exit 77; }

# Open MPI in a container: root allowed, shared memory only, more ranks than cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1
# Sanitizer builds: Open MPI's own start-up allocations (libmpi, its
# dlopen'ed components) are never freed; lf-train's leaks still count.
printf 'leak:%s\n' libmpi libopen-pal libopen-rte libpmix libhwloc libevent mca_ >"$WORK/lsan.supp"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$WORK/lsan.supp:fast_unwind_on_malloc=0"
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

check_plan() {   # TAG NP SAMPLER [server args...]: batch logs == lf-server --print-plan (of $DS)
  local tag=$1 np=$2 sampler=$3 r; shift 3
  "$LF_BIN/lf-server" --data "${DS:-$WORK/ds}" --world "$np" --sampler "$sampler" --seed 0 \
    --epochs 1 --cost "$COST" --pad-id 0 "$@" --print-plan | sort -k1,1n -k2,2n -k3,3n \
    >"$WORK/$tag.plan"
  [[ -s "$WORK/$tag.plan" ]] || fail "$tag: empty plan"
  for ((r = 0; r < np; r++)); do [[ -s "$WORK/$tag.r$r.txt" ]] || fail "$tag: rank $r got nothing"; done
  diff <(cat "$WORK/$tag".r*.txt | sort -k1,1n -k2,2n -k3,3n) "$WORK/$tag.plan" >/dev/null ||
    fail "$tag: the batches the ranks received differ from the plan"
}

check_loss() {   # TAG SAMPLER MIN_STEPS: the loss of the last 10% of steps is lower
  local tag=$1 sampler=$2 min=$3 steps first last
  read -r steps first last < <(sed -n "s/^$sampler: \([0-9]*\) steps.*loss \([0-9.]*\) -> \([0-9.]*\)\$/\1 \2 \3/p" "$WORK/$tag.out")
  [[ -n "${steps:-}" ]] || fail "$tag: no summary line: $(cat "$WORK/$tag.out")"
  [[ $steps -ge $min ]] || fail "$tag: only $steps steps"
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.3) }' ||
    fail "$tag: the loss did not fall: $first -> $last"
  echo "$tag: $steps steps, loss $first -> $last"
}

# The report's keys, and the trace (common/timeline.c: e2e/check_timeline.py)
# with the harness's all-reduce slices.
check_report() {   # REPORT TRACE RANKS DEVICE: documented keys, one track per rank
  /usr/bin/python3 - "$@" <<'PY' || fail "report malformed"
import json, sys
r = json.load(open(sys.argv[1]))
want = ["sampler", "ranks", "steps", "tokens_per_s", "step_ms", "sync_wait_fraction",
        "data_wait_fraction", "compute_max_over_mean", "compute_epoch_max_over_mean",
        "compute_noise_floor", "step_tokens_to_median", "device"]
assert list(r) == want, list(r)
# every step counted, the last too: the epoch's figure, the steps against the median
e = r["compute_epoch_max_over_mean"]
assert e is None or e >= 1, e
st = r["step_tokens_to_median"]
assert set(st) == {"min", "p99", "max"}, st
assert st["min"] is None or 0 < st["min"] <= 1 <= st["p99"] <= st["max"], st
assert r["ranks"] == int(sys.argv[3]) and (r["device"] == "cpu") == (sys.argv[4] == "cpu")
assert set(r["step_ms"]) == {"p50", "p99"} and set(r["compute_max_over_mean"]) == {"p50", "p99"}
# the noise floor: identical work on every rank, measured after the plan
fl = r["compute_noise_floor"]
assert set(fl) == {"p50", "p99"} and 1 <= fl["p50"] <= fl["p99"], fl
assert 0 <= r["sync_wait_fraction"] < 1 and 0 <= r["data_wait_fraction"] < 1
t = json.load(open(sys.argv[2]))["traceEvents"]
assert "all-reduce" in {e["name"] for e in t}
PY
  check_trace "$2" "$3"
}

check_clean() {   # nothing left: shared memory, runtime directories, processes
  check_no_leftovers
  [[ -z "$(ls -A "$TMP")" ]] || fail "runtime directories left: $(ls "$TMP")"
  ! pgrep -f "$WORK/ds" >/dev/null || fail "processes left: $(pgrep -af "$WORK/ds")"
}
