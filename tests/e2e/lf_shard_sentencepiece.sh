#!/usr/bin/env bash
# Text through a SentencePiece model: a tiny unigram model is trained here
# on fixture text (Debian's python3-sentencepiece), the text JSONL (plain
# and gzip, two files) goes through tools/lf-shard/sp_tokenize.py into
# `lf-shard create tokens --in -`, and the dataset holds exactly the ids the
# library gives for each line, encoded one by one in this script. A line
# without the text field is named FILE:LINE and leaves no dataset.
source "$(dirname "$0")/../data/lf_shard/helpers.sh"
"$PY" -c 'import sentencepiece' 2>/dev/null ||
  { echo "skip: $PY with sentencepiece (python3-sentencepiece) is needed"; exit 77; }
sp_tokenize=$root/tools/lf-shard/sp_tokenize.py
cd "$tmp" || exit 1

"$PY" - <<'EOF' || fail "making the model and the text"
import json, random
import sentencepiece as spm

r = random.Random(3)
words = ("the data loader reads shards of tokens from disk and every rank gets a batch "
         "whose cost is balanced naïve façade Grüße 東京 😀").split()
def line():
    return " ".join(r.choice(words) for _ in range(r.randint(0, 60)))
with open("train.txt", "w") as f:
    for _ in range(3000):
        f.write(line() + "\n")
spm.SentencePieceTrainer.train(input="train.txt", model_prefix="m", vocab_size=60,
                               character_coverage=1.0, num_threads=1, minloglevel=2)
sp = spm.SentencePieceProcessor(model_file="m.model")
docs = [line() for _ in range(150)] + [""]
for name, part in (("a.jsonl", docs[:80]), ("b.jsonl", docs[80:])):
    with open(name, "w") as f:
        for i, t in enumerate(part):
            f.write(json.dumps({"id": i, "text": t}, ensure_ascii=i % 2 == 0) + "\n")
with open("want.jsonl", "w") as f:
    for t in docs:
        f.write(json.dumps({"tokens": [sp.bos_id()] + sp.encode(t) + [sp.eos_id()]}) + "\n")
EOF
gzip -k b.jsonl

set -o pipefail
"$PY" "$sp_tokenize" --model m.model --add-bos --add-eos a.jsonl b.jsonl.gz |
  "$LF_SHARD" create tokens --in - --dtype u16 --out out 2>out.err || fail "pipe: $(cat out.err)"
"$LF_SHARD" create tokens --in want.jsonl --out want 2>/dev/null || fail "want.jsonl"
got=$("$LF_SHARD" digest out)
want=$("$LF_SHARD" digest want)
[[ ${got%% *} == "${want%% *}" && $got == *": 151 samples" ]] ||
  fail "digest '$got', want '$want'"

sed -i '7s/"text"/"txt"/' a.jsonl
rc=0
"$PY" "$sp_tokenize" --model m.model a.jsonl 2>bad.err |
  "$LF_SHARD" create tokens --in - --out bad 2>>bad.err || rc=$?
[[ $rc == 1 ]] || fail "bad line: exit $rc"
grep -q "^sp_tokenize: a.jsonl:7: no string field 'text'" bad.err || fail "bad line: $(cat bad.err)"
[[ ! -e bad ]] || fail "bad line left a dataset"
echo "sentencepiece: 151 documents token-exact, ${got%% *}"
