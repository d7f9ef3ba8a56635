#!/usr/bin/env bash
# lf-server reads its job from the launcher's environment where its flags
# leave it out (issue 29, item 2): node rank, ranks per node and world from
# Slurm, torchrun or Open MPI, a flag in place of its variable; start-up
# says where each value came from; values that disagree, and placements
# that are not blocks, stop it naming the variables. The ranks it serves
# are checked in its --print-plan against the whole plan's. Then two jobs
# of one user on one node, both servers on their default endpoint (named
# for SLURM_JOB_ID) at once, each job's ranks served by their own server
# (before: one endpoint for all, and the second server refused to start).
source "$(dirname "$0")/server_lib.sh"

make_dataset "$WORK/ds"
export XDG_RUNTIME_DIR="$WORK/xdg"
mkdir -m 700 "$XDG_RUNTIME_DIR"
"$LF_BIN/lf-server" --data "$WORK/ds" --world 4 --print-plan >"$WORK/all4.txt"
"$LF_BIN/lf-server" --data "$WORK/ds" --world 16 --print-plan >"$WORK/all16.txt"

# The plan lines of ranks FIRST..LAST of the whole plan PLAN.
ranks_of() {   # PLAN FIRST LAST
  awk -v a="$2" -v b="$3" '$3 >= a && $3 <= b' "$WORK/$1"
}

# env VARS... lf-server --print-plan FLAGS: serves exactly ranks FIRST-LAST of
# PLAN, saying each value's source as in SAYS.
serves() {   # PLAN FIRST LAST SAYS -- VAR=V... -- FLAGS...
  local plan=$1 first=$2 last=$3 says=$4 vars=() rc=0
  shift 5
  while [[ $1 != -- ]]; do vars+=("$1"); shift; done
  shift
  env "${vars[@]}" "$LF_BIN/lf-server" --data "$WORK/ds" --print-plan "$@" \
    >"$WORK/got.txt" 2>"$WORK/err" || rc=$?
  [[ $rc == 0 ]] || fail "${vars[*]} $*: exit $rc: $(cat "$WORK/err")"
  grep -qF -- "lf-server: job: $says: serving ranks $first-$last" "$WORK/err" ||
    fail "${vars[*]} $*: want '$says' serving $first-$last: $(cat "$WORK/err")"
  diff <(ranks_of "$plan" "$first" "$last") "$WORK/got.txt" >/dev/null ||
    fail "${vars[*]} $*: the plan printed is not ranks $first-$last of $plan"
  echo "${vars[*]} $*: ranks $first-$last, as said: $says"
}

# env VARS... lf-server FLAGS must exit 2 before planning, naming MESSAGE.
refuses() {   # MESSAGE -- VAR=V... -- FLAGS...
  local want=$1 vars=() rc=0
  shift 2
  while [[ $1 != -- ]]; do vars+=("$1"); shift; done
  shift
  env "${vars[@]}" "$LF_BIN/lf-server" --data "$WORK/ds" --print-plan "$@" \
    >/dev/null 2>"$WORK/err" || rc=$?
  [[ $rc == 2 ]] && grep -qF -- "$want" "$WORK/err" ||
    fail "${vars[*]} $*: exit $rc, want 2 and '$want': $(cat "$WORK/err")"
  echo "${vars[*]} $*: refused: $(head -1 "$WORK/err")"
}

SL=(SLURM_JOB_ID=9 SLURM_NNODES=2 SLURM_NTASKS=4)
serves all4.txt 2 3 "from the environment of Slurm: node rank 1 (SLURM_NODEID), 2 ranks per node (SLURM_NTASKS_PER_NODE), world 4 (SLURM_NTASKS)" \
  -- "${SL[@]}" SLURM_NODEID=1 SLURM_NTASKS_PER_NODE=2 --
serves all4.txt 0 1 "from the environment of Slurm: node rank 0 (SLURM_NODEID), 2 ranks per node (SLURM_TASKS_PER_NODE), world 4 (SLURM_NTASKS)" \
  -- "${SL[@]}" SLURM_NODEID=0 "SLURM_TASKS_PER_NODE=2(x2)" SLURM_DISTRIBUTION=block --
# srun --ntasks-per-node=1 lf-launch ... --ranks-per-node 8: one task a node
# in the environment, the trainer's 8 from the flag, the world from both.
serves all16.txt 8 15 "from the environment of Slurm: node rank 1 (SLURM_NODEID), 8 ranks per node (--ranks-per-node), world 16 (SLURM_NNODES=2 x --ranks-per-node)" \
  -- SLURM_NNODES=2 SLURM_NTASKS=2 SLURM_NTASKS_PER_NODE=1 SLURM_NODEID=1 -- --ranks-per-node 8
# ... also where the step inherits the allocation's count a node (sbatch
# --ntasks-per-node=8, srun -N2 -n2): the environment's own counts
# disagree, but the flag replaces the one that does.
serves all16.txt 8 15 "from the environment of Slurm: node rank 1 (SLURM_NODEID), 8 ranks per node (--ranks-per-node), world 16 (SLURM_NNODES=2 x --ranks-per-node)" \
  -- SLURM_NNODES=2 SLURM_NTASKS=2 SLURM_NTASKS_PER_NODE=8 SLURM_NODEID=1 -- --ranks-per-node 8
# A flag wins over its variable.
serves all4.txt 0 1 "from the environment of Slurm: node rank 0 (--node-rank), 2 ranks per node (SLURM_NTASKS_PER_NODE), world 4 (SLURM_NTASKS)" \
  -- "${SL[@]}" SLURM_NODEID=1 SLURM_NTASKS_PER_NODE=2 -- --node-rank 0
# --world alone, another than the environment's: a server of a rank's own
# (examples/torch_ddp.py's preload) or a shell in an allocation; the
# variables are set aside, saying so, and every rank of --world is served.
env GROUP_RANK=1 LOCAL_WORLD_SIZE=2 WORLD_SIZE=4 "$LF_BIN/lf-server" --data "$WORK/ds" \
  --print-plan --world 16 >"$WORK/got.txt" 2>"$WORK/err" || fail "--world 16 in torchrun's: $(cat "$WORK/err")"
grep -qF "lf-server: job: --world 16, but WORLD_SIZE=4 (torchrun): the environment describes another job; not using it" "$WORK/err" &&
  cmp -s "$WORK/got.txt" "$WORK/all16.txt" || fail "--world 16 in torchrun's: $(cat "$WORK/err")"
echo "--world 16 with torchrun's WORLD_SIZE=4: every rank of 16 served, the variables set aside, said"
# torchrun's worker variables come before Slurm's (torchrun under srun).
serves all4.txt 2 3 "from the environment of torchrun: node rank 1 (GROUP_RANK), 2 ranks per node (LOCAL_WORLD_SIZE), world 4 (WORLD_SIZE)" \
  -- GROUP_RANK=1 LOCAL_WORLD_SIZE=2 WORLD_SIZE=4 "${SL[@]}" SLURM_NODEID=0 SLURM_NTASKS_PER_NODE=2 --
serves all4.txt 2 3 "from the environment of torchrun: node rank 1 (NODE_RANK), 2 ranks per node (LOCAL_WORLD_SIZE), world 4 (WORLD_SIZE)" \
  -- NODE_RANK=1 LOCAL_WORLD_SIZE=2 WORLD_SIZE=4 --
# Open MPI, one process a node (mpirun --map-by ppr:1:node lf-launch ...).
serves all4.txt 2 3 "from the environment of Open MPI: node rank 1 (OMPI_COMM_WORLD_RANK), 2 ranks per node (--ranks-per-node), world 4 (OMPI_COMM_WORLD_SIZE / OMPI_COMM_WORLD_LOCAL_SIZE=2 x --ranks-per-node)" \
  -- OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_SIZE=1 OMPI_COMM_WORLD_RANK=1 -- --ranks-per-node 2
# Open MPI on one node (lf-train --data's server): node 0, all ranks.
serves all4.txt 0 3 "from the environment of Open MPI: node rank 0 (the only node), 4 ranks per node (OMPI_COMM_WORLD_LOCAL_SIZE), world 4 (--world)" \
  -- OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_LOCAL_SIZE=4 OMPI_COMM_WORLD_RANK=0 -- --world 4

refuses "SLURM_NTASKS=5 is not SLURM_NNODES=2 x SLURM_NTASKS_PER_NODE=2 (Slurm)" \
  -- SLURM_NNODES=2 SLURM_NTASKS=5 SLURM_NODEID=0 SLURM_NTASKS_PER_NODE=2 --
refuses "SLURM_NODEID=2, but SLURM_NNODES=2 nodes (Slurm)" \
  -- "${SL[@]}" SLURM_NODEID=2 SLURM_NTASKS_PER_NODE=2 --
refuses "SLURM_NODEID=one in the environment is not" \
  -- "${SL[@]}" SLURM_NODEID=one SLURM_NTASKS_PER_NODE=2 --
refuses "SLURM_TASKS_PER_NODE says the nodes run unequal task counts" \
  -- SLURM_NNODES=2 SLURM_NTASKS=3 SLURM_NODEID=0 "SLURM_TASKS_PER_NODE=2,1" --
refuses "SLURM_DISTRIBUTION does not place the tasks in blocks" \
  -- "${SL[@]}" SLURM_NODEID=0 SLURM_NTASKS_PER_NODE=2 SLURM_DISTRIBUTION=cyclic --
refuses "--world 12, but SLURM_NNODES=2 x --ranks-per-node gives 8 (Slurm)" \
  -- "${SL[@]}" SLURM_NODEID=0 SLURM_NTASKS_PER_NODE=2 -- --world 12 --ranks-per-node 4
refuses "WORLD_SIZE=5 is not a multiple of LOCAL_WORLD_SIZE=2 (torchrun)" \
  -- GROUP_RANK=0 LOCAL_WORLD_SIZE=2 WORLD_SIZE=5 --
refuses "Open MPI exports no node index" \
  -- OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_LOCAL_SIZE=2 OMPI_COMM_WORLD_RANK=2 --
refuses "node rank 3 (--node-rank) x 2 ranks per node (SLURM_NTASKS_PER_NODE): ranks past the world, 6 (SLURM_NTASKS)" \
  -- SLURM_NNODES=3 SLURM_NTASKS=6 SLURM_NODEID=0 SLURM_NTASKS_PER_NODE=2 -- --node-rank 3
refuses "no number of ranks per node: given by no flag, nor by a launcher's environment" \
  -- -- --node-rank 1 --world 4

# Two jobs side by side, default endpoints: job 101 (seed 1) and job 102
# (seed 2), two ranks each, both servers up at once.
for j in 101 102; do
  SLURM_JOB_ID=$j "$LF_BIN/lf-server" --data "$WORK/ds" --world 2 --seed "${j: -1}" \
    >"$WORK/srv$j.log" 2>&1 &
  PIDS+=($!)
  SRV[j]=$!
done
for j in 101 102; do
  EP=$XDG_RUNTIME_DIR/levelfeed/ctl-$j
  wait_until 20 "job $j's server to serve on $EP" "$WORK/srv$j.log" -- serving
  "$LF_BIN/lf-server" --data "$WORK/ds" --world 2 --seed "${j: -1}" --print-plan >"$WORK/plan$j.txt"
done
for j in 101 102; do
  for r in 0 1; do
    SLURM_JOB_ID=$j "$LF_BIN/lf-rank-loop" --rank $r --world 2 --out "$WORK/job$j.r$r.txt" \
      >"$WORK/job$j.r$r.log" 2>&1 &
    PIDS+=($!)
    CL[j * 2 + r]=$!
  done
done
for j in 101 102; do
  for r in 0 1; do
    wait_ok 60 "job $j rank $r" "${CL[j * 2 + r]}" "$WORK/job$j.r$r.log"
  done
  wait_ok 20 "job $j's server" "${SRV[j]}" "$WORK/srv$j.log"
  check_exactly_once "job$j" 2000 1
  diff <(stream_of "job$j") <(sort -k1,1n -k2,2n -k3,3n "$WORK/plan$j.txt") >/dev/null ||
    fail "job $j: its ranks' batches are not its plan"
done
cmp -s "$WORK/plan101.txt" "$WORK/plan102.txt" && fail "the two jobs' plans are the same"
left=$(ls -A "$XDG_RUNTIME_DIR/levelfeed")
[[ -z $left ]] || fail "left in the runtime directory: $left"
echo "two jobs, default endpoints ctl-101 and ctl-102: each served its own plan: ok"
