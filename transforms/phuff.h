/*
 * phuff.h — the progressive-scan entropy decoder (phuff.c); not installed.
 *
 * It takes over libjpeg's decode_mcu at the start of each progressive scan
 * and hands the source back at the scan's end; jpeg.c calls it from the
 * progress monitor (see "progressive scans" in phuff.c).
 */
#ifndef LF_TF_PHUFF_H
#define LF_TF_PHUFF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <jpeglib.h>

typedef struct tf_phuff tf_phuff;

/* Returns NULL when out of memory. */
tf_phuff *tf_phuff_create(void);
void tf_phuff_free(tf_phuff *h);

/* From the allocator of the whole-image coefficient arrays, for every
 * component ci (0..MAX_COMPONENTS-1) of each image before its first scan:
 * masks, one uint64_t per block of ci's array (stride per block row), all
 * zero, which the decoder keeps as the block's nonzero AC coefficients
 * (bit k: zigzag position k), so AC refinement finds them without reading
 * the block; NULL where not kept. Where a scan of the image is not ours
 * (libjpeg decoded it), the decoder stops using them for the image. */
void tf_phuff_set_masks(tf_phuff *h, int ci, uint64_t *masks, size_t stride);

/* After the image's last scan is absorbed: 1 where every scan was ours and
 * the masks were kept throughout, so that no scan read a block's
 * coefficients to find its nonzero ones (jpeg.c's strips send the blocks
 * outside a strip to one scratch row and rely on this), else 0. */
int tf_phuff_masks_held(const tf_phuff *h, j_decompress_ptr c);

/* From the progress monitor: where a progressive scan's first iMCU row is
 * about to be consumed with libjpeg's decoder, installs ours for the scan
 * (decode_mcu, and consume_input until the scan's finish_input_pass).
 * c->client_data must be h. */
void tf_phuff_take_scan(tf_phuff *h, j_decompress_ptr c);

/* Where our decoder is reading a scan: gives the source the position our
 * reader reached (and a marker it met, as unread_marker), so libjpeg can
 * read on from there; our decoder reads no more of this scan. Done by the
 * decoder itself after the scan's last MCU. */
void tf_phuff_sync(tf_phuff *h, j_decompress_ptr c);

#endif
