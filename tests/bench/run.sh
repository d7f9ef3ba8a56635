#!/usr/bin/env bash
# `make bench`: runs each benchmark script in tests/bench/ (they call the
# compiled bench programs and the tools). Benchmarks print figures and ratios
# to the limits measured in the same run; they never pass or fail on a time.
# Usage: tests/bench/run.sh BUILD_DIR [NAME_FILTER]
set -euo pipefail
B=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd); filter=${2:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
export LF_BUILD="$B" LF_BIN="$B/bin" LF_ROOT="$root"
for s in "$root"/tests/bench/*.sh; do
  [[ "$(basename "$s")" == run.sh ]] && continue
  [[ -n "$filter" && "$s" != *"$filter"* ]] && continue
  echo "== $(basename "$s" .sh)"
  bash "$s"
  echo
done
