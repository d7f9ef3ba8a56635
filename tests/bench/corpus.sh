#!/usr/bin/env bash
# Corpus conversion benchmark (run by `make bench`; figures, never a verdict).
#
# `lf-shard create tokens` on one generated JSONL file of token-id documents
# (lognormal lengths, ~10 MB) and on its .zst copy, on 1 thread and on all:
# input MB/s (JSONL bytes over wall time) and tokens/s per core (over CPU
# time). Next to it, measured in the same run on the same bytes: `zstd -3`
# (-T1) compressing the JSONL, `zstd -d` of the .zst, and a /usr/bin/python3
# loop of json.loads over the lines. Then the same documents as a Megatron
# indexed dataset (uint16 .bin + .idx): `create tokens --megatron` next to
# `zstd -3 -T1` of the .bin and a numpy loop copying each document out of
# the mapped .bin (what MMapIndexedDataset does), in .bin MB/s. Each figure
# is the best of 3 runs.
set -euo pipefail
source "$(dirname "$0")/bench_lib.sh"

tokens=$(/usr/bin/python3 - "$tmp/in.jsonl" "$tmp/m" <<'EOF'
import array, random, struct, sys
rng = random.Random(1)
total = 0
lengths = []
with open(sys.argv[1], "w") as f, open(sys.argv[2] + ".bin", "wb") as b:
    for i in range(5000):
        n = min(16384, max(32, int(rng.lognormvariate(6.4, 1.0))))
        total += n
        ids = [int(rng.paretovariate(1.0)) % 50257 for _ in range(n)]
        f.write('{"id": %d, "tokens": [%s]}\n' % (i, ",".join(map(str, ids))))
        b.write(array.array("H", ids).tobytes())   # little-endian on the hosts we bench
        lengths.append(n)
# The MMIDIDX index: magic, version 1, dtype 8 (uint16), counts, then the
# lengths (i32), byte pointers (i64) and document boundaries (i64).
with open(sys.argv[2] + ".idx", "wb") as x:
    x.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(lengths), len(lengths) + 1))
    x.write(struct.pack("<%di" % len(lengths), *lengths))
    ptrs = [0]
    for n in lengths[:-1]:
        ptrs.append(ptrs[-1] + 2 * n)
    x.write(struct.pack("<%dq" % len(ptrs), *ptrs))
    x.write(struct.pack("<%dq" % (len(lengths) + 1), *range(len(lengths) + 1)))
print(total)
EOF
)
zstd -q -3 -c "$tmp/in.jsonl" >"$tmp/in.jsonl.zst"
bytes=$(stat -c %s "$tmp/in.jsonl")
echo "input: $(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }') MB JSONL, $tokens tokens," \
     "$(awk -v b="$(stat -c %s "$tmp/in.jsonl.zst")" 'BEGIN { printf "%.1f", b / 1e6 }') MB as .zst;" \
     "$threads CPUs"

row() {   # LABEL WALL CPU [BYTES]: MB/s of the JSONL bytes (or BYTES), tokens/s per core
  awk -v l="$1" -v w="$2" -v c="$3" -v b="${4:-$bytes}" -v t="$tokens" 'BEGIN {
    printf "%-36s %8.1f MB/s  %6.2f M tokens/s per core\n", l, b / w / 1e6, t / c / 1e6 }'
}

convert() {   # INPUT THREADS [FLAG]: one conversion into a fresh directory
  rm -rf "$tmp/out"
  "$lf" create tokens "${3:---in}" "$1" --out "$tmp/out" --threads "$2"
}

read -r lw1 lc1 <<<"$(best_of_3 convert "$tmp/in.jsonl" 1)"
read -r zw1 zc1 <<<"$(best_of_3 convert "$tmp/in.jsonl.zst" 1)"
read -r lwn lcn <<<"$(best_of_3 convert "$tmp/in.jsonl" "$threads")"
read -r zwn zcn <<<"$(best_of_3 convert "$tmp/in.jsonl.zst" "$threads")"
read -r cw cc <<<"$(best_of_3 zstd -q -3 -T1 -c "$tmp/in.jsonl")"
read -r dw dc <<<"$(best_of_3 zstd -q -d --no-asyncio -c "$tmp/in.jsonl.zst")"
read -r pw pc <<<"$(best_of_3 /usr/bin/python3 -c '
import json, sys
n = 0
for line in open(sys.argv[1], "rb"):
    n += len(json.loads(line)["tokens"])
' "$tmp/in.jsonl")"

row "create tokens .jsonl, 1 thread" "$lw1" "$lc1"
row "create tokens .jsonl.zst, 1 thread" "$zw1" "$zc1"
row "create tokens .jsonl, $threads threads" "$lwn" "$lcn"
row "create tokens .jsonl.zst, $threads threads" "$zwn" "$zcn"
row "limit: zstd -3 -T1 on the JSONL" "$cw" "$cc"
row "limit: zstd -d of the .zst" "$dw" "$dc"
row "python3 json.loads loop" "$pw" "$pc"

awk -v l="$lw1" -v z="$cw" -v p="$pw" 'BEGIN {
  printf "create tokens (.jsonl, 1 thread) / zstd -3 -T1: %.2fx; / json.loads: %.2fx\n", z / l, p / l }'

binbytes=$(stat -c %s "$tmp/m.bin")
echo "Megatron: $(awk -v b="$binbytes" 'BEGIN { printf "%.1f", b / 1e6 }') MB .bin (uint16), the same documents"
read -r mw1 mc1 <<<"$(best_of_3 convert "$tmp/m" 1 --megatron)"
read -r mwn mcn <<<"$(best_of_3 convert "$tmp/m" "$threads" --megatron)"
read -r bw bc <<<"$(best_of_3 zstd -q -3 -T1 -c "$tmp/m.bin")"
read -r nw nc <<<"$(best_of_3 /usr/bin/python3 -c '
import struct, sys
import numpy as np
prefix = sys.argv[1]
with open(prefix + ".idx", "rb") as f:
    s, d = struct.unpack("<QQ", f.read(34)[18:])
idx = np.memmap(prefix + ".idx", mode="r", dtype=np.uint8)
lengths = np.frombuffer(idx, dtype=np.int32, count=s, offset=34)
ptrs = np.frombuffer(idx, dtype=np.int64, count=s, offset=34 + 4 * s)
data = np.memmap(prefix + ".bin", mode="r", dtype=np.uint16)
n = 0
for p, k in zip(ptrs.tolist(), lengths.tolist()):
    n += len(np.array(data[p // 2:p // 2 + k]))
assert n == lengths.sum()
' "$tmp/m")"
row "create tokens --megatron, 1 thread" "$mw1" "$mc1" "$binbytes"
row "create tokens --megatron, $threads threads" "$mwn" "$mcn" "$binbytes"
row "limit: zstd -3 -T1 on the .bin" "$bw" "$bc" "$binbytes"
row "python3 numpy per-document copy" "$nw" "$nc" "$binbytes"
awk -v m="$mw1" -v z="$bw" -v n="$nw" 'BEGIN {
  printf "create tokens --megatron (1 thread) / zstd -3 -T1: %.2fx; / numpy copy loop: %.2fx\n", z / m, n / m }'
