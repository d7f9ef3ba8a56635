#!/usr/bin/env bash
# Evaluation on demand (lf-server --eval-data, lf_eval_begin/lf_eval_next):
# a held-out set made by lf-shard split, served beside the training data.
# For 2 and 3 ranks, eval passes at training steps drawn at random (seeded,
# the same for every rank, one before the first batch and one after the
# last included) must give
#   - the same eval stream in every pass (each rank's batches, ids in order),
#   - every held-out sample exactly once per pass over the ranks, every rank
#     the same number of batches, none empty, the bytes those of the held-out
#     set's shards (--eval-verify),
#   - a training stream equal, batch for batch and byte for byte, to a run of
#     the same server without --eval-data, whose plan fingerprint it prints;
# and after a resume (state saved mid-epoch, a new server and clients) with
# passes on both sides, the two pieces equal the run without eval passes.
# A rank that asks for passes while the other never does holds nobody up.
source "$(dirname "$0")/server_lib.sh"

make_dataset "$WORK/all"
"$LF_BIN/lf-shard" split "$WORK/all" --fraction 0.1 --seed 3 --out-train "$WORK/tr" \
  --out-eval "$WORK/ev" >"$WORK/split.log" 2>&1 || { cat "$WORK/split.log" >&2; fail "split"; }
NEVAL=$("$LF_BIN/lf-shard" inspect "$WORK/ev" | sed -n 's/^samples: \([0-9]*\).*/\1/p')
[[ $NEVAL -gt 100 ]] || fail "held-out set of $NEVAL samples"
RANDOM=33  # the passes' steps: random, the same every run of the test

fingerprint() { sed -n 's/.*plan fingerprint \([0-9a-f]*\).*/\1/p' "$WORK/server.log"; }

# The eval lines of pass P of one --eval-out file, without the pass column.
pass_of() {  # FILE P
  awk -v p="$2" '$1 == p { $1 = ""; print }' "$1"
}

# Checks TAG's eval outputs for N ranks and NPASS passes: every pass as the
# reference REF (TAG of a run whose pass 0 is checked here), each sample of
# the held-out set once per pass over the ranks, equal batch counts.
check_passes() {  # TAG N NPASS REF
  local tag=$1 n=$2 npass=$3 ref=$4 r p
  for ((r = 0; r < n; r++)); do
    local f="$WORK/$tag.r$r.eval"
    [[ $(awk '{print $1}' "$f" | sort -un | wc -l) -eq $npass ]] ||
      fail "$tag: rank $r ran $(awk '{print $1}' "$f" | sort -un | wc -l) passes, not $npass"
    for ((p = 0; p < npass; p++)); do
      cmp -s <(pass_of "$f" "$p") <(pass_of "$WORK/$ref.r$r.eval" 0) ||
        fail "$tag: rank $r's pass $p differs from the first pass of $ref"
    done
    awk '$4 == 0 { exit 1 }' "$f" || fail "$tag: rank $r has an empty eval batch"
    [[ $(pass_of "$f" 0 | wc -l) -eq $(pass_of "$WORK/$tag.r0.eval" 0 | wc -l) ]] ||
      fail "$tag: rank $r has another number of eval batches than rank 0"
  done
  for ((p = 0; p < npass; p++)); do
    for ((r = 0; r < n; r++)); do pass_of "$WORK/$tag.r$r.eval" "$p"; done |
      awk '{print $4}' | tr ',' '\n' | sed 's/@.*//' | sort -n | uniq -c |
      awk -v want="$NEVAL" '$1 != 1 || $2 != NR - 1 { bad = 1 } END { exit bad || NR != want }' ||
      fail "$tag: pass $p does not hold each of the $NEVAL held-out samples once"
  done
}

# Steps after which each pass runs: 0, three at random inside the run
# (sorted, possibly equal: two passes back to back), and the last.
draw_steps() {  # TOTAL
  local a=$((RANDOM % $1)) b=$((RANDOM % $1)) c=$((RANDOM % $1))
  echo "0,$(printf '%s\n' "$a" "$b" "$c" | sort -n | paste -sd,),$1"
}

for W in 2 3; do
  SRV=(--data "$WORK/tr" --world "$W" --seed 5 --epochs 2 --budget 300000 --slots 3)
  start_server "${SRV[@]}"
  fp_plain=$(fingerprint)
  run_clients "ref$W" "$W"
  wait_server
  total=$(wc -l <"$WORK/ref$W.r0.txt")
  [[ $total -gt 20 ]] || fail "world $W: $total steps"

  steps=$(draw_steps "$total")
  start_server "${SRV[@]}" --eval-data "$WORK/ev"
  [[ $(fingerprint) == "$fp_plain" ]] ||
    fail "world $W: fingerprint $(fingerprint) with --eval-data, $fp_plain without"
  run_clients "ev$W" "$W" --verify "$WORK/tr" --eval-at "$steps" \
    --eval-out "$WORK/ev$W.r{r}.eval" --eval-verify "$WORK/ev"
  wait_server
  for ((r = 0; r < W; r++)); do
    cmp -s "$WORK/ev$W.r$r.txt" "$WORK/ref$W.r$r.txt" ||
      fail "world $W: rank $r's training batches differ with eval passes at $steps"
    cmp -s "$WORK/ev$W.r$r.dig" "$WORK/ref$W.r$r.dig" ||
      fail "world $W: rank $r's training bytes differ with eval passes at $steps"
  done
  check_passes "ev$W" "$W" 5 "ev$W"
  echo "world $W: 5 eval passes after batches $steps: the same every pass, each held-out sample once, training unchanged: ok"

  # Resume: passes before and after a state saved mid-run.
  k=$((total / 2 + RANDOM % (total / 4)))
  start_server "${SRV[@]}" --eval-data "$WORK/ev"
  run_clients "a$W" "$W" --max-batches "$k" --save "$WORK/state$W.{r}" \
    --eval-at "$((RANDOM % k)),$k" --eval-out "$WORK/a$W.r{r}.eval"
  wait_server
  start_server "${SRV[@]}" --eval-data "$WORK/ev"
  run_clients "b$W" "$W" --restore "$WORK/state$W.{r}" --eval-at "0,$((RANDOM % (total - k)))" \
    --eval-out "$WORK/b$W.r{r}.eval"
  wait_server
  for ((r = 0; r < W; r++)); do
    cmp -s <(cat "$WORK/a$W.r$r.txt" "$WORK/b$W.r$r.txt") "$WORK/ref$W.r$r.txt" ||
      fail "world $W: rank $r resumed after $k batches, with eval passes, differs"
    cmp -s <(cat "$WORK/a$W.r$r.dig" "$WORK/b$W.r$r.dig") "$WORK/ref$W.r$r.dig" ||
      fail "world $W: rank $r's resumed bytes differ"
  done
  check_passes "a$W" "$W" 2 "ev$W"
  check_passes "b$W" "$W" 2 "ev$W"
  check_no_leftovers
  echo "world $W: resumed after $k batches with passes on both sides: ok"
done

# Only rank 0 evaluates (twice, mid-run): rank 1 is not held up, nor the server.
start_server --data "$WORK/tr" --world 2 --seed 5 --epochs 2 --budget 300000 --slots 3 \
  --eval-data "$WORK/ev"
"$LF_BIN/lf-rank-loop" --endpoint "$EP" --rank 1 --world 2 --out "$WORK/one.r1.txt" \
  >"$WORK/one.r1.log" 2>&1 &
r1=$!
PIDS+=("$r1")
"$LF_BIN/lf-rank-loop" --endpoint "$EP" --rank 0 --world 2 --out "$WORK/one.r0.txt" \
  --eval-at 3,9 --eval-out "$WORK/one.r0.eval" >"$WORK/one.r0.log" 2>&1 ||
  { cat "$WORK/one.r0.log" >&2; fail "rank 0, the one that evaluates"; }
wait_ok 60 "rank 1, which does not evaluate" "$r1" "$WORK/one.r1.log"
wait_server
cmp -s "$WORK/one.r1.txt" "$WORK/ref2.r1.txt" || fail "rank 1's batches beside rank 0's passes"
cmp -s <(pass_of "$WORK/one.r0.eval" 1) <(pass_of "$WORK/ev2.r0.eval" 0) ||
  fail "rank 0's pass, alone, differs"
check_no_leftovers
echo "one rank evaluates, the other does not: ok"
