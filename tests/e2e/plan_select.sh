#!/usr/bin/env bash
# --select world (balancer/README.md, "Selection for the world") through
# the programs that plan: lf-server --print-plan with it plans the same
# twice, every piece once in epoch 0 with every rank a sample at every
# step, and not as the default; lf-plan with the same flags counts the
# same steps (one plan definition, common/plan_cli.c). On long documents cut
# into pieces (steps of whole pieces, "Steps of whole pieces"), in pad and
# in pack: the same, and lf-plan names the level (world_level). (The
# default's plans are e2e/plan_golden's.)
source "$(dirname "$0")/../data/lf_shard/helpers.sh"
B=$bin
for prog in lf-plan lf-server; do [[ -x "$B/$prog" ]] || fail "$B/$prog is not built"; done

"$B/lf-shard" synth tokens --out "$tmp/ds" --samples 3000 --seed 5 --threads 1 \
  --len-median 300 --len-max 8192 --len-min 8 >/dev/null 2>&1 || fail "lf-shard synth tokens"
# cut at 1024: 342 samples make 820 pieces, 3478 in all
ARGS=(--world 4 --sampler balanced --samples-per-rank 4 --micro-max-padded 1024)

served() {   # OUT [args...]: lf-server's plan
  local out=$1; shift
  "$B/lf-server" --data "$tmp/ds" "${ARGS[@]}" "$@" --print-plan >"$tmp/$out" 2>"$tmp/$out.err" ||
    fail "lf-server $*: $(cat "$tmp/$out.err")"
}
served world.plan --select world
served again.plan --select world
served step.plan
cmp -s "$tmp/world.plan" "$tmp/again.plan" || fail "lf-server --select world: two plans differ"
! cmp -s "$tmp/world.plan" "$tmp/step.plan" || fail "--select world planned as the default"

# epoch0 FILE PIECES: every piece once in epoch 0, every rank a sample at
# every step; prints the steps
epoch0() {
  "$PY" - "$1" "$2" <<'PY'
import sys
seen, ranks = set(), {}
for line in open(sys.argv[1]):
    epoch, step, rank, n, ids = line.split()
    if epoch != "0":
        continue
    ids = ids.split(",")
    if int(n) != len(ids) or int(n) < 1:
        sys.exit("step %s rank %s: %s samples listed as %d" % (step, rank, n, len(ids)))
    for i in ids:
        if i in seen:
            sys.exit("%s placed twice" % i)
        seen.add(i)
    ranks.setdefault(step, set()).add(rank)
if len(seen) != int(sys.argv[2]):
    sys.exit("%d pieces placed, not %s" % (len(seen), sys.argv[2]))
bad = [s for s, r in ranks.items() if len(r) != 4]
if bad:
    sys.exit("steps with a rank empty: %s" % bad[:5])
print(len(ranks))
PY
}
steps=$(epoch0 "$tmp/world.plan" 3478) || fail "lf-server --select world, epoch 0: $steps"
want=$("$B/lf-plan" "$tmp/ds" "${ARGS[@]}" --select world --json 2>/dev/null |
  "$PY" -c 'import json, sys; print(json.load(sys.stdin)["samplers"]["balanced"]["steps"])') ||
  fail "lf-plan --select world"
[[ $steps == "$want" ]] || fail "lf-server served $steps steps, lf-plan counts $want"
echo "lf-server --select world: $steps steps, every piece once, no rank empty; lf-plan: $want"

# Long documents (98 % of the tokens in documents over 1024), cut into
# pieces of 1024: steps of whole pieces, in pad and in pack
"$B/lf-shard" synth tokens --out "$tmp/long" --samples 600 --seed 5 --threads 1 \
  --len-median 3000 --len-max 60000 --len-min 8 >/dev/null 2>&1 || fail "lf-shard synth tokens (long)"
for layout in pad pack; do
  cut=(--micro-max-padded 1024)
  [[ $layout == pack ]] && cut=(--layout pack --seq-len 1024)
  LONG=(--data "$tmp/long" --world 4 --sampler balanced --samples-per-rank 4 "${cut[@]}" --select world)
  for out in a b; do
    "$B/lf-server" "${LONG[@]}" --print-plan >"$tmp/long.$out" 2>"$tmp/long.err" ||
      fail "lf-server --select world, $layout: $(cat "$tmp/long.err")"
  done
  cmp -s "$tmp/long.a" "$tmp/long.b" || fail "lf-server --select world, $layout: two plans differ"
  steps=$(epoch0 "$tmp/long.a" 3271) || fail "lf-server --select world, $layout, epoch 0: $steps"
  got=$("$B/lf-plan" "$tmp/long" "${LONG[@]:2}" --json 2>/dev/null |
    "$PY" -c '
import json, sys
r = json.load(sys.stdin)["samplers"]["balanced"]
lvl = r["world_level"]
if not lvl or lvl["pieces_a_rank"] != 4 or lvl["piece_len"] != 1024:
    sys.exit("world_level %r, not 4 pieces of 1024 a rank" % (lvl,))
if r["epoch_max_over_mean"] > 1.002 or r["max_over_mean"]["p99"] > 1.002:
    sys.exit("epoch %.5f, p99 %.5f: over 1.002" % (r["epoch_max_over_mean"], r["max_over_mean"]["p99"]))
print(r["steps"])') || fail "lf-plan --select world, $layout: $got"
  [[ $steps == "$got" ]] || fail "$layout: lf-server served $steps steps, lf-plan counts $got"
  echo "--select world, $layout, long documents: $steps steps of 4 whole pieces a rank's cost, every piece once, no rank empty, within 1.002"
done

# A serving lf-server names the level in its epoch report (pad, 4 ranks).
mkdir -m 700 "$tmp/rt"
EP="ipc://$tmp/rt/ctl"
timeout 120 "$B/lf-server" --endpoint "$EP" --data "$tmp/long" --world 4 --sampler balanced \
  --samples-per-rank 4 --micro-max-padded 1024 --select world >"$tmp/serve.log" 2>&1 &
server=$!
for r in 0 1 2 3; do
  timeout 120 "$B/lf-rank-loop" --endpoint "$EP" --rank "$r" --world 4 --out /dev/null \
    >"$tmp/rank$r.log" 2>&1 &
done
for r in 0 1 2 3; do wait %$((r + 2)) || fail "rank $r: $(cat "$tmp/rank$r.log")"; done
wait "$server" || fail "lf-server --select world, serving: $(cat "$tmp/serve.log")"
grep -q "plan: --select world: every step 4 whole pieces of 1024 tokens a rank" "$tmp/serve.log" ||
  fail "the serving lf-server did not name the level: $(cat "$tmp/serve.log")"
echo "lf-server --select world, serving: the level named in its epoch report"
