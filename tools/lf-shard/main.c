/*
 * lf-shard — make, inspect and check levelfeed datasets.
 *
 * main() only dispatches: each subcommand lives in its own file and parses
 * its own options (cli.c has the shared pieces).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "open_limit.h"
#include "version.h"

static const char usage[] =
    "Usage: lf-shard COMMAND [OPTIONS]\n"
    "\n"
    "Make, inspect and check levelfeed datasets (a directory of zstd-compressed,\n"
    "checksummed shards plus a manifest).\n"
    "\n"
    "Commands:\n"
    "  create tokens|images|frames  convert JSONL token arrays or text, an ImageNet-style\n"
    "                               JPEG tree, or .npy frame arrays into a dataset\n"
    "  synth tokens|images|frames   write a deterministic synthetic dataset\n"
    "  inspect DIR                  schema, shards, blocks, sizes, compression ratio\n"
    "  stats DIR [--json]           cost-input percentiles and a histogram\n"
    "  verify DIR                   check every checksum; non-zero exit names the place\n"
    "  index DIR                    write the planner's compact index (" LF_INDEX_NAME ") again\n"
    "  cat DIR INDEX                print one sample's fields\n"
    "  split DIR --fraction F ...   hold out a share of the samples, deterministically\n"
    "\n"
    "Run 'lf-shard COMMAND --help' for a command's options; 'lf-shard --version'\n"
    "prints the version.\n"
    "\n"
    "Example:\n"
    "  lf-shard synth tokens --out /tmp/toks --samples 100000 --seed 1\n"
    "  lf-shard stats /tmp/toks\n"
    "  lf-shard verify /tmp/toks && lf-shard cat /tmp/toks 42\n"
    "\n"
    "Exit status: 0 success, 1 failure (bad input, I/O error, corruption), 2 usage error.\n";

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
} commands[] = {
    {"create", cmd_create}, {"synth", cmd_synth}, {"inspect", cmd_inspect},
    {"stats", cmd_stats},   {"verify", cmd_verify}, {"cat", cmd_cat},
    {"digest", cmd_digest}, {"split", cmd_split}, {"index", cmd_index},
};

int main(int argc, char **argv)
{
    raise_open_file_limit(); /* one descriptor per shard file, read or written */
    if (argc < 2) {
        fputs(usage, stderr);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        cli_print_version("lf-shard");
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name) != 0)
            continue;
        int rc = commands[i].fn(argc - 1, argv + 1);
        /* A report that did not reach its file is a failure (a full disk
         * under `stats --json > f`), for every command alike. */
        if (fflush(stdout) != 0 || ferror(stdout))
            cli_die("cannot write to stdout");
        return rc;
    }
    fprintf(stderr, "lf-shard: unknown command '%s'\nTry 'lf-shard --help'.\n", argv[1]);
    return CLI_EXIT_USAGE;
}
