/*
 * tf_plan.c — crop/flip planning: torchvision's random-resized-crop rules
 * (ranges, integer boxes, the fallback), center crop, reproducibility from
 * (seed, epoch, sample id) alone. (augment == crop_resize(plan) is checked in
 * tf_jpeg_golden.c, which has the JPEGs.)
 */
#include "lf_tf.h"
#include "test.h"

#include <math.h>

#define PIN_X 132
#define PIN_Y 153
#define PIN_W 185
#define PIN_H 176
#define PIN_FLIP 0

static void test_rrc_ranges(void)
{
    lf_tf_image_params p;
    lf_tf_image_params_default(&p, 224, 224);
    p.seed = 1234;
    const uint32_t W = 500, H = 400;
    double area_sum = 0;
    int flips = 0;
    const int N = 20000;
    for (int i = 0; i < N; i++) {
        lf_tf_box b;
        ASSERT_EQ(lf_tf_image_plan(&p, W, H, 3, (uint64_t)i, &b), 0);
        ASSERT_TRUE(b.x == floor(b.x) && b.y == floor(b.y) && b.w == floor(b.w) && b.h == floor(b.h));
        ASSERT_TRUE(b.x >= 0 && b.y >= 0 && b.x + b.w <= W && b.y + b.h <= H);
        double frac = b.w * b.h / (W * H), ratio = b.w / b.h;
        /* Rounding w and h to whole pixels moves each by <= 0.5. */
        ASSERT_TRUE(frac >= 0.08 * (1 - 2.0 / b.w - 2.0 / b.h) && frac <= 1.0);
        ASSERT_TRUE(ratio >= 0.75 * (1 - 1.0 / b.h) / (1 + 1.0 / b.w) &&
                    ratio <= 4.0 / 3 * (1 + 1.0 / b.w) / (1 - 1.0 / b.h));
        area_sum += frac;
        flips += b.flip;
    }
    /* Accepted draws are biased to small areas by the fit test: torchvision's
     * get_params simulated in Python (200k draws) gives 0.453 for 500x400. */
    double mean = area_sum / N;
    printf("rrc 500x400: mean area fraction %.4f, flip rate %.4f\n", mean, (double)flips / N);
    ASSERT_TRUE(mean > 0.445 && mean < 0.461);
    ASSERT_TRUE(flips > N * 0.47 && flips < N * 0.53);
}

static void test_rrc_fallback(void)
{
    lf_tf_image_params p;
    lf_tf_image_params_default(&p, 224, 224);
    lf_tf_box b;
    /* 1000x10: no try fits, so the central crop clamped to ratio 4/3. */
    ASSERT_EQ(lf_tf_image_plan(&p, 1000, 10, 0, 5, &b), 0);
    ASSERT_DBL_NEAR(b.w, 13, 0);
    ASSERT_DBL_NEAR(b.h, 10, 0);
    ASSERT_DBL_NEAR(b.x, 493, 0);
    ASSERT_DBL_NEAR(b.y, 0, 0);
    ASSERT_EQ(lf_tf_image_plan(&p, 10, 1000, 0, 5, &b), 0);
    ASSERT_DBL_NEAR(b.w, 10, 0);
    ASSERT_DBL_NEAR(b.h, 13, 0);
    ASSERT_DBL_NEAR(b.x, 0, 0);
    ASSERT_DBL_NEAR(b.y, 493, 0);
    /* In-range aspect with an impossible scale: the whole image. */
    p.scale_min = p.scale_max = 1.0;
    p.ratio_min = p.ratio_max = 2.0;
    ASSERT_EQ(lf_tf_image_plan(&p, 300, 300, 0, 5, &b), 0);   /* 300x300 < ratio 2: h clamps */
    ASSERT_DBL_NEAR(b.w, 300, 0);
    ASSERT_DBL_NEAR(b.h, 150, 0);
    ASSERT_DBL_NEAR(b.y, 75, 0);
    p.ratio_min = 0.5;
    ASSERT_EQ(lf_tf_image_plan(&p, 400, 300, 0, 5, &b), 0);   /* ratio inside: whole */
    ASSERT_TRUE(b.w == 400 && b.h == 300 && b.x == 0 && b.y == 0);
}

static void test_center_and_args(void)
{
    lf_tf_image_params p;
    lf_tf_image_params_default(&p, 224, 224);
    p.crop = LF_TF_CROP_CENTER;
    p.flip_prob = 0;
    lf_tf_box b;
    ASSERT_EQ(lf_tf_image_plan(&p, 400, 300, 9, 9, &b), 0);
    ASSERT_DBL_NEAR(b.w, 262.5, 1e-9);
    ASSERT_DBL_NEAR(b.h, 262.5, 1e-9);
    ASSERT_DBL_NEAR(b.x, 68.75, 1e-9);
    ASSERT_DBL_NEAR(b.y, 18.75, 1e-9);
    ASSERT_EQ(b.flip, 0);
    p.crop = 7;
    ASSERT_EQ(lf_tf_image_plan(&p, 400, 300, 0, 0, &b), LF_TF_E_ARG);
    lf_tf_image_params_default(&p, 224, 224);
    p.scale_min = 0;
    ASSERT_EQ(lf_tf_image_plan(&p, 400, 300, 0, 0, &b), LF_TF_E_ARG);
    lf_tf_image_params_default(&p, 224, 224);
    ASSERT_EQ(lf_tf_image_plan(&p, 0, 300, 0, 0, &b), LF_TF_E_ARG);
}

/* The same (seed, epoch, id) gives the same box in any order; the pinned
 * values (this implementation's, recorded once) catch a change of the hash
 * that would silently change every run's crops. */
static void test_reproducible(void)
{
    lf_tf_image_params p;
    lf_tf_image_params_default(&p, 224, 224);
    p.seed = 1;
    lf_tf_box first[64], again;
    for (int i = 0; i < 64; i++) ASSERT_EQ(lf_tf_image_plan(&p, 640, 480, 2, (uint64_t)i, &first[i]), 0);
    int differ = 0;
    for (int i = 63; i >= 0; i--) {
        ASSERT_EQ(lf_tf_image_plan(&p, 640, 480, 2, (uint64_t)i, &again), 0);
        ASSERT_TRUE(again.x == first[i].x && again.y == first[i].y && again.w == first[i].w &&
                    again.h == first[i].h && again.flip == first[i].flip);
        ASSERT_EQ(lf_tf_image_plan(&p, 640, 480, 3, (uint64_t)i, &again), 0);
        differ += again.x != first[i].x || again.w != first[i].w;
    }
    ASSERT_GT(differ, 56);            /* another epoch: other crops */
    printf("pinned: seed 1 epoch 2 sample 3 -> x %.0f y %.0f w %.0f h %.0f flip %d\n",
           first[3].x, first[3].y, first[3].w, first[3].h, first[3].flip);
    ASSERT_TRUE(first[3].x == PIN_X && first[3].y == PIN_Y && first[3].w == PIN_W &&
                first[3].h == PIN_H && first[3].flip == PIN_FLIP);
}

int main(void)
{
    test_rrc_ranges();
    test_rrc_fallback();
    test_center_and_args();
    test_reproducible();
    printf("tf_plan: ok\n");
    return 0;
}
