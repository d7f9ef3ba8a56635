#!/usr/bin/env bash
# lf-shard synth is deterministic: the same seed gives byte-identical files
# (whatever the thread count), another seed gives other bytes; a batch of
# wide samples stays within its memory bound; the length options hold; the
# cost statistics of a fixed synthetic dataset match the expected output
# file.
source "$(dirname "$0")/../data/lf_shard/helpers.sh"
expected="$root/tests/e2e/expected/lf_shard"
cd "$tmp" || exit 1

synth() {   # KIND DIR SEED THREADS [OPTIONS...]
  local kind=$1 dir=$2 seed=$3 threads=$4; shift 4
  "$LF_SHARD" synth "$kind" --out "$dir" --seed "$seed" --threads "$threads" "$@" 2>/dev/null ||
    fail "synth $kind --seed $seed --threads $threads $*"
}

same_files() {   # DIR_A DIR_B: same names, same bytes
  [[ "$(ls "$1")" == "$(ls "$2")" ]] || return 1
  for f in "$1"/*; do cmp -s "$f" "$2/$(basename "$f")" || return 1; done
}

check_kind() {   # KIND OPTIONS...
  local kind=$1; shift
  synth "$kind" "$kind-a" 3 1 "$@"
  synth "$kind" "$kind-b" 3 2 "$@"
  synth "$kind" "$kind-c" 4 2 "$@"
  same_files "$kind-a" "$kind-b" || fail "$kind: seed 3 with 1 and 2 threads differ"
  for f in "$kind-a"/*.lfs; do
    cmp -s "$f" "$kind-c/$(basename "$f")" && fail "$kind: seeds 3 and 4 give the same $(basename "$f")"
  done
  "$LF_SHARD" verify "$kind-a" >/dev/null || fail "$kind: verify"
}

check_kind tokens --samples 3000 --shard-size 1M
check_kind images --samples 24 --max-side 256 --block-size 64K
check_kind frames --samples 120 --dtype f16 --width 13
synth frames i16 1 2 --samples 50 --dtype i16
"$LF_SHARD" verify i16 >/dev/null || fail "frames i16: verify"

# The same seed gives the same values in every frame dtype: the f16 and i16
# datasets must hold numpy's conversion of the f32 one (round to nearest even;
# fixed point 1/1024), and cat must print f16 values as numpy reads them.
"$PY" -c 'import numpy' 2>/dev/null ||
  fail "numpy is needed for the frame dtype checks (python3-numpy: make test installs it)"
for t in f32 f16 i16; do synth frames conv-$t 5 2 --samples 6 --dtype $t --width 7; done
for i in 0 5; do
  for t in f32 f16 i16; do "$LF_SHARD" cat conv-$t $i --raw frames >raw-$t; done
  "$LF_SHARD" cat conv-f16 $i | grep '^frames' >cat-f16
  "$PY" - <<'PYEOF' || fail "frame dtype conversions of sample $i"
import numpy as np
f32 = np.fromfile("raw-f32", "<f4")
assert (np.fromfile("raw-f16", "<f2") == f32.astype("<f2")).all(), "f16"
i16 = np.rint(np.clip(f32, -32, 31.99) * 1024).astype("<i2")
assert (np.fromfile("raw-i16", "<i2") == i16).all(), "i16"
shown = open("cat-f16").read().split("first values:")[1].split()
want = ["%g" % v for v in np.fromfile("raw-f16", "<f2")[:8].astype(float)]
assert shown == want, (shown, want)
PYEOF
done

# A batch is sized from the largest sample the options allow: 64 samples of
# 4 MiB (16 frames of 65536 f32) were all generated before the writer took
# the first (a 304 MiB peak); batches are now at most 64 MiB (a 108 MiB
# peak here). Two threads: the writer's memory grows with them.
peak=$("$PY" - "$LF_SHARD" <<'PYEOF'
import resource, subprocess, sys
subprocess.run([sys.argv[1], "synth", "frames", "--out", "wide", "--samples", "64",
                "--width", "65536", "--len-min", "16", "--len-max", "16", "--threads", "2"],
               check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
PYEOF
) || fail "synth frames --width 65536"
[[ $peak -lt 200 ]] || fail "synth of 64 samples of 4 MiB peaked at $peak MiB, want < 200"
"$LF_SHARD" verify wide >/dev/null || fail "wide frames: verify"
rm -rf wide

# Length bounds: every sample's token count within [--len-min, --len-max].
synth tokens bounded 9 2 --samples 2000 --len-median 150 --len-min 100 --len-max 200
"$LF_SHARD" stats bounded --json | "$PY" -c '
import json, sys
s = json.load(sys.stdin)
assert s["samples"] == 2000 and s["p0"] >= 100 and s["max"] <= 200, s
assert s["p0"] == 100 and s["max"] == 200, "the clamps should be hit at sigma 1: %r" % s
' || fail "length bounds"

# A fixed dataset's statistics, text and JSON, against the expected output.
synth tokens stats 7 2 --samples 2000
{ "$LF_SHARD" stats stats; "$LF_SHARD" stats stats --json; } >stats.out 2>&1 ||
  fail "stats"
diff -u "$expected/synth_stats.txt" stats.out || fail "stats output differs from expected"
echo "synth: deterministic across threads, seeds differ, stats as expected"
