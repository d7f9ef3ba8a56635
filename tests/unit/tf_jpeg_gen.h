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

#endif
