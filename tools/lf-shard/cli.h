/*
 * cli.h — the pieces shared by lf-shard's subcommands (a program, not a
 * library: these functions print and exit on misuse).
 *
 * Exit codes: 0 success, 1 a failure (bad input, I/O, corruption),
 * 2 a usage error (unknown option, invalid value), 130 interrupted.
 */
#ifndef LF_SHARD_CLI_H
#define LF_SHARD_CLI_H

#include <getopt.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "lf_shard.h"

#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2
#define CLI_EXIT_INTERRUPTED 130

/* A subcommand: its name as typed ("create tokens") and its --help text. */
typedef struct cli_cmd {
    const char *name;
    const char *help;
} cli_cmd;

/* ---- messages ------------------------------------------------------------ */

/* "lf-shard: <message>" on stderr. die exits 1. */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void cli_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "lf-shard <cmd>: <message>" plus a --help hint on stderr; exits 2. */
_Noreturn void cli_usage_error(const cli_cmd *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- options --------------------------------------------------------------- */

/* getopt_long over long options only (and -h). Handles --help (prints the
 * help, exits 0), unknown options and missing values (exit 2). Returns the
 * option's val, or -1 when the options end. */
int cli_getopt(const cli_cmd *c, int argc, char **argv, const struct option *opts);

/* The long name of the option whose val is `id` ("" if none). */
const char *cli_option_name(const struct option *opts, int id);

/* Leftover positional arguments after cli_getopt: exactly `want` of them, or
 * a usage error naming what is missing or extra. Returns argv + optind. */
char **cli_positionals(const cli_cmd *c, int argc, char **argv, int want,
                       const char *what);

/* The options of a command that reads one dataset: --help, one optional
 * switch `flag` (NULL for none; *on is set to whether it was given), and
 * the dataset directory, which it returns. Misuse is a usage error. */
const char *cli_dataset_arg(const cli_cmd *c, int argc, char **argv,
                            const char *flag, int *on);

/* Value parsers: a usage error naming `opt` unless the whole string is a
 * valid value inside [min, max]. Sizes take K/M/G/T suffixes (powers of 1024). */
uint64_t cli_parse_u64(const cli_cmd *c, const char *opt, const char *s,
                       uint64_t min, uint64_t max);
uint64_t cli_parse_size(const cli_cmd *c, const char *opt, const char *s,
                        uint64_t min, uint64_t max);
double cli_parse_double(const cli_cmd *c, const char *opt, const char *s,
                        double min, double max);

/* The writer options every create/synth subcommand takes. Option values
 * start at CLI_OPT_WRITER so subcommands can use small values for theirs. */
enum {
    CLI_OPT_WRITER = 1000,
    CLI_OPT_OUT = CLI_OPT_WRITER,
    CLI_OPT_SHARD_SIZE,
    CLI_OPT_BLOCK_SIZE,
    CLI_OPT_LEVEL,
    CLI_OPT_THREADS,
};
/* Everything but --out, for commands that name their outputs otherwise. */
#define CLI_WRITER_TUNING_OPTIONS                                              \
    {"shard-size", required_argument, NULL, CLI_OPT_SHARD_SIZE},               \
    {"block-size", required_argument, NULL, CLI_OPT_BLOCK_SIZE},               \
    {"level", required_argument, NULL, CLI_OPT_LEVEL},                         \
    {"threads", required_argument, NULL, CLI_OPT_THREADS}
#define CLI_WRITER_OPTIONS                                                     \
    {"out", required_argument, NULL, CLI_OPT_OUT}, CLI_WRITER_TUNING_OPTIONS

/* The same options' help lines, for the subcommands' help texts, with the
 * command's default block size (a string literal). */
#define CLI_WRITER_TUNING_HELP(block_default)                                  \
    "  --shard-size SIZE  start a new shard past SIZE stored bytes (default 1G)\n" \
    "  --block-size SIZE  raw bytes per compressed block, 0 = one record per block\n" \
    "                     (default " block_default ")\n"                       \
    "  --level N          zstd level 1..19 (default 3)\n"                       \
    "  --threads N        worker threads: compression, and parsing or generating\n" \
    "                     input (default: online CPUs)\n"
#define CLI_WRITER_HELP(block_default)                                         \
    "  --out DIR          output dataset directory (required): new or empty; only\n" \
    "                     temporary files of an interrupted conversion are removed\n" \
    CLI_WRITER_TUNING_HELP(block_default)

typedef struct cli_writer_args {
    const char *out;             /* --out */
    lf_writer_options opts;      /* everything else */
} cli_writer_args;

/* Takes option `id` into *w when it is a writer option: returns 1, else 0. */
int cli_writer_option(const cli_cmd *c, int id, const char *arg, cli_writer_args *w);
/* A usage error when --out is missing. */
void cli_writer_check(const cli_cmd *c, const cli_writer_args *w);

/* ---- threads ---------------------------------------------------------------- */

/* --threads, or the online CPUs when it was not given. */
unsigned cli_thread_count(const cli_writer_args *w);

/* Runs fn(arg, i, tid) for every i in [0, count) on `threads` threads, the
 * caller's among them (tid 0): thread tid takes i = tid, tid + threads, ...
 * Returns when all are done. Work is striped, not queued: callers give it
 * items of similar cost (one sample each). */
typedef void (*cli_job_fn)(void *arg, size_t index, unsigned tid);
void cli_parallel(size_t count, unsigned threads, cli_job_fn fn, void *arg);

/* ---- interruption ---------------------------------------------------------- */

/* Set by SIGINT/SIGTERM once cli_catch_signals ran: long loops check it,
 * abort their writer (so no temporary file stays) and exit 130. */
extern volatile sig_atomic_t cli_interrupted;
void cli_catch_signals(void);

/* ---- progress -------------------------------------------------------------- */

/* A one-line meter on stderr, redrawn at most 4 times a second when stderr
 * is a terminal; otherwise (a Slurm or nohup log) a line every 10 s.
 * `done`/`total` are in whatever unit the caller can count ahead (samples,
 * input bytes, blocks); total 0 means unknown (no ETA). */
typedef struct cli_progress {
    const char *verb;            /* "synth", "create", "verify" */
    const char *unit;            /* what the count counts: "samples", "blocks" */
    int tty;                     /* stderr is a terminal */
    int drawn;                   /* a line is on screen */
    double start;                /* monotonic seconds at start */
    double last;                 /* last redraw */
    uint64_t total;
} cli_progress;

double cli_now(void);            /* monotonic seconds */
void cli_progress_start(cli_progress *p, const char *verb, const char *unit,
                        uint64_t total);
void cli_progress_update(cli_progress *p, uint64_t count, uint64_t bytes,
                         uint64_t done);
void cli_progress_clear(cli_progress *p);   /* erases the line, if any */

/* The one-line summary every writing command prints on stderr:
 * "lf-shard: <verb> DIR: N samples, ... in T s (R samples/s, M MB/s)". */
void cli_print_write_summary(const char *verb, const char *dir,
                             const lf_writer_stats *st, uint64_t in_bytes,
                             double seconds);

/* ---- writing a dataset ----------------------------------------------------- */

/* A writer plus its progress meter: the loop every create/synth runs.
 * cli_out_add dies (after aborting the writer) on any error, naming `where`. */
typedef struct cli_out {
    lf_writer *w;
    const char *dir;
    cli_progress prog;
    uint64_t samples;            /* added so far */
    uint64_t in_bytes;           /* input bytes consumed so far */
    int made_dir;                /* the output directory did not exist before */
    struct cli_out *peer;        /* written alongside (split): abandoned with this one */
} cli_out;

void cli_out_open(cli_out *o, const cli_writer_args *wa, const lf_schema *schema,
                  const char *verb, uint64_t total);
/* Adds one sample; `done` advances the meter (same unit as total). */
void cli_out_add(cli_out *o, const lf_field_input *fields, uint64_t in_bytes,
                 uint64_t done, const char *where);
/* The same for a piece of a document, from its token doc_offset on
 * (lf_writer_add_piece; the writer was opened with opts.pieces). */
void cli_out_add_piece(cli_out *o, const lf_field_input *fields, uint32_t doc_offset,
                       uint64_t in_bytes, uint64_t done, const char *where);
/* Finishes and prints the summary line. Dies on failure. */
void cli_out_finish(cli_out *o, const char *verb);
/* Aborts the writer (temporary files removed) and removes the output
 * directory if this run made it (and it is empty); the same for its peer. */
void cli_out_abandon(cli_out *o);
/* cli_out_abandon, then exit with `code`. */
_Noreturn void cli_out_fail(cli_out *o, int code);

/* ---- reading a dataset ----------------------------------------------------- */

/* Opens DIR or dies with the library's message. */
lf_dataset *cli_open_dataset(const char *dir);

/* ---- small helpers ----------------------------------------------------------- */

/* A malloc'd copy of s, and "dir/name"; both die when out of memory.
 * The caller frees. */
char *cli_strdup(const char *s);
char *cli_path_join(const char *dir, const char *name);

/* A growing list of malloc'd strings: the input files, a folder's names. */
typedef struct cli_strings {
    char **v;
    size_t n, cap;
} cli_strings;

/* Appends s, which the list then owns; dies when out of memory. */
void cli_strings_push(cli_strings *l, char *s);
/* Frees every string and the list, leaving it empty. */
void cli_strings_free(cli_strings *l);

/* Reads a whole file into a malloc'd buffer (caller frees). Returns 0 or
 * -errno; files larger than max_size give -EFBIG. */
int cli_read_file(const char *path, size_t max_size, uint8_t **out, size_t *size);

/* IEEE half <-> float (round to nearest even). */
uint16_t cli_f32_to_f16(float f);
float cli_f16_to_f32(uint16_t h);

/* ---- subcommands ----------------------------------------------------------- */

int cmd_synth(int argc, char **argv);
int cmd_create(int argc, char **argv);
int create_tokens(int argc, char **argv);   /* argv[0] is the kind */
int create_images(int argc, char **argv);
int create_frames(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_index(int argc, char **argv);
int cmd_cat(int argc, char **argv);
int cmd_digest(int argc, char **argv);
int cmd_split(int argc, char **argv);

#endif
