#!/usr/bin/env bash
# lf-shard verify against damage: a clean dataset passes; a single flipped
# byte at >= 1000 positions spread over every region of every file (each
# shard's header, every block, each index and footer, the manifest) and
# truncation at >= 100 positions must each give exit 1 (not a crash, not a
# usage error) with a message naming the damaged file and region (the block
# number for a block).
source "$(dirname "$0")/../data/lf_shard/helpers.sh"
[[ -x "$PY" ]] || { echo "skip: $PY is needed"; exit 77; }

ds="$tmp/ds"
"$LF_SHARD" synth tokens --out "$ds" --samples 300 --seed 2 --shard-size 200K \
  --block-size 16K --threads 2 2>/dev/null || fail "synth"
"$LF_SHARD" verify "$ds" >/dev/null || fail "verify of a clean dataset"

"$PY" - "$ds" <<'EOF' || exit 1
import os, random, subprocess, sys

L, ds = os.environ["LF_SHARD"], sys.argv[1]
rng = random.Random(11)
ALIGN, FOOTER = 4096, 64

# Under AddressSanitizer the leak check at exit doubles a run's cost: it runs
# on every 8th call only (harmless without a sanitizer).
runs = 0
quiet_env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
def verify():
    global runs
    runs += 1
    p = subprocess.run([L, "verify", ds], capture_output=True,
                       env=None if runs % 8 == 1 else quiet_env)
    return p.returncode, p.stderr.decode(errors="replace")

# Regions from `inspect --blocks`: block rows are "block shard offset stored ...".
out = subprocess.run([L, "inspect", ds, "--blocks"], capture_output=True, check=True).stdout.decode()
shard_table = out.split("\nshard  samples", 1)[1].split("\nsamples: ", 1)[0]
shard_files = [line.split()[-1] for line in shard_table.splitlines()[1:]]
rows = out.split("\nblock  shard  file_offset", 1)[1].splitlines()[1:]
regions = []          # (file, start, end, words the message must hold)
ends, local = {}, {}  # per shard: where its blocks end, blocks so far
for r in rows:
    b, shard, off, stored, raw, first, n = map(int, r.split())
    k = local.get(shard, 0)
    local[shard] = k + 1
    regions.append((shard_files[shard], off, off + stored, ["block %d " % k]))
    ends[shard] = off + stored
for shard, name in enumerate(shard_files):
    size = os.path.getsize(os.path.join(ds, name))
    regions.append((name, 0, ALIGN, ["header"]))
    regions.append((name, ends[shard], size - FOOTER, ["index"]))
    regions.append((name, size - FOOTER, size, ["footer"]))
msize = os.path.getsize(os.path.join(ds, "manifest.lfm"))
regions.append(("manifest.lfm", 0, msize, []))

def positions(start, end):
    """Both ends and the first 16 bytes, then random ones past those: 12 in
    a block or an index, 48 in the small metadata regions that hold every
    count and offset (a header, a footer, the manifest)."""
    n = 12 if end - start > FOOTER and start >= ALIGN else 48
    fixed = list(range(start, min(end, start + 16))) + [end - 1]
    inner = (start + 16, end - 1)
    drawn = [rng.randrange(*inner) for _ in range(n)] if inner[1] > inner[0] else []
    return sorted(set(fixed + drawn))

failures, flips, cuts = [], 0, 0
def check(what, name, words):
    rc, err = verify()
    if rc != 1 or name not in err or any(w not in err for w in words):
        failures.append("%s: exit %d, message %r" % (what, rc, err.strip()[:200]))

for name, start, end, words in regions:
    path = os.path.join(ds, name)
    orig = open(path, "rb").read()
    for pos in positions(start, end):
        data = bytearray(orig)
        data[pos] ^= rng.randrange(1, 256)
        open(path, "wb").write(data)
        check("%s byte %d flipped" % (name, pos), name, words)
        flips += 1
    open(path, "wb").write(orig)

files = sorted(set(r[0] for r in regions))
for name in files:
    path = os.path.join(ds, name)
    orig = open(path, "rb").read()
    cutpoints = {0, 1, len(orig) - 1, len(orig) - FOOTER, ALIGN, ALIGN - 1}
    while len(cutpoints) < (40 if name != "manifest.lfm" else 20):
        cutpoints.add(rng.randrange(0, len(orig)))
    for cut in sorted(p for p in cutpoints if 0 <= p < len(orig)):
        open(path, "wb").write(orig[:cut])
        check("%s truncated to %d bytes" % (name, cut), name, [])
        cuts += 1
    open(path, "wb").write(orig)

rc, err = verify()
if rc != 0:
    failures.append("restored dataset does not verify: " + err)
for f in failures[:20]:
    print("FAIL: " + f, file=sys.stderr)
print("corruption: %d flips, %d truncations over %d regions, %d undetected or unnamed"
      % (flips, cuts, len(regions), len(failures)))
if flips < 1000 or cuts < 100:
    print("FAIL: too few positions", file=sys.stderr)
    sys.exit(1)
sys.exit(1 if failures else 0)
EOF
