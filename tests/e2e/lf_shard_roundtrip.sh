#!/usr/bin/env bash
# lf-shard round trip: inputs made here (JSONL, JPEGs with PIL, .npy with
# numpy) go through `lf-shard create`, and every field of every sample read
# back with `lf-shard cat` must equal the input, for one-record blocks and for
# many-record blocks.
source "$(dirname "$0")/../data/lf_shard/helpers.sh"
need_python

"$PY" - "$tmp" <<'EOF' || exit 1
import json, os, random, subprocess, sys
import numpy as np
from PIL import Image

L, tmp = os.environ["LF_SHARD"], sys.argv[1]
rng = random.Random(5)
BLOCK_SIZES = ["0", "1K", "64K"]      # one record per block, a few, many
checked = 0

def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)

def run(*args, raw=False):
    p = subprocess.run([L, *args], capture_output=True)
    if p.returncode != 0:
        fail("lf-shard %s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr.decode()))
    return p.stdout if raw else p.stdout.decode()

def samples_of(ds):
    for line in run("inspect", ds).splitlines():
        if line.startswith("samples: "):
            return int(line.split()[1])
    fail("inspect %s: no samples line" % ds)

def fields_of(ds, i):
    """{field name: the text after 'name (type): '} from `lf-shard cat`."""
    out = {}
    for line in run("cat", ds, str(i)).splitlines()[1:]:
        head, _, rest = line.partition(": ")
        out[head.split(" ")[0]] = (head, rest)
    return out

def expect_eq(what, got, want):
    global checked
    if got != want:
        if isinstance(got, int):
            fail("%s: got %r, want %r" % (what, got, want))
        at = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), min(len(got), len(want)))
        fail("%s: differs at %d of %d/%d: got %r, want %r" % (what, at, len(got), len(want),
             got[max(0, at - 20):at + 20], want[max(0, at - 20):at + 20]))
    checked += 1

# ---- tokens -------------------------------------------------------------------
def token_case(name, rows, key, want_type, extra_args, piped=False):
    """piped: the JSONL comes through a pipe (--in /dev/stdin), which cannot
    be read twice."""
    src = os.path.join(tmp, name + ".jsonl")
    with open(src, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
            if rng.random() < 0.1:
                f.write("\n")               # blank lines are skipped
    for bs in BLOCK_SIZES:
        ds = os.path.join(tmp, "%s-%s" % (name, bs))
        args = ["create", "tokens", "--in", "/dev/stdin" if piped else src, "--out", ds,
                "--block-size", bs, *extra_args]
        if piped:
            p = subprocess.run([L, *args], input=open(src, "rb").read(), capture_output=True)
            if p.returncode != 0:
                fail("lf-shard %s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr.decode()))
        else:
            run(*args)
        expect_eq(ds + " samples", samples_of(ds), len(rows))
        for i, r in enumerate(rows):
            v = r[key]
            ids = list(v.encode("utf-8")) if isinstance(v, str) else v
            want = "%d tokens:%s" % (len(ids), "".join(" %d" % t for t in ids))
            got = fields_of(ds, i)["tokens"]
            expect_eq("%s[%d] type" % (ds, i), got[0], "tokens (%s)" % want_type)
            expect_eq("%s[%d] tokens" % (ds, i), got[1], want)

def ids(n, hi):
    return [rng.choice([0, hi, rng.randrange(hi + 1), rng.randrange(100)]) for _ in range(n)]

lengths = [0, 1, 2, 700] + [rng.randrange(1, 300) for _ in range(20)]
token_case("u16", [{"tokens": ids(n, 65535), "id": i} for i, n in enumerate(lengths)],
           "tokens", "tokens_u16", [])
token_case("auto32", [{"tokens": ids(n, 65535 if i < 15 else 4294967295)}
                      for i, n in enumerate(lengths)], "tokens", "tokens_u32", [])
# Through a pipe: no second pass is possible, so u32 from the start (once a
# late id above 65535 restarted the pass on the rest of the pipe: 0 samples).
token_case("auto32-pipe", [{"tokens": ids(n, 65535 if i < 15 else 4294967295)}
                           for i, n in enumerate(lengths)], "tokens", "tokens_u32", [], piped=True)
token_case("u16-pipe", [{"tokens": ids(n, 65535)} for n in lengths], "tokens", "tokens_u16",
           ["--dtype", "u16"], piped=True)
token_case("u32", [{"ids": ids(n, 1000), "tokens": "not this"} for n in lengths],
           "ids", "tokens_u32", ["--field", "ids", "--dtype", "u32"])
texts = ["", "a", "héllo wörld\n", "tab\tand \u0000 nul", "\U0001F600 emoji"] + \
        ["".join(rng.choice("abc xyz\u00e9") for _ in range(rng.randrange(200))) for _ in range(10)]
token_case("text", [{"text": t} for t in texts], "text", "tokens_u16", ["--text-field", "text"])

# ---- images -------------------------------------------------------------------
def make_jpeg(path, w, h, mode, progressive):
    a = np.random.default_rng(w * 1000 + h).integers(0, 256, (h, w, 3), dtype=np.uint8)
    img = Image.fromarray(a).convert(mode)
    img.save(path, "JPEG", quality=rng.randrange(50, 96), progressive=progressive)

def image_case(name, classes):
    top = os.path.join(tmp, name)
    files = []                                  # (path, w, h, label) in dataset order
    for label, cls in enumerate(sorted(classes)):
        d = os.path.join(top, cls) if cls else top
        os.makedirs(d, exist_ok=True)
        for k in range(4):
            w, h = rng.randrange(1, 300), rng.randrange(1, 300)
            p = os.path.join(d, "img%02d.jpg" % k)
            make_jpeg(p, w, h, rng.choice(["RGB", "L"]), k == 1)
            files.append((p, w, h, label))
    open(os.path.join(top, ".hidden"), "w").write("not an image, skipped\n")
    for bs in ["0", "64K"]:
        ds = top + "-" + bs
        run("create", "images", "--in", top, "--out", ds, "--block-size", bs)
        expect_eq(ds + " samples", samples_of(ds), len(files))
        for i, (p, w, h, label) in enumerate(files):
            f = fields_of(ds, i)
            size = os.path.getsize(p)
            expect_eq("%s[%d] image" % (ds, i), f["image"][1], "%d bytes, %dx%d" % (size, w, h))
            expect_eq("%s[%d] label" % (ds, i), f["label"][1], str(label))
            expect_eq("%s[%d] raw" % (ds, i), run("cat", ds, str(i), "--raw", "image", raw=True),
                      open(p, "rb").read())
        if classes != [""]:
            expect_eq(ds + " classes.txt", open(os.path.join(ds, "classes.txt")).read(),
                      "".join(c + "\n" for c in sorted(classes)))

image_case("imgs", ["n02_dog", "n01_cat", "n10_bird"])
image_case("flat", [""])

# ---- frames -------------------------------------------------------------------
def frames_case(name, dtype, lf_type, versions):
    top = os.path.join(tmp, name)
    arrays = []                                 # (array, label) in dataset order
    width = rng.randrange(1, 40)
    for label, cls in enumerate(["a", "b"]):
        os.makedirs(os.path.join(top, cls))
        for k, ver in enumerate(versions):
            rows = rng.choice([0, 1, rng.randrange(2, 90)])
            a = (np.random.default_rng(k).standard_normal((rows, width)) * 100).astype(dtype)
            with open(os.path.join(top, cls, "%d.npy" % k), "wb") as f:
                np.lib.format.write_array(f, a, version=ver)
            arrays.append((a, label))
    for bs in ["0", "64K"]:
        ds = top + "-" + bs
        run("create", "frames", "--in", top, "--out", ds, "--block-size", bs)
        expect_eq(ds + " samples", samples_of(ds), len(arrays))
        for i, (a, label) in enumerate(arrays):
            f = fields_of(ds, i)
            expect_eq("%s[%d] type" % (ds, i), f["frames"][0], "frames (%s)" % lf_type)
            expect_eq("%s[%d] shape" % (ds, i), f["frames"][1].split(";")[0],
                      "%d x %d" % a.shape)
            expect_eq("%s[%d] label" % (ds, i), f["label"][1], str(label))
            expect_eq("%s[%d] raw" % (ds, i), run("cat", ds, str(i), "--raw", "frames", raw=True),
                      a.astype(a.dtype.newbyteorder("<")).tobytes())

frames_case("f32", "<f4", "frames_f32", [(1, 0), (2, 0), (3, 0)])
frames_case("f16", "<f2", "frames_f16", [(1, 0), (2, 0)])
frames_case("i16", "<i2", "frames_i16", [(1, 0), (3, 0)])

print("round trip: %d checks passed" % checked)
EOF
