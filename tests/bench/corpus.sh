#!/usr/bin/env bash
# Corpus conversion benchmark (run by `make bench`; figures, never a verdict).
#
# `lf-shard create tokens` on one generated JSONL file of token-id documents
# (lognormal lengths, ~30 MB) and on its .zst copy, on 1 thread and on all:
# input MB/s (JSONL bytes over wall time) and tokens/s per core (over CPU
# time). Next to it, measured in the same run on the same bytes: `zstd -3`
# (-T1) compressing the JSONL, `zstd -d` of the .zst, and a /usr/bin/python3
# loop of json.loads over the lines. Each figure is the best of 3 runs.
set -euo pipefail
source "$(dirname "$0")/bench_lib.sh"

tokens=$(/usr/bin/python3 - "$tmp/in.jsonl" <<'EOF'
import random, sys
rng = random.Random(1)
total = 0
with open(sys.argv[1], "w") as f:
    for i in range(5000):
        n = min(16384, max(32, int(rng.lognormvariate(6.4, 1.0))))
        total += n
        f.write('{"id": %d, "tokens": [%s]}\n' % (i, ",".join(str(int(rng.paretovariate(1.0)) % 50257) for _ in range(n))))
print(total)
EOF
)
zstd -q -3 -c "$tmp/in.jsonl" >"$tmp/in.jsonl.zst"
bytes=$(stat -c %s "$tmp/in.jsonl")
echo "input: $(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }') MB JSONL, $tokens tokens," \
     "$(awk -v b="$(stat -c %s "$tmp/in.jsonl.zst")" 'BEGIN { printf "%.1f", b / 1e6 }') MB as .zst;" \
     "$threads CPUs"

row() {   # LABEL WALL CPU: MB/s of the JSONL bytes and tokens/s per core
  awk -v l="$1" -v w="$2" -v c="$3" -v b="$bytes" -v t="$tokens" 'BEGIN {
    printf "%-36s %8.1f MB/s  %6.2f M tokens/s per core\n", l, b / w / 1e6, t / c / 1e6 }'
}

convert() {   # INPUT THREADS: one conversion into a fresh directory
  rm -rf "$tmp/out"
  "$lf" create tokens --in "$1" --out "$tmp/out" --threads "$2"
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
