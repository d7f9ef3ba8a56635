/*
 * rundir.c — which lf-server to run, and the job's private runtime
 * directory.
 *
 * Two jobs of one user on one node must never share an endpoint, whatever
 * their job ids (two steps of one Slurm allocation share SLURM_JOB_ID), so
 * the directory is made by mkdtemp: unique by construction, 0700, ours.
 * The job's name is only in its prefix, for a person (or lf-stat) looking
 * for it. It lives in the directory that holds the server's default
 * endpoint ($XDG_RUNTIME_DIR/levelfeed, else /tmp/levelfeed-$UID), checked
 * private as the server checks its own.
 */
#include "launch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* PATH's directories in turn: the first DIR/lf-server we may execute. */
static int search_path(char *out, size_t cap)
{
    const char *p = getenv("PATH");
    while (p && *p) {
        size_t n = strcspn(p, ":");
        if (n > 0 && (size_t)snprintf(out, cap, "%.*s/lf-server", (int)n, p) < cap &&
            access(out, X_OK) == 0)
            return 0;
        p += n + (p[n] == ':');
    }
    return -1;
}

int launch_find_server(launch *L)
{
    char *path = L->server_path;
    size_t cap = sizeof L->server_path;
    if (L->server_opt) {
        if ((size_t)snprintf(path, cap, "%s", L->server_opt) < cap && access(path, X_OK) == 0)
            return 0;
        fprintf(stderr, "lf-launch: --server %s: %s\n", L->server_opt, strerror(errno));
        return -1;
    }
    /* Installed or built, lf-server sits beside lf-launch. */
    ssize_t n = readlink("/proc/self/exe", path, cap - 1);
    if (n > 0) {
        path[n] = 0;
        char *slash = strrchr(path, '/');
        if (slash && (size_t)(slash - path) + sizeof "/lf-server" <= cap) {
            strcpy(slash, "/lf-server");
            if (access(path, X_OK) == 0) return 0;
        }
    }
    if (search_path(path, cap) == 0) return 0;
    fprintf(stderr, "lf-launch: no lf-server beside lf-launch or on PATH; give --server PATH\n");
    return -1;
}

int launch_make_rundir(launch *L)
{
    if (L->endpoint_opt) { /* the user's endpoint: theirs to keep, nothing made */
        int rc = lf_ipc_endpoint(L->endpoint_opt, NULL, L->endpoint, sizeof L->endpoint);
        if (rc < 0) fprintf(stderr, "lf-launch: --endpoint %s: %s\n", L->endpoint_opt,
                            rc == -ENAMETOOLONG ? "too long" : "not an ipc:// path");
        return rc < 0 ? -1 : 0;
    }
    char base[LF_IPC_PATH_MAX + 1], name[LF_IPC_JOB_MAX + 1];
    int rc = lf_ipc_endpoint(NULL, L->job, base, sizeof base);
    if (rc == 0) rc = lf_ipc_private_dir(base, 1, NULL, 0);
    if (rc < 0) {
        fprintf(stderr, "lf-launch: the runtime directory of %s: %s\n", base,
                rc == -EPERM ? "not private to this user (must be 0700 and ours)"
                             : strerror(-rc));
        return -1;
    }
    *strrchr(base, '/') = 0; /* the default endpoint's directory */
    if (!lf_ipc_job(L->job, name, sizeof name)) strcpy(name, "job");
    int n = snprintf(L->rundir, sizeof L->rundir, "%s/job-%s.XXXXXX", base, name);
    /* room for "/ctl" and the server's ".lock" after it */
    if (n < 0 || (size_t)n + sizeof "/ctl" > sizeof L->rundir) {
        fprintf(stderr, "lf-launch: %s/job-%s.XXXXXX/ctl is too long for a socket path; "
                "set XDG_RUNTIME_DIR to a shorter directory or give --endpoint\n", base, name);
        L->rundir[0] = 0;
        return -1;
    }
    if (!mkdtemp(L->rundir)) {
        fprintf(stderr, "lf-launch: cannot make %s: %s\n", L->rundir, strerror(errno));
        L->rundir[0] = 0;
        return -1;
    }
    n = snprintf(L->endpoint, sizeof L->endpoint, "%s/ctl", L->rundir);
    return n > 0 && (size_t)n < sizeof L->endpoint ? 0 : -1; /* checked above */
}

/* What a server leaves in its endpoint's directory when it was killed: its
 * lock file and its sockets (a clean exit removes them all). Only these and
 * the directory are removed: anything else there is not ours. */
void launch_remove_rundir(launch *L)
{
    static const char *const left[] = {"", ".fd", ".lock"};
    if (!L->rundir[0]) return;
    char path[LF_IPC_PATH_MAX + 8];
    for (size_t i = 0; i < sizeof left / sizeof left[0]; i++) {
        snprintf(path, sizeof path, "%s%s", L->endpoint, left[i]);
        unlink(path);
    }
    if (rmdir(L->rundir) != 0)
        fprintf(stderr, "lf-launch: cannot remove %s: %s\n", L->rundir, strerror(errno));
    L->rundir[0] = 0;
}
