#!/usr/bin/python3
"""Groups tests/bench/tf.sh's per-file times into the JPEG report.

Usage: tf_report.py LABEL FILE...: FILEs are outputs of `tf_jpeg run` ("file
NAME W H COMPONENTS PROGRESSIVE TJ_S AUGMENT_S") and of tf_pil.py ("pil NAME
S"), several rounds of each; a file counts with its fastest time per method
over all rounds. Prints, per class of images (all; <= 0.5 MP, 0.5-4 MP,
> 4 MP; progressive, baseline; grayscale; both sides > 2 x the crop), images
per CPU second of levelfeed's crop pipeline, the PIL pipeline and a full-size
tjDecompress2, libjpeg-turbo's decode rate in Mpx/s, and the ratios to the
targets (crop >= 3x PIL per core; >= 1.5x full decode on images > 2 x crop).
Figures only, no verdict.
"""
import math
import sys

CROP = 224


def load(paths):
    meta, best = {}, {}
    for path in paths:
        for line in open(path):
            f = line.split()
            if f and f[0] == "file":
                name, w, h, comps, prog = f[1], int(f[2]), int(f[3]), int(f[4]), int(f[5])
                meta[name] = (w, h, comps, prog)
                times = {"tj": float(f[6]), "crop": float(f[7])}
            elif f and f[0] == "pil":
                name, times = f[1], {"pil": float(f[2])}
            else:
                continue
            for k, t in times.items():
                best[(name, k)] = min(best.get((name, k), math.inf), t)
    return meta, best


def classes(meta):
    mp = {n: w * h / 1e6 for n, (w, h, _, _) in meta.items()}
    return [
        ("all", lambda n: True),
        ("<= 0.5 MP", lambda n: mp[n] <= 0.5),
        ("0.5-4 MP", lambda n: 0.5 < mp[n] <= 4),
        ("> 4 MP", lambda n: mp[n] > 4),
        ("progressive", lambda n: meta[n][3] == 1),
        ("baseline", lambda n: meta[n][3] == 0),
        ("grayscale", lambda n: meta[n][2] == 1),
        ("> 2x crop", lambda n: min(meta[n][0], meta[n][1]) > 2 * CROP),
    ]


def main():
    label, meta, best = sys.argv[1], *load(sys.argv[2:])
    missing = [n for n in meta if (n, "pil") not in best]
    if missing:
        sys.exit(f"tf_report: no PIL time for {missing[0]} ({len(missing)} files)")
    print(f"{label}: {len(meta)} images; images/s per CPU second, each file's fastest time")
    print(f"  {'class':<12} {'n':>4} {'mean MP':>7} {'crop':>7} {'PIL':>7} {'full tj':>7} "
          f"{'tj Mpx/s':>8} {'crop/PIL':>8} {'crop/tj':>7}")
    for cname, pick in classes(meta):
        names = [n for n in meta if pick(n)]
        if not names:
            continue
        rate = {k: len(names) / sum(best[(n, k)] for n in names) for k in ("crop", "pil", "tj")}
        mpix = sum(meta[n][0] * meta[n][1] for n in names) / 1e6
        mpx_s = mpix / sum(best[(n, "tj")] for n in names)
        print(f"  {cname:<12} {len(names):>4} {mpix / len(names):>7.2f} {rate['crop']:>7.1f} "
              f"{rate['pil']:>7.1f} {rate['tj']:>7.1f} {mpx_s:>8.1f} "
              f"{rate['crop'] / rate['pil']:>8.2f} {rate['crop'] / rate['tj']:>7.2f}")
    print("  targets: crop/PIL >= 3 in every class; crop/tj >= 1.5 on > 2x crop")


if __name__ == "__main__":
    main()
