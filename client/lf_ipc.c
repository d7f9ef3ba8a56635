/*
 * lf_ipc.c — endpoint paths, the private runtime directory, and descriptor
 * passing over a Unix socket (see lf_ipc.h).
 */
#include "lf_ipc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

size_t lf_ipc_job(const char *given, char *out, size_t cap)
{
    static const char *const vars[] = {"LEVELFEED_JOB", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"};
    const char *j = given;
    for (size_t k = 0; (!j || !*j) && k < sizeof vars / sizeof vars[0]; k++) {
        j = getenv(vars[k]);
        /* torchrun's run id when none was chosen: every job's alike. */
        if (k == 2 && j && strcmp(j, "none") == 0) j = NULL;
    }
    size_t i = 0;
    for (; j && j[i] && i < LF_IPC_JOB_MAX && i + 1 < cap; i++)
        out[i] = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
                        j[i]) ? j[i] : '_';
    if (cap) out[i] = 0;
    return i;
}

int lf_ipc_endpoint(const char *given, const char *job, char *path, size_t cap)
{
    int n;
    if (given && *given) {
        if (strncmp(given, "ipc://", 6) == 0) given += 6;
        else if (strstr(given, "://")) return -EINVAL;
        if (*given == 0) return -EINVAL;
        n = snprintf(path, cap, "%s", given);
    } else {
        char name[LF_IPC_JOB_MAX + 1];
        const char *dash = lf_ipc_job(job, name, sizeof name) ? "-" : "";
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        if (xdg && *xdg == '/')
            n = snprintf(path, cap, "%s/levelfeed/ctl%s%s", xdg, dash, name);
        else
            n = snprintf(path, cap, "/tmp/levelfeed-%u/ctl%s%s", (unsigned)getuid(), dash, name);
    }
    if (n < 0 || (size_t)n >= cap || n > LF_IPC_PATH_MAX) return -ENAMETOOLONG;
    return 0;
}

/* lstat, not stat: a symbolic link planted by another user must not lead
 * us into a directory of its choosing. */
int lf_ipc_private_dir(const char *path, int create, char *why, size_t cap)
{
    char dir[LF_IPC_PATH_MAX + 1];
    if (strlen(path) > LF_IPC_PATH_MAX) return -ENAMETOOLONG;
    strcpy(dir, path);
    char *slash = strrchr(dir, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    if (create && mkdir(dir, 0700) != 0 && errno != EEXIST) return -errno;
    struct stat st;
    int rc = 0;
    if (lstat(dir, &st) != 0) rc = -errno;
    else if (S_ISLNK(st.st_mode)) rc = -ELOOP;
    else if (!S_ISDIR(st.st_mode)) rc = -ENOTDIR;
    else if (st.st_uid != getuid() || (st.st_mode & 0077)) rc = -EPERM;
    if (!why || cap == 0) return rc;
    if (rc == -ELOOP || rc == -ENOTDIR)
        snprintf(why, cap, "runtime directory %s is %s, not a directory of this user's; "
                 "remove it (rm %s) and start the server again", dir,
                 rc == -ELOOP ? "a symbolic link" : "not a directory", dir);
    else if (rc == -EPERM && st.st_uid != getuid())
        snprintf(why, cap, "runtime directory %s belongs to uid %u, not to this user (uid %u): "
                 "another user may be posing as the server; remove it (rm -r %s, as root "
                 "or uid %u) and start the server again", dir, (unsigned)st.st_uid,
                 (unsigned)getuid(), dir, (unsigned)st.st_uid);
    else if (rc == -EPERM)
        snprintf(why, cap, "runtime directory %s has mode %04o, others may enter it; it must "
                 "be 0700 (chmod 700 %s)", dir, (unsigned)(st.st_mode & 07777), dir);
    else if (rc < 0)
        snprintf(why, cap, "runtime directory %s: %s", dir, strerror(-rc));
    return rc;
}

int lf_ipc_unlink_socket(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(st.st_mode)) return -EEXIST;
    return unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
}

int lf_ipc_same_user(int sock)
{
    struct ucred cred;
    socklen_t cl = sizeof cred;
    if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0) return -errno;
    return cred.uid == getuid() ? 0 : -EPERM;
}

int lf_ipc_send_fd(int sock, int fd, const void *data, size_t len)
{
    if (len == 0 || len > 256) return -EINVAL;
    union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int))]; } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {.iov_base = (void *)(uintptr_t)data, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1,
                        .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    ssize_t n;
    do n = sendmsg(sock, &mh, MSG_NOSIGNAL); while (n < 0 && errno == EINTR);
    if (n < 0) return -errno;
    return (size_t)n == len ? 0 : -EIO;
}

long lf_ipc_recv_fd(int sock, int *fd, void *data, size_t cap)
{
    union { struct cmsghdr h; char buf[CMSG_SPACE(4 * sizeof(int))]; } ctl;
    struct iovec iov = {.iov_base = data, .iov_len = cap};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1,
                        .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    ssize_t n;
    do n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC); while (n < 0 && errno == EINTR);
    if (n < 0) return -errno;
    *fd = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < nfd; i++) {
            int got;
            memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
            if (*fd < 0) *fd = got;
            else close(got);
        }
    }
    if (mh.msg_flags & MSG_CTRUNC) {
        if (*fd >= 0) close(*fd);
        *fd = -1;
        return -EBADMSG;
    }
    return (long)n;
}
