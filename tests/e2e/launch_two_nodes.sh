#!/usr/bin/env bash
# Two nodes simulated on this machine, as `srun --ntasks-per-node=1 lf-launch`
# starts them (issue 29, must hold): two lf-launch, each with Slurm's
# variables for its node (SLURM_NODEID 0 and 1, SLURM_NNODES 2) and
# --ranks-per-node 2, so each server finds world 4 and its ranks in the
# environment; two servers; four lf-rank-loop ranks, two under each
# lf-launch, that compare their servers' plan fingerprints through a
# shared directory (--plan-peers) before their first batch.
#  - Agreeing nodes: every sample exactly once, the four ranks' streams
#    together equal to one server's whole plan (lf-server --print-plan
#    --world 4), every batch's bytes checked against the shards; both
#    servers printed the same fingerprint; nothing left behind.
#  - A different --seed on node 1, and a copy of the data blocked at 16K
#    on node 1: every rank stops before its first batch with the
#    fingerprint error naming rank 2 and both fingerprints, both lf-launch
#    fail, no batch is trained on, nothing is left behind.
source "$(dirname "$0")/launch_lib.sh"

make_dataset "$WORK/ds"
make_dataset "$WORK/ds16k" --block-size 16K
PLAN=(--seed 5 --budget 400000)
"$LF_BIN/lf-server" --data "$WORK/ds" --world 4 "${PLAN[@]}" --print-plan >"$WORK/plan.txt"

# Both nodes' lf-launch at once; node 1 gets DATA1 and its extra server
# flags. Their exit statuses in RCS[0], RCS[1].
job() {   # TAG DATA1 [node 1's server flags...]
  local tag=$1 data1=$2 k data pids=()
  shift 2
  mkdir -m 700 "$WORK/peers-$tag"
  for k in 0 1; do
    data=$WORK/ds
    [[ $k == 1 ]] && data=$data1
    env SLURM_JOB_ID=77 SLURM_NNODES=2 SLURM_NTASKS=2 SLURM_NTASKS_PER_NODE=1 SLURM_NODEID=$k \
      LAUNCH_NODE=$k LAUNCH_WORLD=4 "$LF_BIN/lf-launch" --data "$data" --ranks-per-node 2 \
      "${PLAN[@]}" $([[ $k == 1 ]] && echo "$@") -- "$TRAINER" "$tag" 2 --verify "$data" \
      --plan-peers "$WORK/peers-$tag" >"$WORK/$tag.$k.launch" 2>&1 &
    pids+=($!)
    PIDS+=($!)
  done
  wait_each 90 "lf-launch ($tag) of node" "$WORK/$tag.%d.launch" "${pids[@]}"
}

# The fingerprint node K's server printed, with the ranks and world it
# found in the environment.
fingerprint() {   # TAG K
  local k=$2 log=$WORK/$1.$2.launch
  grep -qF "lf-server: job: from the environment of Slurm: node rank $k (SLURM_NODEID), 2 ranks per node (--ranks-per-node), world 4 (SLURM_NNODES=2 x --ranks-per-node): serving ranks $((2 * k))-$((2 * k + 1))" "$log" ||
    fail "$1: node $k's server did not take its job from the environment: $(cat "$log")"
  sed -n "s/^lf-server: plan fingerprint \([0-9a-f]*\) for ranks $((2 * k))-$((2 * k + 1)) of world 4 .*/\1/p" "$log"
}

# Nothing of job TAG left: servers, trainers, ranks, runtime directories, /dev/shm.
leftovers() {   # TAG
  local servers
  servers=$(sed -n 's/^lf-launch: started .* (pid \([0-9]*\)) on .*/\1/p' "$WORK/$1".?.launch)
  # shellcheck disable=SC2046,SC2086
  all_gone $servers $(cat "$WORK/$1".?.pid "$WORK/$1".?.pids 2>/dev/null) ||
    fail "$1: left running: $SEEN"
  [[ -z $(ls -A "$XDG_RUNTIME_DIR/levelfeed") ]] || fail "$1: left: $(ls -A "$XDG_RUNTIME_DIR/levelfeed")"
  [[ "$(ls /dev/shm | sort)" == "$SHM_BEFORE" ]] || fail "$1: /dev/shm changed"
}

job agree "$WORK/ds"
[[ ${RCS[0]} == 0 && ${RCS[1]} == 0 ]] ||
  { show_logs +1 "$WORK"/agree.?.launch "$WORK"/agree.r?.log; fail "agreeing nodes: lf-launch exited ${RCS[*]}"; }
fp0=$(fingerprint agree 0) fp1=$(fingerprint agree 1)
[[ -n $fp0 && $fp0 == "$fp1" ]] || fail "agreeing nodes printed fingerprints '$fp0' and '$fp1'"
check_exactly_once agree 2000 1
diff <(stream_of agree) <(sort -k1,1n -k2,2n -k3,3n "$WORK/plan.txt") >/dev/null ||
  fail "the four ranks' batches together are not the plan of lf-server --print-plan --world 4"
leftovers agree
echo "two nodes agreeing (fingerprint $fp0 on both): every sample once, the union of the streams is the plan: ok"

disagree() {   # TAG WHAT DATA1 [node 1's server flags...]
  local tag=$1 what=$2 r a b
  shift 2
  job "$tag" "$@"
  [[ ${RCS[0]} != 0 && ${RCS[1]} != 0 ]] ||
    { show_logs +1 "$WORK/$tag".?.launch; fail "$what: lf-launch exited ${RCS[*]}, want both failing"; }
  a=$(fingerprint "$tag" 0) b=$(fingerprint "$tag" 1)
  [[ -n $a && -n $b && $a != "$b" ]] || fail "$what: fingerprints '$a' and '$b'"
  for r in 0 1 2 3; do
    grep -q "rank-loop $r: the ranks' servers plan different sequences: rank 2 (node [^)]*) has plan fingerprint $b, rank 0 (node [^)]*) $a; .*stopping before the first batch" "$WORK/$tag.r$r.log" ||
      fail "$what: rank $r did not stop with the fingerprint error: $(cat "$WORK/$tag.r$r.log")"
    [[ -f "$WORK/$tag.r$r.txt" && ! -s "$WORK/$tag.r$r.txt" ]] ||
      fail "$what: rank $r trained on a batch: $(head -2 "$WORK/$tag.r$r.txt")"
  done
  leftovers "$tag"
  echo "$what: every rank stopped before its first batch: $(grep -o "rank 2 (node [^)]*) has plan fingerprint [0-9a-f]*, rank 0 (node [^)]*) [0-9a-f]*" "$WORK/$tag.r0.log"): ok"
}
disagree seed "--seed 6 on node 1" "$WORK/ds" --seed 6
disagree blocks "a copy blocked at 16K on node 1" "$WORK/ds16k"
