#!/usr/bin/env bash
# examples/torch_ddp.py fed by levelfeed against the same training fed by a
# plain DataLoader + DistributedSampler (data preloaded in memory: the
# DataLoader's best case, see the example's note), two DDP ranks on CPU
# (gloo, even where GPUs are), one epoch of a token set with lognormal
# lengths. Prints each run's figures and the ratios levelfeed / DataLoader
# measured in this run.
# Env: LF_BENCH_SAMPLES (default 2000), LF_BENCH_SPR (samples per rank per
# step, both loaders; default 8). LF_BENCH_GPU=1: one rank on the GPU
# instead (nccl; levelfeed's batches through Loader(device="cuda"), the
# DataLoader's copied with .to(device)), a larger model; skips (77) where
# torch sees no GPU.
root=${LF_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
source "$root/tests/e2e/server_lib.sh"
source "$root/tests/e2e/python_lib.sh"
need_python_module torch

SAMPLES=${LF_BENCH_SAMPLES:-2000} SPR=${LF_BENCH_SPR:-8}
RANKS=2 HIDE_GPUS=1 MODEL=(--vocab 256 --dim 32 --heads 2 --log-every 0)
if [[ ${LF_BENCH_GPU:-0} == 1 ]]; then
  "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    { echo "SKIP: torch sees no GPU"; exit 77; }
  RANKS=1 HIDE_GPUS=0 MODEL=(--vocab 256 --dim 256 --heads 4 --log-every 0)
fi
"$LF_BIN/lf-shard" synth tokens --out "$WORK/ds" --samples "$SAMPLES" --seed 11 --threads 1 \
  --len-median 32 --len-sigma 1.0 --len-min 4 --len-max 128 --vocab 256 >"$WORK/synth.log" 2>&1 ||
  { cat "$WORK/synth.log" >&2; fail "lf-shard synth"; }

run() {            # TAG [torch_ddp.py args...]: RANKS ranks; rank 0's summary line in $WORK/TAG.sum
  local tag=$1 port r rc=0 rpids=()
  shift
  port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local hide=(); [[ $HIDE_GPUS == 1 ]] && hide=(CUDA_VISIBLE_DEVICES=)
  for ((r = 0; r < RANKS; r++)); do
    env "${hide[@]}" RANK=$r LOCAL_RANK=$r WORLD_SIZE=$RANKS MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$PY" "$ROOT/examples/torch_ddp.py" "${MODEL[@]}" "$@" >"$WORK/$tag.r$r.log" 2>&1 &
    rpids+=($!)
    PIDS+=($!)
  done
  for ((r = 0; r < RANKS; r++)); do wait "${rpids[$r]}" || { rc=1; cat "$WORK/$tag.r$r.log" >&2; }; done
  [[ $rc -eq 0 ]] || fail "run $tag failed"
  grep -v '^summary' "$WORK/$tag.r0.log"
  grep '^summary' "$WORK/$tag.r0.log" >"$WORK/$tag.sum"
}

field() { sed -n "s/.*\b$2=\([^ ]*\).*/\1/p" "$WORK/$1.sum"; }
wait_total() { field "$1" allreduce_wait_s | tr , '\n' | awk '{s += $1} END {print s}'; }

echo "python_ddp: $SAMPLES samples, $RANKS rank(s) ($([[ $HIDE_GPUS == 1 ]] && echo "CPU, gloo" || echo "GPU, nccl")), $SPR samples per rank per step (mean for levelfeed)"
start_server --data "$WORK/ds" --world "$RANKS" --epochs 1 --samples-per-rank "$SPR" --quiet
run lf --endpoint "$EP"
wait_server
run dl --loader torch --data "$WORK/ds" --epochs 1 --batch-size "$SPR"

awk -v a="$(field lf tokens_per_s)" -v b="$(field dl tokens_per_s)" \
    -v c="$(field lf step_p99_ms)" -v d="$(field dl step_p99_ms)" \
    -v e="$(wait_total lf)" -v f="$(wait_total dl)" 'BEGIN {
  printf "ratio levelfeed/DataLoader: tokens/s %.2f, step p99 %.2f, all-reduce wait %.2f\n",
         a / b, c / d, (f > 0 ? e / f : 0) }'
check_python_leftovers
