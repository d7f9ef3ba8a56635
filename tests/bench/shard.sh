#!/usr/bin/env bash
# Shard format benchmark (run by `make bench`; figures, never a verdict).
#
# create: lf-shard synth tokens (~200 MB of token ids, best of 3), create
#   tokens from JSONL, create images from a folder of JPEGs: input MB/s and
#   samples/s from each command's summary line; the limit next to it is
#   `zstd -3` with the same thread count compressing the same raw bytes.
# read: tests/bench/shard_read.c (pread + checksum + decompress of every block,
#   1 and N threads) next to ZSTD_decompressDCtx on the same bytes in memory,
#   and `zstd -d` on the same stored bytes written out as one .zst file.
#   Target: read >= 0.9x the single-thread zstd rate per thread.
# open: tests/bench/shard_open.c on 10^6 short samples: the mapped open
#   (lf-server's), a first batch's blocks, a block of every shard.
set -euo pipefail
source "$(dirname "$0")/bench_lib.sh"
reader="$B/bench/shard_read"

summary() {   # the summary line of an lf-shard run, without its prefix
  grep -E '^lf-shard: (synth|create) ' | sed 's/^lf-shard: //'
}

record_bytes() {  # DIR: total record (raw) bytes from inspect
  "$lf" inspect "$1" | awk '/^record bytes:/ { print $3 }'
}

echo "machine: $threads CPUs ($(uname -m)); zstd $(zstd --version | grep -o 'v[0-9.]*' | head -n1)"

# ---- create ------------------------------------------------------------------
echo "-- create"
# Best of 3, as the zstd -3 limit below is (the first run also meets a cold
# page cache and allocator).
synth_line=$(for _ in 1 2 3; do
  rm -rf "$tmp/tok"
  "$lf" synth tokens --out "$tmp/tok" --samples 100000 --seed 1 2>&1 | summary
done | awk '{print $(NF - 1), $0}' | sort -g -r | head -n 1 | cut -d' ' -f2-)
echo "$synth_line (best of 3)"
"$lf" synth tokens --out "$tmp/tok1" --samples 20000 --seed 1 --block-size 0 2>&1 | summary

/usr/bin/python3 - "$tmp/in.jsonl" <<'EOF'
import random, sys
rng = random.Random(1)
with open(sys.argv[1], "w") as f:
    for i in range(5000):
        n = min(16384, max(32, int(rng.lognormvariate(6.4, 1.0))))
        f.write('{"id": %d, "tokens": [%s]}\n' % (i, ",".join(str(int(rng.paretovariate(1.0)) % 32000) for _ in range(n))))
EOF
"$lf" create tokens --in "$tmp/in.jsonl" --out "$tmp/jsonl" 2>&1 | summary

"$lf" synth images --out "$tmp/synimg" --samples 200 --seed 1 2>/dev/null
mkdir -p "$tmp/jpegs/a" "$tmp/jpegs/b"
for i in $(seq 0 199); do
  "$lf" cat "$tmp/synimg" "$i" --raw image >"$tmp/jpegs/$([[ $((i % 2)) -eq 0 ]] && echo a || echo b)/$i.jpg"
done
"$lf" create images --in "$tmp/jpegs" --out "$tmp/img" 2>&1 | summary

raw_tok=$(record_bytes "$tmp/tok")
"$reader" "$tmp/tok" 1 "$tmp/tok.zst" >/dev/null          # writes the stored bytes
zstd -q -d -c "$tmp/tok.zst" >"$tmp/tok.raw"
read -r w c <<<"$(best_of_3 zstd -q -3 -T"$threads" -c "$tmp/tok.raw")"
synth_rate=$(grep -o '[0-9.]* MB/s$' <<<"$synth_line" | cut -d' ' -f1)
awk -v b="$raw_tok" -v w="$w" -v t="$threads" -v s="$synth_rate" 'BEGIN {
  z = b / w / 1e6
  printf "limit: zstd -3 -T%d on the same %.1f MB raw: %.1f MB/s\n", t, b / 1e6, z
  printf "synth tokens (generation + compression) / zstd -3: %.3f\n", s / z }'

# ---- read --------------------------------------------------------------------
echo "-- read (64 KiB blocks, token ids)"
out=$("$reader" "$tmp/tok" "$threads")
echo "$out"
# --no-asyncio: one thread, as the reader it is compared with (zstd's
# default second reading thread cost up to 0.2 s of wake-ups per 200 MB).
read -r w c <<<"$(best_of_3 zstd -q -d --no-asyncio -c "$tmp/tok.zst")"
read_wall=$(awk '$1 == 1 && $2 == "wall" { print $3 }' <<<"$out")
read_cpu=$(awk '$1 == 1 && $2 == "cpu" { print $3 }' <<<"$out")
awk -v b="$raw_tok" -v w="$w" -v c="$c" -v rw="$read_wall" -v rc="$read_cpu" 'BEGIN {
  zw = b / w / 1e6; zc = b / c / 1e6
  printf "zstd -d CLI on the same stored bytes: wall %.1f MB/s, CPU %.1f MB/s\n", zw, zc
  printf "read (1 thread) / zstd -d CLI: wall %.3f, CPU %.3f\n", rw / zw, rc / zc }'

echo "-- read (one record per block, token ids)"
"$reader" "$tmp/tok1" "$threads"

echo "-- read (one JPEG per block: zstd passes JPEG bytes through)"
"$reader" "$tmp/img" "$threads"

# ---- open to serve -------------------------------------------------------------
# tests/bench/shard_open.c: lf_dataset_open_mapped (block entries only), then
# 8 blocks spread as a first batch, then a block of every shard (each shard's
# index read and checked at its first block): wall, CPU and bytes read.
echo "-- open to serve (10^6 short samples, shards of 2M)"
"$lf" synth tokens --out "$tmp/open" --samples 1000000 --seed 1 --len-median 8 --len-min 2 \
  --len-max 16 --len-sigma 0.3 --level 1 --shard-size 2M >/dev/null 2>&1
"$B/bench/shard_open" "$tmp/open" 8
