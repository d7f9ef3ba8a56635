#!/usr/bin/python3
"""Makes the transforms golden files: small JPEGs and PIL's outputs for them.

Run once with Debian's python3-pil (/usr/bin/python3) from the repository
root; the outputs are committed and the C test (tests/unit/tf_jpeg_golden.c)
compares against them. PIL is the independent reference: it decodes the whole
image at full size (same system libjpeg-turbo, default settings) and resizes
the crop box with its own BILINEAR or BOX filter (Image.resize with box=).

cases.txt, one case a line:
    name file x y w h flip out_w out_h mode     (mode: bilinear | area | decode)
and NAME.bin holds PIL's u8 RGB HWC result ("decode": the full-size decode).
"""
import os
import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))


def scene(w, h, seed):
    """A photo-like test picture: smooth gradients, soft shapes, mild noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 128 + 90 * np.sin(x / w * 3.1 + seed) * np.cos(y / h * 2.3)
    g = 110 + 80 * np.cos((x + y) / (w + h) * 5.0 + seed)
    b = 90 + 60 * np.sin(np.hypot(x - w / 3, y - h / 2) / 9.0)
    for _ in range(4):
        cx, cy, rad = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(5, min(w, h) / 3)
        d = np.clip(1.5 - np.hypot(x - cx, y - cy) / rad, 0, 1)
        col = rng.uniform(0, 255, 3)
        r, g, b = (c * (1 - d) + col[i] * d for i, c in enumerate((r, g, b)))
    img = np.stack([r, g, b], -1) + rng.normal(0, 3, (h, w, 3))
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")


def write_images():
    files = {}
    scene(173, 131, 1).save(f"{HERE}/rgb_odd.jpg", quality=90)            # 4:2:0
    scene(97, 61, 2).convert("L").save(f"{HERE}/gray.jpg", quality=90)
    scene(80, 64, 3).convert("CMYK").save(f"{HERE}/cmyk.jpg", quality=92)
    scene(151, 113, 4).save(f"{HERE}/progressive.jpg", quality=90, progressive=True)
    scene(480, 360, 5).save(f"{HERE}/large.jpg", quality=85)                # DCT scaling
    scene(123, 77, 6).save(f"{HERE}/rgb444.jpg", quality=95, subsampling=0)
    # The same CMYK file without its Adobe (APP14) segment: PIL still reads
    # the ink as inverted.
    data = open(f"{HERE}/cmyk.jpg", "rb").read()
    at = data.index(b"\xff\xee")
    seg = 2 + int.from_bytes(data[at + 2:at + 4], "big")
    open(f"{HERE}/cmyk_noadobe.jpg", "wb").write(data[:at] + data[at + seg:])
    # Noise, 4:2:0: neighbouring chroma differs, so a crop whose region edge
    # loses its neighbour's chroma shows it.
    noise = np.random.default_rng(7).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    Image.fromarray(noise, "RGB").save(f"{HERE}/noise420.jpg", quality=95, subsampling=2)
    for name in ("rgb_odd", "gray", "cmyk", "progressive", "large", "rgb444", "noise420",
                 "cmyk_noadobe"):
        files[name] = f"{name}.jpg"
    return files


CASES = [
    # name, file, x, y, w, h, flip, out_w, out_h, mode
    ("odd_up", "rgb_odd", 10, 7, 40, 30, 0, 64, 48, "bilinear"),
    ("odd_down", "rgb_odd", 3, 5, 160, 120, 1, 56, 42, "bilinear"),
    ("odd_full_area", "rgb_odd", 0, 0, 173, 131, 0, 43, 33, "area"),
    ("gray_crop", "gray", 20, 4, 70, 50, 1, 48, 40, "bilinear"),
    ("cmyk_crop", "cmyk", 5, 9, 60, 50, 0, 40, 36, "bilinear"),
    ("prog_crop", "progressive", 31, 17, 110, 90, 0, 64, 52, "bilinear"),
    ("large_rrc", "large", 71, 40, 300, 260, 1, 64, 56, "bilinear"),
    ("large_small", "large", 0, 0, 480, 360, 0, 32, 24, "area"),
    ("large_tall", "large", 333, 11, 120, 330, 0, 20, 56, "bilinear"),
    ("r444_center", "rgb444", 22.5, 0.25, 77.0, 76.5, 0, 48, 48, "bilinear"),
    # the crop region's first column on a block boundary, its last column
    # inside the image, both at the 8/8 scale
    ("noise_left", "noise420", 0, 0, 1, 64, 0, 8, 64, "bilinear"),
    ("noise_cols", "noise420", 17, 0, 20, 30, 0, 40, 60, "bilinear"),
    ("noise_right", "noise420", 0, 0, 37, 37, 1, 74, 74, "bilinear"),
    ("odd_decode", "rgb_odd", 0, 0, 173, 131, 0, 173, 131, "decode"),
    ("gray_decode", "gray", 0, 0, 97, 61, 0, 97, 61, "decode"),
    ("cmyk_decode", "cmyk", 0, 0, 80, 64, 0, 80, 64, "decode"),
    ("cmyk_noadobe_decode", "cmyk_noadobe", 0, 0, 80, 64, 0, 80, 64, "decode"),
    ("prog_decode", "progressive", 0, 0, 151, 113, 0, 151, 113, "decode"),
]


def main():
    files = write_images()
    lines = []
    for name, f, x, y, w, h, flip, ow, oh, mode in CASES:
        img = Image.open(f"{HERE}/{files[f]}").convert("RGB")
        if mode == "decode":
            out = img
        else:
            filt = Image.BILINEAR if mode == "bilinear" else Image.BOX
            out = img.resize((ow, oh), filt, box=(x, y, x + w, y + h))
            if flip:
                out = out.transpose(Image.FLIP_LEFT_RIGHT)
        with open(f"{HERE}/{name}.bin", "wb") as fh:
            fh.write(out.tobytes())
        lines.append(f"{name} {files[f]} {x} {y} {w} {h} {flip} {ow} {oh} {mode}")
    with open(f"{HERE}/cases.txt", "w") as fh:
        fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
