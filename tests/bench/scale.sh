#!/usr/bin/env bash
# Planning and start-up against the dataset's size (issue 35; run by `make
# bench`; figures, never a verdict), on index-only datasets (lf-shard synth
# tokens --index-only: lengths as `synth tokens` draws them, blocks of 64,
# no bytes), so 10^8-10^9 samples need no disk. Per size:
#  - lf-plan DIR --sampler balanced --steps 30 at worlds 8, 64 and 1024:
#    planner CPU ms a step, create s, the run's wall s and peak RSS;
#  - lf-server --world 8 --ranks 0 --epochs E (LF_SCALE_EPOCHS, default
#    1) --memory-limit the cap below (at 10^9 its own 1.3 GB passes the
#    default 1 GiB, which it refuses after planning), with rank 0's client (lf-rank-loop --max-batches 1) started beside
#    it, as a trainer starts: ms from its start to "lf-server: serving" (the
#    index opened, the plan made, epoch 0's first 2^20 samples planned for
#    the cap, the rings sized) and its peak
#    RSS then (VmHWM); and ms to the first batch, which an index-only
#    dataset refuses (no bytes: the server stops naming the dataset, and
#    the client is told; the bench fails if a batch arrives or the refusal
#    is another), so that is start-up to the first batch less its bytes;
#  - the disk index's bytes a sample (index.lfx, the lengths both map);
# and each figure's growth over the size before. A size is skipped, and
# said so, when the bytes a sample took at the size before (the larger
# peak RSS of lf-plan and lf-server, over samples) project past
# LF_SCALE_MEM_MAX (default 6 GiB: the machine is shared) or past the
# memory the machine has available (MemAvailable), or when its index.lfx
# (4 bytes a sample) would not fit the scratch folder's disk; every run is
# also capped at LF_SCALE_MEM_MAX with ulimit -v (lf-plan's scoring used
# to take 64 bytes a sample of address space, which the cap refused at
# 10^8; at 31 bytes a sample 10^8 now runs under the default cap, and 10^9
# is skipped here). Sizes: LF_SCALE_SIZES. LF_SCALE_DATA=DIR reuses the
# index-only datasets DIR/dsN (N the size) instead of writing each one
# (a 10^9 index.lfx is 4 GB and minutes to write), as they are: the line
# says whether each holds its index summary (index-summary.lfx, which
# lf-shard synth and lf-shard index write: without it start-up counts and
# hashes every length), and nothing is written into them or removed.
# LF_SCALE_ARGS adds options to both lf-plan and lf-server: "--layout pack
# --seq-len 1024" cuts the samples longer than 1024 (3 in 10 of them) into
# pieces, 1.5 pieces a sample, as a corpus of long documents is planned.
source "$(dirname "$0")/bench_lib.sh"

sizes=${LF_SCALE_SIZES:-1000000 10000000 100000000 1000000000}
epochs=${LF_SCALE_EPOCHS:-1}
read -r -a extra <<<"${LF_SCALE_ARGS:-}"   # options for both (word-split on purpose)
cap_kb=$(( ${LF_SCALE_MEM_MAX:-$((6 << 30))} / 1024 ))
[[ -x /usr/bin/time ]] || { echo "scale bench: /usr/bin/time is needed for peak RSS"; exit 77; }
ms() { echo $(($(date +%s%N) / 1000000)); }
LF_INDEX=index.lfx   # the lengths the planners map (shard_format/FORMAT.md, section 10)

# lf-plan at world W: "ms_per_step create_s wall_s peak_kb"
plan_run() {   # DIR W
  local out
  out=$( (ulimit -v "$cap_kb"; /usr/bin/time -f "TIME %e %M" "$bin/lf-plan" "$1" --world "$2" \
          --sampler balanced --steps 30 --json "${extra[@]}") 2>&1 ) ||
    { echo "lf-plan failed: $out" >&2; return 1; }
  /usr/bin/python3 -c '
import json, sys
lines = sys.stdin.read().splitlines()
j = json.loads(next(l for l in lines if l.startswith("{")))["samplers"]["balanced"]
t = next(l for l in lines if l.startswith("TIME")).split()
print("%.3f %.2f %s %s" % (j["plan_cpu_ms_per_step"], j["create_s"], t[1], t[2]))' <<<"$out"
}

# lf-server, with rank 0's client beside it: "serving_ms peak_kb first_batch_ms"
server_run() {   # DIR
  local ep="$tmp/rt/ctl" log="$tmp/server.log" clog="$tmp/client.log" t0 pid cpid up='' hwm=0
  local cur last=0
  local first='' refusal="an index-only dataset describes its [0-9]* samples but holds none of their bytes"
  rm -rf "$tmp/rt"; mkdir -m 700 "$tmp/rt"
  t0=$(ms)
  (ulimit -v "$cap_kb"; exec "$bin/lf-server" --endpoint "$ep" --data "$1" --world 8 --ranks 0 \
     --epochs "$epochs" --memory-limit "${cap_kb}K" "${extra[@]}") >"$log" 2>&1 &
  pid=$!
  "$bin/lf-rank-loop" --endpoint "$ep" --rank 0 --world 8 --max-batches 1 --no-digest \
    --connect-timeout-ms 3600000 >"$clog" 2>&1 &
  cpid=$!
  while kill -0 "$pid" 2>/dev/null; do
    # read each round: a server that stops at once on the refused batch is
    # gone by the time "serving" is seen (its peak then, the last read)
    cur=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null) && [[ -n $cur ]] && last=$cur
    if [[ -z $up ]] && grep -q "lf-server: serving" "$log"; then
      up=$(($(ms) - t0))
      hwm=$last
    fi
    if [[ -z $first ]] && ! kill -0 "$cpid" 2>/dev/null; then first=$(($(ms) - t0)); fi
    [[ -n $up && -n $first ]] && break
    sleep 0.05
  done
  if [[ -z $up ]] && grep -q "lf-server: serving" "$log"; then   # served and stopped between two rounds
    up=$(($(ms) - t0)) hwm=$last
  fi
  if [[ -z $up ]]; then   # it stopped before serving: its client would wait its hour
    kill "$cpid" 2>/dev/null; wait "$cpid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
    echo "lf-server did not serve: $(tail -3 "$log")" >&2; return 1
  fi
  [[ -n $first ]] || { wait "$cpid" 2>/dev/null; first=$(($(ms) - t0)); }
  wait "$cpid" && { echo "lf-server served a batch of an index-only dataset: $(tail -3 "$clog")" >&2; return 1; }
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  grep -q "$refusal" "$clog" ||
    { echo "the first batch was not refused as index-only: $(tail -3 "$clog")" >&2; return 1; }
  echo "$up $hwm $first"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1fx", a / b; else print "-" }'; }

echo "index-only datasets; lf-plan --sampler balanced --steps 30; lf-server --world 8 --ranks 0 --epochs $epochs${extra[*]:+; both with ${extra[*]}}"
echo "(first batch: from the server's start to rank 0's first batch refused, index-only: start-up less the batch's bytes)"
printf "%-11s %-22s %-22s %-22s %-36s\n" samples "world 8: cpu ms/step" "world 64: cpu ms/step" \
  "world 1024: cpu ms/step" "server: serving, first batch, rss"
prev_n=0 per_sample=0
declare -A prev
for n in $sizes; do
  avail_kb=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
  disk_kb=$(df -Pk "$tmp" | awk 'NR == 2 {print $4}')
  if (( n * 4 / 1024 + 65536 > disk_kb )); then
    printf "%-11s skipped: its index.lfx takes %d MiB (4 bytes a sample), %s has %d MiB free\n" \
      "$n" $((n * 4 / 1048576)) "$tmp" $((disk_kb / 1024))
    continue
  fi
  if [[ $per_sample != 0 ]]; then
    need=$(awk -v b="$per_sample" -v n="$n" 'BEGIN { printf "%d", b * n / 1024 }')
    if (( need > cap_kb || need > avail_kb )); then
      printf "%-11s skipped: %.0f bytes a sample at %s project %d MiB, above %s\n" \
        "$n" "$per_sample" "$prev_n" $((need / 1024)) \
        "$( ((need > cap_kb)) && echo "the $((cap_kb / 1024)) MiB cap (LF_SCALE_MEM_MAX)" ||
            echo "the $((avail_kb / 1024)) MiB this machine has available")"
      continue
    fi
  fi
  dir="$tmp/n$n"
  if [[ -n ${LF_SCALE_DATA:-} ]]; then
    dir="$LF_SCALE_DATA/ds$n"
    grep -qx "samples $n" "$dir/index-only.lfi" 2>/dev/null ||
      { echo "scale bench: $dir is not an index-only dataset of $n samples"; exit 1; }
  else
    "$lf" synth tokens --index-only --out "$dir" --samples "$n" --seed 1 >/dev/null ||
      { echo "scale bench: synth --index-only failed"; exit 1; }
  fi
  line=$(printf "%-11s" "$n") peak=0
  declare -A cur
  for w in 8 64 1024; do
    read -r mps create wall kb < <(plan_run "$dir" "$w") || exit 1
    line+=$(printf " %-22s" "$mps ms, $((kb / 1024)) MiB")
    cur[ms$w]=$mps cur[rss$w]=$kb
    (( kb > peak )) && peak=$kb
    [[ $w == 8 ]] && cur[create]=$create cur[wall]=$wall
  done
  read -r up hwm first < <(server_run "$dir") || exit 1
  [[ -n $first ]] || exit 1
  (( hwm > peak )) && peak=$hwm
  cur[up]=$up cur[hwm]=$hwm cur[first]=$first
  echo "$line $(printf "%-36s" "$up ms, $first ms, $((hwm / 1024)) MiB")"
  disk=$(awk -v b="$(stat -c %s "$dir/$LF_INDEX")" -v n="$n" 'BEGIN { printf "%.2f", b / n }')
  summary=$([[ -f $dir/index-summary.lfx ]] && echo "with its summary" || echo "without a summary")
  echo "            lf-plan world 8: create ${cur[create]} s, run ${cur[wall]} s; peak $((peak * 1024 / n)) bytes a sample; disk index ($LF_INDEX) $disk bytes a sample, $summary"
  if [[ $prev_n != 0 ]]; then
    echo "            growth over $prev_n ($(ratio "$n" "$prev_n") samples): server start-up" \
         "$(ratio "${cur[up]}" "${prev[up]}"), first batch $(ratio "${cur[first]}" "${prev[first]}"), server RSS $(ratio "${cur[hwm]}" "${prev[hwm]}")," \
         "lf-plan RSS $(ratio "${cur[rss64]}" "${prev[rss64]}"), ms/step at 8 / 64 / 1024:" \
         "$(ratio "${cur[ms8]}" "${prev[ms8]}") / $(ratio "${cur[ms64]}" "${prev[ms64]}") /" \
         "$(ratio "${cur[ms1024]}" "${prev[ms1024]}")"
  fi
  for k in "${!cur[@]}"; do prev[$k]=${cur[$k]}; done
  unset cur
  prev_n=$n per_sample=$(awk -v k="$peak" -v n="$n" 'BEGIN { print k * 1024 / n }')
  [[ -n ${LF_SCALE_DATA:-} ]] || rm -rf "$dir"
done
