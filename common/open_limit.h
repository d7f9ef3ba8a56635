/*
 * open_limit.h — the open-file limit of programs that open datasets.
 */
#ifndef LF_OPEN_LIMIT_H
#define LF_OPEN_LIMIT_H

/* Raises the soft limit on open files (RLIMIT_NOFILE) to the hard limit. A
 * dataset keeps every shard file open, one descriptor each, and the usual
 * soft limit of 1024 is below what a dataset of thousands of shards needs;
 * the hard limit is what the administrator allows. A failure leaves the
 * limit as it was: the reader then names it if a dataset needs more. */
void raise_open_file_limit(void);

#endif
