#!/usr/bin/env bash
# Fine-tuning fields arrive aligned with their tokens (issue 26 item 5): a
# JSON Lines corpus of prompt + answer documents, each with prompt_len, a
# loss_mask of 0 over the prompt and 1 after it, and labels (-100 over the
# prompt, else the token), a few documents longer than a row, converted with
# --field loss_mask:token:u8 --field labels:token:i32 --field
# prompt_len:sample and served to 2 real client processes in the pack layout
# (rows of 128: the long documents cut into pieces across rows), the pad
# layout and pad with --micro-batches (rows capped at 192 tokens: cut too).
# The clients (lf-rank-loop --verify) check every cell of every field
# against the shards and write what they received; here each piece is held
# against the JSONL: its tokens, its prompt_len, and per token
# loss_mask == (position in the document >= prompt_len) and the labels,
# every token once an epoch. lf-rank-loop also checks pack's max_seqlen.
source "$(dirname "$0")/server_lib.sh"

/usr/bin/python3 - "$WORK/ft.jsonl" <<'PY'
import json, random, sys
r = random.Random(265)
long = {3: 700, 17: 129, 30: 400}
with open(sys.argv[1], "w") as f:
    for i in range(90):
        n = long.get(i, r.randint(1, 100))
        toks = [r.randrange(50000) for _ in range(n)]
        p = r.choice([0, n, r.randint(0, n)])        # all answer, all prompt, or between
        if i in long:
            p = n // 2 + 1                           # the mask turns inside a later piece
        f.write(json.dumps({"tokens": toks, "prompt_len": p,
                            "loss_mask": [int(k >= p) for k in range(n)],
                            "labels": [-100 if k < p else t for k, t in enumerate(toks)]}) + "\n")
PY
"$LF_BIN/lf-shard" create tokens --in "$WORK/ft.jsonl" --out "$WORK/ds" --threads 1 \
  --field loss_mask:token:u8 --field labels:token:i32 --field prompt_len:sample \
  >"$WORK/create.log" 2>&1 || { cat "$WORK/create.log" >&2; fail "lf-shard create"; }

# Every piece a client received, against the JSONL.
check_fields() {   # TAG
  /usr/bin/python3 - "$WORK/ft.jsonl" "$WORK/$1".tok.r*.txt <<'PY'
import json, sys
docs = [json.loads(l) for l in open(sys.argv[1])]
got, cut = {}, 0
for path in sys.argv[2:]:
    for line in open(path):
        head, *fields = line.split(" | ")
        e, i, off, *toks = map(int, head.split())
        f = {x.split()[0]: list(map(int, x.split()[1:])) for x in fields}
        d = docs[i]
        assert toks == d["tokens"][off:off + len(toks)], f"document {i} at {off}: tokens differ"
        assert f["prompt_len"] == [d["prompt_len"]], f"document {i} at {off}: prompt_len {f['prompt_len']}"
        want = [int(off + k >= d["prompt_len"]) for k in range(len(toks))]
        assert f["loss_mask"] == want, f"document {i} at {off}: loss_mask {f['loss_mask']}, want {want}"
        assert f["labels"] == d["labels"][off:off + len(toks)], f"document {i} at {off}: labels differ"
        got.setdefault(i, []).append((off, len(toks)))
        cut += off > 0
for i, d in enumerate(docs):
    at = 0
    for off, n in sorted(got.pop(i, [])):
        assert off == at, f"document {i}: piece at {off}, expected {at} (lost or twice)"
        at += n
    assert at == len(d["tokens"]), f"document {i}: {at} of {len(d['tokens'])} tokens arrived"
assert not got and cut, f"outside the corpus: {sorted(got)}; pieces after the first: {cut}"
print(f"{len(docs)} documents, every token once, {cut} later pieces, fields aligned")
PY
}

start_server --data "$WORK/ds" --world 2 --epochs 1 --layout pack --seq-len 128 --seed 3
run_clients pack 2 --verify "$WORK/ds" --tokens "$WORK/pack.tok.r{r}.txt"
wait_server
check_fields pack || fail "pack: the fields do not match the JSONL"

start_server --data "$WORK/ds" --world 2 --epochs 1 --max-tokens 192 --seed 4
run_clients pad 2 --verify "$WORK/ds" --tokens "$WORK/pad.tok.r{r}.txt"
wait_server
check_fields pad || fail "pad: the fields do not match the JSONL"

start_server --data "$WORK/ds" --world 2 --epochs 1 --max-tokens 192 --micro-batches --seed 5
run_clients micro 2 --verify "$WORK/ds" --tokens "$WORK/micro.tok.r{r}.txt"
wait_server
check_fields micro || fail "micro-batches: the fields do not match the JSONL"
check_no_leftovers
echo "ok: tokens, loss_mask, labels and prompt_len aligned in pack, pad and micro-batches"
