/*
 * launch.h — what the parts of lf-launch share: the run's state, the
 * processes (proc.c), the runtime directory (rundir.c) and the readiness
 * probe (probe.c).
 */
#ifndef LF_LAUNCH_H
#define LF_LAUNCH_H

#include "lf_ipc.h"

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct launch {
    /* from the command line */
    char **server_flags;         /* the flags for lf-server, as given */
    int nserver_flags;
    char **trainer;              /* the trainer's command, NULL-terminated */
    const char *server_opt;      /* --server, or NULL: beside lf-launch, else PATH */
    const char *server_log;      /* --server-log FILE, or NULL: our stderr */
    const char *job;             /* --job, or NULL: from the environment */
    const char *endpoint_opt;    /* --endpoint among the server flags, or NULL */
    uint64_t ready_timeout_ms;   /* --ready-timeout */
    uint64_t stop_timeout_ms;    /* --stop-timeout */

    /* the run */
    char server_path[PATH_MAX];  /* the lf-server executed */
    char rundir[LF_IPC_PATH_MAX + 1]; /* the directory we made, "" when none */
    char endpoint[LF_IPC_PATH_MAX + 1]; /* the control socket's path */
    int sigfd;                   /* signalfd: SIGCHLD and the forwarded signals */
    pid_t server_pid, trainer_pid; /* 0: not started or reaped */
    pid_t trainer_pgid;          /* the trainer's process group, kept after it ends */
    int server_status;           /* wait status once reaped, else -1 */
    int trainer_status;
    int stop_signal;             /* a signal that came while no trainer ran */
    int server_sent;             /* the last signal lf-launch sent the server, or 0 */
} launch;

/* proc.c */
uint64_t launch_now_ms(void);
int launch_signals_init(launch *L);
int launch_spawn_server(launch *L);
int launch_spawn_trainer(launch *L);
/* Waits up to timeout_ms (-1: until an event) for a signal, handling what
 * came (reaping children, forwarding signals to the trainer's group); with
 * a ZeroMQ socket, also for a message on it. Returns 1 when the socket is
 * readable, else 0. */
int launch_wait(launch *L, void *zsock, int timeout_ms);
/* After the trainer: ends what is left of its process group and the server
 * (on its own when the trainer succeeded, else SIGTERM at once; SIGKILL
 * after --stop-timeout). */
void launch_stop(launch *L, int trainer_ok);
/* "exited with status 3", "was killed by signal 9 (Killed)". */
const char *launch_status_text(int status, char *buf, size_t cap);
/* The shell's number for a wait status: the exit code, or 128 + signal. */
int launch_status_code(int status);

/* rundir.c */
int launch_find_server(launch *L);
int launch_make_rundir(launch *L);
void launch_remove_rundir(launch *L);

/* probe.c: waits until the server answers on its control socket; 0, or -1
 * after saying why (the server ended, the deadline passed, a signal). */
int launch_wait_ready(launch *L);

#endif
