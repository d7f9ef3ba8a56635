#!/usr/bin/env bash
# The plan fingerprint (issue 29, item 1): one job's four ranks served by
# two lf-servers ("nodes", ranks 0-1 and 2-3, on endpoints of their own),
# as on two machines. Each server prints its fingerprint with the ranks it
# serves, and lf-stat --json has the same. With the same flags and data the
# two agree and lf-train (under mpirun, each rank on its node's server)
# trains the plan. A different --seed on one node, and a differently
# blocked copy of the data on one node, each stop the job at start with the
# fingerprint error naming the rank, the node and both fingerprints, before
# any batch is trained on (before: the job trained, samples were served
# twice or never).
source "$(dirname "$0")/harness_lib.sh"

"$LF_BIN/lf-shard" synth tokens --out "$WORK/ds16k" --samples 1500 --seed 7 --threads 1 \
  --vocab 256 --len-median 32 --len-max 256 --len-min 8 --block-size 16K >"$WORK/synth.log" 2>&1 ||
  { cat "$WORK/synth.log" >&2; fail "lf-shard synth --block-size 16K"; }

SRV=(--world 4 --seed 0 --cost "$COST" --pad-id 0)

# Node N's server (ranks 2N, 2N+1) on $WORK/rtN/ctl; waits until it serves.
node() {   # N DATA [server args...]
  local n=$1 data=$2
  shift 2
  rm -rf "$WORK/rt$n"
  mkdir -m 700 "$WORK/rt$n"
  EP="$WORK/rt$n/ctl"
  "$LF_BIN/lf-server" --endpoint "$EP" --data "$data" "${SRV[@]}" --node-rank "$n" \
    --ranks-per-node 2 "$@" >"$WORK/node$n.log" 2>&1 &
  PIDS+=($!)
  NODE_PID[n]=$!
  wait_until 20 "node $n's server to serve" "$WORK/node$n.log" -- serving
  local shown printed
  shown=$(sed -n 's/.*"plan_fingerprint": "\([0-9a-f]*\)".*/\1/p' <<<"$SEEN")
  printed=$(sed -n "s/^lf-server: plan fingerprint \([0-9a-f]*\) for ranks $((2 * n))-$((2 * n + 1)) of world 4 .*/\1/p" "$WORK/node$n.log")
  [[ -n $printed && $shown == "$printed" ]] ||
    fail "node $n: printed fingerprint '$printed', lf-stat's '$shown': $(cat "$WORK/node$n.log")"
  FP[n]=$printed
}

# lf-train's four ranks, rank r on node r/2's server; exit status in JOB_RC.
job() {    # TAG
  JOB_RC=0
  timeout -k 5 120 mpirun -np 4 sh -c \
    'exec "$0" --endpoint "$LF_NODES/rt$((OMPI_COMM_WORLD_RANK / 2))/ctl" "$@"' \
    "$LF_BIN/lf-train" --sampler balanced "${MODEL[@]}" --batches "$WORK/$1" \
    >"$WORK/$1.out" 2>&1 || JOB_RC=$?
  for n in 0 1; do wait_exit 20 "node $n's server" "${NODE_PID[n]}" "$WORK/node$n.log"; done
}
export LF_NODES=$WORK

# Agreeing nodes: one fingerprint, the job trains the plan.
node 0 "$WORK/ds"
node 1 "$WORK/ds"
[[ ${FP[0]} == "${FP[1]}" ]] || fail "same flags and data, fingerprints ${FP[0]} and ${FP[1]}"
job agree
[[ $JOB_RC -eq 0 ]] || { cat "$WORK/agree.out" >&2; fail "lf-train on agreeing nodes exited $JOB_RC"; }
check_plan agree 4 balanced
echo "agreeing nodes: fingerprint ${FP[0]} on both, lf-train trained the plan: ok"

# Disagreeing nodes: the job stops before its first step, naming both.
disagree() {   # TAG WHAT DATA1 [node 1's server args...]
  local tag=$1 what=$2 data=$3 r
  shift 3
  node 0 "$WORK/ds"
  node 1 "$data" "$@"
  [[ ${FP[0]} != "${FP[1]}" ]] || fail "$what: both nodes have fingerprint ${FP[0]}"
  job "$tag"
  [[ $JOB_RC -ne 0 ]] || { cat "$WORK/$tag.out" >&2; fail "$what: lf-train trained"; }
  grep -q "lf-train: the ranks' servers plan different sequences: rank 2 (node [^)]*) has plan fingerprint ${FP[1]}, rank 0 (node [^)]*) ${FP[0]};" "$WORK/$tag.out" ||
    fail "$what: no fingerprint error naming rank 2, ${FP[1]} and ${FP[0]}: $(cat "$WORK/$tag.out")"
  for r in 0 1 2 3; do
    [[ -f "$WORK/$tag.r$r.txt" && ! -s "$WORK/$tag.r$r.txt" ]] ||
      fail "$what: rank $r trained on a batch (or logged none): $(head -2 "$WORK/$tag.r$r.txt" 2>&1)"
  done
  echo "$what: $(grep -o "rank 2 (node [^)]*) has plan fingerprint [0-9a-f]*, rank 0 (node [^)]*) [0-9a-f]*" "$WORK/$tag.out"); nothing trained: ok"
}
disagree seed "--seed 1 on node 1" "$WORK/ds" --seed 1
disagree blocks "a copy blocked at 16K on node 1" "$WORK/ds16k"
for n in 0 1; do RT=$WORK/rt$n check_clean; done
