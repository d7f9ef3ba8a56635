/*
 * cost_file.h — the cost model as a small text file, so a calibration's
 * result reaches every program that plans without copying four numbers by
 * hand: `lf-train --calibrate --cost-file F` and `levelfeed.calibrate()`
 * write it, `lf-plan`, `lf-server` and `lf-train` read it (`--cost-file F`,
 * the same as `--cost a,b,c0,d`).
 *
 * The format (balancer/README.md, "Cost file"): UTF-8 text lines; `#` starts
 * a comment to the end of the line; blank lines are skipped. The first other
 * line is `levelfeed-cost 1` (the format's version). Then one `KEY VALUE` per
 * line: a, b, c0 and d, each exactly once, finite decimals >= 0 in cost units
 * (c(L) = a*L + b*L^2 + c0 per sample, plus d per micro-batch). Any other key
 * (lower-case letters, digits, `_`) is information for people, such as
 * `ns_per_unit` (measured ns per cost unit), and readers skip it; a key given
 * twice is an error.
 */
#ifndef LF_COST_FILE_H
#define LF_COST_FILE_H

#include <stddef.h>

/* Reads a, b, c0, d into coef. Returns 0, or -1 with why saying which file
 * and line and what is wrong (coef untouched). */
int cost_file_read(const char *path, double coef[4], char *why, size_t why_size);

/* Writes coef with the header, `ns_per_unit` when > 0, and `notes` (lines
 * each already starting with "# ", or NULL) after the values. Returns 0 or
 * -errno. */
int cost_file_write(const char *path, const double coef[4], double ns_per_unit,
                    const char *notes);

#endif
