/*
 * proc.c — the two children of lf-launch and the signals between them.
 *
 * The server runs in a process group of its own, so a Ctrl-C on the
 * terminal cannot stop it under a trainer that is still saving its
 * checkpoint, and it ignores SIGHUP, SIGUSR1 and SIGUSR2, which are the
 * trainer's (Slurm signals every process of a step: `--signal=USR1@120`
 * must not kill the server under a trainer that checkpoints on it). It
 * dies with lf-launch (PR_SET_PDEATHSIG: SIGKILL), so even a kill -9 of
 * lf-launch leaves no server behind. Its rings are memfds, so a killed
 * server leaves nothing in /dev/shm.
 *
 * The trainer runs in a process group of its own too (when lf-launch holds
 * the terminal, that group is given the terminal, as a shell does for a
 * job): SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to
 * lf-launch go to the whole group, so torchrun and its workers see what a
 * scheduler sent. lf-launch is a child subreaper: trainer processes
 * orphaned by their parent's death become its children and are reaped.
 *
 * Every signal arrives through one signalfd (blocked otherwise), so the
 * waits below are a poll on it, with no handler racing the main flow.
 */
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define NFORWARDED (sizeof forwarded / sizeof forwarded[0])

uint64_t launch_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

const char *launch_status_text(int status, char *buf, size_t cap)
{
    if (WIFSIGNALED(status))
        snprintf(buf, cap, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, cap, "exited with status %d", WEXITSTATUS(status));
    return buf;
}

int launch_status_code(int status)
{
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

int launch_signals_init(launch *L)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    for (size_t i = 0; i < NFORWARDED; i++) {
        sigaddset(&set, forwarded[i]);
        /* A non-interactive shell starts background jobs with SIGINT and
         * SIGQUIT ignored; an ignored signal is dropped, never read from
         * the signalfd, so they are taken back. An ignored SIGHUP stays
         * ignored: that is nohup's request. */
        struct sigaction sa;
        if (sigaction(forwarded[i], NULL, &sa) == 0 && sa.sa_handler == SIG_IGN &&
            forwarded[i] != SIGHUP)
            signal(forwarded[i], SIG_DFL);
    }
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) return -1;
    L->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (L->sigfd < 0) {
        fprintf(stderr, "lf-launch: signalfd: %s\n", strerror(errno));
        return -1;
    }
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        fprintf(stderr, "lf-launch: warning: cannot become a subreaper (%s): orphans of the "
                "trainer go to init\n", strerror(errno));
    return 0;
}

/* In a child before exec: the signals as a fresh program expects them
 * (default actions, nothing blocked), and death with the parent. */
static void child_setup(pid_t parent, int deathsig)
{
    sigset_t none;
    sigemptyset(&none);
    for (size_t i = 0; i < NFORWARDED; i++)
        if (forwarded[i] != SIGHUP) signal(forwarded[i], SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    prctl(PR_SET_PDEATHSIG, deathsig);
    if (getppid() != parent) _exit(127); /* lf-launch died before the prctl */
}

int launch_spawn_server(launch *L)
{
    char **argv = calloc((size_t)L->nserver_flags + 4, sizeof *argv);
    int n = 0;
    if (!argv) return -1;
    argv[n++] = L->server_path;
    for (int i = 0; i < L->nserver_flags; i++) argv[n++] = L->server_flags[i];
    if (!L->endpoint_opt) {
        argv[n++] = "--endpoint";
        argv[n++] = L->endpoint;
    }
    argv[n] = NULL;
    int logfd = -1;
    if (L->server_log &&
        (logfd = open(L->server_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0) {
        fprintf(stderr, "lf-launch: --server-log %s: %s\n", L->server_log, strerror(errno));
        return -1;
    }
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        child_setup(parent, SIGKILL);
        signal(SIGHUP, SIG_IGN); /* kept ignored through exec */
        signal(SIGUSR1, SIG_IGN);
        signal(SIGUSR2, SIG_IGN);
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC); /* dup2 keeps fd 0 open */
        if (null > 0) dup2(null, 0);
        if (logfd >= 0) { dup2(logfd, 1); dup2(logfd, 2); }
        execv(argv[0], argv);
        fprintf(stderr, "lf-launch: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    free(argv);
    if (logfd >= 0) close(logfd);
    if (pid < 0) {
        fprintf(stderr, "lf-launch: fork: %s\n", strerror(errno));
        return -1;
    }
    setpgid(pid, pid); /* as the child does: whichever runs first */
    L->server_pid = pid;
    fprintf(stderr, "lf-launch: started %s (pid %d) on ipc://%s\n", L->server_path, (int)pid,
            L->endpoint);
    return 0;
}

/* Gives the terminal to process group pgid when lf-launch holds it (it is
 * in the terminal's foreground group), as a shell does for a foreground
 * job; SIGTTOU ignored around it, since a background caller would get one. */
static void give_terminal(pid_t pgid, pid_t holder)
{
    if (!isatty(STDIN_FILENO) || tcgetpgrp(STDIN_FILENO) != holder) return;
    void (*old)(int) = signal(SIGTTOU, SIG_IGN);
    tcsetpgrp(STDIN_FILENO, pgid);
    signal(SIGTTOU, old);
}

int launch_spawn_trainer(launch *L)
{
    char url[LF_IPC_PATH_MAX + 8];
    snprintf(url, sizeof url, "ipc://%s", L->endpoint);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        give_terminal(getpid(), getpgid(parent));
        /* The trainer is asked to stop (not killed) when lf-launch dies,
         * so torchrun can stop its workers. */
        child_setup(parent, SIGTERM);
        setenv("LEVELFEED_ENDPOINT", url, 1);
        execvp(L->trainer[0], L->trainer);
        int e = errno;
        fprintf(stderr, "lf-launch: cannot run %s: %s\n", L->trainer[0], strerror(e));
        _exit(e == ENOENT ? 127 : 126); /* the shell's codes */
    }
    if (pid < 0) {
        fprintf(stderr, "lf-launch: fork: %s\n", strerror(errno));
        return -1;
    }
    setpgid(pid, pid);
    give_terminal(pid, getpgrp());
    L->trainer_pid = L->trainer_pgid = pid;
    return 0;
}

static void reap(launch *L)
{
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        if (pid == L->server_pid) {
            L->server_status = st;
            L->server_pid = 0;
        } else if (pid == L->trainer_pid) {
            L->trainer_status = st;
            L->trainer_pid = 0;
            give_terminal(getpgrp(), pid); /* back from the trainer's group */
        } /* else an orphan of the trainer's, adopted as subreaper */
    }
}

static void on_signals(launch *L)
{
    struct signalfd_siginfo si;
    while (read(L->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
        int sig = (int)si.ssi_signo;
        if (sig == SIGCHLD) {
            reap(L);
        } else if (L->trainer_pid) {
            fprintf(stderr, "lf-launch: passing %s on to the trainer\n", strsignal(sig));
            kill(-L->trainer_pid, sig);
        } else {
            L->stop_signal = sig;
        }
    }
    reap(L); /* SIGCHLDs merge: one read may stand for several children */
}

int launch_wait(launch *L, void *zsock, int timeout_ms)
{
    zmq_pollitem_t it[2] = {{.fd = L->sigfd, .events = ZMQ_POLLIN},
                            {.socket = zsock, .events = ZMQ_POLLIN}};
    int n;
    if (zsock) {
        n = zmq_poll(it, 2, timeout_ms);
    } else {
        struct pollfd p = {.fd = L->sigfd, .events = POLLIN};
        n = poll(&p, 1, timeout_ms);
        it[0].revents = p.revents ? ZMQ_POLLIN : 0;
    }
    if (n <= 0) return 0;
    if (it[0].revents) on_signals(L);
    return zsock && (it[1].revents & ZMQ_POLLIN);
}

/* Whether anything of the trainer's process group (pgid) still runs. */
static int group_alive(pid_t pgid)
{
    return pgid > 0 && (kill(-pgid, 0) == 0 || errno == EPERM);
}

/* Waits until the server has ended and the group is empty, or until
 * deadline_ms; then 1 if they did. */
static int wait_ended(launch *L, pid_t pgid, uint64_t deadline_ms)
{
    for (;;) {
        if (!L->server_pid && !group_alive(pgid)) return 1;
        uint64_t now = launch_now_ms();
        if (now >= deadline_ms) return 0;
        /* the group's last members may not be our children: look again */
        launch_wait(L, NULL, (int)(deadline_ms - now < 100 ? deadline_ms - now : 100));
    }
}

void launch_stop(launch *L, int trainer_ok)
{
    pid_t pgid = L->trainer_pgid;
    uint64_t wait_ms = L->stop_timeout_ms;
    /* What the trainer left running in its group is part of the job. */
    if (group_alive(pgid)) kill(-pgid, SIGTERM);
    /* Every rank's connection closed with the trainer: a server whose
     * ranks all came ends by itself at once (and prints its summary). */
    if (trainer_ok && wait_ended(L, pgid, launch_now_ms() + wait_ms)) return;
    if (L->server_pid) {
        if (trainer_ok)
            fprintf(stderr, "lf-launch: lf-server did not end within %.1f s of the trainer; "
                    "sending it SIGTERM\n", (double)wait_ms / 1000);
        kill(L->server_pid, SIGTERM);
        L->server_sent = SIGTERM;
    }
    if (wait_ended(L, pgid, launch_now_ms() + wait_ms)) return;
    fprintf(stderr, "lf-launch: %s still running %.1f s after SIGTERM: SIGKILL\n",
            L->server_pid ? "lf-server" : "the trainer's processes", (double)wait_ms / 1000);
    if (L->server_pid) {
        kill(L->server_pid, SIGKILL);
        L->server_sent = SIGKILL;
    }
    if (group_alive(pgid)) kill(-pgid, SIGKILL);
    if (!wait_ended(L, pgid, launch_now_ms() + 10000))
        fprintf(stderr, "lf-launch: processes still there 10 s after SIGKILL (stuck in the "
                "kernel?)\n");
}
