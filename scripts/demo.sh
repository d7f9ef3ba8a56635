#!/usr/bin/env bash
# make demo: the main job end to end on a synthetic long-tailed token set.
#   scripts/demo.sh BUILD_DIR
# 1. lf-shard synth tokens writes the dataset (lognormal lengths, 8..1024);
#    lf-shard stats shows its length distribution;
# 2. lf-train --calibrate times this model over a spread of lengths and
#    batch sizes and fits the cost model c(L) = aL + bL^2 + c0 (+ d a
#    batch) into the cost file BUILD_DIR/demo/model.cost;
# 3. lf-plan shows what each sampler does with that cost model (no server);
# 4. mpirun -np 4 lf-train --compare: for balanced, naive and sorted in turn
#    lf-train starts an lf-server, trains one epoch on 4 ranks (GPU with
#    NCCL, one rank per GPU, when nvidia-smi sees 2 or more and lf-train has
#    CUDA, else the CPU model with MPI_Allreduce), and prints one table;
#    On the CPU one rank per core (at most 4): more would share cores and
#    measure the scheduler, not the plan;
# 5. lf-train --device sim --compare at 8 and 64 ranks: each rank's compute
#    sleeps for a hidden ground-truth cost (lf-train's --sim-cost default,
#    which the planner is not told: it plans with step 2's cost file), so
#    many ranks share the cores and the planner's real prediction error
#    shows, each run against its own noise floor;
# 6. the reports, traces (open in https://ui.perfetto.dev) and SVG charts
#    stay in BUILD_DIR/demo; nothing else is left (checked).
set -euo pipefail

B=${1:-build/default}
BIN="$B/bin"
OUT="$(mkdir -p "$B" && cd "$B" && pwd)/demo"
RANKS=4

die() { echo "demo: $*" >&2; exit 1; }
command -v mpirun >/dev/null || die "mpirun not found (Debian: apt-get install openmpi-bin libopenmpi-dev)"
[[ -x "$BIN/lf-train" ]] || die "$BIN/lf-train was not built (it needs MPI: make MPI=1)"

# Open MPI in a container: root allowed, shared memory only, ranks may
# outnumber cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1

rm -rf "$OUT"
mkdir -p "$OUT/tmp"
SHM_BEFORE=$(ls /dev/shm | sort)
trap 'rm -rf "$OUT/tmp"' EXIT

DEVICE=cpu
MODEL=(--vocab 64 --dim 16 --hidden 32)
CORES=$(nproc)
RANKS=$((CORES < RANKS ? CORES : RANKS))   # the CPU model: one rank per core
[[ $RANKS -ge 2 ]] || RANKS=2
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [[ ${GPUS:-0} -gt 0 && $("$BIN/lf-train" --help) == *"this build: CPU and CUDA"* ]]; then
  if [[ $GPUS -ge 2 ]]; then
    DEVICE=cuda
    MODEL=(--vocab 1024 --dim 64 --hidden 256)
    RANKS=$((GPUS < RANKS ? GPUS : RANKS))   # NCCL: one rank per GPU
  else
    echo "demo: 1 GPU: NCCL takes one rank per GPU and a single rank has nothing to balance," \
         "so the $RANKS ranks train on the CPU (e2e/harness_gpu trains on the GPU)"
  fi
fi
TRAIN=("$BIN/lf-train" --data "$OUT/data" --device "$DEVICE" "${MODEL[@]}" --log-every 0
       --tmpdir "$OUT/tmp")

echo "== 1. dataset: 3000 token samples, lognormal lengths (median 64, up to 1024)"
"$BIN/lf-shard" synth tokens --out "$OUT/data" --samples 3000 --seed 11 --vocab 64 \
  --len-median 64 --len-max 1024 --len-min 8 --threads 2
"$BIN/lf-shard" stats "$OUT/data"

echo
echo "== 2. the cost model of this model on this machine: lf-train --calibrate"
mpirun -np "$RANKS" "$BIN/lf-train" --calibrate --device "$DEVICE" "${MODEL[@]}" \
  --cost-file "$OUT/model.cost" | tee "$OUT/calibrate.txt"
[[ -s "$OUT/model.cost" ]] || die "--calibrate wrote no cost file"

echo
echo "== 3. the plans (lf-plan --cost-file $OUT/model.cost)"
"$BIN/lf-plan" "$OUT/data" --world "$RANKS" --cost-file "$OUT/model.cost" --samples-per-rank 4 |
  tee "$OUT/plan.txt" | grep -E "^[a-z]+:|max/mean|lf-plan:"

echo
echo "== 4. mpirun -np $RANKS lf-train --compare --device $DEVICE (one lf-server per sampler)"
mpirun -np "$RANKS" "${TRAIN[@]}" --compare --cost-file "$OUT/model.cost" \
  --report "$OUT/report.json" --trace "$OUT/trace.json" --chart "$OUT/chart.svg" \
  -- --samples-per-rank 4 | tee "$OUT/compare.txt"
# naive and sorted take as many samples per step as balanced's mean: lf-server
# and lf-plan derive that default the same way (common/plan_cli.c).

echo
echo "== 5. --device sim: compute asleep for a hidden cost, the planner told step 2's"
# 64 ranks take 4 samples a rank as 8 do (16 times the 3000 samples' steps
# need 48 000): at one a rank a step holds nothing to even out, and five
# runs put balanced under naive's balance in four and over it in one.
"$BIN/lf-shard" synth tokens --out "$OUT/data48k" --samples 48000 --seed 11 --vocab 64 \
  --len-median 64 --len-max 1024 --len-min 8 --threads 2 >/dev/null
spr=4
for np in 8 64; do
  data=$OUT/data
  [[ $np -eq 64 ]] && data=$OUT/data48k
  echo "-- $np ranks on $CORES cores ($data, --samples-per-rank $spr)"
  mpirun -np "$np" "$BIN/lf-train" --data "$data" --device sim --vocab 64 --dim 8 --hidden 8 \
    --log-every 0 --tmpdir "$OUT/tmp" --compare --cost-file "$OUT/model.cost" \
    --report "$OUT/report.sim$np.json" -- --samples-per-rank "$spr" >"$OUT/sim$np.txt"
  grep -E "^ +balanced|max/mean|floor|^step ms" "$OUT/sim$np.txt"
done
echo "(one run each: compare balanced and naive with their noise floors, not with" \
     "another run's)"

echo
echo "== 6. outputs in $OUT"
for s in balanced naive sorted; do
  echo "  $s: report $OUT/report.$s.json  trace $OUT/trace.$s.json  chart $OUT/chart.$s.svg"
done

# Clean shutdown: the servers are gone and left no shared memory. Only the
# entries this run added count, and of them only levelfeed's: /dev/shm is
# the machine's, and another job (or Open MPI's own segments) may come and
# go meanwhile, which is said but is not the demo's failure.
new_shm=$(comm -13 <(echo "$SHM_BEFORE") <(ls /dev/shm | sort) || true)
! grep -q levelfeed <<<"$new_shm" || die "levelfeed left in /dev/shm: $(grep levelfeed <<<"$new_shm")"
[[ -z $new_shm ]] || echo "note: /dev/shm has new entries, not levelfeed's: $new_shm"
! pgrep -f "$OUT/data" >/dev/null || die "processes left: $(pgrep -af "$OUT/data")"
[[ -z "$(ls -A "$OUT/tmp")" ]] || die "runtime directories left in $OUT/tmp"
echo "demo: done, nothing left running"
