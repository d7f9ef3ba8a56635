#!/usr/bin/env bash
# The client's GPU path (figures, never a verdict):
#  - host-to-device copy rate out of a ring registered as liblevelfeed
#    registers it (read-only memfd mapping, cuMemHostRegister READ_ONLY) next
#    to cuMemAllocHost memory on the same device in the same run, for
#    slot-sized copies of 1, 4 and 16 MiB. Target (issue 6): >= 0.8x.
#  - prefetch hides the copy: lf_next latency of one rank stepping every
#    5 ms (lf-rank-loop --compute-us 5000) with host batches and with
#    device batches (--device 0: the client's thread copies each batch to
#    the GPU ahead of the loop), ROUNDS rounds of each, interleaved; p99 of
#    each round, min/median/max, and device/host of the medians (target:
#    within 2x).
# Without a driver or device it says so.
set -euo pipefail
B=${LF_BUILD:?run through make bench}
source "$(dirname "$0")/../e2e/server_lib.sh"   # (re-runs this script in a mount namespace)
for mib in 1 4 16; do
  "$B/bench/client_h2d" "$mib" 2048
done

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [[ ${gpus:-0} -eq 0 ]]; then
  echo "lf_next with device batches: not measured (no GPU: nvidia-smi lists none)"
  exit 0
fi
rounds=${ROUNDS:-3}
"$LF_BIN/lf-shard" synth tokens --out "$WORK/ds" --samples 4800 --seed 3 --threads 2 >/dev/null 2>&1
p99_of() { sed -n 's/.*lf_next p50 [0-9.]* us p99 \([0-9.]*\) us.*/\1/p' "$1"; }
for ((i = 1; i <= rounds; i++)); do
  for mode in host device; do
    start_server --data "$WORK/ds" --world 1 --epochs 1 --samples-per-rank 16 --workers 2 --quiet
    dev=(); [[ $mode == device ]] && dev=(--device 0)
    "$LF_BIN/lf-rank-loop" --endpoint "$EP" --rank 0 --world 1 --compute-us 5000 --no-digest \
      "${dev[@]}" >"$WORK/$mode.$i.log" 2>&1 || { cat "$WORK/$mode.$i.log"; fail "lf-rank-loop ($mode)"; }
    wait_server
    echo "round $i $mode: $(sed -n 's/^rank 0: \(.*\), digest.*/\1/p' "$WORK/$mode.$i.log")"
    p99_of "$WORK/$mode.$i.log" >>"$WORK/$mode.p99"
  done
done
stats() { sort -n "$1" | awk '{v[NR] = $1} END {printf "%.1f %.1f %.1f", v[1], v[int((NR + 1) / 2)], v[NR]}'; }
read -r hmin hmed hmax <<<"$(stats "$WORK/host.p99")"
read -r dmin dmed dmax <<<"$(stats "$WORK/device.p99")"
echo "lf_next p99 at a 5 ms step, $rounds rounds (min/median/max): host $hmin/$hmed/$hmax us," \
     "device $dmin/$dmed/$dmax us; device/host of the medians $(awk -v a="$dmed" -v b="$hmed" \
     'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}') (target <= 2)"
