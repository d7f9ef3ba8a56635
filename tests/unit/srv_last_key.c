/*
 * srv_last_key.c — a saved state at the very last position the server can
 * order (#28 F14): epoch 2^24 - 1 (SRV_EPOCH_MAX), step 2^40 - 1. Its step
 * key is UINT64_MAX, which the server once also used as "no rank started
 * yet": every rank's START was taken for none, the planner never began,
 * and the trainer's lf_next waited out its whole timeout. Now the run
 * starts; the position lies past the epoch's last step, so the rank is
 * told at once that the plan is over (LF_E_END).
 *
 * The state is made as a trainer's would be (lf_state_save of a client of
 * this server, so it carries the server's plan id), with its position
 * written over and its checksum made again.
 * Skips when LF_BIN is not set (tests/run.sh sets it).
 */
#include "levelfeed.h"
#include "srv_test.h"

#include <time.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* A generous deadline against a hang, not a timing check: the old server
 * never answered, so any finite wait shows the difference. */
#define NEXT_TIMEOUT_MS 20000

/* The state layout of client/host.c (version 2): magic, rank, epoch,
 * flags, step, ..., xxh3 of the bytes before it in its last 8. */
static void set_position(unsigned char *st, uint32_t epoch, uint64_t step)
{
    memcpy(st + 8, &epoch, 4);
    memcpy(st + 16, &step, 8);
    uint64_t h = XXH3_64bits(st, LF_STATE_SIZE - 8);
    memcpy(st + LF_STATE_SIZE - 8, &h, 8);
}

int main(void)
{
    srv_test_dirs dirs;
    srv_test_dirs_make(&dirs);
    const char *argv[] = {"--data", dirs.ds, "--world", "1", "--endpoint", dirs.ep, "--quiet",
                          "--epoch", "16777215", "--epochs", "1", NULL};
    pid_t srv = srv_test_start(dirs.bin, dirs.ep, argv);
    lf_client_options o;
    lf_client_options_default(&o);
    char err[256] = "";
    o.rank = 0;
    o.world_size = 1;
    o.endpoint = dirs.ep;
    o.error = err;
    o.error_size = sizeof err;
    lf_client *c;
    if (lf_client_open(&o, &c) != 0) TEST_FAIL_("open: %s", err);
    unsigned char st[LF_STATE_SIZE];
    ASSERT_EQ(lf_state_save(c, st, sizeof st), LF_STATE_SIZE);
    set_position(st, (1u << 24) - 1, (1ull << 40) - 1);
    ASSERT_EQ(lf_state_restore(c, st, sizeof st), 0);
    lf_batch b;
    int rc = lf_next(c, &b, NEXT_TIMEOUT_MS);
    if (rc != LF_E_END)
        TEST_FAIL_("lf_next from epoch 16777215 step 2^40-1: %s (%s), expected the end of "
                   "the plan", lf_strerror(rc), lf_client_error(c));
    lf_client_close(c);
    ASSERT_EQ(srv_test_wait(srv), 0);
    srv_test_no_leftovers(&dirs);
    printf("a state at epoch 16777215 step 2^40-1 resumed: the server started and said "
           "the plan was over (LF_E_END)\n");
    return 0;
}
