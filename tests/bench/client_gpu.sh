#!/usr/bin/env bash
# The client's GPU path (figures, never a verdict): host-to-device copy rate
# out of a ring registered as liblevelfeed registers it (read-only memfd
# mapping, cuMemHostRegister READ_ONLY) next to cuMemAllocHost memory on the
# same device in the same run, for slot-sized copies of 1, 4 and 16 MiB.
# Target (issue 6): >= 0.8x. Without a driver or device it says so.
set -euo pipefail
B=${LF_BUILD:?run through make bench}
for mib in 1 4 16; do
  "$B/bench/client_h2d" "$mib" 2048
done
