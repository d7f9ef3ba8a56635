/*
 * version.h — the one `--version` line every program prints.
 */
#ifndef LF_COMMON_VERSION_H
#define LF_COMMON_VERSION_H

/* Prints "PROG (levelfeed) X.Y.Z" on stdout, the version being the one
 * this program was built against (LF_VERSION_STRING in levelfeed.h). */
void cli_print_version(const char *prog);

#endif
