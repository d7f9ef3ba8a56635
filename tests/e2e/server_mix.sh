#!/usr/bin/env bash
# A mixture (issue 33, item 4): three token datasets of different lengths,
# --weight 0.5 / 0.3 / 0.2, served to 4 ranks for two epochs.
#  - Proportions: over each epoch the tokens delivered from each dataset,
#    as the server reports them and as lf-plan plans them, are within 0.5 %
#    (absolute) of its weight; lf-stat lists the sources.
#  - Every batch's source tensor names each sample's dataset and every
#    token matches the shards (lf-rank-loop --verify A,B,C); no sample comes
#    twice in an epoch (exactly once within each source's draw), and a
#    dataset not exhausted draws another set of its samples the next epoch.
#  - A held-out set beside the mixture (--eval-data): two eval passes give
#    the same batches, checked against its shards (each sample's source the
#    number after the last --data), and leave the training stream as it was.
#  - Resume: clients that stop mid-epoch and restore into a new server go
#    on exactly as the uninterrupted run, batch for batch and byte for byte.
#  - Resume across a change of weights (0.4 / 0.4 / 0.2): states saved at
#    the end of epoch 0 go on with epoch 1 drawn under the new weights
#    (shares within 0.005, every byte checked, the same stream twice); a
#    state saved inside epoch 0 is refused, the message naming both sets.
#  - Two nodes whose servers got different weights print different
#    fingerprints, each line naming its weights, and the ranks stop before
#    their first batch with the fingerprint error naming the --weight flags.
#  - A --weight count that does not match --data, and weights that do not
#    sum to 1, are refused.
source "$(dirname "$0")/server_lib.sh"

A=$WORK/short B=$WORK/mid C=$WORK/long
make_dataset "$A" --samples 3000 --len-median 200 --seed 1
make_dataset "$B" --samples 2000 --len-median 500 --seed 2
make_dataset "$C" --samples 1000 --len-median 1200 --seed 3
MIX=(--data "$A" --weight 0.5 --data "$B" --weight 0.3 --data "$C" --weight 0.2)
SRV=("${MIX[@]}" --world 4 --seed 5 --epochs 2 --slots 3)
N_A=3000 N_B=2000

# Each "source N DIR: weight W, T tokens (share S)" line of FILE within
# 0.005 of its weight; the count of such lines printed.
shares_near() {   # WHAT FILE PATTERN
  awk -v what="$1" -v pat="$3" '
    index($0, pat) && / source [0-9]+ / {
      w = $0; sub(/.*weight /, "", w); sub(/,.*/, "", w)
      s = $0; sub(/.*share /, "", s); sub(/\).*/, "", s)
      d = s - w; if (d < 0) d = -d
      if (d > 0.005) { print what ": share " s " for weight " w > "/dev/stderr"; bad = 1 }
      n++
    }
    END { if (bad) exit 1; print n }' "$2"
}

# Planned: lf-plan's balanced epoch.
"$LF_BIN/lf-plan" "${MIX[@]}" --world 4 --seed 5 --sampler balanced >"$WORK/plan.txt" 2>&1 ||
  fail "lf-plan: $(cat "$WORK/plan.txt")"
n=$(shares_near lf-plan "$WORK/plan.txt" "tokens by source") || fail "lf-plan shares"
[[ $n == 3 ]] || fail "lf-plan printed $n source lines: $(cat "$WORK/plan.txt")"

# Served: two epochs, every batch verified (source tensor included).
start_server "${SRV[@]}"
grep -q "plan fingerprint [0-9a-f]* for ranks 0-3 of world 4 (.*mixture weights 0.500000 0.300000 0.200000)" \
  "$WORK/server.log" || fail "fingerprint line: $(cat "$WORK/server.log")"
n=$(shares_near "start-up" "$WORK/server.log" "epoch 0 draws") || fail "start-up shares"
[[ $n == 3 ]] || fail "start-up printed $n source lines: $(cat "$WORK/server.log")"
[[ $SEEN == *'"sources": ['* && $SEEN == *'"data": "'"$C"'"'* && $SEEN == *'"weight": 0.2'* ]] ||
  fail "lf-stat --json: $SEEN"
"$LF_BIN/lf-stat" "$EP" --count 1 >"$WORK/stat.txt" 2>&1 || fail "lf-stat: $(cat "$WORK/stat.txt")"
grep -q "^source 2 $C: weight 0.200000, 0 tokens delivered" "$WORK/stat.txt" ||
  fail "lf-stat's table: $(cat "$WORK/stat.txt")"
run_clients full 4 --verify "$A,$B,$C"
wait_server
grep -q "differ" "$WORK"/full.r*.log && fail "tensors differ from the shards: $(cat "$WORK"/full.r*.log)"

# Per epoch from the clients' streams: no id twice, tokens per source.
for e in 0 1; do
  stream_of full | awk -v e="$e" '$1 == e && $4 > 0 {print $5}' | tr , '\n' >"$WORK/ids.$e"
  [[ $(sort "$WORK/ids.$e" | uniq -d | wc -l) -eq 0 ]] || fail "epoch $e: an id delivered twice"
  [[ $(wc -l <"$WORK/ids.$e") -gt 1000 ]] || fail "epoch $e: $(wc -l <"$WORK/ids.$e") ids"
done
n=$(shares_near "delivered" "$WORK/server.log" "delivered from") || fail "delivered shares"
[[ $n == 3 ]] || fail "the end of the run printed $n source lines: $(cat "$WORK/server.log")"
# the mid dataset (0.3, not exhausted first) draws a new subset next epoch
mid0=$(awk -v a="$N_A" -v b="$N_B" '$1 >= a && $1 < a + b' "$WORK/ids.0" | sort)
mid1=$(awk -v a="$N_A" -v b="$N_B" '$1 >= a && $1 < a + b' "$WORK/ids.1" | sort)
[[ -n $mid0 && $(wc -l <<<"$mid0") -lt $N_B && $mid0 != "$mid1" ]] ||
  fail "the mid dataset drew $(wc -l <<<"$mid0") of $N_B, the same set both epochs"
echo "proportions, sources, exactly once: ok"

# Evaluation passes beside the mixture.
make_dataset "$WORK/held" --samples 200 --len-median 300 --seed 4
start_server "${SRV[@]}" --eval-data "$WORK/held"
run_clients evald 4 --verify "$A,$B,$C" --eval-at 5,40 --eval-verify "$WORK/held" \
  --eval-out "$WORK/evald.{r}.eval"
wait_server
grep -q "differ" "$WORK"/evald.r*.log && fail "batches differ from the shards: $(cat "$WORK"/evald.r*.log)"
[[ "$(stream_of evald)" == "$(stream_of full)" ]] || fail "eval passes changed the training stream"
for r in 0 1 2 3; do
  [[ -s $WORK/evald.$r.eval ]] || fail "rank $r: no eval batch"
  [[ $(awk '$1 == 0 {$1 = ""; print}' "$WORK/evald.$r.eval") == \
     $(awk '$1 == 1 {$1 = ""; print}' "$WORK/evald.$r.eval") ]] || fail "rank $r: the passes differ"
done
echo "eval passes beside a mixture: the same each pass, training unchanged: ok"

# Resume mid-epoch and inside the second epoch.
steps0=$(awk '$1 == 0' "$WORK/full.r0.txt" | wc -l)
for k in 11 $((steps0 + 5)); do
  resume_equals_full "$k" 4 "$A,$B,$C"
  echo "resume after $k batches: ok"
done
check_no_leftovers

# Resume across a change of weights: states saved after epoch 0's last
# batch, restored into a server started with 0.4 / 0.4 / 0.2, go on with
# epoch 1 drawn under the new weights (its delivered shares within 0.005 of
# them, every byte checked), the same stream twice; a state saved inside
# epoch 0 is refused, naming both weight sets.
NEW=(--data "$A" --weight 0.4 --data "$B" --weight 0.4 --data "$C" --weight 0.2 --world 4
     --seed 5 --epochs 2 --slots 3)
start_server "${SRV[@]}"
run_clients e0 4 --max-batches "$steps0" --save "$WORK/e0.{r}"
wait_server
for tag in rw1 rw2; do
  start_server "${NEW[@]}"
  run_clients "$tag" 4 --restore "$WORK/e0.{r}" --verify "$A,$B,$C"
  wait_server
  grep -q "differ" "$WORK/$tag".r*.log && fail "$tag: tensors differ from the shards"
  n=$(shares_near "$tag" "$WORK/server.log" "delivered from") || fail "$tag: shares"
  [[ $n == 3 ]] && grep -q "delivered from source 1 $B: weight 0.400000" "$WORK/server.log" ||
    fail "$tag: not the new weights' shares: $(cat "$WORK/server.log")"
done
[[ $(stream_of rw1 | cut -d' ' -f1 | sort -u) == 1 && $(stream_of rw1 | wc -l) -gt 8 ]] ||
  fail "the resumed run is not epoch 1: $(stream_of rw1 | head)"
[[ "$(stream_of rw1)" == "$(stream_of rw2)" && "$(digests_of rw1)" == "$(digests_of rw2)" ]] ||
  fail "two resumes under the new weights differ"
[[ "$(stream_of rw1)" != "$(stream_of full | awk '$1 == 1')" ]] ||
  fail "epoch 1 under the new weights is the old weights' epoch 1"
start_server "${NEW[@]}"
if "$LF_BIN/lf-rank-loop" --endpoint "$EP" --rank 0 --world 4 --restore "$WORK/state.11.0" \
    >"$WORK/mid.log" 2>&1; then fail "a state saved inside an epoch resumed under other weights"; fi
grep -q "mixture weights differ: saved inside epoch 0 after 11 of its batches under weights 0.5 0.3 0.2, the server runs 0.4 0.4 0.2 .* epoch boundary" \
  "$WORK/mid.log" || fail "mid-epoch state under other weights: $(cat "$WORK/mid.log")"
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
check_no_leftovers
echo "resume across a change of weights at an epoch boundary: ok; inside an epoch: refused"

# Two nodes, node 1 with other weights: different fingerprints, the ranks stop.
node() {   # N WEIGHT-B WEIGHT-C... : node N's server on rtN
  local n=$1
  shift
  rm -rf "$WORK/rt$n"
  mkdir -m 700 "$WORK/rt$n"
  "$LF_BIN/lf-server" --endpoint "$WORK/rt$n/ctl" --data "$A" --weight "$1" --data "$B" \
    --weight "$2" --data "$C" --weight "$3" --world 4 --seed 5 --node-rank "$n" \
    --ranks-per-node 2 >"$WORK/node$n.log" 2>&1 &
  PIDS+=($!)
  NODE_PID[n]=$!
  EP=$WORK/rt$n/ctl wait_until 20 "node $n's server to serve" "$WORK/node$n.log" -- serving
}
node 0 0.5 0.3 0.2
node 1 0.5 0.2 0.3
fp0=$(sed -n 's/^lf-server: plan fingerprint \([0-9a-f]*\) .*weights 0.500000 0.300000 0.200000)$/\1/p' "$WORK/node0.log")
fp1=$(sed -n 's/^lf-server: plan fingerprint \([0-9a-f]*\) .*weights 0.500000 0.200000 0.300000)$/\1/p' "$WORK/node1.log")
[[ -n $fp0 && -n $fp1 && $fp0 != "$fp1" ]] ||
  fail "fingerprints '$fp0' '$fp1': $(cat "$WORK/node0.log" "$WORK/node1.log")"
mkdir "$WORK/peers"
cpids=()
for r in 0 1 2 3; do
  "$LF_BIN/lf-rank-loop" --endpoint "$WORK/rt$((r / 2))/ctl" --rank "$r" --world 4 \
    --plan-peers "$WORK/peers" --out "$WORK/peer.r$r.txt" >"$WORK/peer.r$r.log" 2>&1 &
  cpids+=($!)
done
PIDS+=("${cpids[@]}")
for r in 0 1 2 3; do
  if wait "${cpids[$r]}"; then fail "rank $r trained under another node's weights"; fi
  grep -q "has plan fingerprint .* --weight values" "$WORK/peer.r$r.log" ||
    fail "rank $r: $(cat "$WORK/peer.r$r.log")"
  [[ ! -s $WORK/peer.r$r.txt ]] || fail "rank $r took a batch"
done
kill "${NODE_PID[@]}" 2>/dev/null || true
wait "${NODE_PID[@]}" 2>/dev/null || true
echo "other weights on one node: refused: ok"

server_exits "a weight short" 2 "3 --data and 2 --weight" "${MIX[@]:0:8}" --data "$C" --world 4
server_exits "weights over 1" 2 "sum to 1.1" "${MIX[@]:0:8}" --data "$C" --weight 0.3 --world 4
echo "mixture flags refused: ok"
