#!/usr/bin/env bash
# The fine-tuning corpus of e2e/server_finetune and e2e/python_finetune
# (sourced after server_lib.sh): $WORK/ft.jsonl, 90 prompt + answer
# documents, each with prompt_len, a loss_mask of 0 over the prompt and 1
# after it, and labels (-100 over the prompt, else the token); documents 3,
# 17 and 30 (700, 129 and 400 tokens) are longer than the rows served, their
# mask turning inside a later piece. $WORK/ds is its dataset, converted with
# the three fields.
/usr/bin/python3 - "$WORK/ft.jsonl" <<'PY'
import json, random, sys
r = random.Random(265)
long = {3: 700, 17: 129, 30: 400}
with open(sys.argv[1], "w") as f:
    for i in range(90):
        n = long.get(i, r.randint(1, 100))
        toks = [r.randrange(1, 50000) for _ in range(n)]   # 0 is the pad id
        p = r.choice([0, n, r.randint(0, n)])        # all answer, all prompt, or between
        if i in long:
            p = n // 2 + 1
        f.write(json.dumps({"tokens": toks, "prompt_len": p,
                            "loss_mask": [int(k >= p) for k in range(n)],
                            "labels": [-100 if k < p else t for k, t in enumerate(toks)]}) + "\n")
PY
"$LF_BIN/lf-shard" create tokens --in "$WORK/ft.jsonl" --out "$WORK/ds" --threads 1 \
  --field loss_mask:token:u8 --field labels:token:i32 --field prompt_len:sample \
  >"$WORK/create.log" 2>&1 || { cat "$WORK/create.log" >&2; fail "lf-shard create"; }
