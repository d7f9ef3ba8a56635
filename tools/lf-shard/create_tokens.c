/*
 * create_tokens.c — `lf-shard create tokens`: JSON Lines to a token dataset.
 *
 * Each non-blank line is a JSON object; the sample is either an array of
 * non-negative integer ids (--field, default "tokens") or a string whose
 * bytes become ids 0..255 (--text-field), with --prepend-bos/--append-eos
 * ids around it. The inputs (input.c: files, directories, globs, stdin,
 * plain, zstd or gzip) are read as one sequence of lines, in the order
 * given, and each line is parsed without a tree (json_line.c), so memory
 * follows the longest line, not the corpus or a DOM. The dataset has one
 * field named "tokens". Without --dtype the ids are stored as u16; if a
 * later line holds an id above 65535 the partial output is abandoned and
 * the inputs are read again as u32, so the common case reads them once and
 * the result never depends on guessing. Input that cannot be read twice
 * (stdin, a pipe) is written as u32 from the start, unless --dtype says
 * otherwise. Lines are parsed in batches on --threads threads and added in
 * line order, so the first bad line is the one named.
 *
 * Token files (--megatron, --array; token_files.c) need no parsing: every
 * one is opened and checked before the output is, their documents are read
 * in order on this thread (mostly a copy), and the ids are stored as u16
 * when every file stores them in 8 or 16 bits. The same --prepend-bos,
 * --append-eos and --max-len apply to their documents.
 *
 * Fine-tuning fields (--field NAME:token:TYPE, --field NAME:sample): each
 * is taken from the same JSON line as the tokens (a walk over the line per
 * field: such corpora are small, and the parser stays one-field) into a
 * dataset field of its own: a per-token array, checked to hold one value a
 * token, or one int64 a document. A split document's pieces take their
 * slice of every per-token array and a copy of every per-sample value.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_names.h"
#include "cli.h"
#include "input.h"
#include "json_line.h"
#include "token_files.h"

static const char tokens_help[] =
    "Usage: lf-shard create tokens --in INPUT [--in INPUT ...] --out DIR [OPTIONS]\n"
    "       lf-shard create tokens --megatron PREFIX | --array FILE [...] --out DIR [OPTIONS]\n"
    "\n"
    "Converts JSON Lines (one object per line), or token files made by another\n"
    "tool, into a dataset with one field, 'tokens'. Blank lines are skipped; any\n"
    "malformed line stops the conversion with FILE:LINE and the problem (a token\n"
    "file: FILE and the byte), and no dataset is left behind.\n"
    "\n"
    "  --in INPUT         a .jsonl file, plain or compressed with zstd or gzip (told\n"
    "                     by its first bytes, so .jsonl.zst and .jsonl.gz work); a\n"
    "                     directory (every file below it, in byte order of the paths,\n"
    "                     names starting with '.' left out); a quoted glob such as\n"
    "                     'shards/*.jsonl.zst'; or - for stdin. Repeat it to read\n"
    "                     several: samples keep the inputs' order (required)\n"
    "  --field NAME       JSON array of integer token ids to take (default 'tokens')\n"
    "  --field NAME:token:u8|i32  also keep JSON array NAME, one integer a token\n"
    "                     (u8: 0..255; i32: signed), as a dataset field of that\n"
    "                     name: a loss mask, labels. It must be as long as the tokens\n"
    "  --field NAME:sample  also keep each line's integer NAME (int64) as a dataset\n"
    "                     field: prompt_len, source. Both repeatable (15 at most);\n"
    "                     lf-server delivers them beside the tokens, by name\n"
    "  --text-field NAME  take a string field instead, tokenized byte-level (ids 0..255;\n"
    "                     for a SentencePiece model, pipe through\n"
    "                     tools/lf-shard/sp_tokenize.py into --in -)\n"
    "  --megatron PREFIX  a Megatron-LM / NeMo indexed dataset, PREFIX.bin + PREFIX.idx\n"
    "                     (preprocess_data.py's output); a document's sequences are\n"
    "                     joined. Repeatable, and mixes with --array, not with --in\n"
    "  --array FILE       a flat array of ids: .npy of uint16 or uint32, or raw\n"
    "                     little-endian ids (nanoGPT's train.bin). Repeatable\n"
    "  --array-dtype u16|u32  the width of a raw --array's ids (default u16)\n"
    "  --eos-split ID     cut an --array into documents after each id ID (kept at\n"
    "                     the end of its document); without it an array is one\n"
    "                     document\n"
    "  --array-offsets F.npy  cut the --array just before at these boundaries: int64\n"
    "                     or uint64, 0 first, the array's length last (np.cumsum of\n"
    "                     the lengths after a 0)\n"
    "  --prepend-bos ID   put token ID before every document\n"
    "  --append-eos ID    put token ID after every document\n"
    "  --max-len N        documents longer than N tokens (--prepend-bos and\n"
    "                     --append-eos counted) are handled by --overflow\n"
    "                     (default: no limit)\n"
    "  --overflow POLICY  split: consecutive pieces of at most N tokens, each its own\n"
    "                     sample (default); truncate: the first N; drop: none. The\n"
    "                     end says what the policy changed, in samples and tokens\n"
    "  --dtype u16|u32    id width (default: u16 when every id fits, else u32;\n"
    "                     u32 when an input is stdin or a pipe, which cannot be read\n"
    "                     twice; for token files u16 when they store u8 or u16 ids)\n"
    CLI_WRITER_HELP("64K")
    "\n"
    "Progress goes to stderr: a meter on a terminal, else a line every 10 s.\n"
    "\n"
    "Example:\n"
    "  echo '{\"tokens\": [17, 4, 9000]}' > a.jsonl\n"
    "  lf-shard create tokens --in a.jsonl --out /data/a --block-size 256K\n"
    "  lf-shard create tokens --in 'corpus/*.jsonl.zst' --append-eos 50256 --out /data/c\n"
    "  lf-shard create tokens --in docs.jsonl --text-field text --out /data/docs\n"
    "  lf-shard create tokens --in sft.jsonl --field loss_mask:token:u8 \\\n"
    "      --field prompt_len:sample --out /data/sft\n"
    "  lf-shard create tokens --megatron corpus_text_document --out /data/m\n"
    "  lf-shard create tokens --array train.bin --eos-split 50256 --out /data/owt\n";

enum { OPT_IN = 1, OPT_FIELD, OPT_TEXT_FIELD, OPT_DTYPE, OPT_BOS, OPT_EOS, OPT_MAX_LEN,
       OPT_OVERFLOW, OPT_MEGATRON, OPT_ARRAY, OPT_ARRAY_DTYPE, OPT_EOS_SPLIT,
       OPT_ARRAY_OFFSETS };

static const struct option tokens_options[] = {
    CLI_WRITER_OPTIONS,
    {"in", required_argument, NULL, OPT_IN},
    {"field", required_argument, NULL, OPT_FIELD},
    {"text-field", required_argument, NULL, OPT_TEXT_FIELD},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"prepend-bos", required_argument, NULL, OPT_BOS},
    {"append-eos", required_argument, NULL, OPT_EOS},
    {"max-len", required_argument, NULL, OPT_MAX_LEN},
    {"overflow", required_argument, NULL, OPT_OVERFLOW},
    {"megatron", required_argument, NULL, OPT_MEGATRON},
    {"array", required_argument, NULL, OPT_ARRAY},
    {"array-dtype", required_argument, NULL, OPT_ARRAY_DTYPE},
    {"eos-split", required_argument, NULL, OPT_EOS_SPLIT},
    {"array-offsets", required_argument, NULL, OPT_ARRAY_OFFSETS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

#define NO_ID UINT64_MAX
#define MAX_EXTRAS (LF_MAX_FIELDS - 1)

/* A fine-tuning field kept beside the tokens (--field NAME:KIND[:TYPE]). */
typedef struct extra_field {
    const char *name;            /* the JSON key and the dataset field's name */
    uint32_t type;               /* LF_FIELD_PER_TOKEN_U8 / _I32, or LABEL_I64 (per sample) */
} extra_field;

/* What --overflow does with a document longer than --max-len. */
enum { OVERFLOW_SPLIT, OVERFLOW_TRUNCATE, OVERFLOW_DROP };
static const char *const overflow_names[] = {"split", "truncate", "drop"};

typedef struct tokens_args {
    cli_writer_args wa;
    input_list inputs;           /* --in, expanded */
    const char *field;           /* JSON key */
    int text;                    /* the key holds a string */
    int dtype;                   /* 0 auto, 2 or 4 bytes per id */
    uint64_t bos, eos;           /* ids around each document, or NO_ID */
    size_t max_len;              /* tokens a sample may hold; 0: no limit */
    int overflow;                /* OVERFLOW_* */
    token_file *files;           /* --megatron and --array, opened, in order */
    size_t nfiles;
    uint64_t eos_split;          /* --eos-split, or NO_ID */
    extra_field extras[MAX_EXTRAS]; /* --field NAME:KIND[:TYPE], in the order given */
    size_t nextras;
} tokens_args;

/* What --overflow changed, for the line at the end. */
typedef struct overflow_count {
    uint64_t docs, tokens;       /* documents read and their tokens */
    uint64_t over, over_tokens;  /* those past --max-len, and their tokens */
    uint64_t pieces;             /* samples the split ones became */
    uint64_t lost;               /* tokens truncated or dropped */
} overflow_count;

/* How one line or one pass over the input ended. */
enum { PASS_BAD = -1, PASS_DONE, PASS_NEED_U32 };

/* One input line and what it parses to; a batch of these is parsed in
 * parallel, then handed to the writer in line order. */
typedef struct line_ctx {
    const tokens_args *a;
    char *text;                  /* the line */
    size_t text_cap;
    size_t len;
    const char *path;            /* the file it came from */
    uint64_t lineno;             /* 1-based, in that file */
    uint64_t done;               /* input bytes (as stored) read when it was */
    token_buf ids;               /* the sample's ids, as wide as this pass's */
    token_buf vals[MAX_EXTRAS];  /* per-token extras: their values (width 1 or 4) */
    int64_t ints[MAX_EXTRAS];    /* per-sample extras: their value */
    size_t extra;                /* the extra being taken (for on_value) */
    int rc;                      /* take_line's result */
    char msg[512];               /* what is wrong with the line (PASS_BAD) */
} line_ctx;

#define BATCH_LINES 1024
#define BATCH_BYTES (32u << 20)  /* bounds the text held per batch */
#define KEEP_BYTES (4u << 20)    /* a slot's buffers past this are freed after a batch */

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
    if (token_buf_push(&l->ids, id) < 0)
        return bad(l, "out of memory: %zu token ids, and no more could be held", l->ids.count);
    return PASS_DONE;
}

/* One array element; PASS_NEED_U32 when it needs u32 and the width was
 * only guessed. */
static int on_id(void *arg, size_t index, uint64_t id)
{
    line_ctx *l = arg;
    if (id > UINT32_MAX)
        return bad(l, "'%s'[%zu]: expected an integer token id in 0..4294967295",
                   l->a->field, index);
    if (id > 65535 && l->ids.width == 2) {
        if (!l->a->dtype)
            return PASS_NEED_U32;
        return bad(l, "'%s'[%zu] = %" PRIu64 " does not fit u16 (use --dtype u32)",
                   l->a->field, index, id);
    }
    return push_id(l, (uint32_t)id);
}

static int on_text(void *arg, const char *bytes, size_t n)
{
    line_ctx *l = arg;
    for (size_t i = 0; i < n; i++)
        if (push_id(l, (unsigned char)bytes[i]) < 0)
            return PASS_BAD;
    return PASS_DONE;
}

/* One value of the extra field being taken, checked against its type. */
static int on_value(void *arg, size_t index, int64_t v, int ok)
{
    line_ctx *l = arg;
    const extra_field *e = &l->a->extras[l->extra];
    if (e->type == LF_FIELD_LABEL_I64) {
        if (!ok)
            return bad(l, "'%s': expected an integer (int64)", e->name);
        l->ints[l->extra] = v;
        return PASS_DONE;
    }
    int u8 = e->type == LF_FIELD_PER_TOKEN_U8;
    if (!ok || v < (u8 ? 0 : INT32_MIN) || v > (u8 ? 255 : INT32_MAX))
        return bad(l, "'%s'[%zu]: expected an integer in %s", e->name, index,
                   u8 ? "0..255" : "-2147483648..2147483647");
    if (token_buf_push(&l->vals[l->extra], (uint32_t)v) < 0)
        return bad(l, "out of memory: %zu values of '%s'", index, e->name);
    return PASS_DONE;
}

/* Takes extra field l->extra of the line: its values, as many as the
 * tokens for a per-token one. */
static int take_extra(line_ctx *l)
{
    const extra_field *e = &l->a->extras[l->extra];
    int scalar = e->type == LF_FIELD_LABEL_I64;
    jl_field f = {.name = e->name, .on_int = on_value, .scalar = scalar, .arg = l,
                  .msg = l->msg, .msg_size = sizeof l->msg};
    token_buf *v = &l->vals[l->extra];
    v->count = 0;
    int rc = jl_take_field(l->text, l->len, &f);
    if (rc == PASS_DONE && !scalar && v->count != l->ids.count)
        return bad(l, "'%s' has %zu values, the tokens %zu: a per-token field needs one a "
                   "token", e->name, v->count, l->ids.count);
    return rc;
}

/* Parses one line into l->buf: PASS_DONE, PASS_NEED_U32, or PASS_BAD with
 * l->msg saying why. */
static int take_line(line_ctx *l)
{
    const tokens_args *a = l->a;
    jl_field f = {.name = a->field, .text = a->text, .on_id = on_id, .on_text = on_text,
                  .arg = l, .msg = l->msg, .msg_size = sizeof l->msg};
    l->ids.count = 0;
    int rc = a->bos != NO_ID ? push_id(l, (uint32_t)a->bos) : PASS_DONE;
    if (rc == PASS_DONE)
        rc = jl_take_field(l->text, l->len, &f);
    if (rc == PASS_DONE && a->eos != NO_ID)
        rc = push_id(l, (uint32_t)a->eos);
    for (l->extra = 0; rc == PASS_DONE && l->extra < a->nextras; l->extra++)
        rc = take_extra(l);
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
    l->rc = take_line(l);
}

/* Reads up to BATCH_LINES non-blank lines into l[]; returns how many. Sets
 * *eof after the last input, *failed when reading failed (s->err says why:
 * reported after the lines before it, which may hold an earlier error). */
static size_t read_batch(input_stream *s, line_ctx *l, int *eof, int *failed)
{
    size_t n = 0, bytes = 0;
    while (n < BATCH_LINES && bytes < BATCH_BYTES) {
        ssize_t r = input_stream_line(s, &l[n].text, &l[n].text_cap);
        if (r <= 0) {
            *eof = 1;
            *failed = r < 0;
            break;
        }
        if (blank(l[n].text, (size_t)r))
            continue;
        l[n].len = (size_t)r;
        l[n].path = s->path;
        l[n].lineno = s->lineno;
        l[n].done = s->stored_bytes;
        bytes += (size_t)r;
        n++;
    }
    return n;
}

static void trim_buf(token_buf *b)
{
    if (b->cap > KEEP_BYTES) {
        free(b->p);
        b->p = NULL;
        b->cap = 0;
    }
}

/* Frees what an unusually long line left in its slot, so memory follows
 * the lines being read, not the longest ones seen. */
static void trim_lines(line_ctx *l)
{
    for (size_t i = 0; i < BATCH_LINES; i++) {
        if (l[i].text_cap > KEEP_BYTES) {
            free(l[i].text);
            l[i].text = NULL;
            l[i].text_cap = 0;
        }
        trim_buf(&l[i].ids);
        for (size_t e = 0; e < MAX_EXTRAS; e++)
            trim_buf(&l[i].vals[e]);
    }
}

static void free_lines(line_ctx *l)
{
    for (size_t i = 0; i < BATCH_LINES; i++) {
        free(l[i].text);
        free(l[i].ids.p);
        for (size_t e = 0; e < MAX_EXTRAS; e++)
            free(l[i].vals[e].p);
    }
    free(l);
}

/* The fields of the sample of tokens off..off+k of a document: the ids,
 * then each extra's slice of the same tokens, or its one value. */
static void piece_fields(const tokens_args *a, const token_buf *ids, const line_ctx *l,
                         size_t off, size_t k, lf_field_input *in)
{
    in[0] = (lf_field_input){.data = ids->p + off * ids->width, .size = k * ids->width};
    for (size_t e = 0; e < a->nextras; e++) {
        const token_buf *v = &l->vals[e];
        in[1 + e] = a->extras[e].type == LF_FIELD_LABEL_I64
                        ? (lf_field_input){.data = &l->ints[e], .size = 8}
                        : (lf_field_input){.data = v->p + off * v->width, .size = k * v->width};
    }
}

/* Adds one document's ids (and, from line l unless NULL, its extra
 * fields) as samples under --max-len and --overflow; in_bytes is what it
 * took of the input, done where the meter stands. */
static void add_document(cli_out *o, const tokens_args *a, const token_buf *ids,
                         const line_ctx *l, uint64_t in_bytes, uint64_t done,
                         overflow_count *oc, const char *where)
{
    size_t max = a->max_len ? a->max_len : ids->count;
    int over = ids->count > max;
    oc->docs++;
    oc->tokens += ids->count;
    if (over) {
        oc->over++;
        oc->over_tokens += ids->count;
        if (a->overflow == OVERFLOW_DROP) {
            oc->lost += ids->count;
            return;
        }
        if (a->overflow == OVERFLOW_TRUNCATE)
            oc->lost += ids->count - max;
    }
    size_t end = over && a->overflow == OVERFLOW_TRUNCATE ? max : ids->count, off = 0;
    do {                         /* once at least: an empty document is a sample too */
        size_t k = end - off < max ? end - off : max;
        lf_field_input in[LF_MAX_FIELDS];
        piece_fields(a, ids, l, off, k, in);
        if (off > UINT32_MAX) {
            cli_warn("%s: a document of more than 2^32 tokens: its pieces cannot record "
                     "where they start", where);
            cli_out_fail(o, CLI_EXIT_FAIL);
        }
        cli_out_add_piece(o, in, (uint32_t)off, off ? 0 : in_bytes, done, where);
        oc->pieces += (uint64_t)over;
        off += k;
    } while (off < end);
}

static void print_overflow(const tokens_args *a, const overflow_count *oc)
{
    double docs = oc->docs ? 100.0 * (double)oc->over / (double)oc->docs : 0;
    double toks = oc->tokens ? 100.0 * (double)oc->over_tokens / (double)oc->tokens : 0;
    double lost = oc->tokens ? 100.0 * (double)oc->lost / (double)oc->tokens : 0;
    fprintf(stderr, "lf-shard: --max-len %zu --overflow %s: %" PRIu64 " of %" PRIu64
            " documents (%.2f%%, holding %.2f%% of the tokens) were longer", a->max_len,
            overflow_names[a->overflow], oc->over, oc->docs, docs, toks);
    if (a->overflow == OVERFLOW_SPLIT)
        fprintf(stderr, "; split into %" PRIu64 " samples, no token lost\n", oc->pieces);
    else
        fprintf(stderr, "; %s: %" PRIu64 " tokens lost (%.2f%% of the tokens)\n",
                a->overflow == OVERFLOW_TRUNCATE ? "truncated" : "dropped", oc->lost, lost);
}

static void finish(cli_out *o, const tokens_args *a, const overflow_count *oc)
{
    cli_out_finish(o, "create");
    if (a->max_len)
        print_overflow(a, oc);
}

/* Adds the batch's samples in line order: PASS_DONE, or PASS_NEED_U32 with
 * the output abandoned. A bad line ends the program. */
static int add_batch(cli_out *o, line_ctx *l, size_t n, overflow_count *oc)
{
    for (size_t i = 0; i < n; i++) {
        char where[600];
        snprintf(where, sizeof where, "%s:%" PRIu64, l[i].path, l[i].lineno);
        if (l[i].rc == PASS_NEED_U32) {
            cli_out_abandon(o);
            cli_warn("%s: token id above 65535; writing again with u32 ids", where);
            return PASS_NEED_U32;
        }
        if (l[i].rc == PASS_BAD) {
            cli_warn("%s: %s", where, l[i].msg);
            cli_out_fail(o, CLI_EXIT_FAIL);
        }
        add_document(o, l[i].a, &l[i].ids, &l[i], l[i].len, l[i].done, oc, where);
    }
    return PASS_DONE;
}

/* The dataset's fields: "tokens", `width` bytes an id, then the extras. */
static void tokens_schema(lf_schema *schema, size_t width, const tokens_args *a)
{
    memset(schema, 0, sizeof *schema);
    schema->nfields = 1 + (uint32_t)a->nextras;
    snprintf(schema->fields[0].name, LF_FIELD_NAME_MAX, "tokens");
    schema->fields[0].type = width == 2 ? LF_FIELD_TOKENS_U16 : LF_FIELD_TOKENS_U32;
    for (size_t e = 0; e < a->nextras; e++) {
        snprintf(schema->fields[1 + e].name, LF_FIELD_NAME_MAX, "%s", a->extras[e].name);
        schema->fields[1 + e].type = a->extras[e].type;
    }
}

/* One pass over the inputs with ids `width` bytes wide: PASS_DONE, or
 * PASS_NEED_U32 (nothing left behind) when u16 was a guess that failed. */
static int run_pass(const tokens_args *a, size_t width)
{
    line_ctx *l = calloc(BATCH_LINES, sizeof *l);
    if (!l)
        cli_die("out of memory");
    for (size_t i = 0; i < BATCH_LINES; i++) {
        l[i] = (line_ctx){.a = a, .ids.width = width};
        for (size_t e = 0; e < a->nextras; e++)
            l[i].vals[e].width = a->extras[e].type == LF_FIELD_PER_TOKEN_U8 ? 1 : 4;
    }

    lf_schema schema;
    tokens_schema(&schema, width, a);
    cli_out o;
    cli_out_open(&o, &a->wa, &schema, "create", input_list_bytes(&a->inputs));

    input_stream s;
    input_stream_init(&s, &a->inputs);
    unsigned threads = cli_thread_count(&a->wa);
    int eof = 0, failed = 0, rc = PASS_DONE;
    overflow_count oc = {0};
    while (!eof && rc == PASS_DONE) {
        size_t n = read_batch(&s, l, &eof, &failed);
        cli_parallel(n, threads, parse_one, l);
        rc = add_batch(&o, l, n, &oc);
        trim_lines(l);
    }
    if (failed && rc == PASS_DONE) {
        cli_warn("%s", s.err);
        cli_out_fail(&o, CLI_EXIT_FAIL);
    }
    if (rc == PASS_DONE)
        finish(&o, a, &oc);
    input_stream_close(&s);
    free_lines(l);
    return rc;
}

/* Converts the --megatron and --array inputs, `width` bytes an id. */
static void run_files(const tokens_args *a, size_t width)
{
    lf_schema schema;
    tokens_schema(&schema, width, a);
    uint64_t total = 0, before = 0;
    for (size_t i = 0; i < a->nfiles; i++)
        total += token_file_bytes(&a->files[i]);
    cli_out o;
    cli_out_open(&o, &a->wa, &schema, "create", total);
    token_buf ids = {.width = width};
    overflow_count oc = {0};
    char why[1024], where[1100];
    for (size_t i = 0; i < a->nfiles; i++) {
        token_file *f = &a->files[i];
        int rc;
        do {
            uint64_t at = 0;
            ids.count = 0;
            if (a->bos != NO_ID && token_buf_push(&ids, (uint32_t)a->bos) < 0)
                cli_die("out of memory");
            size_t marks = ids.count;
            rc = token_file_next(f, a->eos_split, &ids, &at, why, sizeof why);
            if (rc < 0) {
                cli_warn("%s", why);
                cli_out_fail(&o, CLI_EXIT_FAIL);
            }
            if (rc == 0)
                break;
            uint64_t in_bytes = (ids.count - marks) * f->elem;
            if (a->eos != NO_ID && token_buf_push(&ids, (uint32_t)a->eos) < 0)
                cli_die("out of memory");
            snprintf(where, sizeof where, "%s: document %" PRIu64 " (byte %" PRIu64 ")",
                     f->path, f->doc - 1, at);
            add_document(&o, a, &ids, NULL, in_bytes, before + at, &oc, where);
        } while (rc > 0);
        before += token_file_bytes(f);
    }
    finish(&o, a, &oc);
    free(ids.p);
}

/* Opens --megatron PREFIX (kind TOKEN_FILE_MEGATRON) or --array FILE
 * (with its --array-offsets, or NULL) into the next slot; a file that
 * cannot be read ends the program here, before any output exists. */
static void open_file(tokens_args *a, int kind, const char *path, const char *offsets,
                      size_t raw_width)
{
    char why[1024];
    token_file *f = &a->files[a->nfiles];
    int rc = kind == TOKEN_FILE_MEGATRON ? token_file_open_megatron(f, path, why, sizeof why)
                                         : token_file_open_array(f, path, raw_width, why,
                                                                 sizeof why);
    if (rc == 0 && offsets)
        rc = token_file_set_offsets(f, offsets, why, sizeof why);
    if (rc < 0)
        cli_die("%s", why);
    a->nfiles++;
}

/* Opens every token file, then converts them: ids stay u16 when every
 * file stores them so and no mark needs more, unless --dtype says. */
static void convert_files(tokens_args *a, const char **paths, const int *kinds,
                          const char **offsets, size_t n, size_t raw_width, int marks)
{
    a->files = calloc(n, sizeof *a->files);
    if (!a->files)
        cli_die("out of memory");
    int fits = !marks;
    for (size_t i = 0; i < n; i++) {
        open_file(a, kinds[i], paths[i], offsets[i], raw_width);
        fits &= token_file_fits_u16(&a->files[i]);
    }
    run_files(a, a->dtype ? (size_t)a->dtype : fits ? 2 : 4);
    for (size_t i = 0; i < a->nfiles; i++)
        token_file_close(&a->files[i]);
    free(a->files);
}

static uint64_t parse_id(const cli_cmd *c, const char *opt, const char *arg)
{
    return cli_parse_u64(c, opt, arg, 0, UINT32_MAX);
}

/* --field NAME:token:u8|i32 or NAME:sample[:i64]; the spec string lives
 * as long as argv, so the name is cut out of it in place. */
static void parse_extra(const cli_cmd *c, tokens_args *a, char *spec)
{
    char *kind = strchr(spec, ':'), *type;
    *kind++ = 0;
    type = strchr(kind, ':');
    if (type)
        *type++ = 0;
    uint32_t t = 0;
    if (!strcmp(kind, "token") && type && !strcmp(type, "u8"))
        t = LF_FIELD_PER_TOKEN_U8;
    else if (!strcmp(kind, "token") && type && !strcmp(type, "i32"))
        t = LF_FIELD_PER_TOKEN_I32;
    else if (!strcmp(kind, "sample") && (!type || !strcmp(type, "i64")))
        t = LF_FIELD_LABEL_I64;
    if (!t)
        cli_usage_error(c, "--field %s:%s%s%s: expected NAME:token:u8, NAME:token:i32 or "
                        "NAME:sample", spec, kind, type ? ":" : "", type ? type : "");
    if (!*spec || strlen(spec) >= LF_FIELD_NAME_MAX || batch_own_name(spec))
        cli_usage_error(c, "--field %s: the name must be 1..31 bytes and not one of a token "
                        "batch's own tensors (" BATCH_OWN_NAMES ")", spec);
    for (size_t e = 0; e < a->nextras; e++)
        if (!strcmp(a->extras[e].name, spec))
            cli_usage_error(c, "--field %s: given twice", spec);
    if (a->nextras == MAX_EXTRAS)
        cli_usage_error(c, "--field %s: at most %d extra fields", spec, MAX_EXTRAS);
    a->extras[a->nextras++] = (extra_field){spec, t};
}

/* u16 or u32: bytes per id. */
static size_t parse_width(const cli_cmd *c, const char *opt, const char *arg)
{
    if (strcmp(arg, "u16") && strcmp(arg, "u32"))
        cli_usage_error(c, "%s: invalid value '%s' (expected u16 or u32)", opt, arg);
    return arg[1] == '1' ? 2 : 4;
}

int create_tokens(int argc, char **argv)
{
    const cli_cmd c = {"create tokens", tokens_help};
    tokens_args a = {.field = "tokens", .bos = NO_ID, .eos = NO_ID};
    a.wa.opts.block_bytes = 64 << 10;
    const char **in = calloc((size_t)argc, sizeof *in);
    const char **files = calloc((size_t)argc, sizeof *files);
    int *kinds = calloc((size_t)argc, sizeof *kinds);
    const char **offsets = calloc((size_t)argc, sizeof *offsets);
    size_t nin = 0, nfiles = 0, raw_width = 2;
    int id, have_field = 0, have_overflow = 0, have_raw = 0;
    a.eos_split = NO_ID;
    if (!in || !files || !kinds || !offsets)
        cli_die("out of memory");
    while ((id = cli_getopt(&c, argc, argv, tokens_options)) != -1) {
        if (cli_writer_option(&c, id, optarg, &a.wa))
            continue;
        switch (id) {
        case OPT_IN: in[nin++] = optarg; break;
        case OPT_MEGATRON: kinds[nfiles] = TOKEN_FILE_MEGATRON; files[nfiles++] = optarg; break;
        case OPT_ARRAY: kinds[nfiles] = TOKEN_FILE_ARRAY; files[nfiles++] = optarg; break;
        case OPT_EOS_SPLIT: a.eos_split = parse_id(&c, "--eos-split", optarg); break;
        case OPT_ARRAY_OFFSETS:
            if (!nfiles || kinds[nfiles - 1] != TOKEN_FILE_ARRAY || offsets[nfiles - 1])
                cli_usage_error(&c, "--array-offsets %s: give it once, right after the "
                                "--array it cuts", optarg);
            offsets[nfiles - 1] = optarg;
            break;
        case OPT_ARRAY_DTYPE:
            raw_width = parse_width(&c, "--array-dtype", optarg);
            have_raw = 1;
            break;
        case OPT_FIELD:
            if (strchr(optarg, ':'))
                parse_extra(&c, &a, optarg);
            else {
                a.field = optarg;
                have_field = 1;
            }
            break;
        case OPT_TEXT_FIELD: a.field = optarg; a.text = 1; break;
        case OPT_BOS: a.bos = parse_id(&c, "--prepend-bos", optarg); break;
        case OPT_EOS: a.eos = parse_id(&c, "--append-eos", optarg); break;
        case OPT_MAX_LEN:
            a.max_len = (size_t)cli_parse_u64(&c, "--max-len", optarg, 1, UINT32_MAX);
            break;
        case OPT_OVERFLOW:
            for (a.overflow = 0; a.overflow < 3; a.overflow++)
                if (!strcmp(optarg, overflow_names[a.overflow]))
                    break;
            if (a.overflow == 3)
                cli_usage_error(&c, "--overflow: invalid value '%s' (expected split, "
                                "truncate or drop)", optarg);
            have_overflow = 1;
            break;
        case OPT_DTYPE: a.dtype = (int)parse_width(&c, "--dtype", optarg); break;
        default: break;
        }
    }
    cli_positionals(&c, argc, argv, 0, "");
    cli_writer_check(&c, &a.wa);
    if (!nin && !nfiles)
        cli_usage_error(&c, "--in FILE, --megatron PREFIX or --array FILE is required");
    if (nin && nfiles)
        cli_usage_error(&c, "--in (JSON Lines) and --megatron/--array (token files) are "
                        "converted separately: give one kind");
    if (nfiles && (have_field || a.text || a.nextras))
        cli_usage_error(&c, "--field and --text-field are for --in; token files hold ids");
    if (a.nextras && (a.bos != NO_ID || a.eos != NO_ID))
        cli_usage_error(&c, "--prepend-bos/--append-eos would add tokens without a value in "
                        "the per-token fields: put the marks in the JSON arrays instead");
    int arrays = 0, cut = 0;
    for (size_t i = 0; i < nfiles; i++) {
        arrays |= kinds[i] == TOKEN_FILE_ARRAY;
        cut |= offsets[i] != NULL;
    }
    if (cut && a.eos_split != NO_ID)
        cli_usage_error(&c, "--eos-split and --array-offsets both cut documents: give one");
    if ((a.eos_split != NO_ID || have_raw) && !arrays)
        cli_usage_error(&c, "--eos-split and --array-dtype are for --array");
    if (have_field && a.text)
        cli_usage_error(&c, "--field and --text-field exclude each other");
    if (have_overflow && !a.max_len)
        cli_usage_error(&c, "--overflow needs --max-len");
    a.wa.opts.pieces = a.max_len && a.overflow == OVERFLOW_SPLIT; /* pieces say where they start */
    int marks = (a.bos != NO_ID && a.bos > 65535) || (a.eos != NO_ID && a.eos > 65535);
    if (marks && a.dtype == 2)
        cli_usage_error(&c, "--prepend-bos/--append-eos above 65535 need u32 ids, not --dtype u16");
    for (size_t i = 0; i < nin; i++)
        input_list_add(&a.inputs, in[i]);
    free(in);
    if (nfiles)
        convert_files(&a, files, kinds, offsets, nfiles, raw_width, marks);
    free(files);
    free(kinds);
    free(offsets);
    if (nfiles)
        return 0;

    size_t width = a.dtype ? (size_t)a.dtype : marks ? 4 : 2;
    const char *once = input_list_read_once(&a.inputs);
    if (width == 2 && !a.dtype && !a.text && once) {
        width = 4;
        cli_warn("%s is not a regular file and cannot be read twice: ids are stored as u32 "
                 "(--dtype u16 stores u16 and stops at an id above 65535)", once);
    }
    if (run_pass(&a, width) == PASS_NEED_U32)
        run_pass(&a, 4);
    input_list_free(&a.inputs);
    return 0;
}
