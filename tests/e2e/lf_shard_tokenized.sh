#!/usr/bin/env bash
# Corpora tokenized before lf-shard sees them convert token-exact: Megatron
# indexed datasets (PREFIX.bin + PREFIX.idx, written here by numpy in the
# published MMIDIDX layout, uint16 and int32, documents of one sequence and
# of several) and flat arrays (nanoGPT's raw uint16 train.bin, a .npy of
# uint32) cut at an EOS id or at the boundaries of an offsets .npy. Each
# gives the same digest as the same documents written as JSON Lines and
# converted with --in. Corrupt input (bad .idx magic, a truncated .bin or
# .npy, an id too wide, a negative id, boundaries that do not end at the
# array's end) stops the conversion naming the file and the byte, and leaves
# nothing.
source "$(dirname "$0")/../data/lf_shard/helpers.sh"
"$PY" -c 'import numpy' 2>/dev/null || { echo "skip: $PY with numpy is needed"; exit 77; }
cd "$tmp" || exit 1

"$PY" - <<'EOF'
import json, struct
import numpy as np

r = np.random.default_rng(5)
EOS = 50256

def jsonl(name, docs):
    with open(name, "w") as f:
        for d in docs:
            f.write(json.dumps({"tokens": [int(t) for t in d]}) + "\n")

def megatron(prefix, dtype, code, docs):
    """docs: a list of documents, each a list of sequences (arrays)."""
    seqs = [s for d in docs for s in d]
    lengths = np.array([len(s) for s in seqs], dtype=np.int32)
    pointers = np.zeros(len(seqs), dtype=np.int64)
    pointers[1:] = np.cumsum(lengths[:-1].astype(np.int64)) * np.dtype(dtype).itemsize
    bounds = np.zeros(len(docs) + 1, dtype=np.int64)
    bounds[1:] = np.cumsum([len(d) for d in docs])
    with open(prefix + ".bin", "wb") as f:
        for s in seqs:
            f.write(np.asarray(s, dtype=dtype).tobytes())
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", code))
        f.write(struct.pack("<Q", len(seqs)))
        f.write(struct.pack("<Q", len(bounds)))
        f.write(lengths.tobytes())
        f.write(pointers.tobytes())
        f.write(bounds.tobytes())

def doc(top, nseq):
    return [r.integers(0, top, size=int(r.integers(0 if k else 1, 400))) for k in range(nseq)]

# uint16 (code 8): some documents are several sequences (--split-sentences).
u16 = [doc(50000, 1 + (i % 4 == 0) * 2) for i in range(60)]
megatron("m16", np.uint16, 8, u16)
jsonl("m16.jsonl", [np.concatenate(d) for d in u16])
# int32 (code 4), ids above 65535: stored as u32.
i32 = [doc(200000, 1) for i in range(30)]
megatron("m32", np.int32, 4, i32)
jsonl("m32.jsonl", [np.concatenate(d) for d in i32])
# int32 ids that fit u16, and one negative id.
megatron("neg", np.int32, 4, [[np.array([1, 2, 3])], [np.array([4, -7, 5])]])

# Flat arrays: documents back to back, each ending in EOS; the last one not.
flat = [np.append(r.integers(0, 50000, size=int(r.integers(1, 300))), EOS) for i in range(40)]
flat.append(r.integers(0, 50000, size=17))
np.concatenate(flat).astype(np.uint16).tofile("train.bin")
np.save("train.npy", np.concatenate(flat).astype(np.uint32))
bounds = np.concatenate([[0], np.cumsum([len(d) for d in flat])]).astype(np.int64)
np.save("offsets.npy", bounds)
bounds[-1] -= 1
np.save("bad-offsets.npy", bounds)
jsonl("flat.jsonl", flat)
EOF

digest() {   # DIR: the digest line's hash and sample count
  "$LF_SHARD" digest "$1" | sed 's/^\([0-9a-f]*\) .*: \([0-9]*\) samples$/\1 \2/'
}
same() {   # NAME JSONL ARGS...: converts ARGS and JSONL, the digests must match
  local name=$1 jsonl=$2
  shift 2
  "$LF_SHARD" create tokens --out "out-$name" "$@" 2>"$name.err" ||
    fail "$name: $(cat "$name.err")"
  "$LF_SHARD" create tokens --out "want-$name" --in "$jsonl" 2>/dev/null ||
    fail "$name: converting $jsonl"
  local got want
  got=$(digest "out-$name")
  want=$(digest "want-$name")
  [[ $got == "$want" ]] || fail "$name: digest $got, want $want (from $jsonl)"
  echo "$name: $got"
}

same megatron-u16 m16.jsonl --megatron m16
same megatron-i32 m32.jsonl --megatron m32
same raw-u16 flat.jsonl --array train.bin --eos-split 50256
same npy-u32 flat.jsonl --array train.npy --eos-split 50256 --dtype u16
same offsets flat.jsonl --array train.bin --array-offsets offsets.npy
"$LF_SHARD" inspect out-megatron-u16 | grep -q tokens_u16 || fail "m16 is not stored as u16"
"$LF_SHARD" inspect out-megatron-i32 | grep -q tokens_u32 || fail "m32 is not stored as u32"

# Several inputs keep their order; --max-len applies as to JSON Lines.
cat m16.jsonl flat.jsonl >both.jsonl
same order both.jsonl --megatron m16 --array train.bin --eos-split 50256
"$LF_SHARD" create tokens --megatron m16 --max-len 100 --out out-ml 2>ml.err ||
  fail "--max-len: $(cat ml.err)"
grep -q -- '--max-len 100 --overflow split: .* no token lost' ml.err || fail "--max-len: $(cat ml.err)"

expect_fail() {   # PATTERN ARGS...: the conversion fails with PATTERN on stderr, leaves nothing
  local pattern=$1 rc=0
  shift
  rm -rf out-bad
  "$LF_SHARD" create tokens --out out-bad "$@" 2>bad.err || rc=$?
  [[ $rc == 1 ]] || fail "$*: exit $rc, want 1: $(cat bad.err)"
  grep -q -- "$pattern" bad.err || fail "$*: said '$(cat bad.err)', want '$pattern'"
  [[ ! -e out-bad ]] || fail "$*: left out-bad"
}

cp m16.idx badmagic.idx
cp m16.bin badmagic.bin
printf 'TNTIDX\0\0\0' | dd of=badmagic.idx conv=notrunc status=none
expect_fail "^lf-shard: badmagic.idx: byte 0: not a Megatron indexed dataset index" \
  --megatron badmagic
cp m16.idx short.idx
head -c $(( $(stat -c %s m16.bin) - 10 )) m16.bin >short.bin
expect_fail "^lf-shard: short.bin: sequence [0-9]* (short.idx byte [0-9]*) is [0-9]* ids at byte [0-9]*, past the end of the file ($(stat -c %s short.bin) bytes)" \
  --megatron short
head -c 100 m16.idx >cut.idx
cp m16.bin cut.bin
expect_fail "^lf-shard: cut.idx: the header says [0-9]* sequences" --megatron cut
expect_fail "^lf-shard: m32.bin: byte [0-9]*: id [0-9]* does not fit u16" --megatron m32 --dtype u16
expect_fail "^lf-shard: neg.bin: byte 16: id -7 is negative" --megatron neg
head -c 1001 train.bin >odd.bin
expect_fail "^lf-shard: odd.bin: byte 1000: the file ends inside an id" --array odd.bin
head -c 1000 train.npy >short.npy
expect_fail "^lf-shard: short.npy: file ends inside the data" --array short.npy
expect_fail "^lf-shard: missing.idx: No such file" --megatron missing
expect_fail "^lf-shard: bad-offsets.npy: byte [0-9]*: boundary 41 is [0-9]* (boundaries run from 0 up to [0-9]*, the ids in train.bin)" \
  --array train.bin --array-offsets bad-offsets.npy
echo "tokenized inputs: token-exact, corrupt inputs named"
