/*
 * image_cli.c — the image transform's flags as words and numbers.
 */
#include "image_cli.h"

#include "lf_layout.h"
#include "parse_num.h"

/* In the order of the transform's enums: a word's index is its value. */
static const char *const crops[] = {"full", "center", "random", NULL};
static const char *const resizes[] = {"bilinear", "area", NULL};
static const char *const dtypes[] = {"u8", "f16", "f32", NULL};
static const uint32_t dtype_codes[] = {LF_DTYPE_U8, LF_DTYPE_F16, LF_DTYPE_F32};

_Static_assert(LF_TF_CROP_FULL == 0 && LF_TF_CROP_CENTER == 1 && LF_TF_CROP_RANDOM_RESIZED == 2,
               "crops[] follows lf_tf_crop");
_Static_assert(LF_TF_RESIZE_BILINEAR == 0 && LF_TF_RESIZE_AREA == 1,
               "resizes[] follows lf_tf_resize");

int image_cli_set(lf_tf_image_params *p, image_cli_flag flag, const char *v)
{
    uint32_t w;
    switch (flag) {
    case IMAGE_CLI_SIZE: {
        /* the workers' workspaces take the default limits */
        lf_tf_limits lim;
        lf_tf_limits_default(&lim);
        return parse_dims(v, 1, lim.max_out_side, &p->out_w, &p->out_h);
    }
    case IMAGE_CLI_CROP: return parse_word(v, crops, &p->crop);
    case IMAGE_CLI_RESIZE: return parse_word(v, resizes, &p->resize);
    case IMAGE_CLI_DTYPE:
        if (parse_word(v, dtypes, &w)) return -1;
        p->out_dtype = dtype_codes[w];
        return 0;
    case IMAGE_CLI_FLIP: return parse_double(v, 0, 1, &p->flip_prob);
    }
    return -1;
}
