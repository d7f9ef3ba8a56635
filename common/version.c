#include "version.h"

#include <stdio.h>

#include "levelfeed.h"

void cli_print_version(const char *prog)
{
    printf("%s (levelfeed) %s\n", prog, LF_VERSION_STRING);
}
