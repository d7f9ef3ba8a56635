#!/usr/bin/env bash
# lf-shard's failures: usage errors exit 2, bad input exits 1 naming the place
# (FILE:LINE for JSONL, the file for JPEG and .npy), and a failed conversion
# leaves no output directory. The transcript (command, stderr, exit status)
# must equal tests/e2e/expected/lf_shard/errors.txt.
source "$(dirname "$0")/../data/lf_shard/helpers.sh"
need_python
expected="$root/tests/e2e/expected/lf_shard/errors.txt"
cd "$tmp" || exit 1

# One case: the command line, its stderr (a success's timing line shortened
# to "<summary>"), its exit status. stdout is not part of the transcript.
case_() {
  echo "\$ lf-shard $*"
  "$LF_SHARD" "$@" 2>&1 >/dev/null |
    sed -E 's/^(lf-shard: (create|synth) [^:]+): .* samples\/s, .*$/\1: <summary>/'
  echo "[exit ${PIPESTATUS[0]}]"
}

# ---- inputs ---------------------------------------------------------------
printf '{"tokens": [1, 2]}\n\n{"tokens": [3, \n' >truncated.jsonl
printf '{"tokens": [1]}\n[1, 2]\n' >array.jsonl
printf '{"tokens": [1]}\n{"ids": [1]}\n' >nofield.jsonl
printf '{"tokens": [1, -1]}\n' >negative.jsonl
printf '{"tokens": [1.5]}\n' >real.jsonl
printf '{"tokens": ["7"]}\n' >string.jsonl
printf '{"tokens": [1, 70000]}\n' >big.jsonl
printf '{"text": 5}\n' >notext.jsonl
printf '{"tokens": [1], "tokens": [2]}\n' >dup.jsonl
printf '{"tokens": [1, 2], "m": [0, 1], "p": 1}\n{"tokens": [3, 4], "m": [1], "p": 0}\n' >mask.jsonl
printf '{"tokens": [1, 2], "m": [0, 256], "p": 1}\n' >mask-wide.jsonl
printf '{"tokens": [1, 2], "m": [0, 1], "p": 1.5}\n' >prompt-real.jsonl
printf '{"tokens": [1], "a": %s}\n' "$(printf '[%.0s' {1..600})" >deep.jsonl
for i in 1 2 3 4 5 6 7 8; do printf '{"tokens": [%d, 2, 3]}\n' "$i"; done >cut.jsonl
zstd -q -c cut.jsonl | head -c 40 >cut.jsonl.zst
gzip -c cut.jsonl | head -c 40 >cut.jsonl.gz
mkdir -p imgs/a imgs/b empty
"$PY" - <<'EOF'
import os
import numpy as np
from PIL import Image

def put(name, data):
    os.makedirs(os.path.dirname(name), exist_ok=True)
    open(name, "wb").write(data)

def npy(name, arr, **kw):
    os.makedirs(os.path.dirname(name), exist_ok=True)
    with open(name, "wb") as f:
        np.lib.format.write_array(f, arr, **kw)
    return open(name, "rb").read()

Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save("imgs/a/ok.jpg")
put("imgs/b/broken.jpg", b"\xff\xd8\xff\xe0 not really a jpeg")
put("imgs/b/notes.txt", b"hello\n")
Image.fromarray(np.random.default_rng(1).integers(0, 256, (64, 64, 3), np.uint8)).save("whole.jpg")
whole = open("whole.jpg", "rb").read()
put("imgs/b/cut.jpg", whole[:len(whole) // 2])     # headers intact, scans cut
good = np.zeros((3, 4), "<f4")
for case, arr in [("bigendian", good.astype(">f4")), ("float64", good.astype("<f8")),
                  ("threed", np.zeros((2, 3, 4), "<f4")), ("oned", np.zeros(5, "<f4")),
                  ("fortran", np.asfortranarray(good))]:
    npy("npy-%s/x.npy" % case, arr)
raw = npy("npy-short/x.npy", good)
put("npy-short/x.npy", raw[:-3])
put("npy-long/x.npy", raw + b"\0\0")
put("npy-magic/x.npy", b"NUMPY\x01\x00" + raw[7:])
put("npy-hlen/x.npy", raw[:8] + b"\xff\xff" + raw[10:40])
put("npy-version/x.npy", raw[:6] + b"\x04" + raw[7:])
npy("npy-width/a.npy", good)
npy("npy-width/b.npy", np.zeros((3, 5), "<f4"))
npy("npy-dtype/a.npy", good)
npy("npy-dtype/b.npy", np.zeros((3, 4), "<i2"))
npy("npy-wide/x.npy", np.zeros((1, (1 << 24) + 1), "<i2"))   # past the format's row width
EOF
"$LF_SHARD" synth tokens --out toks --samples 10 --seed 1 2>/dev/null || fail "synth"

# ---- the transcript --------------------------------------------------------
{
  case_ frobnicate
  case_ synth
  case_ synth pictures --out bad-1 --samples 1
  case_ synth tokens --samples 10
  case_ synth tokens --out bad-2 --samples ten
  case_ synth tokens --out bad-3 --samples 5 --level 30
  case_ synth tokens --out bad-4 --samples 5 --shard-size 10X
  case_ synth images --out bad-5 --samples 5 --width 3
  case_ synth tokens --out bad-6 --samples 5 --len-min 10 --len-max 5
  case_ synth tokens --out bad-7 --samples
  case_ synth tokens --out bad-8 --samples 5 extra
  # a sample the options allow is past the 1 GiB record limit: a usage error,
  # before any sample is generated (the writer used to refuse it, exit 1,
  # after a whole batch of them was made: 2 GiB here)
  case_ synth frames --out bad-big-1 --samples 2 --width 65536 --len-min 4096
  case_ synth tokens --out bad-big-2 --samples 2 --vocab 70000 --len-min 268435456 --len-max 268435456
  case_ create tokens --in truncated.jsonl --out bad-9 --frobnicate
  case_ create tokens --out bad-10
  case_ create tokens --in big.jsonl --out bad-11 --dtype u8
  case_ create tokens --in big.jsonl --out bad-12 --field a --text-field b
  case_ create tokens --in missing.jsonl --out bad-13
  case_ create tokens --in truncated.jsonl --out bad-14
  case_ create tokens --in array.jsonl --out bad-15
  case_ create tokens --in nofield.jsonl --out bad-16
  # fine-tuning fields: a mask one value short, a value past u8, a length
  # that is no integer, an unknown kind, a batch tensor's name, marks
  case_ create tokens --in mask.jsonl --out bad-ft-1 --field m:token:u8 --field p:sample
  case_ create tokens --in mask-wide.jsonl --out bad-ft-2 --field m:token:u8
  case_ create tokens --in prompt-real.jsonl --out bad-ft-3 --field p:sample
  case_ create tokens --in mask.jsonl --out bad-ft-4 --field m:token:f32
  case_ create tokens --in mask.jsonl --out bad-ft-5 --field lengths:sample
  case_ create tokens --in mask.jsonl --out bad-ft-6 --field m:token:u8 --append-eos 7
  case_ create tokens --in negative.jsonl --out bad-17
  case_ create tokens --in real.jsonl --out bad-18
  case_ create tokens --in string.jsonl --out bad-19
  case_ create tokens --in big.jsonl --out bad-20 --dtype u16
  case_ create tokens --in notext.jsonl --out bad-21 --text-field text
  case_ create tokens --in dup.jsonl --out bad-22
  case_ create tokens --in deep.jsonl --out bad-deep
  case_ create tokens --in 'nomatch-*.jsonl' --out bad-glob
  case_ create tokens --in cut.jsonl.zst --out bad-zst
  case_ create tokens --in cut.jsonl.gz --out bad-gz
  case_ create tokens --in - --in - --out bad-stdin </dev/null
  case_ create tokens --in big.jsonl --out bad-eos --dtype u16 --append-eos 70000
  case_ create tokens --in big.jsonl --out bad-overflow --overflow drop
  case_ create tokens --in big.jsonl --out bad-overflow --max-len 4 --overflow cut
  case_ create images --in imgs --in empty --out bad-twice
  case_ create images --in imgs --out bad-23
  case_ create images --in empty --out bad-24
  case_ create images --in nowhere --out bad-25
  case_ create images --in imgs --out skipped --skip-bad
  for d in bigendian float64 threed oned fortran short long magic hlen version width dtype wide; do
    case_ create frames --in npy-$d --out bad-npy-$d
  done
  case_ create frames --in npy-width --out width-skipped --skip-bad
  case_ cat toks 10
  case_ cat toks 1 --raw nosuch
  case_ cat toks
  case_ stats toks extra
  case_ inspect nowhere
  case_ inspect toks --blocks=1
  case_ verify nowhere
  # a report that cannot be written is a failure
  for c in "stats toks" "stats toks --json" "inspect toks" "verify toks"; do
    echo "\$ lf-shard $c >/dev/full"
    # shellcheck disable=SC2086
    "$LF_SHARD" $c 2>&1 >/dev/full
    echo "[exit $?]"
  done
  # the manifest cannot be written: no shard is left under its final name
  mkdir -p blocked/.manifest.lfm.tmp
  case_ synth tokens --out blocked --samples 3000 --seed 1 --shard-size 1M
  echo "\$ ls -A blocked"
  ls -A blocked
  # classes.txt cannot be written: past the file-size limit, as on a full
  # disk (101 class names of 205 bytes; the one shard is 8 KiB). A directory
  # in its way no longer does: create refuses a directory holding anything.
  mkdir -p manyclasses/a && cp imgs/a/ok.jpg manyclasses/a/
  long=$(printf 'x%.0s' {1..200})
  for k in $(seq -w 100); do mkdir -p "manyclasses/c$k-$long"; done
  echo "\$ lf-shard create images --in manyclasses --out noclasses   # ulimit -f 16"
  rc=0
  (trap '' XFSZ; ulimit -f 16; exec "$LF_SHARD" create images --in manyclasses --out noclasses) \
    2>noclasses.err >/dev/null || rc=$?
  sed -E 's/^(lf-shard: create [^:]+): .* samples\/s, .*$/\1: <summary>/' noclasses.err
  echo "[exit $rc]"
  echo "\$ ls -d bad-*"
  ls -d bad-* 2>&1 | sed 's/^ls: .*/(none)/'
} >actual.txt

diff -u "$expected" actual.txt || fail "transcript differs from $expected"

# A write that fails as a shard is closed (here the file-size limit, as a
# full disk would): nothing is left, not even the directory the run made.
for samples in 3000 48; do
  rc=0
  (trap '' XFSZ; ulimit -f 197; "$LF_SHARD" synth tokens --out full-$samples --samples $samples \
     --seed 1 --threads 2 --block-size 0 --len-max 200 --len-median 100 --shard-size 192K) \
    2>full.err || rc=$?
  [[ $rc == 1 ]] || fail "a failed shard write: exit $rc ($(cat full.err))"
  [[ ! -e full-$samples ]] || fail "a failed shard write left: $(ls -A full-$samples)"
done
echo "errors: transcript as expected"
