/*
 * client_host.h — the client's host path (host.c), internal to liblevelfeed.
 *
 * The client's files are layered, each calling only the ones below it:
 *
 *   client.c  the trainer's calls: each picks the device path or the host one
 *   gpu.c     the device path: a prefetch thread over the host path
 *   host.c    the host path: the server conversation, batches in the ring
 *
 * struct lf_client is here because client.c keeps the trainer's side of it
 * (its position, its last batch, the device in use); gpu.c goes through the
 * functions below only. Once a client uses a device, its prefetch thread is
 * the only caller of the host-side functions: it owns the control socket, so
 * the trainer's thread never touches it and the client stays single-owner,
 * but for a failure's text, which both threads record (under err_mu).
 */
#ifndef LF_CLIENT_HOST_H
#define LF_CLIENT_HOST_H

#include "levelfeed.h"
#include "lf_ipc.h"
#include "lf_layout.h"
#include "lf_wire.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct lf_gpu lf_gpu;

typedef struct held_slot {
    int held;                    /* handed to the trainer, not yet released */
    uint64_t seq;
    lf_layout layout;            /* checked copy of the slot's layout */
    lf_tensor tensors[LF_LAYOUT_MAX_TENSORS];
} held_slot;

/* READYs not yet returned, in order, of one stream: training's, or the
 * eval pass's (EVAL_READY), each with its own slots of the ring. */
typedef struct lf_lane {
    lf_msg_ready *fifo;          /* cap entries */
    uint32_t cap;                /* the stream's slots */
    uint32_t head, len;
    uint64_t next_seq;           /* seq the next READY must carry */
    uint32_t nheld;              /* of its slots, held by the trainer */
} lf_lane;

struct lf_client {
    void *zctx, *zsock;
    int fdsock;                  /* Unix socket the memfd came on; EOF = server gone */
    char path[LF_IPC_PATH_MAX + 1]; /* the control endpoint's path */
    int rank, world_size;
    int device;                  /* the options' device, for lf_client_use_device */
    lf_gpu *gpu;                 /* NULL: batches stay in host memory */
    int asked;                   /* lf_next was called: no restore, no device now */
    int got;                     /* lf_next has returned a batch */
    int saw_end;                 /* lf_next has returned LF_E_END: the trainer's
                                    thread alone uses the socket (lf_client_report) */
    lf_msg_welcome welcome;
    int planning_pct;            /* the server's last PLANNING while connecting; -1: none */
    uint32_t *epoch_steps;       /* each rank's batches per epoch, from
                                    welcome.first_epoch: WELCOME's, then EPOCH's
                                    (min(epochs, LF_WIRE_EPOCHS_MAX) entries) */
    _Atomic uint32_t epochs_told; /* the entries told so far (the prefetch thread's
                                    EPOCH writes one, then this) */
    unsigned char *seg;          /* mapped ring, read-only */
    uint64_t seg_size;
    held_slot *slots;            /* welcome.nslots entries */
    lf_lane train;               /* READYs for lf_next: the first nslots - eval_slots */
    lf_lane eval;                /* EVAL_READYs for lf_eval_next: the last eval_slots */
    int eval_on;                 /* a pass was asked for and lf_eval_next has not ended it */
    int eval_ended;              /* EVAL_END came: the pass's READYs are all in */
    uint32_t pos_epoch;          /* the trainer's position (trainer_got), or the restored one */
    uint64_t pos_step;
    uint64_t restore_plan;       /* plan_id from lf_state_restore, or 0 */
    uint64_t restore_base;       /* its plan id without the weights (0: none, or a
                                    version 1 state) */
    int started, ended;
    int gone;                    /* the ring socket closed: every wait ends at once */
    uint32_t last_epoch;         /* the trainer's last batch, for lf_report_step */
    uint64_t last_step, last_wait_ns;
    uint64_t last_start_ns;      /* when the lf_next that gave it began */
    uint64_t last_sent_ns;       /* for heartbeats */
    uint64_t last_heard_ns;      /* last message from the server */
    pthread_mutex_t err_mu;      /* guards err: the prefetch thread fails too */
    char err[512];               /* the latest failure's text, from either thread */
    char err_seen[512];          /* lf_client_error's: err as the trainer's last call returned */
    lf_msg_waiting waiting;      /* the server's last WAITING (under err_mu) */
    uint64_t waiting_ns;         /* when it came; 0: none since the last READY */
};

/* The host path, as lf_next / lf_release / lf_report_step are without a
 * device. */
int lf_client_host_next(lf_client *c, lf_batch *b, int timeout_ms);
int lf_client_host_release(lf_client *c, const lf_batch *b);
/* lf_state_restore's checks and position (host.c), its text recorded. */
int lf_client_host_state_restore(lf_client *c, const void *buf, size_t len);
/* lf_client_epoch_batches_wait on the host path: reads the server's
 * messages (READYs queued) until the epoch's count is told. */
int64_t lf_client_host_epoch_batches_wait(lf_client *c, int64_t epoch, int timeout_ms);
/* lf_eval_begin and lf_eval_next on the host path. */
int lf_client_host_eval_begin(lf_client *c);
int lf_client_host_eval_next(lf_client *c, lf_batch *b, int timeout_ms);
/* 1 when the pass has no batch left to take (EVAL_END came, every
 * EVAL_READY taken), else 0, once the messages waiting are read; or an
 * error. The ring's eval slots (WELCOME; 0 without --eval-data). */
int lf_client_host_eval_over(lf_client *c);
uint32_t lf_client_host_eval_slots(const lf_client *c);
/* A STEP report of the trainer's step (epoch, step): its compute time, its
 * sync wait (LF_WIRE_UNKNOWN: not reported) and the data wait of the
 * lf_next that gave it the batch. */
typedef struct lf_step_report {
    uint32_t epoch;
    uint64_t step, compute_ns, sync_ns, wait_ns;
    uint64_t start_ns;           /* the lf_next that gave the batch began (lf_client_now_ns) */
} lf_step_report;
int lf_client_host_report(lf_client *c, const lf_step_report *r);
/* Asks the server for the rank's end-of-run report (lf_client_report). */
int lf_client_host_ask_report(lf_client *c, char *buf, size_t cap, int timeout_ms);
/* Asks the server to write the trace and the chart at these absolute
 * paths ("": not wanted) once every local rank has asked or left
 * (lf_client_trace): 0, LF_E_SERVER with the server's reason recorded,
 * LF_E_TIMEOUT, ... */
int lf_client_host_ask_trace(lf_client *c, const char *trace, const char *chart, int timeout_ms);
/* CLOCK_MONOTONIC in ns: the server's clock too (the same node). */
uint64_t lf_client_now_ns(void);
/* The mapped ring and its slot size. */
void lf_client_ring(const lf_client *c, void **base, size_t *size, uint64_t *slot_size);
/* Records why lf_next found no batch within timeout_ms: the rank the
 * server waits for, when it said so lately, else the server's silence. */
void lf_client_set_timeout_error(lf_client *c, int timeout_ms);
/* Records a failure's text, from either thread; lf_client_error shows it
 * once the trainer's current or next call returns. */
void lf_client_set_error(lf_client *c, const char *text);
/* Says BYE, closes the sockets, unmaps the ring and frees c: lf_client_close
 * once no prefetch thread is left. */
void lf_client_host_close(lf_client *c);

#endif
