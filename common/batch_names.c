#include "batch_names.h"

#include <string.h>

int batch_own_name(const char *name)
{
    static const char *const own[] = {"tokens", "lengths", "positions", "cu_seqlens",
                                      "max_seqlen", "micro", "sample_ids", "sample_offsets",
                                      "source"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (!strcmp(name, own[i])) return 1;
    return 0;
}
