/*
 * client_ipc.c — endpoint resolution, the private-directory rule, and the
 * memfd hand-over over a Unix socket.
 */
#include "lf_ipc.h"
#include "test.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/socket.h>

int main(void)
{
    char path[LF_IPC_PATH_MAX + 1];
    ASSERT_EQ(lf_ipc_endpoint("ipc:///tmp/x/ctl", NULL, path, sizeof path), 0);
    ASSERT_STR_EQ(path, "/tmp/x/ctl");
    ASSERT_EQ(lf_ipc_endpoint("/tmp/y/ctl", NULL, path, sizeof path), 0);
    ASSERT_STR_EQ(path, "/tmp/y/ctl");
    ASSERT_EQ(lf_ipc_endpoint("tcp://127.0.0.1:5555", NULL, path, sizeof path), -EINVAL);
    ASSERT_EQ(lf_ipc_endpoint("ipc://", NULL, path, sizeof path), -EINVAL);
    char longp[300];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = 0;
    longp[0] = '/';
    ASSERT_EQ(lf_ipc_endpoint(longp, NULL, path, sizeof path), -ENAMETOOLONG);
    unsetenv("LEVELFEED_JOB");
    unsetenv("SLURM_JOB_ID");
    unsetenv("TORCHELASTIC_RUN_ID");
    setenv("XDG_RUNTIME_DIR", "/run/user/77", 1);
    ASSERT_EQ(lf_ipc_endpoint(NULL, NULL, path, sizeof path), 0);
    ASSERT_STR_EQ(path, "/run/user/77/levelfeed/ctl");
    /* The job names the default endpoint: two jobs of one user on a node
     * never meet. --job, else LEVELFEED_JOB, SLURM_JOB_ID, TORCHELASTIC_RUN_ID
     * (not its "none"); a given endpoint is taken as it is. */
    static const struct { const char *var, *value, *job, *want; } jobs[] = {
        {"TORCHELASTIC_RUN_ID", "none", NULL, "ctl"},
        {"TORCHELASTIC_RUN_ID", "3f2a/x y", NULL, "ctl-3f2a_x_y"},
        {"SLURM_JOB_ID", "4242", NULL, "ctl-4242"},
        {"LEVELFEED_JOB", "mine", NULL, "ctl-mine"},
        {"LEVELFEED_JOB", "mine", "given", "ctl-given"},
    };
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++) {
        char want[128];
        setenv(jobs[i].var, jobs[i].value, 1);
        snprintf(want, sizeof want, "/run/user/77/levelfeed/%s", jobs[i].want);
        ASSERT_EQ(lf_ipc_endpoint(NULL, jobs[i].job, path, sizeof path), 0);
        ASSERT_STR_EQ(path, want);
    }
    ASSERT_EQ(lf_ipc_endpoint("/tmp/y/ctl", "given", path, sizeof path), 0);
    ASSERT_STR_EQ(path, "/tmp/y/ctl");
    char job[LF_IPC_JOB_MAX + 1];
    ASSERT_EQ(lf_ipc_job("0123456789012345678901234567890123456789", job, sizeof job),
              (size_t)LF_IPC_JOB_MAX);
    unsetenv("LEVELFEED_JOB");
    unsetenv("SLURM_JOB_ID");
    unsetenv("TORCHELASTIC_RUN_ID");
    ASSERT_EQ(lf_ipc_job(NULL, job, sizeof job), 0u);
    unsetenv("XDG_RUNTIME_DIR");
    ASSERT_EQ(lf_ipc_endpoint("", NULL, path, sizeof path), 0);
    ASSERT_TRUE(strncmp(path, "/tmp/levelfeed-", 15) == 0);

    /* The directory: created 0700; an existing one open to others refused. */
    const char *tmp = test_tmpdir();
    char ep[256], dir[256];
    snprintf(dir, sizeof dir, "%.200s/rt", tmp);
    snprintf(ep, sizeof ep, "%.200s/ctl", dir);
    ASSERT_EQ(lf_ipc_private_dir(ep, 0, NULL, 0), -ENOENT);
    ASSERT_EQ(lf_ipc_private_dir(ep, 1, NULL, 0), 0);
    struct stat st;
    ASSERT_EQ(stat(dir, &st), 0);
    ASSERT_EQ(st.st_mode & 0777, 0700);
    ASSERT_EQ(chmod(dir, 0755), 0);
    ASSERT_EQ(lf_ipc_private_dir(ep, 1, NULL, 0), -EPERM);
    ASSERT_EQ(chmod(dir, 0700), 0);
    ASSERT_EQ(lf_ipc_private_dir(ep, 0, NULL, 0), 0);

    /* A memfd travels with its bytes; what arrives maps the same memory. */
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int mfd = memfd_create("t", MFD_CLOEXEC);
    ASSERT_GE(mfd, 0);
    ASSERT_EQ(ftruncate(mfd, 4096), 0);
    unsigned char *a = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    ASSERT_TRUE(a != MAP_FAILED);
    a[100] = 42;
    ASSERT_EQ(lf_ipc_send_fd(sv[0], mfd, "OK\n", 4), 0);
    ASSERT_EQ(lf_ipc_send_fd(sv[0], mfd, "", 0), -EINVAL);
    int got = -1;
    char msg[8];
    ASSERT_EQ(lf_ipc_recv_fd(sv[1], &got, msg, sizeof msg), 4);
    ASSERT_STR_EQ(msg, "OK\n");
    ASSERT_GE(got, 0);
    unsigned char *b = mmap(NULL, 4096, PROT_READ, MAP_SHARED, got, 0);
    ASSERT_TRUE(b != MAP_FAILED);
    ASSERT_EQ(b[100], 42);
    a[101] = 7;
    ASSERT_EQ(b[101], 7);
    /* Bytes without a descriptor: *fd is -1. */
    ASSERT_EQ(send(sv[0], "x", 1, 0), 1);
    int none = 5;
    ASSERT_EQ(lf_ipc_recv_fd(sv[1], &none, msg, sizeof msg), 1);
    ASSERT_EQ(none, -1);
    /* End of stream. */
    close(sv[0]);
    ASSERT_EQ(lf_ipc_recv_fd(sv[1], &none, msg, sizeof msg), 0);
    printf("ipc ok\n");
    return 0;
}
