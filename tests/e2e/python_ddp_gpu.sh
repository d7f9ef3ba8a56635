#!/usr/bin/env bash
# python_ddp.sh on GPUs: nccl, the loader's device tensors (Loader(device=)),
# one rank per GPU, at most 2. Skips (77) where torch sees no GPU.
DDP_GPU=1 source "$(dirname "$0")/python_ddp.sh"
