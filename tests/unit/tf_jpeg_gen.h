/*
 * tf_jpeg_gen.h — JPEGs made with libjpeg's compressor for the transforms
 * tests (TurboJPEG's compressor offers no scan scripts or restart
 * intervals).
 */
#ifndef TF_JPEG_GEN_H
#define TF_JPEG_GEN_H

#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

typedef struct tf_jpeg_gen {
    uint32_t w, h;
    int components;              /* 1: grayscale, 3: RGB in */
    /* after jpeg_set_defaults: sampling, quality, scans, restarts */
    void (*setup)(struct jpeg_compress_struct *cc, void *arg);
    /* sample x (0 .. w * components - 1) of row y */
    unsigned char (*sample)(size_t x, uint32_t y);
    void *arg;                   /* setup's */
} tf_jpeg_gen;

/* The JPEG in memory (free() it), its size in *size. */
static inline unsigned char *tf_jpeg_gen_make(const tf_jpeg_gen *g, size_t *size)
{
    struct jpeg_compress_struct cc;
    struct jpeg_error_mgr jerr;
    cc.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&cc);
    unsigned char *buf = NULL;
    unsigned long sz = 0;
    jpeg_mem_dest(&cc, &buf, &sz);
    cc.image_width = g->w;
    cc.image_height = g->h;
    cc.input_components = g->components;
    cc.in_color_space = g->components == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&cc);
    g->setup(&cc, g->arg);
    jpeg_start_compress(&cc, TRUE);
    size_t stride = (size_t)g->w * (size_t)g->components;
    unsigned char *row = malloc(stride);
    ASSERT_TRUE(row != NULL);
    for (uint32_t y = 0; y < g->h; y++) {
        for (size_t x = 0; x < stride; x++) row[x] = g->sample(x, y);
        JSAMPROW r = row;
        jpeg_write_scanlines(&cc, &r, 1);
    }
    jpeg_finish_compress(&cc);
    jpeg_destroy_compress(&cc);
    free(row);
    *size = sz;
    return buf;
}

static inline int tf_jpeg_gen_scan(jpeg_scan_info *s, int n, int comps, int ci, int Ss, int Se,
                                   int Ah, int Al)
{
    memset(&s[n], 0, sizeof s[n]);
    s[n].comps_in_scan = comps;
    for (int c = 0; c < comps; c++) s[n].component_index[c] = comps == 1 ? ci : c;
    s[n].Ss = Ss;
    s[n].Se = Se;
    s[n].Ah = Ah;
    s[n].Al = Al;
    return n + 1;
}

/* Scan scripts for files made with jpeg_set_defaults (scan_info, num_scans;
 * SCRIPT_DEFAULT is jpeg_simple_progression's, made by libjpeg).
 * SCRIPT_APPROX: DC at Al 2, 1, 0; AC in bands 1-2, 3-9, 10-63 at Al 3,
 * then refined down to Al `stop` (0: fully; above 0, the coefficients stay
 * approximate and libjpeg's decoder smooths the blocks). SCRIPT_BANDS: DC
 * whole, then AC 1-5, 6-20, 21-63 of each component, first scans only.
 * Returns the scan count (at most 64). */
enum { SCRIPT_DEFAULT, SCRIPT_APPROX, SCRIPT_BANDS, SCRIPTS };

static inline int tf_jpeg_gen_script(jpeg_scan_info *s, int script, int comps, int stop)
{
    static const int bands[3][2] = {{1, 2}, {3, 9}, {10, 63}};
    static const int groups[3][2] = {{1, 5}, {6, 20}, {21, 63}};
    int n = 0;
    if (script == SCRIPT_APPROX) {
        n = tf_jpeg_gen_scan(s, n, comps, 0, 0, 0, 0, 2);
        for (int c = 0; c < comps; c++)
            for (int b = 0; b < 3; b++)
                n = tf_jpeg_gen_scan(s, n, 1, c, bands[b][0], bands[b][1], 0, 3);
        n = tf_jpeg_gen_scan(s, n, comps, 0, 0, 0, 2, 1);
        for (int al = 2; al >= stop; al--)
            for (int c = 0; c < comps; c++)
                for (int b = 0; b < 3; b++)
                    n = tf_jpeg_gen_scan(s, n, 1, c, bands[b][0], bands[b][1], al + 1, al);
        if (!stop) n = tf_jpeg_gen_scan(s, n, comps, 0, 0, 0, 1, 0);
    } else {
        n = tf_jpeg_gen_scan(s, n, comps, 0, 0, 0, 0, 0);
        for (int c = 0; c < comps; c++)
            for (int g = 0; g < 3; g++)
                n = tf_jpeg_gen_scan(s, n, 1, c, groups[g][0], groups[g][1], 0, 0);
    }
    return n;
}

/* A progressive file's scans (script, refined down to Al stop) and
 * restart interval, from a setup after jpeg_set_defaults. */
static inline void tf_jpeg_gen_progression(struct jpeg_compress_struct *cc, int script, int stop,
                                           unsigned restart_interval, int restart_in_rows)
{
    static jpeg_scan_info scans[64];
    if (script == SCRIPT_DEFAULT) {
        jpeg_simple_progression(cc);
    } else {
        cc->scan_info = scans;
        cc->num_scans = tf_jpeg_gen_script(scans, script, cc->num_components, stop);
    }
    cc->restart_interval = restart_interval;
    cc->restart_in_rows = restart_in_rows;
}

#endif
