/*
 * replay.c — runs a libFuzzer target over a corpus without libFuzzer, so
 * `make test` replays every committed input on any compiler (zstd's
 * tests/fuzz/regression_driver.c does the same). Arguments are files or
 * directories; a target that crashes or trips a sanitizer fails the test.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "replay: cannot open %s\n", path); return -1; }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    /* One extra byte so an empty input still has a valid, distinct pointer. */
    uint8_t *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        free(buf); fclose(f); return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 0;
}

static int replay_path(const char *path, long *count)
{
    struct stat st;
    if (stat(path, &st) != 0) { fprintf(stderr, "replay: no such path %s\n", path); return -1; }
    if (!S_ISDIR(st.st_mode)) { (*count)++; return replay_file(path); }
    struct dirent **names;
    int n = scandir(path, &names, NULL, alphasort);
    if (n < 0) { fprintf(stderr, "replay: cannot list %s\n", path); return -1; }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.' && rc == 0) {
            char child[4096];
            snprintf(child, sizeof child, "%s/%s", path, names[i]->d_name);
            rc = replay_path(child, count);
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    long count = 0;
    for (int i = 1; i < argc; i++)
        if (replay_path(argv[i], &count) != 0) return 1;
    if (count == 0) { fprintf(stderr, "replay: empty corpus\n"); return 1; }
    printf("replayed %ld inputs\n", count);
    return 0;
}
