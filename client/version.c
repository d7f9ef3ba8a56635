/*
 * version.c — which release of levelfeed this library is. A binding that
 * loads liblevelfeed at run time (python/levelfeed) compares it with its
 * own version, so a package and a library from different releases are not
 * mixed silently.
 */
#include "levelfeed.h"

const char *lf_version(void)
{
    return LF_VERSION_STRING;
}
