/*
 * lf_ipc.h — where the control endpoint lives and how the ring's memfd
 * travels from the server to a client.
 *
 * The endpoint is a filesystem path P; ZeroMQ uses "ipc://P", the server
 * hands out ring memfds on the Unix socket "P.fd" and holds the lock file
 * "P.lock" (flock) so that a second server on the same endpoint refuses to
 * start. P's directory is private to the user (mode 0700): the server
 * creates it, and both sides refuse one that others can enter.
 */
#ifndef LF_IPC_H
#define LF_IPC_H

#include <stddef.h>
#include <stdint.h>

#define LF_IPC_PATH_MAX 100      /* room for ".lock" inside a 108-byte sun_path */

#define LF_IPC_JOB_MAX 32        /* characters of a job's name kept in paths */

/* The job's name into out (at most LF_IPC_JOB_MAX characters, and cap - 1;
 * only [A-Za-z0-9._-] kept, others become '_'): `given` when set, else
 * $LEVELFEED_JOB, $SLURM_JOB_ID, $TORCHELASTIC_RUN_ID (not its placeholder
 * "none"). Returns its length, 0 when there is no job. */
size_t lf_ipc_job(const char *given, char *out, size_t cap);

/* Resolves the control endpoint into path (a plain filesystem path):
 * `given` may be "ipc://P", "P", or NULL/"" for the default
 * $XDG_RUNTIME_DIR/levelfeed/ctl-JOB, else /tmp/levelfeed-$UID/ctl-JOB,
 * JOB being lf_ipc_job(job) (".../ctl" without a job): two jobs of one
 * user on one node never meet. Returns 0, or -ENAMETOOLONG, -EINVAL
 * (another transport). */
int lf_ipc_endpoint(const char *given, const char *job, char *path, size_t cap);

/* Makes sure the directory holding `path` exists (created 0700 when `create`
 * is set; parents must exist), is a real directory (a symbolic link is not
 * followed), belongs to this user and is not open to group or others.
 * Returns 0 or a negative errno: -EPERM (another owner, or a mode open to
 * others), -ELOOP (a symbolic link), -ENOTDIR, -ENOENT, ...; on an error,
 * `why` (if not NULL) gets a sentence naming the directory, the cause and
 * what to do. */
int lf_ipc_private_dir(const char *path, int create, char *why, size_t cap);

/* Removes the Unix socket at path, if one is there: anything else that sits
 * there (a user's file) is left alone. Returns 0 (removed or none), -EEXIST
 * (something that is not a socket) or a negative errno. */
int lf_ipc_unlink_socket(const char *path);

/* Whether the peer of the connected Unix socket runs as this process's uid
 * (SO_PEERCRED). Returns 0, -EPERM (another uid) or a negative errno. */
int lf_ipc_same_user(int sock);

/* Sends `len` bytes (1..256) with the descriptor fd attached (SCM_RIGHTS).
 * Returns 0 or a negative errno. */
int lf_ipc_send_fd(int sock, int fd, const void *data, size_t len);

/* Receives up to `cap` bytes and at most one descriptor (*fd = -1 when none
 * came; any extra descriptors are closed). Returns the byte count (0 at end
 * of stream) or a negative errno. */
long lf_ipc_recv_fd(int sock, int *fd, void *data, size_t cap);

#endif
