#!/usr/bin/env bash
# The control-message fuzz corpus is of this build's wire version: each seed
# in tests/fuzz/corpus/ctl_msg/ equals what tests/tools/ctl_seeds writes
# now. Seeds of an older version stop at the decoder's version check, so
# the fuzzer and its replay would test nothing past it (the corpus was of
# version 1 through three wire changes, and the replay's re-encode of a
# WELCOME with step counts aborted unseen).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
B=${LF_BUILD:?run through tests/run.sh}
seeds=$B/tests/tools/ctl_seeds corpus=$root/tests/fuzz/corpus/ctl_msg
[[ -x $seeds ]] || { echo "FAIL: $seeds is not built" >&2; exit 1; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
"$seeds" "$tmp" || { echo "FAIL: ctl_seeds" >&2; exit 1; }
n=0
for f in "$tmp"/*; do
  name=$(basename "$f")
  cmp -s "$f" "$corpus/$name" || {
    echo "FAIL: $corpus/$name is not this wire version's $name message; refresh the" \
         "corpus: rm $corpus/*; $seeds $corpus" >&2
    exit 1
  }
  n=$((n + 1))
done
"$B/fuzz/ctl_msg-replay" "$tmp" || { echo "FAIL: the fuzz target refuses a seed" >&2; exit 1; }
echo "PASS: $n seeds, one a message type, of this wire version"
