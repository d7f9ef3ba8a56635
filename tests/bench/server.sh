#!/usr/bin/env bash
# lf-server benchmarks (figures, never pass/fail):
#  - token path: decompressed bytes/s through the server into the rings, for
#    the pad, pad --micro-batches ("micro") and pack layouts, i32 tokens (the
#    default) and u16 (--token-dtype u16: the stored width, so the server
#    writes the bytes zstd writes), and each count of worker threads in
#    WORKERS (default "1 2"; on a machine with the cores, "1 2 4 8"), each
#    configuration ROUNDS times (best and median). Held
#    against two limits measured in the same run:
#      zstd -d   single-core `zstd -d` on the same blocks (the issue's
#                target: 0.8x per decode thread), by CPU-second and by wall;
#      alone     decode + the layout's transform on one thread with no server
#                (server_tokens): zstd's work plus the tensor bytes the layout
#                must write, so worker/alone is the server's own overhead.
#                server_tokens batches a block's samples in block order, which
#                pads and cuts rows otherwise than the plan (pad i32: about 10
#                tensor bytes per decompressed byte against the server's 8):
#                its transform time is scaled to the server's tensor bytes of
#                the same round (decode time apart, from its decode-only pass),
#                and both byte ratios are printed.
#    The figure for "per decode thread" is bytes per worker-thread CPU-second
#    (the summary's thread cpu line): what one worker delivers with a core of
#    its own; on this 2-core machine the wall-clock rates also carry the
#    planner, readers, control and ZeroMQ threads and the clients.
#  - lf_next latency when a batch is ready (the client computes 2 ms a step,
#    longer than the server needs, on a fixed cadence as in a synchronous
#    job; lf-rank-loop first asks without waiting, and a batch that was not
#    there yet is counted apart), p50/p99, on a smaller dataset (LAT_SAMPLES);
#  - (the image path is server_image.sh's);
#  - the server's peak RSS next to its --memory-limit;
#  - start-up time (to the control socket) with 1 and 10 epochs.
# LAYOUTS (default "pad micro pack") and DTYPES ("i32 u16") pick the token
# configurations. SAMPLES (default 200000) sizes the synthetic token dataset, EPOCHS (2) the
# token runs, LAT_SAMPLES (30000) the latency run; WORKERS and ROUNDS
# (server_lib.sh). The load average is printed: the figures mean little without it.
set -euo pipefail
source "$(dirname "$0")/server_lib.sh"
samples=${SAMPLES:-200000}
layouts=${LAYOUTS:-pad micro pack} dtypes=${DTYPES:-i32 u16}
epochs=${EPOCHS:-2}

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN/lf-shard" synth tokens --out "$work/ds" --samples "$samples" --seed 1 >/dev/null 2>&1
raw=$("$BUILD/bench/server_blocks" "$work/ds" "$work/blocks.zst")
stored=$(stat -c %s "$work/blocks.zst")
# The zstd reference: `zstd -d` runs just before every server round, and a
# configuration's ratios use the best of the zstd runs before its own rounds
# (wall and per CPU-second), as its server figures use its best round: the
# same number of tries on each side, taken at the same moments. (The best
# of all the bench's runs, 37 with the defaults, was a luckier draw than
# any configuration's best of 3 and pulled every ratio down.)
# --no-asyncio: zstd 1.5.4 reads in a second thread by default; on these
# 64 KiB frames the two threads wake each other ~15k times a run, and that
# cost 0.05-0.23 s of system time by how the scheduler placed them, so the
# reference moved by 2x between runs. Single-threaded it is one core and
# steady (0.26 s for 199 MB here, of which 0.03 s system).
: >"$work/zstd.runs"
zstd_run() {   # appends "wall-ns cpu-seconds" of one run to zstd.runs
  local t0 t1
  t0=$(date +%s%N)
  "$gnu_time" -f "%U %S" -o "$work/zstd.cpu" zstd -q -d --no-asyncio -c "$work/blocks.zst" >/dev/null
  t1=$(date +%s%N)
  echo "$((t1 - t0)) $(awk '{print $1 + $2}' "$work/zstd.cpu")" >>"$work/zstd.runs"
}
echo "dataset: $samples samples, $raw raw bytes in $stored stored bytes; $epochs epochs per token run"

# What one decode thread can do in each layout without the server: every
# block decoded and its samples transformed on one thread, sources hot
# (server_tokens; "tokens" is the least any layout writes, as micro does).
for dt in $dtypes; do
  "$BUILD/bench/server_tokens" "$work/ds" 16384 "$dt" | sed "s/^/$dt /"
done >"$work/alone"
alone_of() {   # LAYOUT DTYPE: "decompressed-bytes cpu-seconds tensor-bytes decode-cpu-seconds"
  local mode=${1/micro/tokens}
  awk -v m="$mode" -v d="$2" '$1 == d && $2 == "decode" {dc = $4}
    $1 == d && $2 == m {b = $3; c = $4; t = $5} END {print b, c, t, dc}' "$work/alone"
}
while read -r dt mode b c t; do
  awk -v m="$mode" -v dt="$dt" -v b="$b" -v c="$c" -v t="$t" 'BEGIN {
    if (m == "decode") printf "decode alone (verify + decompress, 1 thread): %.3f GB/s per CPU-second\n", b / c / 1e9
    else printf "decode + %s %s transform alone (1 thread, no server): %.3f GB/s per CPU-second, %.2f tensor bytes per decompressed byte\n", m, dt, b / c / 1e9, t / b }'
done <"$work/alone"

# Each configuration runs ROUNDS times (default 3), each after a zstd -d
# run; a round's figures: decompressed bytes per worker CPU-second (the
# target's "per decode thread"), per wall second (steady and whole run), per
# server CPU-second, and tensor bytes per second.
: >"$work/rounds"
one_round() {   # LAYOUT DTYPE WORKERS ROUND: appends its figures to rounds
  local layout=$1 dt=$2 w=$3 k=$4 tok secs steady cpu wcpu tbytes decoded layout_args
  zstd_run
  tok="$work/tok-$layout$dt$w-$k"
  layout_args=(--layout "${layout/micro/pad}" --token-dtype "$dt")
  [[ $layout == micro ]] && layout_args+=(--micro-batches)
  serve "$tok" "--no-digest" --data "$work/ds" --workers "$w" --memory-limit 1G \
    --epochs "$epochs" "${layout_args[@]}"
  read -r secs steady cpu <<<"$(times_of "$tok.server")"
  wcpu=$(summary "$tok.server" '.*workers \([0-9.]*\) s.*')
  tbytes=$(cat "$tok".r* | sed -n 's/.*samples, \([0-9]*\) tensor bytes.*/\1/p' | awk '{s += $1} END {print s}')
  decoded=$(summary "$tok.server" '.*decoded \([0-9]*\),.*')
  read -r zns zcpu <<<"$(tail -n 1 "$work/zstd.runs")"
  awk -v raw="$((raw * epochs))" -v t="$tbytes" -v s="$secs" -v st="$steady" -v c="$cpu" \
      -v wc="$wcpu" -v d="$decoded" -v cfg="$layout $dt $w" -v load="$(cut -d' ' -f1 /proc/loadavg)" \
      -v zraw="$raw" -v zns="$zns" -v zcpu="$zcpu" \
      'BEGIN { printf "%s %.4f %.4f %.4f %.4f %.4f %d %s %.4f %.4f\n", cfg, raw / wc / 1e9, raw / st / 1e9,
               raw / s / 1e9, raw / c / 1e9, t / st / 1e9, d, load, zraw / zns, zraw / zcpu / 1e9 }' >>"$work/rounds"
}
for k in $(seq "$rounds"); do
  for layout in $layouts; do
    for dt in $dtypes; do
      for w in $workers; do one_round "$layout" "$dt" "$w" "$k"; done
    done
  done
done
echo "zstd -d (1 core, one run before each round; $(wc -l <"$work/zstd.runs") runs): $(awk -v b="$raw" '
  {w = b / $1; c = b / $2 / 1e9; if (!n++ || c < lo) lo = c; if (c > hi) hi = c; if (w > bw) bw = w}
  END {printf "best %.3f GB/s of decompressed bytes wall; %.3f-%.3f GB/s per CPU-second", bw, lo, hi}' "$work/zstd.runs")"
for layout in $layouts; do
  for dt in $dtypes; do
    read -r _ acpu atb adec <<<"$(alone_of "$layout" "$dt")"
    for w in $workers; do
      awk -v cfg="$layout $dt $w" '$1 " " $2 " " $3 == cfg' "$work/rounds" | sort -g -r -k4 >"$work/cfg"
      n=$(wc -l <"$work/cfg")
      # this configuration's zstd reference: the best of the runs before its rounds
      read -r zstd_gbs zstd_cpu_gbs <<<"$(awk '$11 > w {w = $11} $12 > c {c = $12}
        END {printf "%.3f %.3f\n", w, c}' "$work/cfg")"
      picks=1   # the best round, and the median where it is another round
      ((n > 2)) && picks+=" $(((n + 1) / 2))"
      for pick in $picks; do
        [[ $pick == 1 ]] && what="best of $n rounds" || what="median round"
        # alone, scaled: its decode time, plus its transform time times the
        # server's tensor bytes per decompressed byte over its own ($8/$5:
        # the round's tensor and decompressed rates, the same steady time).
        sed -n "${pick}p" "$work/cfg" | awk -v z="$zstd_gbs" -v zc="$zstd_cpu_gbs" \
            -v b="$raw" -v c="$acpu" -v t="$atb" -v dc="$adec" -v what="$what" '{
          srv = $8 / $5; own = t / b
          alone = b / (dc + (c - dc) * srv / own) / 1e9
          printf "token path, %s layout, %s tokens, %d worker(s), %s (by worker rate): worker %.3f GB/s per worker CPU-second = %.2fx zstd -d per CPU-second (%.3f: the best of its rounds'"'"' runs), %.2fx decode + transform alone (%.3f GB/s: scaled to the server'"'"'s %.2f tensor bytes per decompressed byte from its own %.2f); steady %.3f GB/s = %.2fx zstd -d wall, %.2fx per worker; run %.3f GB/s; server %.3f GB/s per CPU-second; %.3f GB/s tensor bytes; %d blocks decoded; load %s\n",
            $1, $2, $3, what, $4, $4 / zc, zc, $4 / alone, alone, srv, own, $5, $5 / z, $5 / z / $3, $6, $7, $8, $9, $10 }'
      done
    done
  done
done

lat_samples=${LAT_SAMPLES:-30000}
"$BIN/lf-shard" synth tokens --out "$work/lat_ds" --samples "$lat_samples" --seed 1 >/dev/null 2>&1
serve "$work/lat" "--compute-us 2000 --no-digest" --data "$work/lat_ds" --workers 2 --memory-limit 1G
for r in 0 1; do
  sed -n 's/.*\(lf_next p50 [0-9.]* us p99 [0-9.]* us\) (batch ready; \([0-9]*\) batches were not).*/rank '$r' ('"$lat_samples"' samples, load '"$(cut -d' ' -f1 /proc/loadavg)"'): \1 when the batch is ready (target p99 <= 50 us); \2 batches were not ready, the server behind/p' "$work/lat.r$r"
done

# The bound holds where it binds: the token dataset (larger than the limit
# once decompressed) through a 64 MiB limit, its evictions printed beside.
serve "$work/rss" "--no-digest" --data "$work/ds" --workers 2 --memory-limit 64M --slots 4
rss=$(sed -n 's/peak_rss_kb \([0-9]*\)/\1/p' "$work/rss.server")
evictions=$(summary "$work/rss.server" '.* \([0-9]*\) evictions.*')
awk -v k="$rss" -v raw="$raw" -v ev="${evictions:-?}" 'BEGIN {printf "server peak RSS: %.1f MiB with --memory-limit 64 MiB (%.2f of the bound; RSS includes the index and code) serving %.0f MiB of decompressed blocks, %s evictions\n", k / 1024, k / 1024 / 64, raw / 1048576, ev}'

# Start-up: exec to serving (the server binds its socket first and answers
# "planning" meanwhile: startup.sh measures that), for 1 and 10 epochs of
# the token dataset: the prepass walks its first epoch at most (the later
# ones are planned while serving: server/plan.c), so the two should match.
startup_ms() {   # EPOCHS: the milliseconds; the server's own words in startup.log
  local t0 t1 pid
  t0=$(date +%s%N)
  "$BIN/lf-server" --endpoint "$EP" --data "$work/ds" --world 8 --epochs "$1" \
    >"$work/startup.log" 2>&1 &
  pid=$!
  while ! grep -q "lf-server: serving" "$work/startup.log" && kill -0 "$pid" 2>/dev/null; do
    sleep 0.005
  done
  t1=$(date +%s%N)
  kill -INT "$pid" && wait "$pid" || true
  echo $(((t1 - t0) / 1000000))
}
s1=$(startup_ms 1)
s10=$(startup_ms 10)
echo "server start-up ($samples samples, world 8): 1 epoch $s1 ms, 10 epochs $s10 ms ($(awk -v a="$s10" -v b="$s1" 'BEGIN {printf "%.1f", a / b}')x the 1-epoch start-up)"

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
