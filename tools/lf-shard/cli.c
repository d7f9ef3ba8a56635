/*
 * cli.c — messages, option parsing, progress and the writing loop shared by
 * the lf-shard subcommands.
 */
#include "cli.h"
#include "index_only.h"
#include "plan_cli.h"
#include "parse_num.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- messages ------------------------------------------------------------ */

static void vmessage(const char *prefix, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* The meter whose line is on screen, if any: a message erases it first, so
 * the message starts its own line (the meter redraws at its next update). */
static cli_progress *meter_drawn;

static void vmessage(const char *prefix, const char *fmt, va_list ap)
{
    fflush(stdout);
    if (meter_drawn) cli_progress_clear(meter_drawn);
    fprintf(stderr, "%s: ", prefix);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void cli_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage("lf-shard", fmt, ap);
    va_end(ap);
}

void cli_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage("lf-shard", fmt, ap);
    va_end(ap);
    exit(CLI_EXIT_FAIL);
}

void cli_usage_error(const cli_cmd *c, const char *fmt, ...)
{
    char prefix[96];
    snprintf(prefix, sizeof prefix, "lf-shard %s", c->name);
    va_list ap;
    va_start(ap, fmt);
    vmessage(prefix, fmt, ap);
    va_end(ap);
    fprintf(stderr, "Try 'lf-shard %s --help'.\n", c->name);
    exit(CLI_EXIT_USAGE);
}

/* ---- options --------------------------------------------------------------- */

int cli_getopt(const cli_cmd *c, int argc, char **argv, const struct option *opts)
{
    /* ':' first: a missing value returns ':' instead of printing. */
    int id = getopt_long(argc, argv, ":h", opts, NULL);
    switch (id) {
    case 'h':
        fputs(c->help, stdout);
        exit(0);
    case '?':
        /* For a long option optopt is its id, not a letter: name the word
         * (an unknown one, or --flag=VALUE for a flag that takes none). */
        if (strncmp(argv[optind - 1], "--", 2) != 0)
            cli_usage_error(c, "unknown option '-%c'", optopt);
        cli_usage_error(c, strchr(argv[optind - 1], '=')
                               ? "unknown option, or a value for a flag that takes none: '%s'"
                               : "unknown option '%s'",
                        argv[optind - 1]);
    case ':':
        cli_usage_error(c, "option '%s' needs a value", argv[optind - 1]);
    default:
        return id;
    }
}

const char *cli_option_name(const struct option *opts, int id)
{
    for (; opts->name; opts++)
        if (opts->val == id)
            return opts->name;
    return "";
}

char **cli_positionals(const cli_cmd *c, int argc, char **argv, int want,
                       const char *what)
{
    int have = argc - optind;
    if (have < want)
        cli_usage_error(c, "missing %s", what);
    if (have > want)
        cli_usage_error(c, "unexpected argument '%s'", argv[optind + want]);
    return argv + optind;
}

const char *cli_dataset_arg(const cli_cmd *c, int argc, char **argv,
                            const char *flag, int *on)
{
    const struct option opts[] = {     /* without a flag, its NULL name ends the table */
        {"help", no_argument, NULL, 'h'},
        {flag, no_argument, NULL, 1},
        {NULL, 0, NULL, 0},
    };
    int id;
    if (on)
        *on = 0;
    while ((id = cli_getopt(c, argc, argv, opts)) != -1)
        if (on)
            *on = id == 1;
    return cli_positionals(c, argc, argv, 1, "dataset directory")[0];
}

uint64_t cli_parse_u64(const cli_cmd *c, const char *opt, const char *s,
                       uint64_t min, uint64_t max)
{
    uint64_t v;
    if (parse_u64(s, min, max, &v))
        cli_usage_error(c, "%s: invalid value '%s' (expected an integer in %" PRIu64
                        "..%" PRIu64 ")", opt, s, min, max);
    return v;
}

uint64_t cli_parse_size(const cli_cmd *c, const char *opt, const char *s,
                        uint64_t min, uint64_t max)
{
    uint64_t v;
    if (parse_size(s, min, max, &v))
        cli_usage_error(c, "%s: invalid size '%s' (expected bytes in %" PRIu64 "..%"
                        PRIu64 ", suffixes K, M, G, T)", opt, s, min, max);
    return v;
}

double cli_parse_double(const cli_cmd *c, const char *opt, const char *s,
                        double min, double max)
{
    double v;
    if (parse_double(s, min, max, &v))
        cli_usage_error(c, "%s: invalid value '%s' (expected a number in %g..%g)",
                        opt, s, min, max);
    return v;
}

int cli_writer_option(const cli_cmd *c, int id, const char *arg, cli_writer_args *w)
{
    switch (id) {
    case CLI_OPT_OUT:
        w->out = arg;
        return 1;
    case CLI_OPT_SHARD_SIZE:
        w->opts.shard_bytes = cli_parse_size(c, "--shard-size", arg, 4096, UINT64_MAX);
        return 1;
    case CLI_OPT_BLOCK_SIZE:
        w->opts.block_bytes =
            (uint32_t)cli_parse_size(c, "--block-size", arg, 0, 1u << 30);
        return 1;
    case CLI_OPT_LEVEL:
        w->opts.zstd_level = (int)cli_parse_u64(c, "--level", arg, 1, 19);
        return 1;
    case CLI_OPT_THREADS:
        w->opts.threads = (int)cli_parse_u64(c, "--threads", arg, 1, 256);
        return 1;
    default:
        return 0;
    }
}

void cli_writer_check(const cli_cmd *c, const cli_writer_args *w)
{
    if (!w->out)
        cli_usage_error(c, "--out DIR is required");
}

/* ---- threads ---------------------------------------------------------------- */

unsigned cli_thread_count(const cli_writer_args *w)
{
    if (w->opts.threads > 0)
        return (unsigned)w->opts.threads;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

typedef struct job_share {
    cli_job_fn fn;
    void *arg;
    size_t count;
    unsigned tid, threads;
    pthread_t thread;
} job_share;

static void *run_share(void *p)
{
    job_share *s = p;
    for (size_t i = s->tid; i < s->count; i += s->threads)
        s->fn(s->arg, i, s->tid);
    return NULL;
}

void cli_parallel(size_t count, unsigned threads, cli_job_fn fn, void *arg)
{
    job_share shares[64];
    if (threads > 64)
        threads = 64;
    if (threads > count)
        threads = count ? (unsigned)count : 1;
    for (unsigned t = 0; t < threads; t++)
        shares[t] = (job_share){fn, arg, count, t, threads, 0};
    unsigned started = 1;
    for (; started < threads; started++)
        if (pthread_create(&shares[started].thread, NULL, run_share, &shares[started]) != 0)
            break;
    run_share(&shares[0]);
    for (unsigned t = started; t < threads; t++)   /* threads that did not start */
        run_share(&shares[t]);
    for (unsigned t = 1; t < started; t++)
        pthread_join(shares[t].thread, NULL);
}

/* ---- interruption ---------------------------------------------------------- */

volatile sig_atomic_t cli_interrupted;

static void on_signal(int sig)
{
    (void)sig;
    cli_interrupted = 1;
}

void cli_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;  /* a second signal kills at once, as usual */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* ---- progress -------------------------------------------------------------- */

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_progress_start(cli_progress *p, const char *verb, const char *unit,
                        uint64_t total)
{
    memset(p, 0, sizeof *p);
    p->verb = verb;
    p->unit = unit;
    p->tty = isatty(STDERR_FILENO);
    p->start = p->last = cli_now();
    p->total = total;
}

void cli_progress_update(cli_progress *p, uint64_t count, uint64_t bytes,
                         uint64_t done)
{
    double now = cli_now();
    if (now - p->last < (p->tty ? 0.25 : 10.0))
        return;
    p->last = now;
    double secs = now - p->start;
    char eta[48] = "";
    if (p->total && done > 0 && done <= p->total) {
        double left = secs * (double)(p->total - done) / (double)done;
        snprintf(eta, sizeof eta, ", %.0f%%, ETA %.0f s",
                 100.0 * (double)done / (double)p->total, left);
    }
    fprintf(stderr, "%s%s: %" PRIu64 " %s, %.0f %s/s, %.1f MB/s%s%s",
            p->tty ? "\r" : "lf-shard: ", p->verb, count, p->unit, (double)count / secs,
            p->unit, (double)bytes / secs / 1e6, eta, p->tty ? "\033[K" : "\n");
    if (!p->tty)
        return;                  /* a whole line: nothing to erase */
    p->drawn = 1;
    meter_drawn = p;
}

void cli_progress_clear(cli_progress *p)
{
    if (p->drawn)
        fputs("\r\033[K", stderr);
    p->drawn = 0;
    if (meter_drawn == p) meter_drawn = NULL;
}

void cli_print_write_summary(const char *verb, const char *dir,
                             const lf_writer_stats *st, uint64_t in_bytes,
                             double seconds)
{
    if (seconds <= 0)
        seconds = 1e-9;
    double ratio = st->stored_bytes ? (double)st->raw_bytes / (double)st->stored_bytes : 0;
    fprintf(stderr,
            "lf-shard: %s %s: %" PRIu64 " samples, %u shards, %" PRIu64 " blocks, "
            "%.1f MB in, %.1f MB stored (ratio %.2f) in %.2f s: %.0f samples/s, "
            "%.1f MB/s\n",
            verb, dir, st->samples, st->shards, st->blocks, (double)in_bytes / 1e6,
            (double)st->stored_bytes / 1e6, ratio, seconds,
            (double)st->samples / seconds, (double)in_bytes / seconds / 1e6);
}

/* ---- writing a dataset ----------------------------------------------------- */

void cli_out_open(cli_out *o, const cli_writer_args *wa, const lf_schema *schema,
                  const char *verb, uint64_t total)
{
    memset(o, 0, sizeof *o);
    o->dir = wa->out;
    struct stat st;
    o->made_dir = stat(wa->out, &st) != 0;
    lf_shard_error err;
    if (lf_writer_create(wa->out, schema, &wa->opts, &o->w, &err) < 0)
        cli_die("cannot create dataset %s: %s", wa->out, err.msg);
    uint64_t stale_bytes;
    uint32_t stale = lf_writer_stale_removed(o->w, &stale_bytes);
    if (stale)
        cli_warn("%s: removed %u temporary files (%.1f MB) left by an earlier, interrupted "
                 "conversion", wa->out, stale, (double)stale_bytes / 1e6);
    cli_catch_signals();
    cli_progress_start(&o->prog, verb, "samples", total);
}

void cli_out_add(cli_out *o, const lf_field_input *fields, uint64_t in_bytes,
                 uint64_t done, const char *where)
{
    cli_out_add_piece(o, fields, 0, in_bytes, done, where);
}

void cli_out_add_piece(cli_out *o, const lf_field_input *fields, uint32_t doc_offset,
                       uint64_t in_bytes, uint64_t done, const char *where)
{
    lf_shard_error err;
    if (cli_interrupted) {
        cli_warn("interrupted; removing the partial dataset in %s", o->dir);
        cli_out_fail(o, CLI_EXIT_INTERRUPTED);
    }
    if (lf_writer_add_piece(o->w, fields, doc_offset, &err) < 0) {
        cli_warn("%s: %s", where, err.msg);
        cli_out_fail(o, CLI_EXIT_FAIL);
    }
    o->samples++;
    o->in_bytes += in_bytes;
    cli_progress_update(&o->prog, o->samples, o->in_bytes, done);
}

void cli_out_finish(cli_out *o, const char *verb)
{
    lf_writer_stats st;
    lf_shard_error err;
    int rc = lf_writer_finish(o->w, &st, &err);
    o->w = NULL;
    cli_progress_clear(&o->prog);
    if (rc < 0) { /* the writer removed its files; the directory this run made goes too */
        cli_warn("cannot finish dataset %s: %s", o->dir, err.msg);
        cli_out_fail(o, CLI_EXIT_FAIL);
    }
    /* The planner's compact index: without it the dataset still opens, its
     * planners just read every shard index. */
    if (lf_dataset_write_index(o->dir, &err) < 0)
        cli_warn("dataset %s is complete, but without %s: %s", o->dir, LF_INDEX_NAME, err.msg);
    else if (plan_cli_summary_write(o->dir, &err) < 0) /* its planners then count at start-up */
        cli_warn("dataset %s is complete, but without %s: %s", o->dir, LF_INDEX_SUMMARY_NAME,
                 err.msg);
    cli_print_write_summary(verb, o->dir, &st, o->in_bytes, cli_now() - o->prog.start);
}

void cli_out_abandon(cli_out *o)
{
    cli_progress_clear(&o->prog);
    lf_writer_abort(o->w);
    o->w = NULL;
    if (o->made_dir)
        rmdir(o->dir);           /* fails, harmlessly, if anything else is in it */
    cli_out *peer = o->peer;
    o->peer = NULL;
    if (peer && peer->peer == o) {
        peer->peer = NULL;       /* one step: the peer does not come back here */
        cli_out_abandon(peer);
    }
}

void cli_out_fail(cli_out *o, int code)
{
    cli_out_abandon(o);
    exit(code);
}

/* ---- reading a dataset ----------------------------------------------------- */

lf_dataset *cli_open_dataset(const char *dir)
{
    lf_dataset *ds;
    lf_shard_error err;
    if (dataset_open(dir, 0, &ds, &err) < 0) /* an index-only one too (stats, cat) */
        cli_die("cannot open dataset %s: %s", dir, err.msg);
    return ds;
}

/* ---- small helpers ----------------------------------------------------------- */

char *cli_strdup(const char *s)
{
    char *d = strdup(s);
    if (!d)
        cli_die("out of memory");
    return d;
}

char *cli_path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p)
        cli_die("out of memory");
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

void cli_strings_push(cli_strings *l, char *s)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v)
            cli_die("out of memory");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
}

void cli_strings_free(cli_strings *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

int cli_read_file(const char *path, size_t max_size, uint8_t **out, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = 0;
    uint8_t *buf = NULL;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        goto out_close;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = -EINVAL;
        goto out_close;
    }
    if ((uint64_t)st.st_size > max_size) {
        rc = -EFBIG;
        goto out_close;
    }
    size_t n = (size_t)st.st_size;
    buf = malloc(n ? n : 1);
    if (!buf) {
        rc = -ENOMEM;
        goto out_close;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? -errno : -EIO;   /* the file shrank while we read it */
            goto out_free;
        }
        got += (size_t)r;
    }
    *out = buf;
    *size = n;
    close(fd);
    return 0;
out_free:
    free(buf);
out_close:
    close(fd);
    return rc;
}

uint16_t cli_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;
    if (exp == 0xff)                               /* inf, nan (kept quiet) */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 0x1f)                                 /* overflow: inf */
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {                                  /* subnormal or zero */
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift;
        uint32_t rest = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (man >> 13);
    uint32_t rest = man & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1)))
        half++;                                    /* may carry into the exponent: fine */
    return (uint16_t)half;
}

float cli_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t x;
    if (exp == 0x1f) {
        x = sign | 0x7f800000u | (man << 13);
    } else if (exp == 0) {
        if (!man) {
            x = sign;
        } else {                                   /* subnormal: normalize */
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400u));
            x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else {
        x = sign | ((exp - 15 + 127) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}
