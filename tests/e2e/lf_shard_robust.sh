#!/usr/bin/env bash
# What no dataset may hold and no conversion may do silently (issue #28):
# a FIFO in a shard's or the manifest's place is refused at once by every
# reader (it used to block open() forever). The transcript (command, stderr,
# exit status) must equal tests/e2e/expected/lf_shard/robust.txt.
source "$(dirname "$0")/../data/lf_shard/helpers.sh"
expected="$root/tests/e2e/expected/lf_shard/robust.txt"
cd "$tmp" || exit 1

# One case: the command line, its stderr (a success's timing line shortened
# to "<summary>"), its exit status. A case that runs 20 s has blocked: the
# old open() of a FIFO did.
case_() {
  echo "\$ $*"
  timeout 20 "$@" 2>&1 >/dev/null |
    sed -E -e 's/^(lf-shard: (create|synth) [^:]+): .* samples\/s, .*$/\1: <summary>/' \
      -e "s#$tmp/##g" -e 's/pid [0-9]+/pid <pid>/' 
  echo "[exit ${PIPESTATUS[0]}]"
}
lf_shard() { case_ lf-shard "$@"; }
PATH="$(dirname "$LF_SHARD"):$PATH"

"$LF_SHARD" synth tokens --out toks --samples 300 --seed 1 --shard-size 8K \
  --block-size 4K 2>/dev/null || fail "synth"

{
  # ---- F6: a FIFO in place of a shard or the manifest ----------------------
  cp -a toks fifo-shard && rm fifo-shard/shard-00001.lfs && mkfifo fifo-shard/shard-00001.lfs
  cp -a toks fifo-manifest && rm fifo-manifest/manifest.lfm && mkfifo fifo-manifest/manifest.lfm
  for d in fifo-shard fifo-manifest; do
    lf_shard verify $d
    case_ lf-plan $d --world 2
    case_ lf-server --data $d --world 1 --endpoint ep.sock
  done
} >actual.txt

diff -u "$expected" actual.txt || fail "transcript differs from $expected"
echo "robust: transcript as expected"
