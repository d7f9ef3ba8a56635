/*
 * create_files.c — `lf-shard create images|frames`: a directory of files,
 * one sample per file, to a dataset.
 *
 * Layout (ImageNet's): when DIR has subfolders, each is a class and every
 * file under it, at any depth, gets the folder's rank in byte-wise sorted
 * order as label; the names go to DIR_OUT/classes.txt, one a line, line k
 * for label k, so a class name with a control character (a newline would
 * shift the labels after it) is refused. Without subfolders every file in
 * DIR is a sample with label 0. Hidden entries (".name") are skipped, and
 * so are, named in a warning and counted, entries that are neither regular
 * files nor folders (a FIFO would block the read). Files are taken in sorted
 * order (a folder's own files, then its subfolders'), so the same tree
 * always gives the same dataset.
 *
 * images: each JPEG is stored as it is; its size comes from its header
 * (tjDecompressHeader3) and goes to the index. One above the server's
 * transform limit (lf_tf_limits_default's max_pixels) is a bad file: the
 * server would stop at it. frames: each .npy holds a 2-D
 * little-endian f4/f2/i2 array whose rows are frames; every file must have
 * the first file's dtype and row width. A file that fails these checks stops
 * the conversion naming it, or with --skip-bad is counted and skipped.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>

#include "cli.h"
#include "lf_tf.h"
#include "npy.h"

#define MAX_INPUT_FILE (1ull << 30)   /* records are 32-bit sized; keep far below */

/* ---- the input tree ------------------------------------------------------------ */

typedef struct input_file {
    char *path;
    int64_t label;
} input_file;

typedef struct input_tree {
    input_file *files;
    size_t n, cap;
    cli_strings classes;           /* empty without class folders */
} input_tree;

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Entries that are neither regular files nor folders (FIFOs, sockets,
 * devices) are named in a warning and counted here, never read: a FIFO
 * would block the conversion. */
typedef struct scan_counts {
    uint64_t not_regular;
} scan_counts;

/* The visible subfolders and regular files of dir, each sorted. */
static void list_dir(const char *dir, cli_strings *dirs, cli_strings *files, scan_counts *sc)
{
    DIR *d = opendir(dir);
    if (!d)
        cli_die("cannot open directory %s: %s", dir, strerror(errno));
    struct dirent *e;
    while ((errno = 0, e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *path = cli_path_join(dir, e->d_name);
        struct stat st;
        if (stat(path, &st) < 0)
            cli_die("cannot stat %s: %s", path, strerror(errno));
        if (S_ISDIR(st.st_mode))
            cli_strings_push(dirs, cli_strdup(e->d_name));
        else if (S_ISREG(st.st_mode))
            cli_strings_push(files, cli_strdup(e->d_name));
        else {
            cli_warn("%s: neither a regular file nor a folder (a FIFO, socket or device); "
                     "skipped", path);
            sc->not_regular++;
        }
        free(path);
    }
    if (errno)
        cli_die("cannot read directory %s: %s", dir, strerror(errno));
    closedir(d);
    if (dirs->n)
        qsort(dirs->v, dirs->n, sizeof *dirs->v, by_name);
    if (files->n)
        qsort(files->v, files->n, sizeof *files->v, by_name);
}

static void tree_push(input_tree *t, char *path, int64_t label)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 1024;
        input_file *v = realloc(t->files, cap * sizeof *v);
        if (!v)
            cli_die("out of memory");
        t->files = v;
        t->cap = cap;
    }
    t->files[t->n++] = (input_file){.path = path, .label = label};
}

#define MAX_DEPTH 64   /* folders inside a class folder; deeper is a link loop */

/* Every file under class folder `dir`, at any depth, with `label`: this
 * folder's files in sorted order, then each subfolder's, in sorted order. */
static void class_add(input_tree *t, const char *dir, int64_t label, int depth,
                      scan_counts *sc)
{
    if (depth > MAX_DEPTH)
        cli_die("%s: folders nested more than %d deep (a symbolic link loop?)", dir, MAX_DEPTH);
    cli_strings dirs = {0}, files = {0};
    list_dir(dir, &dirs, &files, sc);
    for (size_t i = 0; i < files.n; i++)
        tree_push(t, cli_path_join(dir, files.v[i]), label);
    for (size_t i = 0; i < dirs.n; i++) {
        char *sub = cli_path_join(dir, dirs.v[i]);
        class_add(t, sub, label, depth + 1, sc);
        free(sub);
    }
    cli_strings_free(&dirs);
    cli_strings_free(&files);
}

/* classes.txt holds one name a line: a name with a control character (a
 * newline above all) would shift every label after it. */
static void check_class_name(const char *dir, const char *name)
{
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p < 0x20 || *p == 0x7f) {
            char shown[1024];
            size_t n = 0;
            for (const unsigned char *q = (const unsigned char *)name; *q && n + 5 < sizeof shown; q++)
                n += (size_t)snprintf(shown + n, sizeof shown - n,
                                      *q < 0x20 || *q == 0x7f ? "\\x%02x" : "%c", *q);
            cli_die("class folder %s/%s: its name holds a control character (byte 0x%02x); "
                    "classes.txt holds one class name a line, so rename the folder",
                    dir, shown, *p);
        }
}

static void tree_scan(const char *dir, input_tree *t)
{
    cli_strings top_files = {0};
    scan_counts sc = {0};
    memset(t, 0, sizeof *t);
    list_dir(dir, &t->classes, &top_files, &sc);
    if (t->classes.n == 0)
        for (size_t i = 0; i < top_files.n; i++)
            tree_push(t, cli_path_join(dir, top_files.v[i]), 0);
    else if (top_files.n)
        cli_warn("ignoring %zu files beside the class folders in %s", top_files.n, dir);
    for (size_t k = 0; k < t->classes.n; k++)
        check_class_name(dir, t->classes.v[k]);
    for (size_t k = 0; k < t->classes.n; k++) {
        char *sub = cli_path_join(dir, t->classes.v[k]);
        class_add(t, sub, (int64_t)k, 0, &sc);
        free(sub);
    }
    cli_strings_free(&top_files);
    if (sc.not_regular)
        cli_warn("skipped %" PRIu64 " entries of %s that are neither regular files nor "
                 "folders", sc.not_regular, dir);
    if (t->n == 0)
        cli_die("no input files in %s", dir);
}

static void tree_free(input_tree *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->files[i].path);
    free(t->files);
    cli_strings_free(&t->classes);
}

/* classes.txt beside the manifest: written after the dataset is complete,
 * under a temporary name first like every other file. The only map from
 * label to class name: without it the run failed (exit 1). */
static void write_classes(const char *out, const cli_strings *classes)
{
    char *tmp = cli_path_join(out, ".classes.txt.tmp"), *dst = cli_path_join(out, "classes.txt");
    FILE *f = fopen(tmp, "w");
    int ok = f != NULL;
    for (size_t k = 0; ok && k < classes->n; k++)
        ok = fprintf(f, "%s\n", classes->v[k]) >= 0;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok || rename(tmp, dst) != 0) {
        int e = errno;
        remove(tmp);
        cli_die("cannot write %s: %s (the dataset itself is complete, but its label names "
                "are not written)", dst, strerror(e));
    }
    free(tmp);
    free(dst);
}

/* ---- per-kind checks ---------------------------------------------------------- */

/* What a kind does with one file's bytes: checks them and points in->data at
 * the field's bytes (with width/height for JPEGs), or returns -1 with why. */
typedef struct file_kind {
    uint32_t default_block;      /* --block-size when not given */
    int (*parse)(void *state, const uint8_t *buf, size_t size, lf_field_input *in,
                 char *why, size_t why_len);
    void (*schema)(const void *state, lf_schema *s);  /* after the first good file */
} file_kind;

/* Whether the data after the first scan header reaches the end-of-image
 * marker: a file cut short has none, and tjDecompressHeader3 reads only the
 * headers. The segments before the scan are skipped by their lengths (an
 * EXIF thumbnail inside APP1 has markers of its own); in the scans, 0xFF
 * is followed only by a stuffed 0x00, a restart marker or a real marker. */
static int jpeg_complete(const uint8_t *b, size_t n)
{
    size_t i = 2; /* after SOI */
    while (i + 4 <= n && b[i] == 0xFF) {
        uint8_t m = b[i + 1];
        if (m == 0xFF || m == 0x01 || (m >= 0xD0 && m <= 0xD8)) { /* fill, standalone */
            i += m == 0xFF ? 1 : 2;
            continue;
        }
        size_t len = (size_t)b[i + 2] << 8 | b[i + 3];
        if (m == 0xDA) { /* start of scan */
            for (size_t k = i + 2 + len; k + 1 < n; k++)
                if (b[k] == 0xFF && b[k + 1] == 0xD9) return 1;
            return 0;
        }
        i += 2 + len;
    }
    return 0;
}

static int jpeg_parse(void *state, const uint8_t *buf, size_t size, lf_field_input *in,
                      char *why, size_t why_len)
{
    tjhandle tj = state;
    int w = 0, h = 0, subsamp, colorspace;   /* a header without a size sets neither */
    if (tjDecompressHeader3(tj, buf, size, &w, &h, &subsamp, &colorspace) < 0) {
        snprintf(why, why_len, "not a readable JPEG (%s)", tjGetErrorStr2(tj));
        return -1;
    }
    if (w <= 0 || h <= 0) {
        snprintf(why, why_len, "not a readable JPEG (header gives size %dx%d)", w, h);
        return -1;
    }
    /* The server's transform refuses an image above its pixel limit and
     * stops there (--on-corrupt skip does not cover it): no dataset may
     * hold one. Its default limit is the one the server uses. */
    lf_tf_limits lim;
    lf_tf_limits_default(&lim);
    uint64_t pixels = (uint64_t)w * (uint64_t)h;
    if (pixels > lim.max_pixels) {
        snprintf(why, why_len, "%dx%d = %" PRIu64 " pixels > limit %" PRIu64 " (the JPEG "
                 "transform's max_pixels: lf-server could not decode it)", w, h, pixels,
                 lim.max_pixels);
        return -1;
    }
    if (!jpeg_complete(buf, size)) {
        snprintf(why, why_len, "not a readable JPEG (no end-of-image marker after its scans: "
                 "cut short?)");
        return -1;
    }
    *in = (lf_field_input){.data = buf, .size = size, .width = (uint32_t)w,
                           .height = (uint32_t)h};
    return 0;
}

static void jpeg_schema(const void *state, lf_schema *s)
{
    (void)state;
    snprintf(s->fields[0].name, LF_FIELD_NAME_MAX, "image");
    s->fields[0].type = LF_FIELD_JPEG;
}

/* frames: the first file fixes dtype and row width. */
typedef struct frames_state {
    int have_first;
    npy_array first;
} frames_state;

static int npy_file_parse(void *state, const uint8_t *buf, size_t size, lf_field_input *in,
                          char *why, size_t why_len)
{
    frames_state *fs = state;
    npy_array a;
    if (npy_parse(buf, size, NPY_FRAMES, &a, why, why_len) < 0)
        return -1;
    if (!fs->have_first) {
        if (a.cols > LF_MAX_ROW_WIDTH) {
            snprintf(why, why_len, "rows of %" PRIu64 " values are too wide (at most %u)",
                     a.cols, LF_MAX_ROW_WIDTH);
            return -1;
        }
        fs->first = a;
        fs->have_first = 1;
    } else if (a.type != fs->first.type || a.cols != fs->first.cols) {
        snprintf(why, why_len, "%s rows of %" PRIu64 " values differ from the first file's "
                 "%s rows of %" PRIu64, lf_field_type_name(a.type), a.cols,
                 lf_field_type_name(fs->first.type), fs->first.cols);
        return -1;
    }
    *in = (lf_field_input){.data = buf + a.data_offset, .size = a.data_size};
    return 0;
}

static void npy_schema(const void *state, lf_schema *s)
{
    const frames_state *fs = state;
    snprintf(s->fields[0].name, LF_FIELD_NAME_MAX, "frames");
    s->fields[0].type = fs->first.type;
    s->fields[0].row_width = (uint32_t)fs->first.cols;
}

/* ---- the conversion -------------------------------------------------------------- */

enum { OPT_IN = 1, OPT_SKIP_BAD };

static const struct option file_options[] = {
    CLI_WRITER_OPTIONS,
    {"in", required_argument, NULL, OPT_IN},
    {"skip-bad", no_argument, NULL, OPT_SKIP_BAD},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct files_args {
    cli_writer_args wa;
    const char *in;
    int skip_bad;
} files_args;

static void parse_args(const cli_cmd *c, const file_kind *k, int argc, char **argv,
                       files_args *a)
{
    memset(a, 0, sizeof *a);
    a->wa.opts.block_bytes = k->default_block;
    int id;
    while ((id = cli_getopt(c, argc, argv, file_options)) != -1) {
        if (cli_writer_option(c, id, optarg, &a->wa))
            continue;
        if (id == OPT_IN && a->in)  /* one tree: its subfolders are the labels */
            cli_usage_error(c, "--in given twice ('%s', '%s'): give one directory", a->in,
                            optarg);
        if (id == OPT_IN)
            a->in = optarg;
        else if (id == OPT_SKIP_BAD)
            a->skip_bad = 1;
    }
    cli_positionals(c, argc, argv, 0, "");
    cli_writer_check(c, &a->wa);
    if (!a->in)
        cli_usage_error(c, "--in DIR is required");
}

static void make_schema(const file_kind *k, const void *state, lf_schema *s)
{
    memset(s, 0, sizeof *s);
    s->nfields = 2;
    s->cost_field = 0;
    k->schema(state, s);
    snprintf(s->fields[1].name, LF_FIELD_NAME_MAX, "label");
    s->fields[1].type = LF_FIELD_LABEL_I64;
}

static void convert(const file_kind *k, void *state, const files_args *a)
{
    input_tree t;
    tree_scan(a->in, &t);
    cli_out out = {0};
    int opened = 0;
    uint64_t skipped = 0;
    for (size_t i = 0; i < t.n; i++) {
        const input_file *f = &t.files[i];
        uint8_t *buf = NULL;
        size_t size = 0;
        char why[300];
        lf_field_input in[2];
        uint8_t label[8];
        int rc = cli_read_file(f->path, MAX_INPUT_FILE, &buf, &size);
        if (rc < 0)
            snprintf(why, sizeof why, "cannot read: %s", strerror(-rc));
        else
            rc = k->parse(state, buf, size, &in[0], why, sizeof why);
        if (rc < 0) {
            free(buf);
            cli_warn("%s: %s%s", f->path, why, a->skip_bad ? " (skipped)" : "");
            if (!a->skip_bad) {
                if (opened)
                    cli_out_fail(&out, CLI_EXIT_FAIL);
                exit(CLI_EXIT_FAIL);
            }
            skipped++;
            continue;
        }
        if (!opened) {
            lf_schema schema;
            make_schema(k, state, &schema);
            cli_out_open(&out, &a->wa, &schema, "create", t.n);
            opened = 1;
        }
        for (int b = 0; b < 8; b++)
            label[b] = (uint8_t)((uint64_t)f->label >> (8 * b));
        in[1] = (lf_field_input){.data = label, .size = 8};
        cli_out_add(&out, in, size, i + 1, f->path);
        free(buf);
    }
    if (!opened)
        cli_die("no usable input files in %s (%" PRIu64 " skipped)", a->in, skipped);
    cli_out_finish(&out, "create");
    if (skipped)
        cli_warn("skipped %" PRIu64 " bad files of %zu", skipped, t.n);
    if (t.classes.n)
        write_classes(a->wa.out, &t.classes);
    tree_free(&t);
}

static const char images_help[] =
    "Usage: lf-shard create images --in DIR --out DIR [OPTIONS]\n"
    "\n"
    "Stores JPEG files as they are, with their size from the JPEG header in the\n"
    "index (fields 'image' and 'label'). When DIR has subfolders each is a class:\n"
    "every file under it, at any depth, gets the folder's rank in sorted order as\n"
    "label, and OUT/classes.txt lists the names (line k = label k; a name with a\n"
    "control character such as a newline is refused). Otherwise every file in DIR\n"
    "gets label 0. FIFOs, sockets and devices are skipped with a warning.\n"
    "\n"
    "  --in DIR           input folder (required)\n"
    "  --skip-bad         skip (and count) files that are not readable JPEGs, or have\n"
    "                     more pixels than lf-server's JPEG transform takes, instead\n"
    "                     of stopping at the first one\n"
    CLI_WRITER_HELP("0: one image per block")
    "\n"
    "Example:\n"
    "  lf-shard create images --in /data/imagenet/train --out /data/in1k-train --skip-bad\n";

static const char frames_help[] =
    "Usage: lf-shard create frames --in DIR --out DIR [OPTIONS]\n"
    "\n"
    "Stores 2-D .npy arrays (NPY versions 1-3, C order, little-endian float32,\n"
    "float16 or int16) as frame arrays: each row is a frame, and every file must\n"
    "have the first file's dtype and row width (fields 'frames' and 'label').\n"
    "Class subfolders give labels as for 'create images'; otherwise labels are 0.\n"
    "\n"
    "  --in DIR           input folder (required)\n"
    "  --skip-bad         skip (and count) unusable files instead of stopping\n"
    CLI_WRITER_HELP("64K")
    "\n"
    "Example:\n"
    "  lf-shard create frames --in /data/fbank --out /data/fbank-ds --level 6\n";

int create_images(int argc, char **argv)
{
    static const file_kind k = {0, jpeg_parse, jpeg_schema};
    const cli_cmd c = {"create images", images_help};
    files_args a;
    parse_args(&c, &k, argc, argv, &a);
    tjhandle tj = tjInitDecompress();
    if (!tj)
        cli_die("cannot start TurboJPEG: %s", tjGetErrorStr2(NULL));
    convert(&k, tj, &a);
    tjDestroy(tj);
    return 0;
}

int create_frames(int argc, char **argv)
{
    static const file_kind k = {64 << 10, npy_file_parse, npy_schema};
    const cli_cmd c = {"create frames", frames_help};
    files_args a;
    frames_state fs = {0};
    parse_args(&c, &k, argc, argv, &a);
    convert(&k, &fs, &a);
    return 0;
}
