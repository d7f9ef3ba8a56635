#!/usr/bin/env bash
# Fine-tuning fields in Python (issue 26 item 5): the corpus of
# finetune_lib.sh served in the pack (rows of 128), pad and micro-batch
# layouts (rows capped at 192 tokens; the long documents cut into pieces in
# each) to a levelfeed.Loader. Each batch dict holds loss_mask and labels
# shaped as the tokens and prompt_len [n]; pack batches max_seqlen, the
# longest cu_seqlens segment; batch.micro_batches() cuts the fields with
# their micro-batch. Per token: loss_mask == (position in the document >=
# prompt_len), labels as in the JSONL, 0 in padding; every token once.
source "$(dirname "$0")/server_lib.sh"
source "$(dirname "$0")/python_lib.sh"
source "$(dirname "$0")/finetune_lib.sh"

check() {   # LAYOUT: one epoch through the Loader, held against the JSONL
  "$PY" - "$EP" "$WORK/ft.jsonl" "$1" <<'PYEOF' || fail "$1: the fields do not match the JSONL"
import json, sys
import levelfeed

ep, jsonl, layout = sys.argv[1:]
docs = [json.loads(l) for l in open(jsonl)]
seen = {}

def piece(i, off, toks, mask, labels, prompt, where):
    """Sample i's piece from token off: toks, mask and labels as lists."""
    d = docs[i]
    assert toks == d["tokens"][off:off + len(toks)], f"{where}: document {i} at {off}: tokens"
    assert prompt == d["prompt_len"], f"{where}: document {i}: prompt_len {prompt}"
    want = [int(off + k >= prompt) for k in range(len(toks))]
    assert mask == want, f"{where}: document {i} at {off}: loss_mask {mask}, want {want}"
    assert labels == d["labels"][off:off + len(toks)], f"{where}: document {i}: labels"
    seen.setdefault(i, []).append((off, len(toks)))

def rows(mb, where):
    """Pad rows: each row's sample, then 0 in every field."""
    offs = mb["sample_offsets"].tolist() if "sample_offsets" in mb else [0] * len(mb["lengths"])
    for r, (i, n) in enumerate(zip(mb["sample_ids"].tolist(), mb["lengths"].tolist())):
        tok, m, lab = (mb[k][r].tolist() for k in ("tokens", "loss_mask", "labels"))
        piece(i, offs[r], tok[:n], m[:n], lab[:n], mb["prompt_len"][r].item(), where)
        assert not any(m[n:]) and not any(lab[n:]), f"{where}: row {r}: padding not 0"

lo = levelfeed.Loader(endpoint=ep, rank=0, world_size=1)
for b in lo:
    where = f"{layout} step {b.step}"
    if layout == "pack":
        flat = {k: b[k].reshape(-1).tolist() for k in ("tokens", "loss_mask", "labels")}
        cu, ids = b["cu_seqlens"].tolist(), b["sample_ids"].tolist()
        offs, prompt = b["sample_offsets"].tolist(), b["prompt_len"].tolist()
        assert b["max_seqlen"].ndim == 0, where
        assert int(b["max_seqlen"]) == max(e - a for a, e in zip(cu, cu[1:])), where
        k = 0
        for a, e in zip(cu, cu[1:]):
            doc = docs[ids[k]]["tokens"] if k < len(ids) else None
            if a == e:
                continue
            if doc is not None and flat["tokens"][a:e] == doc[offs[k]:offs[k] + e - a]:
                piece(ids[k], offs[k], flat["tokens"][a:e], flat["loss_mask"][a:e],
                      flat["labels"][a:e], prompt[k], where)
                k += 1
            else:     # a row's padding: 0 in every field
                assert not any(flat["tokens"][a:e] + flat["loss_mask"][a:e] + flat["labels"][a:e]), where
        assert k == len(ids), f"{where}: {k} of {len(ids)} samples found"
    else:
        mbs = b.micro_batches()
        assert ("micro" in b) == (layout == "micro"), where
        assert all("loss_mask" in m and "prompt_len" in m for m in mbs), where
        for mb in mbs:
            rows(mb, where)
    b.close()
lo.close()
cut = 0
for i, d in enumerate(docs):
    at = 0
    for off, n in sorted(seen.pop(i, [])):
        assert off == at, f"document {i}: piece at {off}, expected {at}"
        at, cut = at + n, cut + (off > 0)
    assert at == len(d["tokens"]), f"document {i}: {at} of {len(d['tokens'])} tokens"
assert cut, "no document was cut into pieces"
print(f"{layout}: {len(docs)} documents, every token once, {cut} later pieces, fields aligned")
PYEOF
}

start_server --data "$WORK/ds" --world 1 --epochs 1 --layout pack --seq-len 128 --seed 3
check pack
wait_server
start_server --data "$WORK/ds" --world 1 --epochs 1 --max-tokens 192 --seed 4
check pad
wait_server
start_server --data "$WORK/ds" --world 1 --epochs 1 --max-tokens 192 --micro-batches --seed 5
check micro
wait_server
check_python_leftovers
echo "ok: the Loader's batches carry loss_mask, labels, prompt_len (and max_seqlen) aligned"
