#!/usr/bin/env bash
# Transforms benchmark (make bench): JPEG decode and augmentation per core.
# Makes a synthetic set (64 JPEGs, q90 4:2:0, sides 300..1200) and the
# hostile inputs of tests/unit/tf_jpeg_bad, then prints, all from this run:
#   libjpeg-turbo's full-size decode rate (tjDecompress2 to RGB), our decode
#   and our random-resized-crop 224 + flip + f32 normalize (tests/bench/tf_jpeg.c),
#   the PIL pipeline doing the same work (tests/bench/tf_pil.py, Debian python3-pil),
#   the ratios to the targets (augment >= 1.5x full decode on images larger than
#   twice the crop; >= 3x PIL per core), and the time to reject each hostile input.
# Rates are images per CPU second; every method runs each file 12 times,
# interleaved with the others, and a file counts with its fastest time (the
# C side also prints the fastest whole pass).
# Figures only: nothing here fails on a time.
set -euo pipefail
B=${LF_BUILD:?run through make bench}; root=${LF_ROOT:?}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir "$work/set" "$work/bad"
"$B/bench/tf_jpeg" make "$work/set" 64 1
"$B/tests/unit/tf_jpeg_bad" --write "$work/bad" >/dev/null
"$B/bench/tf_jpeg" run "$work/set" "$work/bad" | tee "$work/c.txt"
echo "PIL pipeline (one process):"
/usr/bin/python3 "$root/tests/bench/tf_pil.py" "$work/set" | tee "$work/py.txt"
get() { awk -v k="$1" '$1 == k { print $2 }' "$work/c.txt" "$work/py.txt"; }
awk -v aug_l="$(get augment_large_ips)" -v tj_l="$(get full_decode_large_ips)" \
    -v aug_lp="$(get augment_large_pass_ips)" -v tj_lp="$(get full_decode_large_pass_ips)" \
    -v aug_a="$(get augment_all_ips)" -v pil_a="$(get pil_augment_all_ips)" \
    -v pil_l="$(get pil_augment_large_ips)" 'BEGIN {
  printf "ratios (per-file fastest pass; in brackets the fastest whole pass):\n"
  printf "  augment / full-size decode, images > 2x crop: %.2f [%.2f] (target >= 1.5)\n", aug_l / tj_l, aug_lp / tj_lp
  printf "  augment / PIL pipeline, all images:            %.2f (target >= 3)\n", aug_a / pil_a
  printf "  augment / PIL pipeline, images > 2x crop:      %.2f (target >= 3)\n", aug_l / pil_l
}'
