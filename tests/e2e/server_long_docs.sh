#!/usr/bin/env bash
# Documents far longer than the context, served whole (issue 26 item 4):
# a JSON Lines corpus of many short documents and a few 4-20 rows long is
# converted WITHOUT --max-len and served with --layout pack --seq-len 256 to
# 4 real client processes over 2 epochs. Each long document arrives as
# consecutive pieces (sample_offsets, positions going on across the cut,
# cu_seqlens a segment a piece), and the tokens the clients received,
# put back together by sample id and offset, equal every input document,
# each once an epoch (lf-rank-loop --tokens: the pieces as checked against
# the shards; compared here with the JSONL itself). lf-plan and the
# server's start-up say nothing is dropped; with --overflow drop, both say
# how many samples and what share of the tokens are left out, and the
# clients get exactly the other documents.
source "$(dirname "$0")/server_lib.sh"

SEQ=256
/usr/bin/python3 - "$WORK/docs.jsonl" <<'PY'
import json, random, sys
r = random.Random(26)
long = {7: 5000, 40: 1500, 41: 257, 99: 3 * 256, 150: 2049}   # ids: line numbers
with open(sys.argv[1], "w") as f:
    for i in range(200):
        n = long.get(i, r.randint(1, 200))
        f.write(json.dumps({"tokens": [r.randrange(50000) for _ in range(n)]}) + "\n")
PY
"$LF_BIN/lf-shard" create tokens --in "$WORK/docs.jsonl" --out "$WORK/ds" --threads 1 \
  >"$WORK/create.log" 2>&1 || { cat "$WORK/create.log" >&2; fail "lf-shard create"; }

# Every token of every document, once an epoch: the clients' pieces, by
# sample id (the line) and offset, joined and compared with the line.
check_tokens() {   # TAG EPOCHS [DROPPED_IDS...]
  /usr/bin/python3 - "$WORK/docs.jsonl" "$2" "${@:3}" "$WORK/$1".tok.r*.txt <<'PY'
import json, sys
docs = [json.loads(l)["tokens"] for l in open(sys.argv[1])]
epochs = int(sys.argv[2])
dropped = {int(a) for a in sys.argv[3:] if not a.endswith(".txt")}
got = {}
for path in (a for a in sys.argv[3:] if a.endswith(".txt")):
    for line in open(path):
        e, i, off, *toks = map(int, line.split())
        got.setdefault((e, i), []).append((off, toks))
for e in range(epochs):
    for i, doc in enumerate(docs):
        pieces = sorted(got.pop((e, i), []))
        if i in dropped:
            assert not pieces, f"epoch {e}: document {i} was to be dropped, got {len(pieces)} piece(s)"
            continue
        at, joined = 0, []
        for off, toks in pieces:
            assert off == at, f"epoch {e}: document {i}: piece at {off}, expected {at} (lost or twice)"
            joined += toks
            at += len(toks)
        assert joined == doc, f"epoch {e}: document {i}: {len(joined)} tokens back of {len(doc)}"
assert not got, f"samples outside the corpus or the epochs: {sorted(got)[:5]}"
print(f"{len(docs) - len(dropped)} documents, every token once in each of {epochs} epochs")
PY
}

# lf-plan: the long documents are split, nothing dropped.
"$LF_BIN/lf-plan" "$WORK/ds" --layout pack --seq-len $SEQ --world 4 >"$WORK/plan.txt" \
  2>"$WORK/plan.err" || { cat "$WORK/plan.err" >&2; fail "lf-plan"; }
grep -q "5 samples (.* of the tokens) are longer than a row (--seq-len, --max-tokens) of 256 tokens: split into 40 pieces" "$WORK/plan.err" ||
  fail "lf-plan does not say the long documents are split: $(cat "$WORK/plan.err")"
grep -q "tokens dropped    0 (every token placed once" "$WORK/plan.txt" ||
  fail "lf-plan: tokens dropped is not 0: $(grep dropped "$WORK/plan.txt")"

start_server --data "$WORK/ds" --world 4 --epochs 2 --layout pack --seq-len $SEQ --seed 5
run_clients split 4 --verify "$WORK/ds" --tokens "$WORK/split.tok.r{r}.txt"
wait_server
grep -q "nothing dropped: 0 samples, 0 tokens" "$WORK/server.log" ||
  fail "the server's start-up does not say nothing is dropped: $(cat "$WORK/server.log")"
grep -q "@256" "$WORK"/split.r*.txt || fail "no piece (ID@OFFSET) in the clients' streams"
check_tokens split 2
check_no_leftovers

# pad, with micro-batches: --max-tokens 512 cuts the long documents into
# pieces of 512 (their offsets in sample_offsets), each a row.
start_server --data "$WORK/ds" --world 4 --epochs 1 --max-tokens 512 --micro-batches
run_clients pad 4 --verify "$WORK/ds" --tokens "$WORK/pad.tok.r{r}.txt"
wait_server
grep -q "@512" "$WORK"/pad.r*.txt || fail "pad: no piece (ID@OFFSET) in the clients' streams"
check_tokens pad 1
check_no_leftovers

# --overflow drop: the 5 long documents are left out, and said so.
"$LF_BIN/lf-plan" "$WORK/ds" --layout pack --seq-len $SEQ --world 4 --overflow drop \
  >"$WORK/drop.txt" 2>"$WORK/drop.err" || { cat "$WORK/drop.err" >&2; fail "lf-plan --overflow drop"; }
total=$(/usr/bin/python3 -c 'import json,sys; print(sum(len(json.loads(l)["tokens"]) for l in open(sys.argv[1])))' "$WORK/docs.jsonl")
long=$((5000 + 1500 + 257 + 768 + 2049))
pct=$(/usr/bin/python3 -c "print(f'{100 * $long / $total:.2f}')")
grep -qF -- "--overflow drop drops 5 samples, $long tokens ($pct % of the tokens)" "$WORK/drop.err" ||
  fail "lf-plan --overflow drop: want 5 samples, $long tokens ($pct %): $(cat "$WORK/drop.err")"
grep -q "tokens dropped    $long (" "$WORK/drop.txt" ||
  fail "lf-plan --overflow drop: $(grep dropped "$WORK/drop.txt")"
start_server --data "$WORK/ds" --world 4 --epochs 1 --layout pack --seq-len $SEQ --overflow drop
run_clients drop 4 --verify "$WORK/ds" --tokens "$WORK/drop.tok.r{r}.txt"
wait_server
grep -qF "leaves out 5 of the 200 samples, $pct % of the tokens" "$WORK/server.log" ||
  fail "the server does not say what it drops: $(cat "$WORK/server.log")"
grep -qF "dropped 5 sample(s) or piece(s), $long tokens ($pct % of the tokens)" "$WORK/server.log" ||
  fail "the server's plan line does not say what it drops: $(cat "$WORK/server.log")"
check_tokens drop 1 7 40 41 99 150
check_no_leftovers
echo "ok: split delivers every token once an epoch; drop says what it leaves out"
