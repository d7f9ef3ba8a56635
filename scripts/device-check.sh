#!/usr/bin/env bash
# The GPU checks, on a machine that has a GPU but none of levelfeed's
# packages (the device tool's machines), from the repository root with the
# .kit/ that scripts/device-kit.sh packed here:
#   scripts/device-check.sh env     what the machine has; every kit program
#                                   finds its libraries
#   scripts/device-check.sh tests   tests/run.sh .kit/build: the whole suite
#                                   (LF_TESTS=REGEX: the tests it matches)
#                                   (unit/client_gpu, e2e/harness_gpu and
#                                   e2e/python_ddp_gpu no longer skip)
#   scripts/device-check.sh gpu     the GPU figures: H2D rate from the
#                                   registered ring against cuMemAllocHost
#                                   memory, lf_next p99 with device against
#                                   host batches at a 5 ms step; the GPU
#                                   tests (their logs); e2e/harness_gpu's
#                                   report; the demo's lf-train --compare
#                                   on the GPUs where there are 2 or more
#   scripts/device-check.sh train   lf-train --device cuda: the GPU model's
#                                   gradients against the CPU model's; five
#                                   --calibrate runs (a, b, c0, R^2 and
#                                   their spread); one balanced epoch with
#                                   the fitted cost, measured compute /
#                                   planned cost per step
#   scripts/device-check.sh ddp     examples/torch_ddp.py on one GPU (nccl,
#                                   Loader(device="cuda")) against the
#                                   DataLoader baseline: tokens/s
#   scripts/device-check.sh server  the token and image path benchmarks
#                                   with 1, 2, 4 and 8 workers (it has the
#                                   cores)
# Several phases may be named; each runs under a time limit (LIMIT_<phase>
# seconds, default 600) and the run stops at DEADLINE (seconds from the
# start, default none: a phase then gets what is left). Logs go to $OUT
# (the device tool's folder that comes back) or /tmp/lf-device. The Python tests use LF_PYTHON, by
# default the python3 first on PATH there: the image's, which holds torch.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kit="$root/.kit"
[[ -d "$kit/build" ]] || { echo "device-check: no $kit: run scripts/device-kit.sh and carry .kit" >&2; exit 1; }
out=${OUT:-/tmp/lf-device}
mkdir -p "$out"

setup_env() {
  local ompi="$kit/ompi/usr" py nccl
  py=${LF_PYTHON:-$(command -v python3)}
  # NCCL from the image's PyTorch wheel (nvidia-nccl-cu13), when there.
  nccl=$("$py" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
  export LIBRARY_PATH="$kit/lib${LIBRARY_PATH:+:$LIBRARY_PATH}"   # cc -lzmq
  export LD_LIBRARY_PATH="$kit/lib:$ompi/lib/x86_64-linux-gnu/openmpi/lib:$ompi/lib/x86_64-linux-gnu:$ompi/lib/x86_64-linux-gnu/pmix2/lib${nccl:+:$nccl}:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export OPAL_PREFIX="$ompi" PMIX_INSTALL_PREFIX="$ompi/lib/x86_64-linux-gnu/pmix2"
  export PATH="$kit/bin:$ompi/bin:$PATH"
  export OMPI_MCA_mca_base_component_show_load_errors=0
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export LF_PYTHON="$py"
}

phase_env() {
  nvidia-smi -L || echo "no nvidia-smi"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  echo "cores: $(nproc), python: $LF_PYTHON $("$LF_PYTHON" -c 'import torch, numpy; print("torch", torch.__version__, "numpy", numpy.__version__, "cuda", torch.cuda.is_available())' 2>&1)"
  mpirun --version | head -1
  local missing
  missing=$(find "$kit/build" -type f -perm -u+x | while read -r f; do
    [[ "$(head -c 4 "$f" 2>/dev/null)" == $'\x7fELF' ]] || continue   # the ELF magic (`file` may be missing)
    ldd "$f" | grep 'not found' | sed "s|^|$f: |"
  done)
  [[ -z $missing ]] && echo "every kit program finds its libraries" || { echo "$missing"; return 1; }
  "$kit/build/bin/lf-train" --help | grep "this build"
}

# The device tool brings back at most 8 files: folders go as one archive.
phase_tests() {
  local rc=0
  bash "$root/tests/run.sh" "$kit/build" "${LF_TESTS:-}" || rc=$?
  tar czf "$out/test-logs.tgz" -C "$kit/build" test-logs
  return $rc
}

phase_gpu() {
  local rc=0 keep gpus
  bash "$root/tests/bench/run.sh" "$kit/build" client_gpu || rc=$?
  # The GPU tests first, so they run whatever time is left for the suite;
  # their work folders are kept for e2e/harness_gpu's report and trace.
  keep=$(mktemp -d)
  TMPDIR=$keep LF_KEEP_TMP=1 bash "$root/tests/run.sh" "$kit/build" 'gpu' || rc=$?
  cat "$keep"/lf-e2e.*/report.json 2>/dev/null
  # Only the GPU tests' logs: a filtered run leaves the other tests' in place.
  cp "$kit/build"/test-logs/*gpu* "$keep"/ 2>/dev/null
  tar czf "$out/gpu-tests.tgz" -C "$keep" \
    --exclude='*/ds' --exclude='*/rt' . 2>/dev/null
  rm -rf "$keep"
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  if [[ ${gpus:-0} -ge 2 ]]; then   # one GPU: the demo trains on the CPU
    bash "$root/tests/bench/run.sh" "$kit/build" harness || rc=$?
    tar czf "$out/harness.tgz" -C "$kit/build/demo" --exclude=data --exclude=tmp . 2>/dev/null
  fi
  return $rc
}

# The cost model's fit on this GPU and how closely measured compute follows
# the planned cost, on the demo's long-tailed set with a model large enough
# that compute, not kernel launches, fills a step.
phase_train() {
  local rc=0 d i cost
  "$kit/build/bin/lf-train" --gradcheck --device cuda || rc=1
  d=$(mktemp -d)
  "$kit/build/bin/lf-shard" synth tokens --out "$d/ds" --samples 3000 --seed 11 --vocab 4096 \
    --len-median 64 --len-max 1024 --len-min 8 --threads 8 >/dev/null || return 1
  local model=(--device cuda --vocab 4096 --dim 256 --hidden 1024 --window 1024)
  local train=(mpirun -np 1 "$kit/build/bin/lf-train" --data "$d/ds" "${model[@]}" --log-every 0
               --tmpdir "$d")
  for i in 1 2 3 4 5; do
    mpirun -np 1 "$kit/build/bin/lf-train" --calibrate "${model[@]}" --cost-file "$d/cal$i.cost" \
      >"$d/cal$i.txt" 2>&1 || { cat "$d/cal$i.txt"; rc=1; }
    grep -E "a = " "$d/cal$i.txt" | sed "s/^ */calibration $i: /"
  done
  "$LF_PYTHON" - "$d"/cal?.txt <<'PY'
import re, statistics as st, sys
fits = []
for path in sys.argv[1:]:
    m = re.search(r"a = (\S+) ns/token, b = (\S+) ns/token\^2, c0 = (\S+) ns/sample, R\^2 = (\S+)",
                  open(path).read())
    if m: fits.append([float(v) for v in m.groups()])
for i, name in enumerate(("a", "b", "c0", "R^2")):
    v = [f[i] for f in fits]
    if v:
        med = st.median(v)
        print(f"{name}: min {min(v):.4g} median {med:.4g} max {max(v):.4g}, "
              f"spread (max-min)/median {abs(max(v) - min(v)) / abs(med) if med else float('nan'):.1%}")
print(f"{len(fits)} of {len(sys.argv) - 1} calibrations gave a fit")
PY
  cost=$(sed -n 's/.*lf-server --cost \([^ ]*\).*/\1/p' "$d/cal1.txt")
  if [[ -n $cost ]]; then
    "${train[@]}" --sampler balanced --cost "$cost" --report "$out/train-report.json" \
      --trace "$d/trace.json" -- --samples-per-rank 4 >"$d/bal.txt" 2>&1 || { cat "$d/bal.txt"; rc=1; }
    "$LF_PYTHON" - "$d/trace.json" <<'PY'
import json, statistics as st, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"]
      if e.get("name") == "compute" and e.get("args", {}).get("planned_cost")]
r = [e["dur"] / e["args"]["planned_cost"] for e in ev]
if r:
    mean = st.mean(r)
    q = sorted(x / mean for x in r)
    print(f"measured compute / planned cost over {len(q)} steps, each / the mean: "
          f"min {q[0]:.3f} p1 {q[len(q) // 100]:.3f} median {q[len(q) // 2]:.3f} "
          f"p99 {q[len(q) * 99 // 100]:.3f} max {q[-1]:.3f} (max/mean {q[-1]:.3f})")
else:
    print("no compute steps with a planned cost in the trace")
PY
  else
    echo "no cost flags from the first calibration"; rc=1
  fi
  rm -rf "$d"
  return $rc
}

phase_ddp() {
  LF_BENCH_GPU=1 bash "$root/tests/bench/run.sh" "$kit/build" python_ddp
}

phase_server() {
  WORKERS=${WORKERS:-1 2 4 8} ROUNDS=${ROUNDS:-2} SAMPLES=${SAMPLES:-100000} \
    LAT_SAMPLES=${LAT_SAMPLES:-10000} IMAGES=${IMAGES:-1000} bash "$root/tests/bench/run.sh" "$kit/build" server
}

setup_env
if [[ ${1:-} == --one ]]; then "phase_$2"; exit; fi   # one phase, under the limit below
[[ $# -gt 0 ]] || set -- env
start=$SECONDS rc=0
for p in "$@"; do
  case $p in
    env|tests|gpu|train|ddp|server) ;;
    *) echo "device-check: unknown phase $p (env, tests, gpu, train, ddp, server)" >&2; exit 2 ;;
  esac
  limit_var=LIMIT_$p limit=${!limit_var:-600}
  if [[ -n ${DEADLINE:-} ]]; then
    left=$((DEADLINE - (SECONDS - start)))
    [[ $left -lt $limit ]] && limit=$left
    [[ $limit -gt 10 ]] || { echo "== device-check $p: not run, the deadline is near"; rc=1; continue; }
  fi
  echo "== device-check $p (limit ${limit} s, at $((SECONDS - start)) s)"
  timeout -k 5 "$limit" bash "$0" --one "$p" 2>&1 | tee "$out/$p.log"
  prc=${PIPESTATUS[0]}
  [[ $prc -eq 124 || $prc -eq 137 ]] && echo "== device-check $p: stopped at its limit of $limit s"
  [[ $prc -eq 0 ]] || rc=1
done
echo "== device-check done at $((SECONDS - start)) s"
exit $rc
