#!/usr/bin/env bash
# lf-train with --device cuda (CUDA kernels, NCCL all-reduce), one rank per
# GPU (at most 2): the GPU model's gradients equal the CPU model's (to 1e-4;
# 1.8e-7 on an H200), the loss falls, each rank's batches equal the plan,
# the report names the GPU, the parameter check holds, nothing is left
# behind.
# Skips without a GPU or without a CUDA build.
source "$(dirname "$0")/harness_lib.sh"

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[[ ${gpus:-0} -gt 0 ]] || { echo "SKIP: no GPU"; exit 77; }
[[ $("$LF_BIN/lf-train" --help) == *"this build: CPU and CUDA"* ]] ||
  { echo "SKIP: lf-train built without CUDA"; exit 77; }
np=$((gpus < 2 ? gpus : 2))

# The GPU model's gradients against the CPU model's (bound 1e-4).
"$LF_BIN/lf-train" --gradcheck --device cuda >"$WORK/grad.out" 2>&1 ||
  fail "--gradcheck --device cuda: $(cat "$WORK/grad.out")"
grep "gradcheck gpu" "$WORK/grad.out"

train gpu "$np" --device cuda --batches "$WORK/gpu" --report "$WORK/report.json" \
  --trace "$WORK/trace.json" -- --samples-per-rank 1 ||
  { cat "$WORK/gpu.out" >&2; fail "lf-train --device cuda failed"; }
check_plan gpu "$np" balanced --samples-per-rank 1
check_loss gpu balanced 100
check_report "$WORK/report.json" "$WORK/trace.json" "$np" cuda
check_clean
echo "harness gpu ok ($np ranks)"
