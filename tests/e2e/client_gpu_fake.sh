#!/usr/bin/env bash
# The client's GPU path without a GPU: unit/client_gpu and unit/client_gpu_eval
# run against the stand-in driver of tests/fakecuda (host memory as device
# memory, copies checked to read the registered read-only ring and write
# allocated slots), so the prefetch thread, slot order, releases, the saved
# position, the end of the stream and evaluation passes through a lent socket
# and a count waited for while the thread runs (lent the same way)
# are exercised everywhere, sanitizers included. Each must pass, not skip: a
# skip would mean the stand-in was not the driver loaded. Last, two
# lf-rank-loop ranks with --device 0 --eval-at 0,4,4,20 (passes before the
# first batch, two back to back, one mid-run) against a server with
# --eval-data: both must end with every batch, training and eval, in device
# memory (the tool refused --eval-at with --device before).
source "$(dirname "$0")/server_lib.sh"
B=${LF_BUILD:?run through tests/run.sh}
FAKE="$B/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
check() {  # PROGRAM LINE: the program's last word on the device run
  local rc=0 out
  out=$(LD_LIBRARY_PATH="$FAKE" "$B/tests/unit/$1" 2>&1) || rc=$?
  echo "$out"
  [[ $rc -eq 0 ]] || fail "$1 with the stand-in driver: exit $rc"
  grep -q "$2" <<<"$out" || fail "$1: no line '$2'"
}
check client_gpu "bytes and saved state equal the host run"
check client_gpu_eval "bytes and saved state equal the host runs"

make_dataset "$WORK/all"
"$LF_BIN/lf-shard" split "$WORK/all" --fraction 0.1 --seed 3 --out-train "$WORK/tr" \
  --out-eval "$WORK/ev" >"$WORK/split.log" 2>&1 || { cat "$WORK/split.log" >&2; fail "split"; }
start_server --data "$WORK/tr" --eval-data "$WORK/ev" --world 2 --seed 5 --budget 300000 \
  --slots 3
pids=()
for r in 0 1; do
  LD_LIBRARY_PATH="$FAKE" "$LF_BIN/lf-rank-loop" --endpoint "$EP" --rank "$r" --world 2 \
    --device 0 --eval-at 0,4,4,20 >"$WORK/dev.r$r.log" 2>&1 &
  pids+=($!)
done
PIDS+=("${pids[@]}")
for r in 0 1; do wait_ok 120 "lf-rank-loop --device 0 --eval-at, rank $r" "${pids[$r]}" \
  "$WORK/dev.r$r.log"; done
wait_server
cat "$WORK/dev.r0.log" "$WORK/dev.r1.log"
echo "lf-rank-loop --device 0 --eval-at 0,4,4,20: both ranks, every batch on the device"
