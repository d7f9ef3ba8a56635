#!/usr/bin/env bash
# --select world (balancer/README.md, "Selection for the world") through
# the programs that plan: lf-server --print-plan with it plans the same
# twice, every piece once in epoch 0 with every rank a sample at every
# step, and not as the default; lf-plan with the same flags counts the
# same steps (one plan definition, common/plan_cli.c); both refuse it with
# --layout pack, naming the flag. (The default's plans are e2e/plan_golden's.)
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

steps=$("$PY" - "$tmp/world.plan" <<'PY'
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
if len(seen) != 3478:
    sys.exit("%d pieces placed, not 3478" % len(seen))
bad = [s for s, r in ranks.items() if len(r) != 4]
if bad:
    sys.exit("steps with a rank empty: %s" % bad[:5])
print(len(ranks))
PY
) || fail "lf-server --select world, epoch 0: $steps"
want=$("$B/lf-plan" "$tmp/ds" "${ARGS[@]}" --select world --json 2>/dev/null |
  "$PY" -c 'import json, sys; print(json.load(sys.stdin)["samplers"]["balanced"]["steps"])') ||
  fail "lf-plan --select world"
[[ $steps == "$want" ]] || fail "lf-server served $steps steps, lf-plan counts $want"
echo "lf-server --select world: $steps steps, every piece once, no rank empty; lf-plan: $want"

for prog in server plan; do
  if [[ $prog == server ]]; then
    "$B/lf-server" --data "$tmp/ds" --world 4 --layout pack --select world --print-plan \
      >"$tmp/out" 2>&1 && fail "lf-server took --select world with pack"
  else
    "$B/lf-plan" "$tmp/ds" --world 4 --layout pack --select world >"$tmp/out" 2>&1 &&
      fail "lf-plan took --select world with pack"
  fi
  grep -q -- "--select world is for --layout pad" "$tmp/out" ||
    fail "lf-$prog: pack refused without naming the flag: $(cat "$tmp/out")"
done
echo "--select world with pack: refused by both, naming the flag"
