#!/usr/bin/python3
"""PIL baseline for tests/bench/tf.sh: what a PyTorch DataLoader worker runs.

Per image, as torchvision's RandomResizedCrop(224) + RandomHorizontalFlip +
ToTensor + Normalize do on a PIL image (no draft(), which a PIL user would not
usually call): open, convert("RGB"), torchvision's get_params crop box, resize
of that box to 224x224 BILINEAR, flip with p=0.5, to float32 / 255, normalize
with numpy, CHW. Single process, every file under DIR (subfolders too) held
in memory, CPU time (process_time) per image: each image's fastest of PASSES
passes (one fixed crop per image), as tests/bench/tf_jpeg.c counts them.
Usage: tf_pil.py DIR PASSES; prints "pil_version V" and one line per file,
"pil NAME SECONDS", NAME relative to DIR as tf_jpeg.c prints it.
"""
import io
import math
import os
import random
import sys
import time

import numpy as np
from PIL import Image

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
CROP = 224


def rrc_box(width, height, rng, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    area = width * height
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(*log_ratio))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            i = rng.randint(0, height - h)
            j = rng.randint(0, width - w)
            return j, i, j + w, i + h
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        w, h = int(round(height * max(ratio))), height
    else:
        w, h = width, height
    i, j = (height - h) // 2, (width - w) // 2
    return j, i, j + w, i + h


def augment(data, rng):
    img = Image.open(io.BytesIO(data)).convert("RGB")
    box = rrc_box(img.width, img.height, rng)
    out = img.resize((CROP, CROP), Image.BILINEAR, box=box)
    if rng.random() < 0.5:
        out = out.transpose(Image.FLIP_LEFT_RIGHT)
    a = np.asarray(out, dtype=np.float32) / 255.0
    a = (a - MEAN) / STD
    return np.ascontiguousarray(a.transpose(2, 0, 1))


def fastest(fn, images, passes):
    """Each image's fastest CPU time over the passes. Image i always gets the
    same crop (its own seeded rng), so every pass does the same work."""
    best = [math.inf] * len(images)
    for _ in range(passes):
        for i, data in enumerate(images):
            rng = random.Random(i)
            t0 = time.process_time()
            fn(data, rng)
            best[i] = min(best[i], time.process_time() - t0)
    return best


def tree(top):
    """Every file under top, subfolders included, named relative to it
    (tf_report.py pairs these names with tf_jpeg.c's)."""
    out = []
    for name in sorted(os.listdir(top)):
        path = os.path.join(top, name)
        if name.startswith("."):
            continue
        if os.path.isdir(path):
            out += [os.path.join(name, sub) for sub in tree(path)]
        else:
            out.append(name)
    return out


def main():
    top, passes = sys.argv[1], int(sys.argv[2])
    names = tree(top)
    images = [open(os.path.join(top, n), "rb").read() for n in names]
    print(f"pil_version {Image.__version__}")
    for name, t in zip(names, fastest(augment, images, passes)):
        print(f"pil {name} {t:.9f}")


if __name__ == "__main__":
    main()
