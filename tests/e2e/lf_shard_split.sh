#!/usr/bin/env bash
# lf-shard split: a held-out set made deterministically from one dataset.
# Held out exactly round(F x N); train and eval together are the source, each
# in the source's order (every sample's fields compared byte for byte); the
# same seed gives the same split whatever the source's or the outputs' block
# sizes, another seed another one; JPEG sizes survive; a damaged source block
# or a bad option leaves neither output behind.
source "$(dirname "$0")/../data/lf_shard/helpers.sh"
[[ -x "$PY" ]] || { echo "skip: $PY is needed"; exit 77; }

split() { "$LF_SHARD" split "$@" 2>"$tmp/split.err"; }
digest() { "$LF_SHARD" digest "$1" | cut -d' ' -f1; }
samples() { "$LF_SHARD" inspect "$1" | sed -n 's/^samples: \([0-9]*\).*/\1/p'; }

"$LF_SHARD" synth tokens --out "$tmp/src" --samples 120 --seed 4 --len-median 40 \
  --block-size 2K --threads 2 2>/dev/null || fail "synth tokens"
"$LF_SHARD" synth tokens --out "$tmp/src1" --samples 120 --seed 4 --len-median 40 \
  --block-size 0 --shard-size 8K --threads 2 2>/dev/null || fail "synth tokens, one a block"
[[ $(digest "$tmp/src") == $(digest "$tmp/src1") ]] || fail "the two layouts of one dataset differ"

split "$tmp/src" --fraction 0.3 --seed 9 --out-train "$tmp/tr" --out-eval "$tmp/ev" ||
  fail "split: $(cat "$tmp/split.err")"
grep -q "36 samples held out in $tmp/ev, 84 for training" "$tmp/split.err" ||
  fail "split's summary line: $(tail -1 "$tmp/split.err")"
[[ $(samples "$tmp/ev") == 36 && $(samples "$tmp/tr") == 84 ]] ||
  fail "held out $(samples "$tmp/ev"), kept $(samples "$tmp/tr"); want 36 and 84"

# Train and eval are the source, interleaved in its order.
"$PY" - "$tmp" <<'PYEOF' || exit 1
import os, subprocess, sys
L, tmp = os.environ["LF_SHARD"], sys.argv[1]
def sample(ds, i):
    return subprocess.run([L, "cat", os.path.join(tmp, ds), str(i), "--raw", "tokens"],
                          capture_output=True, check=True).stdout
tr = [sample("tr", i) for i in range(84)]
ev = [sample("ev", i) for i in range(36)]
t = e = 0
for i in range(120):
    s = sample("src", i)
    if t < len(tr) and tr[t] == s:
        t += 1
    elif e < len(ev) and ev[e] == s:
        e += 1
    else:
        sys.exit("FAIL: source sample %d is neither train's %d-th nor eval's %d-th" % (i, t, e))
print("train and eval together are the source, in order (%d + %d)" % (t, e))
PYEOF

# Deterministic: another source layout and other output blocks, same split.
split "$tmp/src1" --fraction 0.3 --seed 9 --out-train "$tmp/tr1" --out-eval "$tmp/ev1" \
  --block-size 0 || fail "split of the other layout: $(cat "$tmp/split.err")"
[[ $(digest "$tmp/tr") == $(digest "$tmp/tr1") && $(digest "$tmp/ev") == $(digest "$tmp/ev1") ]] ||
  fail "the same seed split two layouts of one dataset differently"
split "$tmp/src" --fraction 0.3 --seed 10 --out-train "$tmp/tr2" --out-eval "$tmp/ev2" ||
  fail "split, seed 10"
[[ $(digest "$tmp/ev") != $(digest "$tmp/ev2") ]] || fail "seeds 9 and 10 held out the same samples"

# Images: the JPEG's size (the cost input) is carried over.
"$LF_SHARD" synth images --out "$tmp/img" --samples 12 --seed 1 --max-side 96 \
  --threads 2 2>/dev/null || fail "synth images"
split "$tmp/img" --fraction 0.5 --out-train "$tmp/itr" --out-eval "$tmp/iev" ||
  fail "split images: $(cat "$tmp/split.err")"
"$LF_SHARD" verify "$tmp/iev" >/dev/null || fail "verify of the held-out images"
want=$("$LF_SHARD" cat "$tmp/img" 0 | sed -n 's/^image.*: //p')
got=$("$LF_SHARD" cat "$tmp/iev" 0 | sed -n 's/^image.*: //p')
got2=$("$LF_SHARD" cat "$tmp/itr" 0 | sed -n 's/^image.*: //p')
[[ -n $want && ($got == "$want" || $got2 == "$want") ]] ||
  fail "image 0 is '$want' in the source, '$got' / '$got2' after the split"

# Errors: nothing left under either output name.
gone() { for d; do [[ ! -e $d/manifest.lfm ]] || fail "$d has a manifest after a failed split"; done; }
split "$tmp/src" --fraction 1 --out-train "$tmp/x1" --out-eval "$tmp/x2"
[[ $? == 2 ]] || fail "--fraction 1: want exit 2"
split "$tmp/src" --fraction 0.2 --out-train "$tmp/x1" --out-eval "$tmp/x1"
[[ $? == 2 ]] || fail "one directory for both outputs: want exit 2"
split "$tmp/src" --fraction 0.001 --out-train "$tmp/x1" --out-eval "$tmp/x2"
[[ $? == 1 ]] && grep -q "one side would be empty" "$tmp/split.err" ||
  fail "a fraction that holds out nothing: $(cat "$tmp/split.err")"
cp -r "$tmp/src" "$tmp/bad"
shard=$(ls "$tmp/bad"/*.lfs | head -1)
printf '\xff\xff\xff\xff' | dd of="$shard" bs=1 seek=20000 conv=notrunc status=none
split "$tmp/bad" --fraction 0.3 --out-train "$tmp/x1" --out-eval "$tmp/x2"
[[ $? == 1 ]] && grep -q "block" "$tmp/split.err" || fail "a damaged block: $(cat "$tmp/split.err")"
gone "$tmp/x1" "$tmp/x2"
[[ ! -e $tmp/x1 && ! -e $tmp/x2 ]] || fail "a failed split left $(ls -d "$tmp"/x* 2>/dev/null)"
echo "PASS"
