#!/usr/bin/env bash
# What no dataset may hold and no conversion may do silently (issue #28):
# a FIFO in a shard's or the manifest's place is refused at once by every
# reader (it used to block open() forever). The transcript (command, stderr,
# exit status) must equal tests/e2e/expected/lf_shard/robust.txt.
# A conversion never writes into a directory holding files it did not make,
# and removes (saying so) the temporary files a killed one left; a second
# conversion into the directory another one is writing fails, naming it.
# create images takes every file under a class folder, names in a warning
# what it skips, and refuses a class name that would break classes.txt; it
# refuses (or with --skip-bad skips) a JPEG the server would not decode.
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
      -e "s#$tmp/##g" \
      -e 's/removed [0-9]+ temporary files \([0-9.]+ MB\)/removed N temporary files (S MB)/' 
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

  # ---- F12: an existing directory that is not a dataset --------------------
  mkdir user && echo "the user's own file" >user/shard-00000.lfs && cp user/shard-00000.lfs mine
  lf_shard synth tokens --out user --samples 10 --seed 1
  cmp -s user/shard-00000.lfs mine && echo "user/shard-00000.lfs: unchanged"
  ls -A user
  mkdir hidden && echo "notes" >hidden/.notes.tmp
  lf_shard synth tokens --out hidden --samples 10 --seed 1
  ls -A hidden
  lf_shard synth tokens --out toks --samples 10 --seed 1

  # ---- F12: temporary files of a conversion killed with kill -9 ------------
  "$LF_SHARD" synth tokens --out killed --samples 100000 --seed 1 --threads 1 \
    --shard-size 64K 2>/dev/null &
  pid=$!
  for _ in $(seq 200); do
    (($(ls -A killed 2>/dev/null | grep -c '\.tmp$') >= 3)) && break
    sleep 0.1
  done
  kill -9 $pid
  wait $pid 2>/dev/null
  echo "after kill -9: $(ls -A killed | grep -c '\.tmp$' | sed 's/^[3-9]$\|^[1-9][0-9]\+$/3 or more/') temporary files"
  lf_shard synth tokens --out killed --samples 10 --seed 1
  ls -A killed
  lf_shard verify killed

  # ---- F11: two conversions into one directory at once ---------------------
  "$LF_SHARD" synth tokens --out race --samples 50000 --seed 1 --threads 1 \
    --shard-size 64K 2>first.err &
  pid=$!
  for _ in $(seq 200); do ls -A race 2>/dev/null | grep -q '\.tmp$' && break; sleep 0.1; done
  echo "\$ lf-shard synth tokens --out race --samples 10 --seed 2"
  rc=0
  "$LF_SHARD" synth tokens --out race --samples 10 --seed 2 2>second.err >/dev/null || rc=$?
  sed "s/(pid $pid)/(pid of the first)/" second.err
  echo "[exit $rc]"
  wait $pid
  echo "first conversion: exit $?"
  lf_shard verify race
  ls -A race | grep -v '^shard-'

  # ---- F13: a class folder's subfolders, FIFOs, a newline in a class name ---
  jpg="$root/tests/data/tf/rgb444.jpg"
  mkdir -p tree/a/deep/deeper tree/b
  cp "$jpg" tree/a/x.jpg && cp "$jpg" tree/a/deep/y.jpg && cp "$jpg" tree/a/deep/deeper/z.jpg
  cp "$jpg" tree/b/w.jpg && mkfifo tree/b/pipe tree/a/deep/pipe
  lf_shard create images --in tree --out tree-ds
  echo "\$ lf-shard cat tree-ds I --raw label (I = 0..3)"
  for i in 0 1 2 3; do "$LF_SHARD" cat tree-ds $i --raw label | od -An -tu8; done
  cat tree-ds/classes.txt
  mkdir -p nl/$'a\nb' nl/c && cp "$jpg" nl/$'a\nb'/x.jpg && cp "$jpg" nl/c/y.jpg
  lf_shard create images --in nl --out nl-ds
  ls nl-ds 2>&1

  # ---- F2: JPEGs above the server's pixel limit ----------------------------
  mkdir -p big/a
  cp "$jpg" big/a/0-ok.jpg
  for wh in 8000x7000 65000x65000; do   # the header's size, over a small image
    "$PY" - "$jpg" "big/a/$wh.jpg" "${wh%x*}" "${wh#*x}" <<'PYEOF'
import sys
src, dst, w, h = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
b = bytearray(open(src, "rb").read())
i = 2
while b[i + 1] not in (0xC0, 0xC1, 0xC2):      # to the start-of-frame segment
    i += 2 + (b[i + 2] << 8 | b[i + 3])
b[i + 5:i + 9] = bytes([h >> 8, h & 255, w >> 8, w & 255])
open(dst, "wb").write(b)
PYEOF
  done
  lf_shard create images --in big --out big-1
  lf_shard create images --in big --out big-2 --skip-bad
  "$LF_SHARD" verify big-2 | sed 's/ in [0-9.]* s$//'
} >actual.txt

diff -u "$expected" actual.txt || fail "transcript differs from $expected"
echo "robust: transcript as expected"
