/*
 * cost_file.c — read and write the cost file (format: cost_file.h).
 */
#include "cost_file.h"
#include "lf_plan.h"
#include "parse_num.h"

#include <errno.h>
#include <float.h>
#include <stdio.h>
#include <string.h>

static const char *const keys[4] = {"a", "b", "c0", "d"};
#define HEADER "levelfeed-cost"

/* Says what is wrong in why (of size `size`, both in scope) and fails. */
#define FAIL(...) return (snprintf(why, size, __VA_ARGS__), -1)

static int key_index(const char *k)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(k, keys[i])) return i;
    return -1;
}

static int info_key(const char *k)
{
    for (; *k; k++)
        if (!((*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9') || *k == '_')) return 0;
    return 1;
}

/* One line, comment cut, split into at most two words; returns the count
 * (3: more than two). */
static int words(char *line, char **w)
{
    char *hash = strchr(line, '#'), *save = NULL;
    if (hash) *hash = '\0';
    int n = 0;
    for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save))
        if (n++ < 2) w[n - 1] = t;
    return n > 2 ? 3 : n;
}

/* The lines after the header: KEY VALUE. */
static int read_values(FILE *f, const char *path, int lineno, double v[4], char *why,
                       size_t size)
{
    char line[512], *w[2], seen[64][32];
    int have[4] = {0}, nseen = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        int n = words(line, w);
        if (n == 0) continue;
        if (n != 2)
            FAIL("%s:%d: want one KEY VALUE a line", path, lineno);
        int k = key_index(w[0]);
        if (k < 0 && !info_key(w[0]))
            FAIL("%s:%d: '%s' is not a key (lower-case letters, digits, _)",
                        path, lineno, w[0]);
        for (int i = 0; i < nseen; i++)
            if (!strcmp(seen[i], w[0]))
                FAIL("%s:%d: %s given twice", path, lineno, w[0]);
        if (nseen < 64 && strlen(w[0]) < sizeof seen[0]) strcpy(seen[nseen++], w[0]);
        if (k < 0) continue; /* information for people */
        if (parse_double(w[1], 0, DBL_MAX, &v[k]))
            FAIL("%s:%d: %s must be a finite number >= 0, not '%s'", path,
                        lineno, w[0], w[1]);
        have[k] = 1;
    }
    for (int k = 0; k < 4; k++)
        if (!have[k]) FAIL("%s: no '%s' line (a, b, c0 and d are needed)",
                                  path, keys[k]);
    lf_plan_cost_model m;
    if (lf_plan_cost_set(&m, v[0], v[1], v[2], v[3]))
        FAIL("%s: the planner cannot hold these coefficients (a below "
                    "2^46, b below 2^30, c0 and d below 2^52)", path);
    return 0;
}

/* The first line that is not blank or a comment: the header. */
static int read_header(FILE *f, const char *path, int *lineno, char *why, size_t size)
{
    char line[512], *w[2];
    int n = 0;
    while (n == 0 && fgets(line, sizeof line, f)) {
        ++*lineno;
        n = words(line, w);
    }
    if (n != 2 || strcmp(w[0], HEADER) || strcmp(w[1], "1"))
        FAIL("%s:%d: not a cost file: the first line must be '" HEADER " 1'", path, *lineno);
    return 0;
}

int cost_file_read(const char *path, double coef[4], char *why, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f) FAIL("%s: %s", path, strerror(errno));
    int lineno = 0;
    double v[4];
    int rc = read_header(f, path, &lineno, why, size);
    if (rc == 0) rc = read_values(f, path, lineno, v, why, size);
    fclose(f);
    if (rc == 0) memcpy(coef, v, sizeof v);
    return rc;
}

int cost_file_write(const char *path, const double coef[4], double ns_per_unit,
                    const char *notes)
{
    FILE *f = fopen(path, "w");
    if (!f) return -errno;
    fprintf(f, "# levelfeed cost model: c(L) = a*L + b*L^2 + c0 per sample, plus d per\n"
               "# micro-batch, in cost units (format: balancer/README.md, \"Cost file\").\n"
               "# Read by lf-plan, lf-server and lf-train with --cost-file.\n"
               HEADER " 1\n");
    for (int k = 0; k < 4; k++) fprintf(f, "%s %.9g\n", keys[k], coef[k]);
    if (ns_per_unit > 0) fprintf(f, "ns_per_unit %.9g\n", ns_per_unit);
    if (notes) fputs(notes, f);
    int e = ferror(f) ? EIO : 0;
    if (fclose(f) && !e) e = errno;
    return -e;
}
