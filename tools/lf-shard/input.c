/*
 * input.c — `--in` arguments to files, files to lines.
 *
 * A corpus comes as many files (a directory of shards, a glob), often
 * compressed. Expansion happens once, before anything is written, so a
 * name that matches nothing stops the run at once. Reading then goes file
 * by file through a 1 MiB buffer of stored bytes and, for compressed files,
 * a 1 MiB buffer of decoded bytes; a line is copied out of those into the
 * caller's buffer, which grows to the longest line: memory is the line,
 * not the file. The format is sniffed from the magic bytes, not the name,
 * so stdin and misnamed files work too.
 */
#include "input.h"
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#define CHUNK (1u << 20)

/* ---- the list ------------------------------------------------------------------ */

/* Every file below dir, appended unsorted. */
static void walk(input_list *l, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        cli_die("cannot open directory %s: %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char *path = cli_path_join(dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) < 0)
            cli_die("cannot read %s: %s", path, strerror(errno));
        if (S_ISDIR(st.st_mode)) {
            walk(l, path);
            free(path);
        } else if (S_ISLNK(st.st_mode) && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            free(path);          /* a link may loop back up the tree */
        } else {
            cli_strings_push(l, path);
        }
    }
    closedir(d);
}

static int by_bytes(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One existing path: a file, or a directory's files in byte order. */
static void add_existing(input_list *l, const char *path, const struct stat *st)
{
    if (!S_ISDIR(st->st_mode)) {
        cli_strings_push(l, cli_strdup(path));
        return;
    }
    size_t first = l->n;
    walk(l, path);
    if (l->n == first)
        cli_die("no input files in %s", path);
    qsort(l->v + first, l->n - first, sizeof *l->v, by_bytes);
}

void input_list_add(input_list *l, const char *arg)
{
    struct stat st;
    if (!strcmp(arg, "-")) {
        for (size_t i = 0; i < l->n; i++)
            if (!strcmp(l->v[i], "-"))
                cli_die("--in -: stdin can be read only once");
        cli_strings_push(l, cli_strdup(arg));
    } else if (stat(arg, &st) == 0) {
        add_existing(l, arg, &st);
    } else if (strpbrk(arg, "*?[")) {
        glob_t g;
        int rc = glob(arg, 0, NULL, &g);   /* sorted: strcmp order in the C locale */
        if (rc == GLOB_NOMATCH)
            cli_die("no file matches %s", arg);
        if (rc != 0)
            cli_die("cannot expand %s: %s", arg, rc == GLOB_NOSPACE ? "out of memory"
                                                                    : "read error");
        for (size_t i = 0; i < g.gl_pathc; i++)
            if (stat(g.gl_pathv[i], &st) == 0)
                add_existing(l, g.gl_pathv[i], &st);
        globfree(&g);
    } else {
        cli_die("cannot open %s: %s", arg, strerror(errno));
    }
}

void input_list_free(input_list *l)
{
    cli_strings_free(l);
}

const char *input_list_read_once(const input_list *l)
{
    struct stat st;
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], "-") || stat(l->v[i], &st) < 0 || !S_ISREG(st.st_mode))
            return strcmp(l->v[i], "-") ? l->v[i] : "stdin";
    return NULL;
}

uint64_t input_list_bytes(const input_list *l)
{
    uint64_t sum = 0;
    struct stat st;
    if (input_list_read_once(l))
        return 0;
    for (size_t i = 0; i < l->n; i++)
        if (stat(l->v[i], &st) == 0)
            sum += (uint64_t)st.st_size;
    return sum;
}

/* ---- one file -------------------------------------------------------------------- */

enum { FORMAT_PLAIN, FORMAT_ZSTD, FORMAT_GZIP };

struct input_file {
    int fd;
    int format;
    int eof;                     /* no more stored bytes */
    int ended;                   /* the compressed stream ended where the bytes did */
    uint8_t *raw;                /* stored bytes */
    size_t raw_len, raw_pos;
    uint8_t *dec;                /* decoded bytes (raw itself for plain files) */
    size_t dec_len, dec_pos;
    ZSTD_DStream *zd;
    z_stream gz;
};

/* Reads more stored bytes; 0, or -errno. */
static int read_raw(input_stream *s, input_file *f)
{
    f->raw_len = f->raw_pos = 0;
    while (f->raw_len == 0 && !f->eof) {
        ssize_t r = read(f->fd, f->raw, CHUNK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        f->eof = r == 0;
        f->raw_len = (size_t)r;
        s->stored_bytes += (uint64_t)r;
    }
    return 0;
}

static int decode_zstd(input_file *f, const char **why)
{
    ZSTD_inBuffer in = {f->raw, f->raw_len, f->raw_pos};
    ZSTD_outBuffer out = {f->dec, CHUNK, 0};
    size_t rc = ZSTD_decompressStream(f->zd, &out, &in);
    if (ZSTD_isError(rc)) {
        *why = ZSTD_getErrorName(rc);
        return -1;
    }
    f->ended = rc == 0;
    f->raw_pos = in.pos;
    f->dec_len = out.pos;
    return 0;
}

static int decode_gzip(input_file *f, const char **why)
{
    if (f->ended && f->raw_pos < f->raw_len)
        inflateReset(&f->gz);    /* another member follows (as `cat a.gz b.gz` makes) */
    f->gz.next_in = f->raw + f->raw_pos;
    f->gz.avail_in = (uInt)(f->raw_len - f->raw_pos);
    f->gz.next_out = f->dec;
    f->gz.avail_out = CHUNK;
    int rc = inflate(&f->gz, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
        *why = f->gz.msg ? f->gz.msg : "corrupt data";
        return -1;
    }
    f->ended = rc == Z_STREAM_END;
    f->raw_pos = f->raw_len - f->gz.avail_in;
    f->dec_len = CHUNK - f->gz.avail_out;
    return 0;
}

/* Refills f->dec: 1 with bytes there, 0 at the end of the file, -1 with
 * s->err set. */
static int fill(input_stream *s, input_file *f)
{
    static const char *const names[] = {"", "zstd", "gzip"};
    f->dec_len = f->dec_pos = 0;
    while (f->dec_len == 0) {
        int rc = f->raw_pos < f->raw_len ? 0 : read_raw(s, f);
        if (rc < 0) {
            snprintf(s->err, sizeof s->err, "%s:%llu: cannot read: %s", s->path,
                     (unsigned long long)s->lineno, strerror(-rc));
            return -1;
        }
        int drained = f->eof && f->raw_pos == f->raw_len;
        if (f->format == FORMAT_PLAIN) {
            f->dec_len = f->raw_len;
            f->raw_pos = f->raw_len;
            if (drained)
                return 0;
            continue;
        }
        if (drained && f->ended)
            return 0;
        /* Run even with no input left: the decoder may hold output back. */
        const char *why = "";
        rc = f->format == FORMAT_ZSTD ? decode_zstd(f, &why) : decode_gzip(f, &why);
        if (rc < 0) {
            snprintf(s->err, sizeof s->err, "%s:%llu: corrupt %s data: %s", s->path,
                     (unsigned long long)s->lineno, names[f->format], why);
            return -1;
        }
        if (drained && f->dec_len == 0 && !f->ended) {
            snprintf(s->err, sizeof s->err, "%s:%llu: the %s data ends too soon (a "
                     "truncated file?)", s->path, (unsigned long long)s->lineno,
                     names[f->format]);
            return -1;
        }
    }
    return 1;
}

static void close_file(input_file *f)
{
    if (!f)
        return;
    if (f->fd > STDIN_FILENO)
        close(f->fd);
    if (f->format == FORMAT_GZIP)
        inflateEnd(&f->gz);
    ZSTD_freeDStream(f->zd);
    if (f->dec != f->raw)
        free(f->dec);
    free(f->raw);
    free(f);
}

/* Opens the list's next file and tells its format; -1 with s->err set. */
static int open_next(input_stream *s)
{
    const char *path = s->list->v[s->next++];
    input_file *f = calloc(1, sizeof *f);
    s->path = path;
    s->lineno = 0;
    if (!f || !(f->raw = malloc(CHUNK)))
        goto oom;
    f->fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
    if (f->fd < 0) {
        snprintf(s->err, sizeof s->err, "cannot open %s: %s", path, strerror(errno));
        close_file(f);
        return -1;
    }
    s->cur = f;
    int rc = read_raw(s, f);
    if (rc < 0) {
        snprintf(s->err, sizeof s->err, "cannot read %s: %s", path, strerror(-rc));
        return -1;
    }
    const uint8_t *m = f->raw;
    if (f->raw_len >= 4 && m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd)
        f->format = FORMAT_ZSTD;
    else if (f->raw_len >= 2 && m[0] == 0x1f && m[1] == 0x8b)
        f->format = FORMAT_GZIP;
    f->dec = f->raw;
    if (f->format == FORMAT_PLAIN)
        return 0;
    if (!(f->dec = malloc(CHUNK)))
        goto oom;
    if (f->format == FORMAT_ZSTD ? !(f->zd = ZSTD_createDStream())
                                 : inflateInit2(&f->gz, 16 + MAX_WBITS) != Z_OK) {
        f->format = FORMAT_PLAIN;          /* nothing for close_file to end */
        goto oom;
    }
    return 0;
oom:
    snprintf(s->err, sizeof s->err, "%s: out of memory opening it", path);
    close_file(f);
    s->cur = NULL;
    return -1;
}

/* ---- the stream -------------------------------------------------------------------- */

void input_stream_init(input_stream *s, const input_list *list)
{
    memset(s, 0, sizeof *s);
    s->list = list;
}

/* Makes *line hold `need` bytes: doubling, or just enough when doubling
 * would not fit. */
static int grow(char **line, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t want = *cap * 2 > need ? *cap * 2 : need;
    char *p = realloc(*line, want);
    if (!p && want > need)
        p = realloc(*line, want = need);
    if (!p)
        return -1;
    *line = p;
    *cap = want;
    return 0;
}

ssize_t input_stream_line(input_stream *s, char **line, size_t *cap)
{
    size_t len = 0;
    for (;;) {
        if (!s->cur && s->next == s->list->n)
            return 0;
        if (!s->cur && open_next(s) < 0)
            return -1;
        input_file *f = s->cur;
        if (len == 0)
            s->lineno++;
        if (f->dec_pos == f->dec_len) {
            int rc = fill(s, f);
            if (rc < 0)
                return -1;
            if (rc == 0 && len > 0)
                break;           /* the last line has no newline */
            if (rc == 0) {
                s->lineno--;
                close_file(f);
                s->cur = NULL;
                continue;
            }
        }
        const uint8_t *p = f->dec + f->dec_pos;
        size_t avail = f->dec_len - f->dec_pos;
        const uint8_t *nl = memchr(p, '\n', avail);
        size_t take = nl ? (size_t)(nl - p) + 1 : avail;
        if (grow(line, cap, len + take + 1) < 0) {
            snprintf(s->err, sizeof s->err, "%s:%llu: out of memory: the line is longer than "
                     "%zu bytes, and no more could be held", s->path,
                     (unsigned long long)s->lineno, len);
            return -1;
        }
        memcpy(*line + len, p, take);
        len += take;
        f->dec_pos += take;
        if (nl)
            break;
    }
    (*line)[len] = 0;
    return (ssize_t)len;
}

void input_stream_close(input_stream *s)
{
    close_file(s->cur);
    s->cur = NULL;
}
