#!/usr/bin/python3
"""PIL baseline for tests/bench/tf.sh: what a PyTorch DataLoader worker runs.

Per image, as torchvision's RandomResizedCrop(224) + RandomHorizontalFlip +
ToTensor + Normalize do on a PIL image (no draft(), which a PIL user would not
usually call): open, convert("RGB"), torchvision's get_params crop box, resize
of that box to 224x224 BILINEAR, flip with p=0.5, to float32 / 255, normalize
with numpy, CHW. Also the plain decode (open + convert) for reference.
Single process, images held in memory, rates per CPU second (process_time)
as tests/bench/tf_jpeg.c counts them: the sum over images of each image's
fastest of 12 passes (one fixed crop per image).
Usage: tf_pil.py DIR [PASSES]; prints "key value" lines.
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


def decode(data, rng):
    return Image.open(io.BytesIO(data)).convert("RGB")


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


def main():
    d = sys.argv[1]
    passes = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    files = sorted(f for f in os.listdir(d) if not f.startswith("."))
    images = [open(os.path.join(d, f), "rb").read() for f in files]
    large = [min(Image.open(io.BytesIO(b)).size) > 2 * CROP for b in images]
    dec = fastest(decode, images, passes)
    aug = fastest(augment, images, passes)
    aug_large = [t for t, big in zip(aug, large) if big]
    print(f"pil_version {Image.__version__}")
    print(f"pil_decode_all_ips {len(dec) / sum(dec):.1f}")
    print(f"pil_augment_all_ips {len(aug) / sum(aug):.1f}")
    print(f"pil_augment_large_ips {len(aug_large) / sum(aug_large):.1f}")


if __name__ == "__main__":
    main()
