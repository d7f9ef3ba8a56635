#!/usr/bin/env bash
# A corpus of 4 JSONL files converts to the same samples however it is
# given: repeated --in, a directory, a glob, .zst and .gz copies (one file
# per part, or all parts as one multi-frame / multi-member file), stdin, and
# a mix. A bad line in the third file names that file and line, and nothing
# is left under the output name. A long line takes memory in proportion to
# it, and one that cannot be held says so, naming FILE:LINE. --max-len
# splits, truncates or drops the longer documents and says what it changed.
source "$(dirname "$0")/../data/lf_shard/helpers.sh"
cd "$tmp" || exit 1

# Four parts; part 3 (in a subdirectory) holds the first id above 65535, so
# the u16 guess fails in the third file and the inputs are all read again.
mkdir -p corpus/part-2
"$PY" - <<'EOF'
import json, random
r = random.Random(7)
names = ["corpus/part-0.jsonl", "corpus/part-1.jsonl", "corpus/part-2/x.jsonl",
         "corpus/part-3.jsonl"]
for k, name in enumerate(names):
    with open(name, "w") as f:
        for i in range(40 + 10 * k):
            n = r.randint(0, 300 if i else 3000)
            top = 70000 if (k == 2 and i == 5) else 50000
            f.write(json.dumps({"id": "%d-%d" % (k, i), "meta": {"n": [n, None, 1.5]},
                                "tokens": [r.randint(0, top) for _ in range(n)]}) + "\n")
            if i % 7 == 0:
                f.write("\n")     # blank lines are skipped
EOF
echo 'not json' >corpus/.hidden      # names starting with '.' are left out
parts=(corpus/part-0.jsonl corpus/part-1.jsonl corpus/part-2/x.jsonl corpus/part-3.jsonl)
lines=$(cat "${parts[@]}" | grep -c .)
mkdir -p zst gz
for i in 0 1 2 3; do
  zstd -q -c "${parts[$i]}" >zst/part-$i.jsonl.zst
  gzip -c "${parts[$i]}" >gz/part-$i.jsonl.gz
done
cat zst/part-*.jsonl.zst >all.jsonl.zst
cat gz/part-*.jsonl.gz >all.jsonl.gz

convert() {   # NAME ARGS...: converts, prints the digest line's hash
  local name=$1
  shift
  "$LF_SHARD" create tokens --out "out-$name" --block-size 4K "$@" 2>"$name.err" ||
    fail "create $name: $(cat "$name.err")"
  local d
  d=$("$LF_SHARD" digest "out-$name") || fail "digest $name"
  [[ $d == *": $lines samples" ]] || fail "$name: $d (want $lines samples)"
  echo "${d%% *}"
}

want=$(convert repeated --in "${parts[0]}" --in "${parts[1]}" --in "${parts[2]}" --in "${parts[3]}")
grep -q "part-2/x.jsonl:7: token id above 65535; writing again with u32 ids" repeated.err ||
  fail "repeated: no restart at part-2/x.jsonl:7: $(cat repeated.err)"
check() {   # NAME ARGS...: the same digest as the repeated --in conversion
  local got
  got=$(convert "$@") || exit 1
  [[ $got == "$want" ]] || fail "$1: digest $got, want $want"
}
check directory --in corpus
check glob --in 'corpus/part-*'
check zst --in 'zst/*.zst'
check gz --in gz
check zst-frames --in all.jsonl.zst
check gz-members --in all.jsonl.gz
check stdin --in - <all.jsonl.zst
check mixed --in "${parts[0]}" --in zst/part-1.jsonl.zst --in gz/part-2.jsonl.gz --in "${parts[3]}"
check threads-1 --in corpus --threads 1 --block-size 0

# The first sample of the second file is the second file's first line.
first=$("$PY" -c 'import json,sys; print(" ".join(map(str, json.loads(open(sys.argv[1]).readline())["tokens"])))' "${parts[1]}")
n0=$(grep -c . "${parts[0]}")
got=$("$LF_SHARD" cat out-repeated "$n0" | sed -n 's/^tokens (tokens_u32): [0-9]* tokens: *//p')
[[ $got == "$first" ]] || fail "sample $n0 is not ${parts[1]}'s first line"

# A bad line in the third file, plain and compressed: named, nothing left.
cp -r corpus bad
sed -i '5s/\]}$/, "x"]}/' bad/part-2/x.jsonl
zstd -q -c bad/part-2/x.jsonl >bad/x.jsonl.zst
gzip -c bad/part-2/x.jsonl >bad/x.jsonl.gz
for third in bad/part-2/x.jsonl bad/x.jsonl.zst bad/x.jsonl.gz; do
  rc=0
  "$LF_SHARD" create tokens --in "${parts[0]}" --in "${parts[1]}" --in "$third" \
    --in "${parts[3]}" --out out-bad 2>bad.err || rc=$?
  [[ $rc == 1 ]] || fail "bad line in $third: exit $rc"
  grep -q "^lf-shard: $third:5: 'tokens'\[[0-9]*\]: expected an integer token id" bad.err ||
    fail "bad line in $third: $(cat bad.err)"
  [[ ! -e out-bad ]] || fail "bad line in $third left out-bad: $(ls -A out-bad)"
done

# A 23 MB line: the old jansson parser took 190 MB for it, 8x; the peak
# must stay under 3x (the line, its ids, the writer's copy). With too little
# memory to hold it: out of memory at long.jsonl:1, nothing left. Not under
# ASan, whose shadow memory is in the peak and which needs the address space.
if ! ldd "$LF_SHARD" | grep -q libasan; then
  "$PY" -c '
import sys
sys.stdout.write("{\"tokens\": [" + ",".join(str(i % 60000) for i in range(4000000)) + "]}\n")' >long.jsonl
  size=$(stat -c %s long.jsonl)
  /usr/bin/time -f '%M' -o long.rss "$LF_SHARD" create tokens --in long.jsonl --out out-long \
    --threads 1 2>long.err || fail "long line: $(cat long.err)"
  rss=$(( $(tail -1 long.rss) * 1024 ))
  echo "long line: $size bytes, peak RSS $rss bytes"
  (( rss < 3 * size )) || fail "a $size-byte line took $rss bytes (want < 3x)"
  rc=0
  (ulimit -v 30000; "$LF_SHARD" create tokens --in long.jsonl --out out-oom --threads 1) \
    2>oom.err || rc=$?
  [[ $rc == 1 ]] || fail "out of memory: exit $rc"
  grep -q '^lf-shard: long.jsonl:1: out of memory' oom.err || fail "out of memory: $(cat oom.err)"
  [[ ! -e out-oom ]] || fail "out of memory left out-oom"
fi

# --max-len 4 with each --overflow policy: the samples and the summary line.
printf '{"tokens": [%s]}\n' "1,2,3,4,5,6,7,8,9,10" "11,12,13" "" "21,22,23,24,25,26,27" >ml.jsonl
declare -A kept=([split]="1 2 3 4|5 6 7 8|9 10|11 12 13||21 22 23 24|25 26 27"
                 [truncate]="1 2 3 4|11 12 13||21 22 23 24" [drop]="11 12 13|")
declare -A said=([split]="split into 5 samples, no token lost"
                 [truncate]="truncated: 9 tokens lost (45.00% of the tokens)"
                 [drop]="dropped: 17 tokens lost (85.00% of the tokens)")
for p in split truncate drop; do
  "$LF_SHARD" create tokens --in ml.jsonl --max-len 4 --overflow "$p" --out "out-ml-$p" \
    2>ml.err || fail "--overflow $p: $(cat ml.err)"
  grep -qF -- "--max-len 4 --overflow $p: 2 of 4 documents (50.00%, holding 85.00% of the tokens) were longer; ${said[$p]}" ml.err ||
    fail "--overflow $p said: $(cat ml.err)"
  n=$("$LF_SHARD" digest "out-ml-$p" | sed 's/.*: \([0-9]*\) samples/\1/')
  got=$(for ((i = 0; i < n; i++)); do
          "$LF_SHARD" cat "out-ml-$p" "$i" | sed -n 's/^tokens (tokens_u16): [0-9]* tokens: *//p'
        done | paste -sd '|')
  [[ $got == "${kept[$p]}" ]] || fail "--overflow $p kept '$got', want '${kept[$p]}'"
done

echo "corpus: $lines samples, digest $want in every form"
