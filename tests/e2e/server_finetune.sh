#!/usr/bin/env bash
# Fine-tuning fields arrive aligned with their tokens (issue 26 item 5): a
# JSON Lines corpus of prompt + answer documents (finetune_lib.sh), a few
# longer than a row, converted with --field loss_mask:token:u8 --field
# labels:token:i32 --field prompt_len:sample and served to 2 real client
# processes in the pack layout (rows of 128: the long documents cut into
# pieces across rows), the pad
# layout and pad with --micro-batches (rows capped at 192 tokens: cut too).
# The clients (lf-rank-loop --verify) check every cell of every field
# against the shards and write what they received; here each piece is held
# against the JSONL: its tokens, its prompt_len, and per token
# loss_mask == (position in the document >= prompt_len) and the labels,
# every token once an epoch. lf-rank-loop also checks pack's max_seqlen.
source "$(dirname "$0")/server_lib.sh"

source "$(dirname "$0")/finetune_lib.sh"
"$LF_BIN/lf-shard" cat "$WORK/ds" 3 >"$WORK/cat.txt" || fail "lf-shard cat"
grep -q "^loss_mask (per_token_u8): 700 values: 0 0 " "$WORK/cat.txt" &&
  grep -q "^labels (per_token_i32): 700 values: -100 " "$WORK/cat.txt" &&
  grep -q "^prompt_len (label_i64): 351$" "$WORK/cat.txt" ||
  fail "lf-shard cat does not show the fields: $(cat "$WORK/cat.txt")"

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
