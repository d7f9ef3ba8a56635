#!/usr/bin/env bash
# An index-only dataset (lf-shard synth tokens --index-only, issue 35 item
# 3): a few lines describe the samples and index.lfx holds their lengths
# (under 16 bytes a sample), no bytes are written; one written before
# index.lfx (the description alone) plans the same. lf-plan plans
# it exactly as it plans `--synth N` with the same seed and blocks (the
# same lengths, every figure but the times equal); lf-server starts on it
# and serves; the first batch a rank asks for stops the server with an
# error naming the dataset, which the rank is told. A malformed description
# is refused naming its line; --index-only is for tokens only.
source "$(dirname "$0")/server_lib.sh"
PY=/usr/bin/python3
[[ -x "$PY" ]] || { echo "SKIP: /usr/bin/python3 is needed"; exit 77; }

"$LF_BIN/lf-shard" synth tokens --index-only --out "$WORK/io" --samples 200000 --seed 5 \
  >"$WORK/synth.log" 2>&1 || { cat "$WORK/synth.log" >&2; fail "lf-shard synth --index-only"; }
[[ $(ls "$WORK/io" | tr '\n' ' ') == "index-only.lfi index-summary.lfx index.lfx " ]] ||
  fail "the dataset holds more than its description, compact index and summary: $(ls "$WORK/io")"
size=$(stat -c %s "$WORK/io/index-only.lfi")
[[ $size -lt 1024 ]] || fail "the description takes $size bytes"
lfx=$(( $(stat -c %s "$WORK/io/index.lfx") + $(stat -c %s "$WORK/io/index-summary.lfx") ))
(( lfx < 16 * 200000 )) || fail "index.lfx and its summary take $lfx bytes for 200000 samples"
echo "index-only: 200000 samples described in $size bytes, their lengths and summary in $lfx"

# Two lf-plan --json outputs agree in every figure but the times.
same_plans() {   # A.json B.json WHAT
  "$PY" - "$1" "$2" "$3" <<'PYEOF'
import json, sys
times = ("plan_ms_per_step", "plan_cpu_ms_per_step", "epoch_s", "create_s", "epoch_cpu_s")
a, b = (json.load(open(f)) for f in sys.argv[1:3])
for d in (a, b):
    for s in d["samplers"].values():
        for k in times: s.pop(k)
assert a == b, (a, b)
print("lf-plan:", sys.argv[3], a["samplers"]["balanced"]["steps"], "balanced steps, figures equal")
PYEOF
}

# The same plan as lf-plan --synth (lengths from the same streams, blocks of 64).
"$LF_BIN/lf-plan" "$WORK/io" --seed 5 --world 8 --json >"$WORK/io.json" 2>/dev/null ||
  fail "lf-plan on the index-only dataset"
"$LF_BIN/lf-plan" --synth 200000 --synth-block 64 --seed 5 --world 8 --json \
  >"$WORK/synth.json" 2>/dev/null || fail "lf-plan --synth"
same_plans "$WORK/io.json" "$WORK/synth.json" "the index-only dataset plans as --synth does:" ||
  fail "the plans differ"

# A description written before index.lfx (none beside it) plans the same.
mkdir "$WORK/old" && cp "$WORK/io/index-only.lfi" "$WORK/old/"
"$LF_BIN/lf-plan" "$WORK/old" --seed 5 --world 8 --json >"$WORK/old.json" 2>/dev/null ||
  fail "lf-plan on an index-only dataset without index.lfx"
same_plans "$WORK/io.json" "$WORK/old.json" "without index.lfx (an older description) the same:" ||
  fail "the plans with and without index.lfx differ"

# Without its summary (the length counts and the plan's digest, taken when
# index.lfx was written), as a directory written before it: the same plan,
# and lf-server the same fingerprint (the digest is the sequence hash's
# part that reads every length); lf-shard index writes it again. A summary
# beside another index.lfx (the seed's other lengths) is refused, naming
# lf-shard index, rather than planned from.
mkdir "$WORK/nosum" && cp "$WORK/io/index-only.lfi" "$WORK/io/index.lfx" "$WORK/nosum/"
"$LF_BIN/lf-plan" "$WORK/nosum" --seed 5 --world 8 --json >"$WORK/nosum.json" 2>/dev/null ||
  fail "lf-plan on an index-only dataset without its summary"
same_plans "$WORK/io.json" "$WORK/nosum.json" "without index-summary.lfx the same:" ||
  fail "the plans with and without the summary differ"
fingerprint() {   # DIR: lf-server's fingerprint line for it (stopped once planned)
  LF_TEST_STARTUP_HOLD_MS=600000 "$LF_BIN/lf-server" --endpoint "$EP" --data "$1" --world 8 \
    --ranks 0 --seed 5 >"$WORK/fp.log" 2>&1 &
  local pid=$!
  for _ in $(seq 300); do grep -q "plan fingerprint" "$WORK/fp.log" && break; sleep 0.1; done
  kill "$pid"; wait "$pid" || true
  grep -o "plan fingerprint [0-9a-f]*" "$WORK/fp.log" || { cat "$WORK/fp.log" >&2; echo none; }
}
a=$(fingerprint "$WORK/io"); b=$(fingerprint "$WORK/nosum")
[[ $a == "plan fingerprint "* && $a == "$b" ]] ||
  fail "lf-server's fingerprint with the summary ($a) is not the one without ($b)"
"$LF_BIN/lf-shard" index "$WORK/nosum" >/dev/null || fail "lf-shard index on an index-only dataset"
cmp "$WORK/io/index-summary.lfx" "$WORK/nosum/index-summary.lfx" ||
  fail "lf-shard index wrote another summary than lf-shard synth"
"$LF_BIN/lf-shard" synth tokens --index-only --out "$WORK/io6" --samples 200000 --seed 6 \
  >/dev/null 2>&1 || fail "lf-shard synth --index-only --seed 6"
cp "$WORK/io6/index-summary.lfx" "$WORK/nosum/"
out=$("$LF_BIN/lf-plan" "$WORK/nosum" --world 8 2>&1) && fail "lf-plan took a summary of other lengths"
[[ $out == *"index-summary.lfx: written for another index.lfx"*"lf-shard index DIR"* ]] ||
  fail "a summary of other lengths: $out"
echo "without its summary the same plan and $a; one of other lengths refused: ok"

# lf-server starts, serves, and refuses the first batch naming the dataset.
"$LF_BIN/lf-server" --endpoint "$EP" --data "$WORK/io" --world 1 >"$WORK/server.log" 2>&1 &
PIDS+=($!)
rc=0
"$LF_BIN/lf-rank-loop" --endpoint "$EP" --rank 0 --world 1 --max-batches 1 --no-digest \
  >"$WORK/client.log" 2>&1 || rc=$?
wait "${PIDS[-1]}" || true
grep -q "lf-server: serving" "$WORK/server.log" || { show_logs +1 "$WORK/server.log"; fail "the server did not serve"; }
want="index-only.lfi: block [0-9]*: an index-only dataset describes its 200000 samples but holds none of their bytes"
[[ $rc -ne 0 ]] && grep -q "$want" "$WORK/client.log" && grep -q "error: read: .*$want" "$WORK/server.log" ||
  { show_logs +1 "$WORK/server.log" "$WORK/client.log"; fail "a batch of the index-only dataset was not refused (client exit $rc)"; }
echo "lf-server: served the index-only dataset's plan, refused its first batch: ok"

# A malformed description names its line; images have no --index-only.
sed -i 's/^len-min .*/len-min many/' "$WORK/io/index-only.lfi"
out=$("$LF_BIN/lf-plan" "$WORK/io" --world 8 2>&1) && fail "lf-plan took a malformed description"
[[ $out == *"index-only.lfi: line 7: "* ]] || fail "malformed description: $out"
out=$("$LF_BIN/lf-shard" synth images --index-only --out "$WORK/img" --samples 10 2>&1) &&
  fail "synth images --index-only was taken"
[[ $out == *"--index-only"* ]] || fail "synth images --index-only: $out"
echo "malformed description and images refused: ok"
