#!/usr/bin/env bash
# lf-server with 1, 2 and 4 real client processes, two epochs back to back:
# every sample exactly once per epoch; each rank's batches equal the plan
# (lf-server --print-plan, straight from the balancer); every tensor byte
# equals the shard contents (the clients re-read the shards themselves);
# --io=pread and --io=uring streams are byte-identical; the pack layout,
# --micro-batches and --token-dtype u16 hold the same (the latter two with
# fewer tensor bytes than one [n, longest] i32 batch); nothing is left in
# /dev/shm or the runtime directory.
source "$(dirname "$0")/server_lib.sh"
need_uring

make_dataset "$WORK/ds"
PLAN=(--data "$WORK/ds" --seed 3 --epochs 2 --budget 400000)
CLIENT_ARGS=(--pad-id 0)

run_one() {   # TAG N IO [server args...]
  local tag=$1 n=$2 io=$3; shift 3
  "$LF_BIN/lf-server" "${PLAN[@]}" --world "$n" "$@" --print-plan | sort -k1,1n -k2,2n -k3,3n \
    >"$WORK/$tag.plan"
  [[ -s "$WORK/$tag.plan" ]] || fail "$tag: empty plan"
  start_server "${PLAN[@]}" --world "$n" --io "$io" --slots 3 "$@"
  run_clients "$tag" "$n" --verify "$WORK/ds" "${CLIENT_ARGS[@]}"
  wait_server
  diff <(stream_of "$tag") "$WORK/$tag.plan" >/dev/null || fail "$tag: stream differs from the plan"
  check_exactly_once "$tag" 2000 2
  check_no_leftovers
}

for n in 1 2 4; do
  run_one "uring$n" "$n" uring
  run_one "pread$n" "$n" pread --readers 2 --workers 1
  [[ "$(digests_of "uring$n")" == "$(digests_of "pread$n")" ]] ||
    fail "N=$n: uring and pread streams differ"
  echo "N=$n: plan, exactly-once, shard bytes, uring == pread: ok"
done

# --micro-batches: the plan's micro-batches, each padded to its own longest
# (the clients check every row and pad id through the micro table): the
# same plan, and fewer tensor bytes than one [n, longest] batch a rank-step.
run_one micro2 2 uring --micro-batches
run_one microp2 2 pread --micro-batches --readers 2 --workers 1
[[ "$(digests_of micro2)" == "$(digests_of microp2)" ]] || fail "micro: uring and pread differ"
tensor_bytes() { cat "$WORK/$1".r*.log | sed -n 's/.* \([0-9]*\) tensor bytes.*/\1/p' | awk '{s += $1} END {print s}'; }
whole=$(tensor_bytes uring2) micro=$(tensor_bytes micro2)
[[ -n "$micro" && $((micro * 2)) -lt $whole ]] ||
  fail "micro-batches: $micro tensor bytes, not under half of one-batch pad's $whole"
echo "micro-batches: plan, exactly-once, shard bytes, uring == pread; $micro tensor bytes vs $whole: ok"

# --token-dtype u16 keeps the stored u16 tokens as they are: the same plan
# and tokens (the clients read each element by its dtype), in half the token
# bytes of i32 (lengths and sample ids are the same in both).
run_one u16 2 uring --token-dtype u16
[[ "$(digests_of u16)" != "$(digests_of uring2)" ]] || fail "u16 and i32 batches have equal digests"
u16=$(tensor_bytes u16)
[[ -n "$u16" && $((u16 * 10)) -lt $((whole * 6)) ]] ||
  fail "u16: $u16 tensor bytes, not near half of i32's $whole"
echo "--token-dtype u16: plan, exactly-once, shard bytes; $u16 tensor bytes vs $whole: ok"

# A u16 tensor cannot hold u32 shards, nor a pad id past 65535: refused at
# start-up, naming the field and the flag (the pad id with the command
# line's exit 2: it needs no dataset to be wrong).
make_dataset "$WORK/ds32" --vocab 100000
server_refuses "u16 from u32 shards" "--token-dtype u16: field 'tokens' stores u32 tokens" \
  --endpoint "$EP" --world 1 --data "$WORK/ds32" --token-dtype u16
server_exits "pad id past u16" 2 "--pad-id 70000 does not fit --token-dtype u16" \
  --endpoint "$EP" --world 1 --data "$WORK/ds" --token-dtype u16 --pad-id 70000
check_no_leftovers
echo "--token-dtype u16 on u32 shards and a pad id past u16: refused: ok"

# Two "nodes" of one rank each: each server serves only its local rank and
# the two together deliver exactly the single-server plan.
"$LF_BIN/lf-server" "${PLAN[@]}" --world 2 --print-plan | sort -k1,1n -k2,2n -k3,3n >"$WORK/nodes.plan"
for node in 0 1; do
  start_server "${PLAN[@]}" --world 2 --node-rank "$node" --ranks-per-node 1
  "$LF_BIN/lf-rank-loop" --endpoint "$EP" --rank "$node" --world 2 --out "$WORK/node.r$node.txt" \
    >"$WORK/node.r$node.log" 2>&1 || fail "node $node client"
  wait_server
done
diff <(stream_of node) "$WORK/nodes.plan" >/dev/null || fail "per-node servers differ from the plan"
check_exactly_once node 2000 2
# A node past the job, also where node rank x ranks per node wraps 32 bits.
server_exits "node 2 of 2" 2 "ranks past --world 4" \
  --endpoint "$EP" --data "$WORK/ds" --world 4 --node-rank 2 --ranks-per-node 2
server_exits "node rank that wraps" 2 "ranks past --world 512" \
  --endpoint "$EP" --data "$WORK/ds" --world 512 --node-rank 16777216 --ranks-per-node 256
echo "one server per node (--node-rank/--ranks-per-node), a node past the job refused: ok"

server_exits "a cap with a baseline" 2 "bind --sampler balanced only" \
  --endpoint "$EP" --data "$WORK/ds" --world 2 --sampler naive --max-tokens 100000
echo "--max-tokens with --sampler naive refused: ok"

# Pack layout (rows of 16384 tokens, cu_seqlens), with a cache too small to
# hold the epoch's blocks (1 MiB of the dataset's 3.9 MB, by the test hook:
# what --memory-limit leaves to the cache follows the process's resident
# memory, which under ASan varies by more than this dataset), so eviction
# and re-reads are exercised.
CLIENT_ARGS=(--pad-id 7)
PACK=(--layout pack --seq-len 16384 --token-dtype i64 --pad-id 7 --slots 3)
LF_TEST_CACHE_BYTES=1048576 run_one pack2 2 uring "${PACK[@]}"
ev=$(sed -n "s/.* \([0-9]*\) evictions.*/\1/p" "$WORK/server.log")
[[ -n "$ev" && $ev -gt 0 ]] || fail "the small cache evicted nothing: $(cat "$WORK/server.log")"
echo "pack layout with a small cache: ok"

# Pack with u16 tokens: positions and cu_seqlens stay i32.
run_one packu16 2 uring --layout pack --seq-len 16384 --token-dtype u16 --pad-id 7 --slots 3
echo "pack layout with u16 tokens: ok"
