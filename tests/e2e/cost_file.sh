#!/usr/bin/env bash
# The cost file (common/cost_file.h, balancer/README.md "Cost file") reaches
# the plan: lf-plan --cost-file F scores and lf-server --cost-file F plans
# exactly as --cost with the file's four numbers, and not as the default
# cost model; a file that is not a cost file is refused naming its line and
# what is wrong, by both programs.
set -u
B=${LF_BIN:?LF_BIN is set by tests/run.sh}
[[ -x "$B/lf-shard" && -x "$B/lf-plan" && -x "$B/lf-server" ]] ||
  { echo "skip: lf-shard, lf-plan or lf-server is not built"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lf_cost_file.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$B/lf-shard" synth tokens --out "$tmp/ds" --samples 3000 --seed 5 --threads 1 \
  --len-median 64 --len-max 1024 --len-min 8 >/dev/null 2>&1 || fail "lf-shard synth tokens"

# A strongly quadratic model with a per-sample constant, far from the text
# preset (b/a = 1/(12*4096)), with comments, an information key and the
# values out of order, as a person might edit it.
cat >"$tmp/model.cost" <<'EOF'
# written by hand for this test
levelfeed-cost 1
b 0.25     # per token squared
a 16
ns_per_unit 143.5
d 0
c0 300
EOF
FLAGS=(--cost 16,0.25,300,0)
PLAN=(--world 4 --samples-per-rank 4 --json)

scores() {   # OUT [cost args...]: lf-plan's scores without its own timings
  "$B/lf-plan" "$tmp/ds" "${PLAN[@]}" "${@:2}" 2>/dev/null | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
for s in d["samplers"].values():
    for k in [k for k in s if k.endswith("_s") or "_ms_" in k]: del s[k]
print(json.dumps(d, sort_keys=True))' >"$tmp/$1" || fail "lf-plan ${*:2}"
}
scores file.json --cost-file "$tmp/model.cost"
scores flags.json "${FLAGS[@]}"
scores default.json
cmp -s "$tmp/file.json" "$tmp/flags.json" ||
  fail "lf-plan: --cost-file and the same --cost differ: $(diff "$tmp/file.json" "$tmp/flags.json" | head -5)"
! cmp -s "$tmp/file.json" "$tmp/default.json" ||
  fail "lf-plan: the cost file changed nothing against the default cost model"
echo "lf-plan: --cost-file == --cost 16,0.25,300,0, != the default"

server_plan() {   # OUT [cost args...]: lf-server's balanced plan, sorted
  local out=$1; shift
  "$B/lf-server" --data "$tmp/ds" --world 4 --sampler balanced --samples-per-rank 4 \
    "$@" --print-plan >"$tmp/$out" 2>"$tmp/$out.err" || fail "lf-server $*: $(cat "$tmp/$out.err")"
  [[ -s "$tmp/$out" ]] || fail "lf-server $*: empty plan"
}
server_plan file.plan --cost-file "$tmp/model.cost"
server_plan flags.plan "${FLAGS[@]}"
server_plan default.plan
cmp -s "$tmp/file.plan" "$tmp/flags.plan" || fail "lf-server: --cost-file and the same --cost plan differently"
! cmp -s "$tmp/file.plan" "$tmp/default.plan" || fail "lf-server: the cost file changed no batch"
echo "lf-server: --cost-file plans as --cost 16,0.25,300,0 ($(wc -l <"$tmp/file.plan") batches), != the default"

# Broken files: each refused, naming the file, the line and the fault.
check_refused() {   # NAME EXPECTED-TEXT: $tmp/NAME.cost is refused by both
  local f="$tmp/$1.cost" want=$2 prog
  for prog in plan server; do
    if [[ $prog == plan ]]; then
      "$B/lf-plan" "$tmp/ds" --world 4 --cost-file "$f" >"$tmp/err" 2>&1 && fail "lf-plan took $1"
    else
      "$B/lf-server" --data "$tmp/ds" --world 4 --cost-file "$f" --print-plan >"$tmp/err" 2>&1 &&
        fail "lf-server took $1"
    fi
    grep -qF -- "$want" "$tmp/err" || fail "lf-$prog on $1: want '$want', got: $(cat "$tmp/err")"
  done
  echo "refused: $1: $want"
}
printf 'a 16\nb 0\nc0 0\nd 0\n' >"$tmp/noheader.cost"
check_refused noheader "noheader.cost:1: not a cost file"
printf 'levelfeed-cost 1\na 16\nb 0\nd 0\n' >"$tmp/missing.cost"
check_refused missing "missing.cost: no 'c0' line"
printf 'levelfeed-cost 1\na 16\nb -1\nc0 0\nd 0\n' >"$tmp/negative.cost"
check_refused negative "negative.cost:3: b must be a finite number >= 0"
printf 'levelfeed-cost 1\na 16\na 17\nb 0\nc0 0\nd 0\n' >"$tmp/twice.cost"
check_refused twice "twice.cost:3: a given twice"
check_refused absent "absent.cost: No such file or directory"
echo "cost file ok"
