# Sourced by tests/e2e/lf_shard_*.sh (not a test itself): the lf-shard binary,
# a scratch directory removed on exit, and the python used to make inputs.
set -u
root=${LF_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)}
bin=${LF_BIN:-$root/build/default/bin}
[[ -x "$bin/lf-shard" ]] || { echo "FAIL: $bin/lf-shard is not built" >&2; exit 1; }
LF_SHARD=$(cd "$bin" && pwd)/lf-shard     # absolute: the tests change directory
PY=${LF_PYTHON:-/usr/bin/python3}          # as tests/e2e/python_lib.sh
export LF_SHARD
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lf_shard.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# Skips (77) when that python lacks numpy or PIL.
need_python() {
  "$PY" -c 'import numpy, PIL' 2>/dev/null ||
    { echo "skip: $PY with numpy and PIL is needed"; exit 77; }
}
