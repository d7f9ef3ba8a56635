/*
 * create_tokens.c — `lf-shard create tokens`: JSONL to a token dataset.
 *
 * Each non-blank line is a JSON object; the sample is either an array of
 * non-negative integer ids (--field, default "tokens") or a string whose
 * bytes become ids 0..255 (--text-field). The dataset has one field named
 * "tokens". Without --dtype the ids are stored as u16; if a later line holds
 * an id above 65535 the partial output is abandoned and the file is written
 * again as u32, so the common case reads the input once and the result never
 * depends on guessing. Input that cannot be read twice (a pipe) is written
 * as u32 from the start, unless --dtype says otherwise: a second pass would
 * see only what the first left in the pipe. Lines are parsed in batches on
 * --threads threads and added in line order, so the first bad line in the
 * file is the one named.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static const char tokens_help[] =
    "Usage: lf-shard create tokens --in FILE.jsonl --out DIR [OPTIONS]\n"
    "\n"
    "Converts JSON Lines (one object per line) into a dataset with one field,\n"
    "'tokens'. Blank lines are skipped; any malformed line stops the conversion\n"
    "with FILE:LINE and the problem, and no dataset is left behind.\n"
    "\n"
    "  --in FILE          input .jsonl file (required)\n"
    "  --field NAME       JSON array of integer token ids to take (default 'tokens')\n"
    "  --text-field NAME  take a string field instead, tokenized byte-level (ids 0..255)\n"
    "  --dtype u16|u32    id width (default: u16 when every id fits, else u32;\n"
    "                     u32 when FILE is a pipe, which cannot be read twice)\n"
    CLI_WRITER_HELP("64K")
    "\n"
    "Example:\n"
    "  echo '{\"tokens\": [17, 4, 9000]}' > a.jsonl\n"
    "  lf-shard create tokens --in a.jsonl --out /data/a --block-size 256K\n"
    "  lf-shard create tokens --in docs.jsonl --text-field text --out /data/docs\n";

enum { OPT_IN = 1, OPT_FIELD, OPT_TEXT_FIELD, OPT_DTYPE };

static const struct option tokens_options[] = {
    CLI_WRITER_OPTIONS,
    {"in", required_argument, NULL, OPT_IN},
    {"field", required_argument, NULL, OPT_FIELD},
    {"text-field", required_argument, NULL, OPT_TEXT_FIELD},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct tokens_args {
    cli_writer_args wa;
    const char *in;
    const char *field;           /* JSON key */
    int text;                    /* the key holds a string */
    int dtype;                   /* 0 auto, 2 or 4 bytes per id */
} tokens_args;

/* How one line or one pass over the input ended. */
enum { PASS_BAD = -1, PASS_DONE, PASS_NEED_U32 };

/* One input line and what it parses to; a batch of these is parsed in
 * parallel, then handed to the writer in line order. */
typedef struct line_ctx {
    const tokens_args *a;
    size_t width;                /* bytes per id in this pass */
    char *text;                  /* the line, from getline */
    size_t text_cap;
    size_t len;
    uint64_t lineno;             /* 1-based */
    uint64_t end;                /* input bytes consumed up to the line's end */
    uint8_t *buf;                /* the sample's ids, little-endian */
    size_t cap;
    size_t count;
    int rc;                      /* take_line's result */
    char msg[512];               /* what is wrong with the line (PASS_BAD) */
} line_ctx;

#define BATCH_LINES 1024
#define BATCH_BYTES (32u << 20)  /* bounds the text held per batch */

static int bad(line_ctx *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(line_ctx *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->msg, sizeof l->msg, fmt, ap);
    va_end(ap);
    return PASS_BAD;
}

static int push_id(line_ctx *l, uint32_t id)
{
    if ((l->count + 1) * l->width > l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4096;
        uint8_t *p = realloc(l->buf, cap);
        if (!p)
            return bad(l, "out of memory");
        l->buf = p;
        l->cap = cap;
    }
    uint8_t *d = l->buf + l->count * l->width;
    for (size_t b = 0; b < l->width; b++)
        d[b] = (uint8_t)(id >> (8 * b));
    l->count++;
    return PASS_DONE;
}

/* Fills l->buf from the array; PASS_NEED_U32 when an id needs u32 and the
 * width was only guessed. */
static int take_array(line_ctx *l, json_t *arr)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
        if (id < 0 || id > (json_int_t)UINT32_MAX)
            return bad(l, "'%s'[%zu]: expected an integer token id in 0..4294967295",
                       l->a->field, i);
        if (id > 65535 && l->width == 2) {
            if (!l->a->dtype)
                return PASS_NEED_U32;
            return bad(l, "'%s'[%zu] = %" JSON_INTEGER_FORMAT " does not fit u16 "
                       "(use --dtype u32)", l->a->field, i, id);
        }
        if (push_id(l, (uint32_t)id) < 0)
            return PASS_BAD;
    }
    return PASS_DONE;
}

static int take_text(line_ctx *l, json_t *str)
{
    const unsigned char *s = (const unsigned char *)json_string_value(str);
    for (size_t i = 0, n = json_string_length(str); i < n; i++)
        if (push_id(l, s[i]) < 0)
            return PASS_BAD;
    return PASS_DONE;
}

/* Parses one line into l->buf: PASS_DONE, PASS_NEED_U32, or PASS_BAD with
 * l->msg saying why. */
static int take_line(line_ctx *l, const char *line, size_t len)
{
    json_error_t jerr;
    json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!root && jerr.column > 0)
        return bad(l, "invalid JSON at column %d: %s", jerr.column, jerr.text);
    if (!root)
        return bad(l, "invalid JSON at the end of the line: %s", jerr.text);
    json_t *v = json_is_object(root) ? json_object_get(root, l->a->field) : NULL;
    int rc;
    l->count = 0;
    if (!json_is_object(root))
        rc = bad(l, "expected a JSON object");
    else if (!v)
        rc = bad(l, "no field '%s'", l->a->field);
    else if (l->a->text)
        rc = json_is_string(v) ? take_text(l, v)
                               : bad(l, "field '%s' is not a string", l->a->field);
    else
        rc = json_is_array(v) ? take_array(l, v)
                              : bad(l, "field '%s' is not an array of token ids", l->a->field);
    json_decref(root);
    return rc;
}

static int blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
            return 0;
    return 1;
}

static void parse_one(void *arg, size_t i, unsigned tid)
{
    (void)tid;
    line_ctx *l = (line_ctx *)arg + i;
    l->rc = take_line(l, l->text, l->len);
}

/* Reads up to BATCH_LINES non-blank lines into l[]; returns how many, and
 * sets *eof at the end of the input. */
static size_t read_batch(FILE *f, line_ctx *l, uint64_t *lineno, uint64_t *consumed, int *eof)
{
    size_t n = 0, bytes = 0;
    while (n < BATCH_LINES && bytes < BATCH_BYTES) {
        ssize_t r = getline(&l[n].text, &l[n].text_cap, f);
        if (r <= 0) {
            *eof = 1;
            break;
        }
        ++*lineno;
        *consumed += (uint64_t)r;
        if (blank(l[n].text, (size_t)r))
            continue;
        l[n].len = (size_t)r;
        l[n].lineno = *lineno;
        l[n].end = *consumed;
        bytes += (size_t)r;
        n++;
    }
    return n;
}

static void free_lines(line_ctx *l)
{
    for (size_t i = 0; i < BATCH_LINES; i++) {
        free(l[i].text);
        free(l[i].buf);
    }
    free(l);
}

/* One pass over the input with ids `width` bytes wide: PASS_DONE, or
 * PASS_NEED_U32 (nothing left behind) when u16 was a guess that failed. */
static int run_pass(const tokens_args *a, size_t width)
{
    FILE *f = fopen(a->in, "rb");
    if (!f)
        cli_die("cannot open %s: %s", a->in, strerror(errno));
    struct stat st;
    uint64_t total = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    line_ctx *l = calloc(BATCH_LINES, sizeof *l);
    if (!l)
        cli_die("out of memory");
    for (size_t i = 0; i < BATCH_LINES; i++)
        l[i] = (line_ctx){.a = a, .width = width};

    lf_schema schema;
    memset(&schema, 0, sizeof schema);
    schema.nfields = 1;
    snprintf(schema.fields[0].name, LF_FIELD_NAME_MAX, "tokens");
    schema.fields[0].type = width == 2 ? LF_FIELD_TOKENS_U16 : LF_FIELD_TOKENS_U32;
    cli_out o;
    cli_out_open(&o, &a->wa, &schema, "create", total);

    unsigned threads = cli_thread_count(&a->wa);
    uint64_t lineno = 0, consumed = 0, prev_end = 0;
    int eof = 0, rc = PASS_DONE;
    while (!eof && rc == PASS_DONE) {
        size_t n = read_batch(f, l, &lineno, &consumed, &eof);
        cli_parallel(n, threads, parse_one, l);
        for (size_t i = 0; i < n && rc == PASS_DONE; i++) {
            char where[600];
            snprintf(where, sizeof where, "%s:%" PRIu64, a->in, l[i].lineno);
            if ((rc = l[i].rc) == PASS_NEED_U32) {
                cli_out_abandon(&o);
                cli_warn("%s: token id above 65535; writing again with u32 ids", where);
            } else if (rc == PASS_BAD) {
                cli_warn("%s: %s", where, l[i].msg);
                cli_out_fail(&o, CLI_EXIT_FAIL);
            } else {
                lf_field_input in = {.data = l[i].buf, .size = l[i].count * width};
                cli_out_add(&o, &in, l[i].end - prev_end, l[i].end, where);
                prev_end = l[i].end;
            }
        }
    }
    if (ferror(f)) {
        cli_warn("cannot read %s: %s", a->in, strerror(errno));
        cli_out_fail(&o, CLI_EXIT_FAIL);
    }
    if (rc == PASS_DONE)
        cli_out_finish(&o, "create");
    free_lines(l);
    fclose(f);
    return rc;
}

int create_tokens(int argc, char **argv)
{
    const cli_cmd c = {"create tokens", tokens_help};
    tokens_args a = {.field = "tokens"};
    a.wa.opts.block_bytes = 64 << 10;
    int id, have_field = 0;
    while ((id = cli_getopt(&c, argc, argv, tokens_options)) != -1) {
        if (cli_writer_option(&c, id, optarg, &a.wa))
            continue;
        switch (id) {
        case OPT_IN: a.in = optarg; break;
        case OPT_FIELD: a.field = optarg; have_field = 1; break;
        case OPT_TEXT_FIELD: a.field = optarg; a.text = 1; break;
        case OPT_DTYPE:
            if (strcmp(optarg, "u16") && strcmp(optarg, "u32"))
                cli_usage_error(&c, "--dtype: invalid value '%s' (expected u16 or u32)", optarg);
            a.dtype = optarg[1] == '1' ? 2 : 4;
            break;
        default: break;
        }
    }
    cli_positionals(&c, argc, argv, 0, "");
    cli_writer_check(&c, &a.wa);
    if (!a.in)
        cli_usage_error(&c, "--in FILE is required");
    if (have_field && a.text)
        cli_usage_error(&c, "--field and --text-field exclude each other");
    size_t width = a.dtype ? (size_t)a.dtype : 2;
    struct stat st;
    if (!a.dtype && !a.text && stat(a.in, &st) == 0 && !S_ISREG(st.st_mode)) {
        width = 4;
        cli_warn("%s is not a regular file and cannot be read twice: ids are stored as u32 "
                 "(--dtype u16 stores u16 and stops at an id above 65535)", a.in);
    }
    if (run_pass(&a, width) == PASS_NEED_U32)
        run_pass(&a, 4);
    return 0;
}
