/*
 * tf_jpeg_entropy.c — entropy decoding of progressive JPEGs alone:
 * libjpeg-turbo's decoder against transforms/phuff.c.
 *
 *   tf_jpeg_entropy DIR [PASSES]
 *
 * Every progressive JPEG under DIR (subfolders too) is read to its
 * coefficients (jpeg_read_coefficients: every scan entropy-decoded, no
 * IDCT) three ways, interleaved file by file in each pass: with libjpeg's
 * decode_mcu, with ours (tf_phuff), and with none (each scan's data passed
 * over: what reading markers, allocating and zeroing the coefficient
 * arrays cost). Entropy time = time - the "none" time. First the
 * coefficients of libjpeg and ours are compared, every block of every
 * component (exit 1 on any difference). Prints per file the fastest CPU
 * time of each way, then the totals. Figures only: no time passes or fails.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include <jpeglib.h>
#include <jerror.h>
#include <jpegint.h>

#include "phuff.h"

enum { WAY_LIBJPEG, WAY_OURS, WAY_NONE, WAYS };
static const char *const way_name[WAYS] = {"libjpeg", "ours", "none"};

typedef struct file {
    unsigned char *data;
    size_t size;
    char *name;
} file;

typedef struct reader {
    struct jpeg_decompress_struct c;
    struct jpeg_error_mgr err;
    struct jpeg_progress_mgr progress;
    jmp_buf jump;
    int way;
    tf_phuff *phuff;
} reader;

static void on_error(j_common_ptr c)
{
    reader *r = (reader *)(void *)c;
    char msg[JMSG_LENGTH_MAX];
    (*c->err->format_message)(c, msg);
    fprintf(stderr, "tf_jpeg_entropy: %s\n", msg);
    longjmp(r->jump, 1);
}

static void on_message(j_common_ptr c, int level)
{
    if (level < 0) on_error(c);
}

static boolean no_mcu(j_decompress_ptr c, JBLOCKROW *blocks)
{
    (void)c; (void)blocks;
    return TRUE;
}

/* WAY_NONE: the source moves to the scan's end marker at its start. */
static void pass_over_scan(j_decompress_ptr c)
{
    const JOCTET *p = c->src->next_input_byte, *end = p + c->src->bytes_in_buffer;
    while (end - p >= 2 && !(p[0] == 0xFF && p[1] != 0 && (p[1] < 0xD0 || p[1] > 0xD7))) p++;
    c->src->bytes_in_buffer -= (size_t)(p - c->src->next_input_byte);
    c->src->next_input_byte = p;
    c->entropy->decode_mcu = no_mcu;
}

static void on_progress(j_common_ptr cc)
{
    reader *r = (reader *)(void *)cc;
    j_decompress_ptr c = &r->c;
    if (r->way == WAY_OURS) tf_phuff_take_scan(r->phuff, c);
    if (r->way == WAY_NONE && c->entropy && c->inputctl->consume_input == c->coef->consume_data &&
        c->input_iMCU_row == 0 && c->entropy->decode_mcu != no_mcu)
        pass_over_scan(c);
}

/* Reads f's coefficients the given way; with sum, adds a hash of them.
 * Returns 0, or -1 where libjpeg failed. */
static int read_coefs(reader *r, const file *f, int way, uint64_t *sum)
{
    r->way = way;
    if (setjmp(r->jump)) {
        jpeg_abort_decompress(&r->c);
        return -1;
    }
    jpeg_mem_src(&r->c, f->data, (unsigned long)f->size);
    jpeg_read_header(&r->c, TRUE);
    jvirt_barray_ptr *arrays = jpeg_read_coefficients(&r->c);
    for (int ci = 0; sum && ci < r->c.num_components; ci++) {
        jpeg_component_info *comp = &r->c.comp_info[ci];
        for (JDIMENSION y = 0; y < comp->height_in_blocks; y++) {
            JBLOCKARRAY row = (*r->c.mem->access_virt_barray)((j_common_ptr)&r->c, arrays[ci], y, 1, FALSE);
            for (JDIMENSION x = 0; x < comp->width_in_blocks; x++)
                for (int k = 0; k < DCTSIZE2; k++)
                    *sum = (*sum ^ (uint16_t)row[0][x][k]) * 0x100000001b3ull + (uint64_t)k;
        }
    }
    jpeg_abort_decompress(&r->c);
    return 0;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int is_progressive(const unsigned char *d, size_t n)
{
    for (size_t i = 2; i + 4 <= n && d[i] == 0xFF;) {
        unsigned m = d[i + 1];
        if (m == 0xC2 || m == 0xC6 || m == 0xCA || m == 0xCE) return 1;
        if (m == 0xDA) return 0;
        i += 2 + ((size_t)d[i + 2] << 8 | d[i + 3]);
    }
    return 0;
}

static file *files;
static size_t nfiles, files_cap;

static void add_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st)) continue;
        if (S_ISDIR(st.st_mode)) {
            add_dir(path);
            continue;
        }
        FILE *fp = fopen(path, "rb");
        if (!fp) continue;
        unsigned char *data = malloc((size_t)st.st_size + 1);
        size_t n = data ? fread(data, 1, (size_t)st.st_size, fp) : 0;
        fclose(fp);
        if (n < 4 || data[0] != 0xFF || data[1] != 0xD8 || !is_progressive(data, n)) {
            free(data);
            continue;
        }
        if (nfiles == files_cap) {
            files_cap = files_cap ? 2 * files_cap : 64;
            files = realloc(files, files_cap * sizeof *files);
        }
        files[nfiles++] = (file){data, n, strdup(path)};
    }
    closedir(d);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: tf_jpeg_entropy DIR [PASSES]\n");
        return 2;
    }
    int passes = argc > 2 ? atoi(argv[2]) : 5;
    add_dir(argv[1]);
    static reader r;
    r.c.err = jpeg_std_error(&r.err);
    r.err.error_exit = on_error;
    r.err.emit_message = on_message;
    jpeg_create_decompress(&r.c);
    r.progress.progress_monitor = on_progress;
    r.c.progress = &r.progress;
    r.phuff = tf_phuff_create();
    r.c.client_data = r.phuff;

    int bad = 0;
    for (size_t i = 0; i < nfiles; i++) {
        uint64_t a = 0, b = 0;
        int ra = read_coefs(&r, &files[i], WAY_LIBJPEG, &a), rb = read_coefs(&r, &files[i], WAY_OURS, &b);
        if (ra || rb || a != b) {
            printf("DIFFER %s (libjpeg %d %016llx, ours %d %016llx)\n", files[i].name, ra,
                   (unsigned long long)a, rb, (unsigned long long)b);
            bad = 1;
        }
    }
    double *best = malloc(nfiles * WAYS * sizeof *best);
    for (size_t i = 0; i < nfiles * WAYS; i++) best[i] = 1e9;
    for (int p = 0; p < passes; p++)
        for (size_t i = 0; i < nfiles; i++)
            for (int w = 0; w < WAYS; w++) {
                int way = (w + p) % WAYS;
                double t0 = cpu_s();
                read_coefs(&r, &files[i], way, NULL);
                double t = cpu_s() - t0;
                if (t < best[i * WAYS + (size_t)way]) best[i * WAYS + (size_t)way] = t;
            }
    double tot[WAYS] = {0};
    for (size_t i = 0; i < nfiles; i++) {
        double *b = best + i * WAYS;
        printf("file %s libjpeg %.3f ours %.3f none %.3f ms entropy ratio %.2f\n", files[i].name,
               b[0] * 1e3, b[1] * 1e3, b[2] * 1e3, (b[0] - b[2]) / (b[1] - b[2]));
        for (int w = 0; w < WAYS; w++) tot[w] += b[w];
    }
    printf("%zu progressive files, fastest of %d passes, CPU ms:", nfiles, passes);
    for (int w = 0; w < WAYS; w++) printf(" %s %.1f", way_name[w], tot[w] * 1e3);
    printf("\nentropy alone (minus none): libjpeg %.1f ms, ours %.1f ms: %.2fx\n",
           (tot[0] - tot[2]) * 1e3, (tot[1] - tot[2]) * 1e3, (tot[0] - tot[2]) / (tot[1] - tot[2]));
    tf_phuff_free(r.phuff);
    jpeg_destroy_decompress(&r.c);
    return bad;
}
