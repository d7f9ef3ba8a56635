#!/usr/bin/env bash
# Transforms benchmark (make bench): JPEG decode and augmentation per core,
# on two sets:
#   synthetic: 64 JPEGs made here (q90 4:2:0, sides 300..1200, photo-like);
#   real: dev-images/ from shared/realdata/fetch.sh (123 photographs, scans
#     and textures, 128 px to 4096x2048, some progressive and grayscale),
#     found in $LF_REALDATA (default ~/.cache/levelfeed-realdata, fetch.sh's);
#     skipped, and said so, without it;
# and the hostile inputs of tests/unit/tf_jpeg_bad (time to reject each).
# Per set, by size class (<= 0.5 MP, 0.5-4 MP, > 4 MP) and progressive vs
# baseline (tests/bench/tf_report.py): levelfeed's random-resized crop 224 +
# flip + f32 normalize (tests/bench/tf_jpeg.c), the same torchvision-style
# pipeline in PIL (tests/bench/tf_pil.py, Debian python3-pil), a full-size
# tjDecompress2 and its Mpx/s, with the ratios to the targets (crop >= 3x PIL
# per core; >= 1.5x full decode on images larger than twice the crop).
# Rates are images per CPU second. The C methods are interleaved file by
# file within each pass; C and PIL alternate in ROUNDS rounds of PASSES
# passes each (LF_TF_BENCH_ROUNDS, LF_TF_BENCH_PASSES: default 3 x 4), so
# the machine's drift hits both; a file counts with its fastest time.
# Figures only: nothing here fails on a time.
set -euo pipefail
B=${LF_BUILD:?run through make bench}; root=${LF_ROOT:?}
rounds=${LF_TF_BENCH_ROUNDS:-3} passes=${LF_TF_BENCH_PASSES:-4}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir "$work/set" "$work/bad"
"$B/bench/tf_jpeg" make "$work/set" 64 1
"$B/tests/unit/tf_jpeg_bad" --write "$work/bad" >/dev/null

# measure LABEL DIR: the rounds, then the report.
measure() {
  local label=$1 dir=$2
  for r in $(seq "$rounds"); do
    "$B/bench/tf_jpeg" run "$dir" "$passes" >"$work/$label.c.$r"
    /usr/bin/python3 "$root/tests/bench/tf_pil.py" "$dir" "$passes" >"$work/$label.py.$r"
  done
  /usr/bin/python3 "$root/tests/bench/tf_report.py" "$label" "$work/$label".*
  echo "  (PIL $(awk '$1 == "pil_version" { print $2; exit }' "$work/$label.py.1"))"
}

measure synthetic "$work/set"
real=${LF_REALDATA:-$HOME/.cache/levelfeed-realdata}
if [[ -d $real/dev-images ]]; then
  measure real "$real/dev-images"
else
  echo "real: $real/dev-images is absent (shared/realdata/fetch.sh fetches it;"
  echo "  LF_REALDATA names another folder): skipped"
fi
"$B/bench/tf_jpeg" run "$work/set" 1 "$work/bad" | grep -v '^file '
