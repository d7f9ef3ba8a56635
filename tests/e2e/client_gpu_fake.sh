#!/usr/bin/env bash
# The client's GPU path without a GPU: unit/client_gpu run against the
# stand-in driver of tests/fakecuda (host memory as device memory, copies
# checked to read the registered read-only ring and write allocated slots),
# so the prefetch thread, slot order, releases, the saved position and the
# end of the stream are exercised everywhere, sanitizers included. It must
# pass, not skip: a skip would mean the stand-in was not the driver loaded.
set -euo pipefail
B=${LF_BUILD:?run through tests/run.sh}
rc=0
out=$(LD_LIBRARY_PATH="$B/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      "$B/tests/unit/client_gpu" 2>&1) || rc=$?
echo "$out"
[[ $rc -eq 0 ]] || { echo "client_gpu with the stand-in driver: exit $rc" >&2; exit 1; }
grep -q "bytes and saved state equal the host run" <<<"$out"
