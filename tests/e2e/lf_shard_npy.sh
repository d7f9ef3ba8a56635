#!/usr/bin/env bash
# The .npy reader against numpy: hundreds of damaged and unusual .npy files
# (bytes flipped in the header, truncations, hand-written headers) go through
# one `lf-shard create frames --skip-bad`. It must not crash; every file it
# accepts must be one numpy loads as a 2-D little-endian f4/f2/i2 C-order
# array, with the same values; and the files it skips must be named.
source "$(dirname "$0")/../data/lf_shard/helpers.sh"
need_python
cd "$tmp" || exit 1

"$PY" - <<'EOF' || exit 1
import io, os, random, re, subprocess, sys
import numpy as np

L = os.environ["LF_SHARD"]
rng = random.Random(3)
os.makedirs("in")

def npy_bytes(arr, version=(1, 0)):
    f = io.BytesIO()
    np.lib.format.write_array(f, arr, version=version)
    return f.getvalue()

def header(text, body, major=1):
    text = text + " " * ((64 - (len(text) + 11) % 64) % 64) + "\n"
    hl = len(text).to_bytes(2 if major == 1 else 4, "little")
    return b"\x93NUMPY" + bytes([major, 0]) + hl + text.encode("latin-1") + body

base = np.arange(12, dtype="<f4").reshape(3, 4) / 7
files = {}
# The first file fixes dtype and width for the dataset: a plain good one.
files["000-good.npy"] = npy_bytes(base)
for i in range(300):
    raw = npy_bytes(base, version=rng.choice([(1, 0), (2, 0), (3, 0)]))
    kind = rng.randrange(3)
    if kind == 0:                                     # flip a header byte
        b = bytearray(raw)
        b[rng.randrange(0, 80)] ^= rng.randrange(1, 256)
        raw = bytes(b)
    elif kind == 1:                                   # truncate
        raw = raw[:rng.randrange(0, len(raw))]
    files["%03d-mut.npy" % (i + 1)] = raw
body = base.tobytes()
for j, text in enumerate([
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }",
        '{"descr": "<f4", "fortran_order": False, "shape": (3,4)}',
        "{'shape': (3, 4), 'fortran_order': False, 'descr': '<f4'}",
        "{ 'descr' : '<f4' , 'fortran_order' : False , 'shape' : ( 3 , 4 , ) , }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3L, 4L), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (12,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 12), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 4), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), 'extra': 1}",
        "{'descr': '<f4', 'fortran_order': False}",
        "{'descr': '<f4', 'fortran_order': 0, 'shape': (3, 4)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)} junk",
        "{'descr': '\\x3cf4', 'fortran_order': False, 'shape': (3, 4)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-3, 4)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)}" + " " * 70000]):
    files["%03d-hand.npy" % (400 + j)] = header(text, body, major=2 if len(text) > 60000 else 1)
for name, data in files.items():
    open(os.path.join("in", name), "wb").write(data)

p = subprocess.run([L, "create", "frames", "--in", "in", "--out", "ds", "--skip-bad"],
                   capture_output=True, text=True, errors="replace")
if p.returncode != 0:
    sys.exit("FAIL: create frames exit %d: %s" % (p.returncode, p.stderr[-2000:]))
skipped = set(re.findall(r"^lf-shard: in/(\S+): .*\(skipped\)$", p.stderr, re.M))
accepted = [n for n in sorted(files) if n not in skipped]

def numpy_view(name):
    try:
        a = np.load(os.path.join("in", name), allow_pickle=False)
    except Exception:
        return None
    ok = a.ndim == 2 and a.dtype.str in ("<f4", "<f2", "<i2") and a.shape[1] >= 1
    return a if ok and not np.isfortran(a) else None

problems = []
for i, name in enumerate(accepted):
    a = numpy_view(name)
    raw = subprocess.run([L, "cat", "ds", str(i), "--raw", "frames"], capture_output=True).stdout
    if a is None:
        problems.append("%s: accepted, but numpy does not read it as 2-D f4/f2/i2" % name)
    elif raw != np.ascontiguousarray(a).tobytes() or a.dtype.str != "<f4" or a.shape[1] != 4:
        problems.append("%s: stored %d bytes differ from numpy's %s %s" % (name, len(raw), a.dtype, a.shape))
for prob in problems[:20]:
    print("FAIL: " + prob, file=sys.stderr)
print("npy: %d files, %d accepted (all agree with numpy), %d skipped and named"
      % (len(files), len(accepted), len(skipped)))
sys.exit(1 if problems or len(accepted) + len(skipped) != len(files) else 0)
EOF
