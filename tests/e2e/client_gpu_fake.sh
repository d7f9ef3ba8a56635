#!/usr/bin/env bash
# The client's GPU path without a GPU: unit/client_gpu and unit/client_gpu_eval
# run against the stand-in driver of tests/fakecuda (host memory as device
# memory, copies checked to read the registered read-only ring and write
# allocated slots), so the prefetch thread, slot order, releases, the saved
# position, the end of the stream and evaluation passes through a lent socket
# are exercised everywhere, sanitizers included. Each must pass, not skip: a
# skip would mean the stand-in was not the driver loaded.
set -euo pipefail
B=${LF_BUILD:?run through tests/run.sh}
check() {  # PROGRAM LINE: the program's last word on the device run
  local rc=0 out
  out=$(LD_LIBRARY_PATH="$B/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$B/tests/unit/$1" 2>&1) || rc=$?
  echo "$out"
  [[ $rc -eq 0 ]] || { echo "$1 with the stand-in driver: exit $rc" >&2; exit 1; }
  grep -q "$2" <<<"$out"
}
check client_gpu "bytes and saved state equal the host run"
check client_gpu_eval "bytes and saved state equal the host runs"
