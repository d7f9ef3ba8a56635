#!/usr/bin/env bash
# lf-server benchmarks (figures, never pass/fail):
#  - token path: decompressed bytes/s through the server into the rings, and
#    tensor bytes/s delivered, next to single-core `zstd -d` on the same
#    blocks in the same run, for 1 and 2 worker threads;
#  - lf_next latency when a batch is ready (the client computes longer than
#    the server needs), p50/p99;
#  - image path: delivered images/s next to the transforms-only rate
#    (server_tf: the same JPEGs through lf_tf_jpeg_augment on one thread);
#  - the server's peak RSS next to its --memory-limit.
# SAMPLES (default 30000) sizes the synthetic token dataset, IMAGES (2000)
# the image one.
set -euo pipefail
BIN=${LF_BIN:?}; BUILD=${LF_BUILD:?}
work=$(mktemp -d "${TMPDIR:-/tmp}/lf-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -m 700 "$work/rt"
EP="$work/rt/ctl"
samples=${SAMPLES:-30000}

"$BIN/lf-shard" synth tokens --out "$work/ds" --samples "$samples" --seed 1 >/dev/null 2>&1
raw=$("$BUILD/bench/server_blocks" "$work/ds" "$work/blocks.zst")
stored=$(stat -c %s "$work/blocks.zst")
t0=$(date +%s%N); zstd -q -d -c "$work/blocks.zst" >/dev/null; t1=$(date +%s%N)
zstd_gbs=$(awk -v b="$raw" -v ns=$((t1 - t0)) 'BEGIN {printf "%.3f", b / ns}')
echo "dataset: $samples samples, $raw raw bytes in $stored stored bytes"
echo "zstd -d (1 core): $zstd_gbs GB/s of decompressed bytes"

server_secs() {   # SERVER-LOG: the run's seconds from the server's summary
  sed -n 's/.* samples in \([0-9.]*\) s;.*/\1/p' "$1"
}

serve() {   # LOG CLIENT-ARGS SERVER-ARGS... : runs a server and 2 clients
  local log=$1 cargs=$2; shift 2
  /usr/bin/time -f "peak_rss_kb %M" "$BIN/lf-server" --endpoint "$EP" --world 2 "$@" \
    >"$log.server" 2>&1 &
  local spid=$!
  for _ in $(seq 100); do [[ -S "$EP" ]] && break; sleep 0.05; done
  for r in 0 1; do
    # shellcheck disable=SC2086
    "$BIN/lf-rank-loop" --endpoint "$EP" --rank $r --world 2 $cargs >"$log.r$r" 2>&1 &
  done
  wait
}

for w in 1 2; do
  serve "$work/tok$w" "--no-digest" --data "$work/ds" --workers "$w" --memory-limit 1G
  secs=$(server_secs "$work/tok$w.server")
  busy=$(sed -n 's/.*decode \([0-9.]*\) s.*/\1/p' "$work/tok$w.server")
  tbytes=$(cat "$work/tok$w".r* | sed -n 's/.*samples, \([0-9]*\) tensor bytes.*/\1/p' | awk '{s += $1} END {print s}')
  decoded=$(sed -n 's/.*decoded \([0-9]*\),.*/\1/p' "$work/tok$w.server")
  awk -v raw="$raw" -v t="$tbytes" -v s="$secs" -v z="$zstd_gbs" -v w="$w" -v d="$decoded" -v b="$busy" 'BEGIN {
    g = raw / s / 1e9
    printf "token path, %d worker(s): %.3f GB/s decompressed into rings (%.2fx zstd -d, %.2fx per worker), %.3f GB/s tensor bytes, %d blocks decoded, %.2f s; decode stage alone %.3f GB/s per busy second (%.2fx zstd -d)\n",
      w, g, g / z, g / z / w, t / s / 1e9, d, s, raw / b / 1e9, raw / b / 1e9 / z }'
done

serve "$work/lat" "--compute-us 2000 --no-digest" --data "$work/ds" --workers 2 --memory-limit 1G
for r in 0 1; do
  sed -n 's/.*\(lf_next p50 [0-9.]* us p99 [0-9.]* us\).*/rank '$r' (batch ready): \1 (target p99 <= 50 us)/p' "$work/lat.r$r"
done

serve "$work/rss" "" --data "$work/ds" --workers 2 --memory-limit 256M --slots 4
rss=$(sed -n 's/peak_rss_kb \([0-9]*\)/\1/p' "$work/rss.server")
awk -v k="$rss" 'BEGIN {printf "server peak RSS: %.1f MiB with --memory-limit 256 MiB (%.2f of the bound; RSS includes the index and code)\n", k / 1024, k / 1024 / 256}'

images=${IMAGES:-2000}
"$BIN/lf-shard" synth images --out "$work/img" --samples "$images" --seed 2 --max-side 512 >/dev/null 2>&1
tf=$("$BUILD/bench/server_tf" "$work/img" 224x224)
echo "transforms only (1 thread, 224x224 random-resized crop, f32): $tf images/s"
for w in 1 2; do
  serve "$work/img$w" "--no-digest" --data "$work/img" --workers "$w" --image-size 224x224 --memory-limit 1G
  secs=$(server_secs "$work/img$w.server")
  awk -v n="$images" -v s="$secs" -v tf="$tf" -v w="$w" 'BEGIN {
    r = n / s
    printf "image path, %d worker(s): %.1f images/s delivered (%.2fx the transforms-only rate, %.2fx per worker; target overhead <= 10%%)\n",
      w, r, r / tf, r / tf / w }'
done
