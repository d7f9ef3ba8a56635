/*
 * srv_test.h — a small token dataset and a real lf-server process, for C
 * tests that talk to the server through the client library or by hand.
 */
#ifndef LF_SRV_TEST_H
#define LF_SRV_TEST_H

#include "lf_shard.h"
#include "test.h"

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* n samples (at most 64) of u16 tokens, 10..73 tokens long, token i of
 * each first + 7 i, in 4 KiB blocks. */
static inline void srv_test_tokens(const char *dir, int n, uint16_t first)
{
    lf_schema sc = {.nfields = 1, .cost_field = 0};
    strcpy(sc.fields[0].name, "tokens");
    sc.fields[0].type = LF_FIELD_TOKENS_U16;
    lf_writer_options o = {.block_bytes = 4096, .threads = 1};
    lf_writer *w;
    lf_shard_error err;
    ASSERT_EQ(lf_writer_create(dir, &sc, &o, &w, &err), 0);
    uint16_t tok[80];
    for (int i = 0; i < 80; i++) tok[i] = (uint16_t)(first + i * 7);
    for (int s = 0; s < n && s < 64; s++) {
        lf_field_input in = {.data = tok, .size = (size_t)(10 + s) * 2};
        ASSERT_GE(lf_writer_add(w, &in, &err), 0);
    }
    ASSERT_EQ(lf_writer_finish(w, NULL, &err), 0);
}

/* 64 samples of u16 tokens, 10..73 tokens long, in 4 KiB blocks. */
static inline void srv_test_dataset(const char *dir)
{
    srv_test_tokens(dir, 64, 0);
}

/* Where a test's server lives: the programs ($LF_BIN, set by tests/run.sh;
 * the test skips without it), the dataset (made by srv_test_dataset), a
 * private runtime directory and the control endpoint in it. */
typedef struct srv_test_dirs {
    const char *bin;
    char ds[512], rt[512], ep[512];
    char shm_before[16384];      /* /dev/shm's names at the start (srv_test_list) */
} srv_test_dirs;

/* The names in `dir`, sorted, one a line ("" if it cannot be read). */
static inline void srv_test_list(const char *dir, char *out, size_t cap)
{
    struct dirent **e;
    int n = scandir(dir, &e, NULL, alphasort);
    size_t len = 0;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (strcmp(e[i]->d_name, ".") && strcmp(e[i]->d_name, "..") &&
            strlen(e[i]->d_name) + 2 <= cap - len)
            len += (size_t)snprintf(out + len, cap - len, "%s\n", e[i]->d_name);
        free(e[i]);
    }
    if (n >= 0) free(e);
}

/* Where the kernel allows it (root, as in CI), the test and the servers it
 * starts get a private, empty /dev/shm, as the e2e scripts do, so the
 * leftover check sees only what they left. It must run before any thread
 * exists: unshare(CLONE_NEWNS) refuses a threaded process. */
static inline void srv_test_private_shm(void)
{
    if (unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0)
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "mode=1777");
}

/* Nothing left by the servers that ended: /dev/shm as it was at
 * srv_test_dirs_make, and nothing in the runtime directory (the lock file
 * included: a server removes it at its exit). */
static inline void srv_test_no_leftovers(const srv_test_dirs *d)
{
    char now[sizeof d->shm_before];
    srv_test_list("/dev/shm", now, sizeof now);
    ASSERT_STR_EQ(now, d->shm_before);
    srv_test_list(d->rt, now, sizeof now);
    ASSERT_STR_EQ(now, "");
}

static inline void srv_test_dirs_make(srv_test_dirs *d)
{
    srv_test_private_shm();
    srv_test_list("/dev/shm", d->shm_before, sizeof d->shm_before);
    d->bin = getenv("LF_BIN");
    if (!d->bin || !*d->bin) TEST_SKIP("LF_BIN not set (run through tests/run.sh)");
    const char *tmp = test_tmpdir();
    snprintf(d->ds, sizeof d->ds, "%.400s/ds", tmp);
    snprintf(d->rt, sizeof d->rt, "%.400s/rt", tmp);
    snprintf(d->ep, sizeof d->ep, "%.400s/ctl", d->rt);
    ASSERT_EQ(mkdir(d->rt, 0700), 0);
    srv_test_dataset(d->ds);
}

/* Starts $bin/lf-server with argv (NULL-terminated, after the program
 * name) and waits until it serves on `ep` (lf-stat says so: the socket
 * exists, and answers, while the server still plans). The server gets
 * SIGTERM when the test ends: a failed assert exits at once, and a server
 * still waiting for its clients would otherwise run on. */
static inline pid_t srv_test_start(const char *bin, const char *ep, const char *const *argv)
{
    char exe[4200];
    snprintf(exe, sizeof exe, "%.4000s/lf-server", bin);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(127);
        char *args[64] = {exe}; /* execv's array is not const: copies */
        for (int i = 0; argv[i] && i < 62; i++) args[i + 1] = strdup(argv[i]);
        execv(exe, args);
        _exit(127);
    }
    char ask[9000];
    snprintf(ask, sizeof ask, "'%.4000s/lf-stat' '%.4000s' --json 2>/dev/null | "
             "grep -q '\"state\": \"serving\"'", bin, ep);
    int rc = 1;
    for (int i = 0; i < 200 && rc != 0; i++)
        if ((rc = access(ep, F_OK) == 0 ? system(ask) : 1) != 0) usleep(20000);
    ASSERT_EQ(rc, 0);
    return pid;
}

/* The server's exit status (it ends by itself once every rank is done). */
static inline int srv_test_wait(pid_t pid)
{
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#endif
