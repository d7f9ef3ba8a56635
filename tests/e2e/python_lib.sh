#!/usr/bin/env bash
# Helpers for the Python end-to-end tests (sourced by tests/e2e/python_*.sh,
# after server_lib.sh): the interpreter, the library the package loads, and
# the leftover check.
# Debian's interpreter, with python3-numpy and python3-torch; LF_PYTHON names
# another (scripts/device-check.sh: the GPU image's, which holds torch).
PY_BIN=${LF_PYTHON:-/usr/bin/python3}
PY=$PY_BIN
ROOT=${LF_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
export LEVELFEED_LIB=${LF_BUILD:-$LF_BIN/..}/lib/liblevelfeed.so
export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
[[ -f $LEVELFEED_LIB ]] || fail "no $LEVELFEED_LIB"
# A sanitizer build's library needs the ASan runtime loaded before Python
# itself (and libstdc++ with it, so ASan can intercept torch's C++ throws);
# the interpreter's own allocations at exit are not ours to report.
# py_run INTERPRETER ARGS... runs any interpreter that way (a venv's too);
# "$PY" names python_sanitized, Debian's interpreter run so.
asan_rt=$(ldd "$LEVELFEED_LIB" | awk '/libasan/ {print $3}')
py_run() {
  local interp=$1
  shift
  if [[ -n $asan_rt ]]; then
    LD_PRELOAD="$asan_rt:$(cc -print-file-name=libstdc++.so.6)" \
      ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" "$interp" "$@"
  else
    "$interp" "$@"
  fi
}
if [[ -n $asan_rt ]]; then
  python_sanitized() { py_run "$PY_BIN" "$@"; }
  PY=python_sanitized
fi

# A ThreadSanitizer build's library cannot be loaded into Python (its
# runtime wants static TLS, which a dlopen cannot have): tests with C parts
# too run those and skip the Python part where python_loads_lib is false.
tsan_rt=$(ldd "$LEVELFEED_LIB" | awk '/libtsan/ {print $3}')
python_loads_lib() { [[ -z $tsan_rt ]]; }

need_python_module() {     # MODULE: exit 77 unless $PY imports it
  "$PY" -c "import $1" 2>/dev/null || { echo "skip: $1 not importable by $PY"; exit 77; }
}

# server_lib's check_no_leftovers, but OpenMPI's segments belong to other
# jobs (these tests start no MPI program; the machine may run some); and no
# process of this test's directory may be left.
check_python_leftovers() {
  local new left stray
  new=$(comm -13 <(echo "$SHM_BEFORE") <(ls /dev/shm | sort) | grep -v '^vader_segment\.' || true)
  [[ -z $new ]] || fail "left in /dev/shm: $new"
  left=$(ls "$RT")
  [[ -z $left ]] || fail "left in the runtime directory: $left"
  stray=$(pgrep -f -- "$WORK" || true)
  [[ -z $stray ]] || fail "processes left: $(ps -o pid,args -p "${stray//$'\n'/,}")"
}
