/*
 * create.c — `lf-shard create KIND`: picks the converter for the input kind.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char create_help[] =
    "Usage: lf-shard create tokens|images|frames --in INPUT --out DIR [OPTIONS]\n"
    "\n"
    "Converts existing data into a dataset. The output is written under temporary\n"
    "names and the manifest renamed into place last, so an interrupted or failed\n"
    "conversion leaves no dataset behind.\n"
    "\n"
    "  tokens  --in INPUT       token-id arrays or byte-level text, one JSON object a line;\n"
    "                           INPUT: .jsonl[.zst|.gz] files, directories, globs, - (stdin),\n"
    "                           --in repeated\n"
    "  images  --in DIR         JPEGs; class subfolders become labels in sorted order\n"
    "  frames  --in DIR         2-D .npy arrays (rows are frames); labels as for images\n"
    "\n"
    "Run 'lf-shard create KIND --help' for the options of each.\n"
    "\n"
    "Example:\n"
    "  lf-shard create images --in /data/imagenet/train --out /data/in1k --threads 16\n";

int cmd_create(int argc, char **argv)
{
    static const struct {
        const char *kind;
        int (*fn)(int argc, char **argv);
    } kinds[] = {{"tokens", create_tokens}, {"images", create_images}, {"frames", create_frames}};
    const cli_cmd c = {"create", create_help};
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(create_help, stdout);
        return 0;
    }
    if (argc < 2 || argv[1][0] == '-')
        cli_usage_error(&c, "missing the kind: tokens, images or frames");
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(argv[1], kinds[i].kind))
            return kinds[i].fn(argc - 1, argv + 1);
    cli_usage_error(&c, "unknown kind '%s' (expected tokens, images or frames)", argv[1]);
}
