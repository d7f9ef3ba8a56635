#!/usr/bin/env bash
# examples/torch_ddp.py under DDP: ranks started with the variables torchrun
# sets (Debian's torchrun itself fails under Python 3.11), fed by an
# lf-server over a small synthetic token set, two epochs, about 200 steps.
# Checks: the loss falls; every sample arrives exactly once per epoch (the
# ranks dump their sample ids), and both feeds train on the same tokens; a run stopped after K steps and resumed from
# its checkpoint (model, optimizer, loader.state_dict()) gives the same
# batches — ids, token bytes and losses — as the uninterrupted run; the
# example's --loader torch (DataLoader + DistributedSampler) trains; its
# model takes empty batches; --vocab defaults to the data's (largest id
# + 1, for the levelfeed feed read by rank 0 alone through a private
# server), an id past an explicit one is refused by name, and the tokens
# counted are those trained on (not past --max-len, where the DataLoader's
# collate cuts too); --out-vocab maps the ids to its classes; nothing is
# left in /dev/shm, the runtime directory or the process table.
# Two ranks on the CPU with gloo, whatever GPUs the machine has. With
# DDP_GPU=1 (python_ddp_gpu.sh) the same on GPUs: nccl, the loader's device
# tensors, one rank per GPU (at most 2); the resumed run's losses are then
# not compared, as CUDA's atomic gradient sums are not bitwise repeatable.
# Exit 77 when the interpreter cannot import torch, or for DDP_GPU=1 when
# torch sees no GPU.
source "$(dirname "$0")/server_lib.sh"

source "$(dirname "$0")/python_lib.sh"
need_python_module torch

if [[ ${DDP_GPU:-0} == 1 ]]; then
  RANKS=$("$PY" -c 'import torch; print(min(torch.cuda.device_count(), 2))' 2>/dev/null || echo 0)
  [[ $RANKS -gt 0 ]] || { echo "SKIP: torch sees no GPU"; exit 77; }
  SAME_COLS=1-6            # epoch step rank n ids token-crc, not the loss
else
  RANKS=2
  SAME_COLS=1-7
  export CUDA_VISIBLE_DEVICES=""   # gloo on the CPU even where GPUs are
fi
LAST=$((RANKS - 1))

SAMPLES=800
"$LF_BIN/lf-shard" synth tokens --out "$WORK/ds" --samples $SAMPLES --seed 7 --threads 1 \
  --len-median 16 --len-min 4 --len-max 48 --vocab 64 >"$WORK/synth.log" 2>&1 ||
  { cat "$WORK/synth.log" >&2; fail "lf-shard synth"; }
# --micro-batches with a small per-micro-batch overhead (4 tokens), so these
# short samples are cut into several micro-batches a step: the example
# accumulates their gradients and all-reduces once a step.
SRV=(--data "$WORK/ds" --world $RANKS --seed 5 --epochs 2 --samples-per-rank 4 --slots 3
     --micro-batches --micro-overhead 4)
MODEL=(--dim 32 --heads 2 --lr 0.01 --log-every 0)

free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Runs the two ranks of one training run to completion; rank r dumps its
# batches to $WORK/TAG.rR.txt and logs to $WORK/TAG.rR.log.
run_ranks() {      # TAG [torch_ddp.py args...]
  local tag=$1 port r rc=0 rpids=()
  shift
  port=$(free_port)
  for r in $(seq 0 $LAST); do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=$RANKS LOCAL_WORLD_SIZE=$RANKS MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$PY" "$ROOT/examples/torch_ddp.py" --endpoint "$EP" "${MODEL[@]}" \
      --dump "$WORK/$tag.r$r.txt" "$@" >"$WORK/$tag.r$r.log" 2>&1 &
    rpids+=($!)
    PIDS+=($!)
  done
  for r in $(seq 0 $LAST); do
    wait "${rpids[$r]}" || { rc=1; cat "$WORK/$tag.r$r.log" >&2; }
  done
  [[ $rc -eq 0 ]] || fail "a rank of run $tag failed"
}

summary_field() {  # TAG KEY: a value of rank 0's summary line
  sed -n "s/^summary .*\b$2=\([^ ]*\).*/\1/p" "$WORK/$1.r0.log"
}

# The vocabulary from the data: rank 0 reads it through a private lf-server
# of world 1 while rank 1 waits (a Loader of another world size must not
# join the plan check's collective, or both wait for ever).
start_server "${SRV[@]}"
run_ranks full --data "$WORK/ds" --step-times "$WORK/full.steps"
wait_server
grep -q "vocabulary 64 (from the data)" "$WORK/full.r0.log" ||
  fail "the vocabulary is not the data's: $(grep vocabulary "$WORK/full.r0.log")"
check_exactly_once full $SAMPLES 2
steps=$(wc -l <"$WORK/full.r0.txt")
[[ $steps -ge 150 && $steps -eq $(wc -l <"$WORK/full.r$LAST.txt") ]] ||
  fail "steps: rank 0 $steps, rank $LAST $(wc -l <"$WORK/full.r$LAST.txt")"
first=$(summary_field full loss_first) last=$(summary_field full loss_last)
[[ -n $first && -n $last ]] || fail "no summary line: $(cat "$WORK/full.r0.log")"
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f - 0.3) }' ||
  fail "loss did not fall: $first -> $last"
micro=$(summary_field full micro_per_step)
awk -v m="$micro" 'BEGIN { exit !(m > 1.2) }' || fail "micro-batches per step: $micro (want several)"
echo "ddp: $steps steps, every sample once per epoch, loss $first -> $last, $micro micro-batches a step"
# --step-times: a line per step and rank, its samples those of --dump's
# batch, one forward-and-backward time per micro-batch, and the waits adding
# up to the summary's per rank.
for r in $(seq 0 $LAST); do
  cmp -s <(awk -v r=$r '!/^#/ && $2 == r {print $1, $4}' "$WORK/full.steps") \
         <(awk '{print NR - 1, $4}' "$WORK/full.r$r.txt") ||
    fail "--step-times: rank $r's steps and samples differ from its --dump: $(head -3 "$WORK/full.steps")"
  awk -v r=$r -v want="$(summary_field full allreduce_wait_s | cut -d, -f$((r + 1)))" '
    !/^#/ && $2 == r { n++; w += $8; if (split($13, mb, ",") != $3 || $7 <= 0 || $8 < 0) bad++ }
    END { exit !(n > 0 && !bad && (w / 1e3 - want) ^ 2 < 1e-4) }' "$WORK/full.steps" ||
    fail "--step-times: rank $r's micro-batch times or waits do not add up: $(grep -m3 " $r " "$WORK/full.steps")"
done
grep -q "all-reduce wait per second of step" "$WORK/full.r0.log" ||
  fail "no wait per second of step in rank 0's report: $(cat "$WORK/full.r0.log")"
echo "ddp: --step-times gives each step's samples as --dump, a time per micro-batch, the waits as the summary's"

K=57
start_server "${SRV[@]}"
run_ranks a --vocab 64 --checkpoint "$WORK/ck" --stop-after $K
wait_server
start_server "${SRV[@]}"
run_ranks b --vocab 64 --checkpoint "$WORK/ck" --resume
wait_server
cols() { cut -d' ' -f"$SAME_COLS" "$@"; }
for r in $(seq 0 $LAST); do
  [[ $(wc -l <"$WORK/a.r$r.txt") -eq $K ]] || fail "rank $r stopped after $(wc -l <"$WORK/a.r$r.txt") steps, not $K"
  cmp -s <(cols "$WORK/a.r$r.txt" "$WORK/b.r$r.txt") <(cols "$WORK/full.r$r.txt") ||
    fail "rank $r: stopped at $K + resumed differs from the uninterrupted run:
$(diff <(cols "$WORK/a.r$r.txt" "$WORK/b.r$r.txt") <(cols "$WORK/full.r$r.txt") | head -5)"
done
echo "ddp: stopped after $K steps and resumed = uninterrupted (dump columns $SAME_COLS: ids, token bytes$([[ $SAME_COLS == 1-7 ]] && echo ", losses"))"

# The example's other feed, a plain DataLoader + DistributedSampler over the
# same samples (preloaded through a private lf-server), trains too.
# The vocabulary comes from the data (MODEL has no --vocab: the default).
run_ranks dl --loader torch --data "$WORK/ds" --epochs 1 --batch-size 4
grep -q "vocabulary 64 (from the data)" "$WORK/dl.r0.log" ||
  fail "--loader torch: the vocabulary is not the data's: $(grep vocabulary "$WORK/dl.r0.log")"
first=$(summary_field dl loss_first) last=$(summary_field dl loss_last)
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < f - 0.3) }' ||
  fail "--loader torch: loss did not fall: $first -> $last"
check_exactly_once dl $SAMPLES 1
# Both feeds train on the same tokens an epoch (the levelfeed run had two):
# what the benchmark's tokens/s compares.
lf_tokens=$(summary_field full tokens) dl_tokens=$(summary_field dl tokens)
[[ -n $lf_tokens && -n $dl_tokens && $lf_tokens -eq $((2 * dl_tokens)) ]] ||
  fail "tokens trained: levelfeed '$lf_tokens' over 2 epochs, --loader torch '$dl_tokens' over 1"
echo "ddp --loader torch: loss $first -> $last, every sample once, $dl_tokens tokens as levelfeed's epoch"

# Empty batches are real (one sample, world 2: rank 1 gets tokens [0, 0];
# a longest sample of one token gives [n, 1]): the example's model and loss
# take them, and backward runs, so the rank still joins DDP's all-reduce.
"$PY" - "$LF_ROOT/examples/torch_ddp.py" <<'PYEOF' || fail "the example's model on empty batches"
import importlib.util, sys
import torch
spec = importlib.util.spec_from_file_location("torch_ddp", sys.argv[1])
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)
model = ex.TinyLM(256, 16, 2, 64)
for shape in [(0, 0), (0, 5), (3, 1)]:
    tokens = torch.randint(0, 256, shape)
    loss = ex.next_token_loss(model, tokens, torch.full((shape[0],), shape[1]))
    loss.backward()
    assert loss.item() == 0, (shape, loss.item())
print("the example's model takes batches [0, 0], [0, 5] and [3, 1]")
# An id past --vocab is an error that says what to pass, not an IndexError
# deep in the embedding; the tokens counted are the ones trained on.
try:
    ex.check_vocab(torch.tensor([[3, 70]]), 64)
    sys.exit("token id 70 with --vocab 64 accepted")
except SystemExit as e:
    assert "pass --vocab 71" in str(e), str(e)
b = {"tokens": torch.randint(1, 64, (2, 10)), "lengths": torch.tensor([10, 4])}
ddp = ex.TinyLM(64, 16, 2, 8)
_, ntok, cells, times = ex.train_step(ddp, b, torch.device("cpu"), 8, 64)
assert ntok == 8 + 4, "tokens counted past --max-len 8: %d" % ntok
assert cells == 2 * 8 and len(times) == 1, (cells, times)    # --step-times' padded, mb_ms
print("an id past --vocab is refused by name; tokens past --max-len are not counted")
# --out-vocab: the kept ids are classes 0..K-2 in their order, every other
# id the last class; the loss is over those classes.
keep = torch.tensor([7, 3])
lm = ex.TinyLM(64, 16, 2, 8, keep)
assert lm.head.out_features == 3
assert lm.class_of(torch.tensor([7, 3, 0, 63])).tolist() == [0, 1, 2, 2]
loss = ex.next_token_loss(lm, torch.tensor([[7, 3, 9, 7]]), torch.tensor([4]))
loss.backward()
assert 0 < loss.item() < 3, loss.item()
# The DataLoader's collate cuts a sample to --max-len, as the trainer does.
import numpy as np
b = ex.pad_collate([(0, np.arange(1, 11)), (1, np.arange(1, 4))], 8)
assert list(b["tokens"].shape) == [2, 8] and b["lengths"].tolist() == [8, 3], b
print("--out-vocab maps ids to classes; the collate cuts samples to --max-len")
PYEOF

check_python_leftovers
echo "python ddp ok"
