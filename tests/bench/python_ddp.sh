#!/usr/bin/env bash
# examples/torch_ddp.py fed by levelfeed against the same training fed by a
# plain DataLoader + DistributedSampler (data preloaded in memory: the
# DataLoader's best case, see the example's note), two DDP ranks on CPU
# (gloo, even where GPUs are), one epoch. Prints each run's figures and the
# ratios levelfeed / DataLoader (issue #30's targets: tokens/s >= 1.2,
# all-reduce wait <= 0.5).
# Data: real text where $LF_REALDATA (default ~/.cache/levelfeed-realdata,
# shared/realdata/fetch.sh's) holds dev-text.jsonl: its first LF_BENCH_DOCS
# documents (default 24; a CPU model over GPT-2's vocabulary trains a few
# thousand tokens a second), made into two datasets, chunked (--max-len 2048
# --overflow split) and unchunked; each pair of runs is repeated
# LF_BENCH_RUNS times (default 3) and the figures given as min/median/max,
# with the load average. Without the file: a synthetic token set of
# LF_BENCH_SAMPLES samples (default 2000) with lognormal lengths, one run.
# The model takes its vocabulary from the data (the example's default).
# Env: LF_BENCH_SPR (samples per rank per step, both loaders; default 8
# synthetic, 4 real). LF_BENCH_GPU=1: one rank on the GPU instead (nccl;
# levelfeed's batches through Loader(device="cuda"), the DataLoader's copied
# with .to(device)), a larger model; skips (77) where torch sees no GPU.
root=${LF_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
source "$root/tests/e2e/server_lib.sh"
source "$root/tests/e2e/python_lib.sh"
need_python_module torch

real=${LF_REALDATA:-$HOME/.cache/levelfeed-realdata}
RANKS=2 HIDE_GPUS=1 MODEL=(--dim 32 --heads 2 --log-every 0)
if [[ ${LF_BENCH_GPU:-0} == 1 ]]; then
  "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null ||
    { echo "SKIP: torch sees no GPU"; exit 77; }
  RANKS=1 HIDE_GPUS=0 MODEL=(--dim 256 --heads 4 --log-every 0)
fi

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
spread() { sort -g | awk '{v[NR] = $1} END {printf "%.4g/%.4g/%.4g", v[1], v[int((NR + 1) / 2)], v[NR]}'; }
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# One pair of runs, levelfeed then DataLoader, on dataset DIR; appends each
# figure to $WORK/NAME.{lf,dl}.{tps,wait}.
pair() {           # NAME DIR SPR
  local name=$1 ds=$2 spr=$3
  start_server --data "$ds" --world "$RANKS" --epochs 1 --samples-per-rank "$spr" --quiet
  run lf --endpoint "$EP" --data "$ds"
  wait_server
  run dl --loader torch --data "$ds" --epochs 1 --batch-size "$spr"
  for l in lf dl; do
    field "$l" tokens_per_s >>"$WORK/$name.$l.tps"
    wait_total "$l" >>"$WORK/$name.$l.wait"
  done
}

compare() {        # NAME: min/median/max of each figure and the ratio of the medians
  local name=$1
  echo "-- $name ($(wc -l <"$WORK/$name.lf.tps") run(s); min/median/max)"
  echo "   levelfeed:  tokens/s $(spread <"$WORK/$name.lf.tps"), all-reduce wait s (ranks summed) $(spread <"$WORK/$name.lf.wait")"
  echo "   DataLoader: tokens/s $(spread <"$WORK/$name.dl.tps"), all-reduce wait s (ranks summed) $(spread <"$WORK/$name.dl.wait")"
  awk -v a="$(median <"$WORK/$name.lf.tps")" -v b="$(median <"$WORK/$name.dl.tps")" \
      -v e="$(median <"$WORK/$name.lf.wait")" -v f="$(median <"$WORK/$name.dl.wait")" 'BEGIN {
    printf "   ratio levelfeed/DataLoader (medians): tokens/s %.2f (target >= 1.2), all-reduce wait %.2f (target <= 0.5)\n",
           a / b, (f > 0 ? e / f : 0) }'
}

if [[ -f "$real/dev-text.jsonl" ]]; then
  DOCS=${LF_BENCH_DOCS:-24} RUNS=${LF_BENCH_RUNS:-3} SPR=${LF_BENCH_SPR:-4}
  head -n "$DOCS" "$real/dev-text.jsonl" >"$WORK/docs.jsonl"
  "$LF_BIN/lf-shard" create tokens --in "$WORK/docs.jsonl" --out "$WORK/chunked" \
    --max-len 2048 --overflow split >"$WORK/create.log" 2>&1 &&
  "$LF_BIN/lf-shard" create tokens --in "$WORK/docs.jsonl" --out "$WORK/unchunked" \
    >>"$WORK/create.log" 2>&1 || { cat "$WORK/create.log" >&2; fail "lf-shard create tokens"; }
  echo "python_ddp: dev-text.jsonl's first $DOCS documents, $RANKS rank(s) ($([[ $HIDE_GPUS == 1 ]] && echo "CPU, gloo" || echo "GPU, nccl")), $SPR samples per rank per step (mean for levelfeed), $RUNS runs; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  for ((i = 0; i < RUNS; i++)); do
    for set in chunked unchunked; do pair "$set" "$WORK/$set" "$SPR"; done
  done
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  compare chunked
  compare unchunked
else
  echo "python_ddp: $real/dev-text.jsonl is absent (shared/realdata/fetch.sh; LF_REALDATA names another folder): synthetic tokens"
  SAMPLES=${LF_BENCH_SAMPLES:-2000} SPR=${LF_BENCH_SPR:-8}
  "$LF_BIN/lf-shard" synth tokens --out "$WORK/ds" --samples "$SAMPLES" --seed 11 --threads 1 \
    --len-median 32 --len-sigma 1.0 --len-min 4 --len-max 128 --vocab 256 >"$WORK/synth.log" 2>&1 ||
    { cat "$WORK/synth.log" >&2; fail "lf-shard synth"; }
  echo "python_ddp: $SAMPLES synthetic samples, $RANKS rank(s), $SPR samples per rank per step"
  pair synthetic "$WORK/ds" "$SPR"
  compare synthetic
fi
check_python_leftovers
