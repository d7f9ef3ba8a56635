/*
 * image_cli.h — the image transform's flags (--image-size, --crop,
 * --resize, --image-dtype, --flip), read one way for lf-server and for
 * lf-rank-loop, whose --verify must take the server's transform flags.
 */
#ifndef LF_IMAGE_CLI_H
#define LF_IMAGE_CLI_H

#include "lf_tf.h"

typedef enum image_cli_flag {
    IMAGE_CLI_SIZE,   /* WxH, each side 1..the transform's default max_out_side */
    IMAGE_CLI_CROP,   /* full | center | random */
    IMAGE_CLI_RESIZE, /* bilinear | area */
    IMAGE_CLI_DTYPE,  /* u8 | f16 | f32 */
    IMAGE_CLI_FLIP,   /* a probability in [0, 1] */
} image_cli_flag;

/* Sets flag's field of *p from the value v. Returns 0, or -1 when v is not
 * a value the transform takes (*p left alone). */
int image_cli_set(lf_tf_image_params *p, image_cli_flag flag, const char *v);

#endif
