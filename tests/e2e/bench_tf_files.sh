#!/usr/bin/env bash
# The JPEG benchmark (make bench's tf part) takes every file of a folder, of
# any size (issue 32 item 1): tf_jpeg once read only the first 512 files of a
# folder and decoded into a fixed 1200x1200x3 buffer, so a larger image was
# written past its end. Here 600 small JPEGs (half of them in a subfolder), a
# 4000x3000 baseline and a 3000x2000 progressive photo go through the bench's
# three programs (tf_jpeg run, tf_pil.py, tf_report.py) for one pass: each
# must exit 0, tf_jpeg must name every file with its size, and the report
# must count all 602. Times are not checked.
set -euo pipefail
B=${LF_BUILD:?run through tests/run.sh}
root=${LF_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
set_dir=$tmp/set
mkdir -p "$set_dir/sub"

/usr/bin/python3 - "$set_dir" <<'PYEOF'
import sys
from PIL import Image
top = sys.argv[1]
small = Image.effect_noise((40, 30), 50).convert("RGB")
for i in range(600):
    folder = top if i % 2 else top + "/sub"
    small.save(f"{folder}/s{i:03d}.jpg", quality=80)
# Smooth content blown up from a small image: photo-sized files, quick to write.
seed = Image.effect_noise((40, 30), 64).convert("RGB")
seed.resize((4000, 3000), Image.BILINEAR).save(f"{top}/big_baseline.jpg", quality=85)
seed.resize((3000, 2000), Image.BILINEAR).save(f"{top}/big_progressive.jpg", quality=85,
                                                progressive=True)
PYEOF
want=$(find "$set_dir" -type f | wc -l)
[[ $want -eq 602 ]] || fail "wrote $want files, meant 602"

"$B/bench/tf_jpeg" run "$set_dir" 1 >"$tmp/c.out" 2>"$tmp/c.err" ||
  fail "tf_jpeg run on $want files (two larger than 1200x1200): exit $?: $(tail -3 "$tmp/c.err")"
got=$(grep -c '^file ' "$tmp/c.out" || true)
[[ $got -eq $want ]] || fail "tf_jpeg timed $got files of $want"
grep -q '^file big_baseline.jpg 4000 3000 3 0 ' "$tmp/c.out" ||
  fail "no 4000x3000 baseline line: $(grep big_baseline "$tmp/c.out")"
grep -q '^file big_progressive.jpg 3000 2000 3 1 ' "$tmp/c.out" ||
  fail "no 3000x2000 progressive line: $(grep big_progressive "$tmp/c.out")"
grep -q '^file sub/s000.jpg 40 30 3 0 ' "$tmp/c.out" || fail "the subfolder's files are not named sub/..."

/usr/bin/python3 "$root/tests/bench/tf_pil.py" "$set_dir" 1 >"$tmp/py.out" ||
  fail "tf_pil.py on $want files: exit $?"
got=$(grep -c '^pil ' "$tmp/py.out" || true)
[[ $got -eq $want ]] || fail "tf_pil.py timed $got files of $want"
/usr/bin/python3 "$root/tests/bench/tf_report.py" check "$tmp/c.out" "$tmp/py.out" >"$tmp/report" ||
  fail "tf_report.py: exit $?"
grep -q "^check: $want images" "$tmp/report" || fail "report: $(head -1 "$tmp/report")"
grep -q "^  > 4 MP " "$tmp/report" || fail "no > 4 MP class in the report"
grep -q "^  progressive " "$tmp/report" || fail "no progressive class in the report"
echo "tf bench: $want files (600 small, half in a subfolder; 4000x3000 baseline, 3000x2000 progressive) timed and reported: ok"
