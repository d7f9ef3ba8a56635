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
#                                   registered ring against cudaHostAlloc
#                                   memory; the demo's lf-train --compare
#                                   (on the GPUs where there are 2 or
#                                   more); e2e/harness_gpu's GPU report
#   scripts/device-check.sh server  the token-path benchmark with 1, 2, 4
#                                   and 8 decode threads (it has the cores)
# Several phases may be named; logs go to $OUT (the device tool's folder
# that comes back) or /tmp/lf-device. The Python tests use LF_PYTHON, by
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
  export LD_LIBRARY_PATH="$kit/lib:$ompi/lib/x86_64-linux-gnu/openmpi/lib:$ompi/lib/x86_64-linux-gnu:$ompi/lib/x86_64-linux-gnu/pmix2/lib${nccl:+:$nccl}:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export OPAL_PREFIX="$ompi" PMIX_INSTALL_PREFIX="$ompi/lib/x86_64-linux-gnu/pmix2"
  export PATH="$kit/bin:$ompi/bin:$PATH"
  export OMPI_MCA_mca_base_component_show_load_errors=0
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
  local rc=0 keep
  bash "$root/tests/bench/run.sh" "$kit/build" client_gpu || rc=$?
  bash "$root/tests/bench/run.sh" "$kit/build" harness || rc=$?
  tar czf "$out/harness.tgz" -C "$kit/build/demo" --exclude=data --exclude=tmp . 2>/dev/null
  # lf-train on the GPU (one rank per GPU): e2e/harness_gpu's report and trace.
  keep=$(mktemp -d)
  TMPDIR=$keep LF_KEEP_TMP=1 bash "$root/tests/run.sh" "$kit/build" harness_gpu || rc=$?
  cat "$keep"/lf-e2e.*/report.json 2>/dev/null
  tar czf "$out/harness_gpu.tgz" -C "$keep" --exclude='*/ds' --exclude='*/rt' . 2>/dev/null
  rm -rf "$keep"
  return $rc
}

phase_server() {
  WORKERS=${WORKERS:-1 2 4 8} ROUNDS=${ROUNDS:-2} bash "$root/tests/bench/run.sh" "$kit/build" server
}

setup_env
[[ $# -gt 0 ]] || set -- env
rc=0
for p in "$@"; do
  case $p in
    env|tests|gpu|server) echo "== device-check $p"; "phase_$p" 2>&1 | tee "$out/$p.log" || rc=1 ;;
    *) echo "device-check: unknown phase $p (env, tests, gpu, server)" >&2; exit 2 ;;
  esac
done
exit $rc
