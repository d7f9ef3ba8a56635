#!/usr/bin/env bash
# Plans change only on purpose: lf-server --print-plan on a fixed synthetic
# dataset, in pad and pack configurations that reach KK, the row fill, the
# local search, the caps and micro-batches, must hash as recorded in
# tests/e2e/expected/plan/print_plan.md5. Property tests check that a plan
# is valid and balanced; they cannot see a choice the local search later
# repairs (a row fill picking the wrong rank, say), nor a plan that changed
# under a resumed job. The baselines' entries (--sampler naive, sorted) are
# of order version 2 (balancer/order.c: the shuffle drawn as it goes), as
# are the mixtures' naive and sorted ones (three datasets at 0.5 / 0.3 /
# 0.2: each source's shuffle drawn as the interleave reaches it); the
# balanced mixtures' are the plans of before that (their sources' orders
# built whole then). A deliberate change records the new hashes:
#   LF_GOLDEN_UPDATE=1 tests/run.sh build/default e2e/plan_golden
# and its commit says why the plans moved.
source "$(dirname "$0")/../data/lf_shard/helpers.sh"
golden="$root/tests/e2e/expected/plan/print_plan.md5"
server="$bin/lf-server"
[[ -x "$server" ]] || fail "$server is not built"
cd "$tmp" || exit 1

configs=(
  "--world 8"
  "--world 3 --max-tokens 9000"
  "--world 8 --micro-max-padded 8000 --micro-overhead 500"
  "--world 64"
  "--world 8 --layout pack"
  "--world 16 --layout pack --seq-len 4096"
  "--world 64 --layout pack --seq-len 4096"
  "--world 8 --layout pack --max-padded 12000"
  "--world 3 --max-tokens 9000 --overflow drop"
  "--world 8 --micro-max-padded 8000 --micro-overhead 500 --overflow drop"
  "--world 16 --layout pack --seq-len 4096 --overflow drop"
  "--world 8 --sampler naive"
  "--world 8 --sampler sorted"
  "--world 3 --sampler sorted --batch-per-rank 5"
  "--weight 0.5 --data ds2 --weight 0.3 --data ds3 --weight 0.2 --world 8"
  "--weight 0.5 --data ds2 --weight 0.3 --data ds3 --weight 0.2 --world 16 --layout pack --seq-len 4096"
  "--weight 0.5 --data ds2 --weight 0.3 --data ds3 --weight 0.2 --world 8 --sampler naive"
  "--weight 0.5 --data ds2 --weight 0.3 --data ds3 --weight 0.2 --world 8 --sampler sorted"
)

"$LF_SHARD" synth tokens --out ds --samples 8000 --seed 3 --threads 2 >/dev/null 2>&1 ||
  fail "lf-shard synth tokens"
"$LF_SHARD" synth tokens --out ds2 --samples 5000 --seed 4 --threads 2 >/dev/null 2>&1 &&
  "$LF_SHARD" synth tokens --out ds3 --samples 3000 --seed 5 --threads 2 >/dev/null 2>&1 ||
  fail "lf-shard synth tokens (the mixture's)"
for cfg in "${configs[@]}"; do
  # shellcheck disable=SC2086  # cfg is a list of options
  "$server" --data ds $cfg --print-plan --epochs 2 >plan.txt 2>err.txt ||
    fail "lf-server $cfg --print-plan: $(tail -n 1 err.txt)"
  [[ -s plan.txt ]] || fail "lf-server $cfg --print-plan printed nothing"
  echo "$(md5sum <plan.txt | cut -d' ' -f1)  $cfg"
done >hashes.txt

if [[ -n "${LF_GOLDEN_UPDATE:-}" ]]; then
  mkdir -p "$(dirname "$golden")" && cp hashes.txt "$golden"
  echo "recorded $(wc -l <hashes.txt) plan hashes in $golden"
  exit 0
fi
diff -u "$golden" hashes.txt ||
  fail "plans differ from the recorded ones (see the header to record a deliberate change)"
echo "plans as recorded in ${#configs[@]} configurations"
