#!/usr/bin/env bash
# `make bench`: runs each benchmark script in tests/bench/ (they call the
# compiled bench programs and the tools). Benchmarks print figures and ratios
# to the limits measured in the same run; they never pass or fail on a time.
# Usage: tests/bench/run.sh BUILD_DIR [NAME_FILTER]
set -euo pipefail
B=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd); filter=${2:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
export LF_BUILD="$B" LF_BIN="$B/bin" LF_ROOT="$root"
# Every benchmark runs whatever an earlier one did: a skip (77, a tool or a
# GPU missing) or a failure is said at its place and listed at the end.
not_run=() failed=0
for s in "$root"/tests/bench/*.sh; do
  name=$(basename "$s" .sh)
  [[ $name == run || $name == *_lib ]] && continue   # *_lib.sh are sourced helpers
  [[ -n "$filter" && "$s" != *"$filter"* ]] && continue
  echo "== $name"
  rc=0
  bash "$s" || rc=$?
  if [[ $rc -eq 77 ]]; then not_run+=("$name (skipped)")
  elif [[ $rc -ne 0 ]]; then
    not_run+=("$name (failed, exit $rc)")
    failed=1
    echo "== $name: failed (exit $rc)"
  fi
  echo
done
[[ ${#not_run[@]} -eq 0 ]] || echo "bench: no figures from: ${not_run[*]}"
exit $failed
