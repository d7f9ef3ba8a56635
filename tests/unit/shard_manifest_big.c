/*
 * shard_manifest_big.c — decoding a manifest of 160 k shards is not
 * quadratic in the shard count (issue #28, F7).
 *
 * The decoder checked that no shard file is listed twice by comparing each
 * name with every earlier one: 1.3e10 comparisons for 160 k shards, about
 * 70 s of `lf-shard verify` before a single shard was opened. The check must
 * still find a name listed twice wherever the two entries are. A CPU-time
 * alarm (ITIMER_PROF: the process's own work, whatever else the machine
 * runs) bounds the decode of the big manifest: 10 s is some thirty times what
 * the sorted check needs (0.3 s, encoding included), and far below the
 * pairwise check's minute, so the test cannot pass on quadratic code and
 * does not hang on it until the runner's timeout.
 */
#include "shard_internal.h"
#include "test.h"

#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#define NSHARDS 160000u

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "manifest decode of 160000 shards took past 10 s of CPU: "
                              "quadratic?\n";
    ssize_t n = write(2, msg, sizeof msg - 1);
    (void)n;
    _exit(1);
}

/* A manifest of n one-sample shards named "shard-NNNNNNN.lfs"; entry `dup`
 * (when below n) takes the name of entry `as`. */
static uint8_t *make_manifest(uint32_t n, uint32_t dup, uint32_t as, size_t *size)
{
    manifest m = {.version = 1, .nshards = n, .samples = n, .blocks = n, .raw_bytes = 0,
                  .stored_bytes = (uint64_t)n * 8192};
    m.schema.nfields = 1;
    strcpy(m.schema.fields[0].name, "tokens");
    m.schema.fields[0].type = LF_FIELD_TOKENS_U16;
    m.shards = calloc(n, sizeof *m.shards);
    ASSERT_TRUE(m.shards != NULL);
    for (uint32_t i = 0; i < n; i++) {
        manifest_shard *s = &m.shards[i];
        snprintf(s->name, sizeof s->name, "shard-%07u.lfs", i == dup ? as : i);
        s->samples = s->blocks = 1;
        s->file_size = 8192;
        s->footer_hash = i;
    }
    *size = manifest_size(n);
    uint8_t *buf = malloc(*size);
    ASSERT_TRUE(buf != NULL);
    manifest_encode(&m, buf);
    free(m.shards);
    return buf;
}

/* Decodes; returns the status, with the message in err. */
static int decode(uint32_t n, uint32_t dup, uint32_t as, lf_shard_error *err)
{
    size_t size;
    uint8_t *buf = make_manifest(n, dup, as, &size);
    manifest m;
    int rc = manifest_decode(buf, size, false, "m.lfm", &m, err);
    if (rc == 0) {
        char last[MANIFEST_NAME_MAX];
        snprintf(last, sizeof last, "shard-%07u.lfs", n - 1);
        ASSERT_EQ(m.nshards, n);
        ASSERT_STR_EQ(m.shards[n - 1].name, last);
        free(m.shards);
    }
    free(buf);
    return rc;
}

int main(void)
{
    lf_shard_error err;
    struct itimerval cpu = {.it_value = {.tv_sec = 10}}, off = {0};
    signal(SIGPROF, on_alarm);
    ASSERT_EQ(setitimer(ITIMER_PROF, &cpu, NULL), 0);
    ASSERT_EQ(decode(NSHARDS, UINT32_MAX, 0, &err), 0);
    ASSERT_EQ(setitimer(ITIMER_PROF, &off, NULL), 0);

    /* a name listed twice is still found: first and last, neighbours */
    ASSERT_EQ(decode(NSHARDS, NSHARDS - 1, 0, &err), LF_SHARD_E_FORMAT);
    ASSERT_STR_EQ(err.msg, "m.lfm: shard file shard-0000000.lfs listed twice");
    ASSERT_EQ(decode(3, 2, 1, &err), LF_SHARD_E_FORMAT);
    ASSERT_STR_EQ(err.msg, "m.lfm: shard file shard-0000001.lfs listed twice");
    ASSERT_EQ(decode(1, UINT32_MAX, 0, &err), 0);
    return 0;
}
