/*
 * input.h — what `--in` names, read as one stream of lines: files,
 * directories, globs and stdin, plain or zstd- or gzip-compressed.
 */
#ifndef LF_SHARD_INPUT_H
#define LF_SHARD_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cli.h"

/* The --in arguments expanded into files, in reading order ("-" is stdin). */
typedef cli_strings input_list;

/* Appends what one --in argument names: "-" (stdin, once), a file, every
 * file below a directory (recursively, in byte order of the paths; names
 * starting with '.' and links to directories are left out), or what a
 * shell glob matches (in byte order, a matched directory expanded as
 * above). Dies naming the argument when it names no file. */
void input_list_add(input_list *l, const char *arg);
void input_list_free(input_list *l);
/* The first input that cannot be read twice (stdin, a pipe, a device), or
 * NULL when all can. */
const char *input_list_read_once(const input_list *l);
/* The inputs' sizes as stored, summed; 0 when one is not a regular file. */
uint64_t input_list_bytes(const input_list *l);

/* Reads the list's files one after the other as one sequence of lines.
 * Each file's format is told by its first bytes: zstd (any number of
 * frames), gzip (any number of members), else plain text. */
typedef struct input_file input_file;
typedef struct input_stream {
    const input_list *list;
    size_t next;                 /* the next file to open */
    input_file *cur;             /* the file being read, or NULL */
    const char *path;            /* where the last line came from */
    uint64_t lineno;             /* its 1-based number in that file */
    uint64_t stored_bytes;       /* bytes read from the files so far, as stored */
    char err[600];               /* "FILE:LINE: what went wrong" after a -1 */
} input_stream;

void input_stream_init(input_stream *s, const input_list *list);
/* The next line into *line (grown as needed; *cap its size), its newline
 * kept, NUL-terminated. Returns its length, 0 after the last file, or -1
 * with s->err set: a file that cannot be opened or read, compressed data
 * that is corrupt or cut short, or a line too long for the memory there is. */
ssize_t input_stream_line(input_stream *s, char **line, size_t *cap);
void input_stream_close(input_stream *s);

#endif
