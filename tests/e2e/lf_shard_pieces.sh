#!/usr/bin/env bash
# Pieces of documents split at conversion say where they start (issue 26
# item 4): the fine-tuning corpus of finetune_lib.sh converted with
# --max-len 128 (format version 2). Document 3 (700 tokens) becomes samples
# 3..8; `lf-shard cat` names sample 6 as document 3's tokens 384..511, with
# its slice of loss_mask and its document's prompt_len, and shows no piece
# line for a whole document. The index entry's doc_offset behind it is
# checked by the reader against the piece before (unit/shard_per_token).
source "$(dirname "$0")/server_lib.sh"
source "$(dirname "$0")/finetune_lib.sh"

"$LF_BIN/lf-shard" create tokens --in "$WORK/ft.jsonl" --out "$WORK/ds-split" --max-len 128 \
  --field loss_mask:token:u8 --field labels:token:i32 --field prompt_len:sample \
  >"$WORK/split.log" 2>&1 || { cat "$WORK/split.log" >&2; fail "lf-shard create --max-len"; }
"$LF_BIN/lf-shard" cat "$WORK/ds-split" 6 >"$WORK/cat6.txt" || fail "lf-shard cat"
grep -q "^piece of document 3: its tokens 384..511$" "$WORK/cat6.txt" &&
  grep -q "^loss_mask (per_token_u8): 128 values: 1 1 " "$WORK/cat6.txt" &&
  grep -q "^prompt_len (label_i64): 351$" "$WORK/cat6.txt" ||
  fail "lf-shard cat does not show the piece: $(cat "$WORK/cat6.txt")"
"$LF_BIN/lf-shard" cat "$WORK/ds-split" 9 >"$WORK/cat9.txt" || fail "lf-shard cat 9"
if grep -q "^piece of document" "$WORK/cat9.txt"; then
  fail "sample 9 (document 4, whole) is shown as a piece: $(cat "$WORK/cat9.txt")"
fi
"$LF_BIN/lf-shard" verify "$WORK/ds-split" >/dev/null || fail "lf-shard verify"
echo "ok: split pieces name their document and tokens"
