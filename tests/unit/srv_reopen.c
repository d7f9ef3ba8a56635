/*
 * srv_reopen.c — clients that come and go do not lock a rank out.
 *
 * Connections to the fd socket that never send a token (a client stopped
 * between connect and send) are closed after ten heartbeats: before, 32 of
 * them took every pending place for good and no client could map its ring.
 *
 * A rank whose client closes and a new one opens at once, many times over,
 * while another rank stays: every open succeeds.
 * Closing sends BYE and then closes the fd socket; the new client's HELLO
 * can reach the server in the same poll as the old connection's end. The
 * server once took that end for the new session's and dropped it, and the
 * new client's open failed ("fd socket sent no ring descriptor"): about one
 * open in 300 here. 1000 rounds make a regression all but certain to show.
 */
#include "levelfeed.h"
#include "srv_test.h"

#include <sys/socket.h>
#include <sys/un.h>

#define ROUNDS 1000
#define IDLE 40                  /* more than the server's 32 pending places */
/* Short, so the idle connections go in a second; not shorter: the server
 * also forgets a client that has not come for its ring ten heartbeats after
 * WELCOME, and a reopen under a sanitizer on a busy machine took 200 ms. */
#define HEARTBEAT_MS 100

static int open_rank(const char *ep, int rank, lf_client **c, char *err, size_t cap)
{
    lf_client_options o;
    lf_client_options_default(&o);
    o.rank = rank;
    o.world_size = 2;
    o.endpoint = ep;
    o.error = err;
    o.error_size = cap;
    return lf_client_open(&o, c);
}

/* A connection to the fd socket that sends nothing. */
static int idle_connect(const char *fd_path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ASSERT_LT(strlen(fd_path), sizeof sa.sun_path);
    memcpy(sa.sun_path, fd_path, strlen(fd_path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

int main(void)
{
    srv_test_dirs dirs;
    srv_test_dirs_make(&dirs);
    const char *bin = dirs.bin, *ds = dirs.ds, *ep = dirs.ep;
    char err[256];
    const char *argv[] = {"--data", ds, "--world", "2", "--endpoint", ep, "--quiet",
                          "--heartbeat-ms", "100", NULL};
    pid_t srv = srv_test_start(bin, ep, argv);

    char fd_path[600];
    snprintf(fd_path, sizeof fd_path, "%s.fd", ep);
    int idle[IDLE];
    for (int i = 0; i < IDLE; i++) idle[i] = idle_connect(fd_path);
    usleep(20 * HEARTBEAT_MS * 1000); /* past ten heartbeats */
    for (int i = 0; i < IDLE; i++) {
        char byte;
        ASSERT_EQ(recv(idle[i], &byte, 1, MSG_DONTWAIT), 0); /* closed by the server */
        close(idle[i]);
    }

    lf_client *keep, *c;
    ASSERT_EQ(open_rank(ep, 1, &keep, err, sizeof err), 0);
    for (int i = 0; i < ROUNDS; i++) {
        int rc = open_rank(ep, 0, &c, err, sizeof err);
        if (rc != 0) TEST_FAIL_("round %d: rank 0's open failed: %s", i, err);
        lf_client_close(c);
    }
    lf_client_close(keep);
    ASSERT_EQ(srv_test_wait(srv), 0);
    srv_test_no_leftovers(&dirs);
    printf("%d idle fd-socket connections closed by the server; rank 0 closed and "
           "reopened %d times beside rank 1: every open served\n", IDLE, ROUNDS);
    return 0;
}
