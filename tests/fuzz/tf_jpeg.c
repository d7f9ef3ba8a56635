/*
 * tf_jpeg.c — fuzz target for the JPEG path of lf_tf: header, full decode,
 * random-resized crop (u8), center crop (f16) and area resize (f32) of any
 * bytes. Every call must either succeed with the exact byte count or fail
 * with a negative status and a reason; anything else traps. Limits are small
 * so one input stays cheap.
 */
#include <stdint.h>
#include <stdlib.h>

#include "lf_tf.h"

#define MAX_PIXELS (2u << 20)

static lf_tf_ws *ws;
static unsigned char *full;      /* MAX_PIXELS * 3 */
static unsigned char out[96 * 96 * 4];

static void check(long rc, long want)
{
    if (rc >= 0 ? rc != want : lf_tf_reason(ws)[0] == '\0') __builtin_trap();
}

static void setup(void)
{
    lf_tf_limits lim;
    lf_tf_limits_default(&lim);
    lim.max_pixels = MAX_PIXELS;
    lim.max_memory = 64u << 20;
    lim.max_scans = 64;
    lim.max_out_side = 96;
    if (lf_tf_ws_create(&lim, &ws) != 0) abort();
    full = malloc((size_t)MAX_PIXELS * 3);
    if (!full) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ws) setup();
    lf_tf_jpeg_info info;
    if (lf_tf_jpeg_info_get(ws, data, size, &info) != 0) return 0;
    long rc = lf_tf_jpeg_decode(ws, full, (size_t)MAX_PIXELS * 3, data, size, &info);
    check(rc, (long)info.width * info.height * 3);

    lf_tf_image_params p;
    lf_tf_image_params_default(&p, 64, 48);
    p.out_dtype = LF_DTYPE_U8;
    p.seed = size;
    rc = lf_tf_jpeg_augment(ws, out, sizeof out, data, size, &p, 1, size, NULL);
    check(rc, (long)lf_tf_image_out_size(&p));

    lf_tf_image_params_default(&p, 96, 40);
    p.crop = LF_TF_CROP_CENTER;
    p.out_dtype = LF_DTYPE_F16;
    rc = lf_tf_jpeg_augment(ws, out, sizeof out, data, size, &p, 2, 7, NULL);
    check(rc, (long)lf_tf_image_out_size(&p));

    lf_tf_image_params_default(&p, 17, 23);
    p.crop = LF_TF_CROP_FULL;
    p.resize = LF_TF_RESIZE_AREA;
    rc = lf_tf_jpeg_augment(ws, out, sizeof out, data, size, &p, 3, 9, NULL);
    check(rc, (long)lf_tf_image_out_size(&p));
    return 0;
}
