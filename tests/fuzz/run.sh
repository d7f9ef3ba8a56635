#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS each, starting from its committed
# corpus (new inputs go to a scratch copy, not into the repository).
# Usage: tests/fuzz/run.sh BUILD_DIR SECONDS
set -euo pipefail
B=${1:?usage: run.sh BUILD_DIR SECONDS}; secs=${2:-60}
root=$(cd "$(dirname "$0")/../.." && pwd)
status=0
for f in "$B"/fuzz/*-libfuzzer; do
  name=$(basename "$f" -libfuzzer)
  work=$(mktemp -d); cp -r "$root/tests/fuzz/corpus/$name/." "$work/"
  echo "fuzz: $name for ${secs}s"
  if ! "$f" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$B/fuzz/$name-" "$work"; then
    echo "fuzz: $name FAILED (artifacts under $B/fuzz/)"; status=1
  fi
  rm -rf "$work"
done
exit $status
