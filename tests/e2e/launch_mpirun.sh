#!/usr/bin/env bash
# lf-launch under mpirun, one per "node": two nodes simulated on this
# machine (mpirun -n 2; on a cluster, --map-by ppr:1:node), each lf-launch
# serving its node's two ranks of a world of four (--node-rank from
# OMPI_COMM_WORLD_RANK, by hand until lf-server reads its job from the
# environment: docs/MULTINODE.md). The four ranks together get the whole
# plan, every sample once; each node had its own runtime directory; nothing
# is left. Skips where Open MPI's mpirun is not installed.
source "$(dirname "$0")/launch_lib.sh"
command -v mpirun >/dev/null && mpirun --version 2>/dev/null | grep -q "Open MPI" ||
  { echo "SKIP: no Open MPI mpirun"; exit 77; }

make_dataset "$WORK/ds"
SRV=(--data "$WORK/ds" --world 4 --ranks-per-node 2 --seed 5 --budget 400000)
"$LF_BIN/lf-server" --data "$WORK/ds" --world 4 --seed 5 --budget 400000 --print-plan \
  >"$WORK/plan.txt"

# Each node's line, as a job script would write it: the node's rank is
# expanded on the node, by its own shell.
NODE='LAUNCH_NODE=$OMPI_COMM_WORLD_RANK exec "$0" --node-rank $OMPI_COMM_WORLD_RANK "$@"'
LAUNCH_WORLD=4 timeout -k 5 90 mpirun --allow-run-as-root --oversubscribe -n 2 \
  sh -c "$NODE" "$LF_BIN/lf-launch" "${SRV[@]}" -- "$TRAINER" m 2 --verify "$WORK/ds" \
  >"$WORK/m.launch" 2>&1 || { show_logs +1 "$WORK/m.launch"; fail "mpirun exited $?"; }
check_exactly_once m 2000 1
diff <(stream_of m) <(sort -k1,1n -k2,2n -k3,3n "$WORK/plan.txt") >/dev/null ||
  fail "the four ranks' batches are not the plan"
[[ $(grep -c "lf-launch: the trainer exited with status 0" "$WORK/m.launch") == 2 ]] ||
  fail "want two trainers ending well: $(cat "$WORK/m.launch")"
[[ $(cat "$WORK/m.0.ep") != $(cat "$WORK/m.1.ep") ]] || fail "both nodes served on $(cat "$WORK/m.0.ep")"
servers=$(sed -n 's/^lf-launch: started .* (pid \([0-9]*\)) on .*/\1/p' "$WORK/m.launch")
# shellcheck disable=SC2046,SC2086
all_gone $servers $(cat "$WORK"/m.?.pid "$WORK"/m.?.pids) || fail "left running: $SEEN"
[[ -z $(ls -A "$XDG_RUNTIME_DIR/levelfeed") ]] || fail "left: $(ls -A "$XDG_RUNTIME_DIR/levelfeed")"
[[ "$(ls /dev/shm | sort)" == "$SHM_BEFORE" ]] || fail "/dev/shm changed"
echo "mpirun -n 2 lf-launch (two nodes of two ranks): the plan delivered, nothing left: ok"
