#!/usr/bin/env bash
# Every program answers --version with exit 0 and one line on stdout,
# "NAME (levelfeed) X.Y.Z", the version being LF_VERSION_STRING of
# client/levelfeed.h; and its --help mentions --version. lf-train is built
# only with MPI=1: where it is missing it is said and left out.
set -euo pipefail
B=${LF_BUILD:?run through tests/run.sh}
bin=${LF_BIN:-$B/bin}
root=${LF_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
want=$(sed -n 's/^#define LF_VERSION_STRING "\(.*\)"$/\1/p' "$root/client/levelfeed.h")
[[ $want =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "FAIL: no X.Y.Z LF_VERSION_STRING in levelfeed.h" >&2; exit 1; }
bad=0 n=0
for prog in lf-server lf-shard lf-plan lf-train lf-stat lf-rank-loop lf-launch; do
  if [[ ! -x $bin/$prog ]]; then
    [[ $prog == lf-train ]] && { echo "$prog: not built (MPI=1 builds it), left out"; continue; }
    echo "FAIL: $bin/$prog is missing" >&2; bad=1; continue
  fi
  rc=0; out=$("$bin/$prog" --version 2>&1) || rc=$?
  if [[ $rc -ne 0 || $out != "$prog (levelfeed) $want" ]]; then
    echo "FAIL: $prog --version: exit $rc, printed '$out', want '$prog (levelfeed) $want'" >&2
    bad=1
  fi
  rc=0; out=$("$bin/$prog" --help 2>&1) || rc=$?
  if [[ $rc -ne 0 || $out != *--version* ]]; then
    echo "FAIL: $prog --help: exit $rc, or no mention of --version" >&2
    bad=1
  fi
  n=$((n + 1))
done
[[ $bad -eq 0 ]] || exit 1
echo "version: $n programs print '(levelfeed) $want' and list --version in --help"
