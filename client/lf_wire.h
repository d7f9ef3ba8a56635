/*
 * lf_wire.h — the control protocol between lf-server and liblevelfeed.
 *
 * Both sides use this one definition. Messages travel as single ZeroMQ
 * frames (ROUTER on the server, DEALER in each client) and are small,
 * versioned, little-endian records:
 *
 *   u32 magic 'LFW1' | u16 version | u16 type | type-specific body
 *
 * Every field is written and read byte by byte (no struct casts), so the
 * layout does not depend on the compiler. lf_wire_decode checks the magic,
 * the version, the exact body length of each type, every enum and every
 * length before it fills the caller's struct: a peer can send any bytes and
 * get at most an error back.
 *
 * The conversation:
 *   client                                   server
 *   HELLO(rank, world, pid)        ───────►
 *                                  ◄───────  PLANNING(percent), while the server
 *                                            still plans its start-up: the
 *                                            client asks again a moment later
 *   HELLO(rank, world, pid)        ───────►
 *                                  ◄───────  WELCOME(slots, sizes, token, fd socket,
 *                                            plan id, plan fingerprint, each
 *                                            epoch's batches per rank, the plan
 *                                            id without the weights and the
 *                                            mixture's weights)
 *   (connects to the fd socket, sends the token, receives the ring's memfd)
 *   START(epoch, step, plan ids)   ───────►  (once every local rank started)
 *                                  ◄───────  WAITING(rank, ...) each heartbeat
 *                                            while a local rank has not
 *                                            connected or not sent START
 *                                  ◄───────  READY(slot, epoch, step, seq) ...
 *   RELEASE(slot, seq)             ───────►
 *   STEP(epoch, step, compute, wait, sync, start) ─►
 *                                  ◄───────  END (all epochs delivered)
 *   REPORT_REQ (after END)         ───────►
 *                                  ◄───────  REPORT(text): the rank's end-of-run report
 *   TRACE_REQ(trace path, chart path) ───►  (held until every local rank has
 *                                            asked too or left)
 *                                  ◄───────  TRACE(code, text): written, or why not
 *   EVAL_REQ (any time after WELCOME) ───►  one pass over the held-out set
 *                                  ◄───────  EVAL_READY(slot, epoch, step, seq) ...
 *                                            into the ring's eval slots, seq from 0
 *                                            each pass; READYs go on beside them
 *   RELEASE(slot, seq)             ───────►  (of an eval slot, as of any)
 *                                  ◄───────  EVAL_END: the pass's last batch was sent
 *   BYE                            ───────►
 *   HEARTBEAT either way when idle; ERROR(code, text) from the server.
 *   STATS_REQ from anyone (lf-stat) ─────►  ◄─── STATS(JSON text)
 */
#ifndef LF_WIRE_H
#define LF_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define LF_WIRE_MAGIC 0x3157464cu /* "LFW1" read as little-endian bytes */
#define LF_WIRE_VERSION 6         /* 2: PLANNING, WELCOME's fingerprint; 3: STEP's
                                     sync, REPORT_REQ and REPORT, WELCOME's epoch step
                                     counts, WAITING; 4: STEP's start, TRACE_REQ and
                                     TRACE; 5: WELCOME's eval slots and steps,
                                     EVAL_REQ, EVAL_READY, EVAL_END; 6: WELCOME's
                                     and START's plan id without the weights,
                                     WELCOME's weights, EPOCH, WELCOME's step
                                     counts only those planned so far */
#define LF_WIRE_MAX 65536         /* no message is larger; receivers drop larger */
#define LF_WIRE_TEXT_MAX 60000    /* ERROR and STATS text, bytes, no NUL on the wire */
#define LF_WIRE_PATH_MAX 108      /* fd socket path incl. NUL (sun_path size) */
#define LF_WIRE_UNKNOWN UINT64_MAX /* a figure the sender does not know */
#define LF_WIRE_TRACE_PATH_MAX 4096 /* TRACE_REQ's paths, bytes (no NUL on the wire) */
#define LF_WIRE_WEIGHTS_MAX 32    /* a mixture's sources (LF_PLAN_MAX_SOURCES) */
#define LF_WIRE_WEIGHTS_ONE 1000000u /* a weight of 1 (LF_PLAN_WEIGHT_ONE) */
#define LF_WIRE_EPOCHS_MAX 8192   /* epochs whose step count WELCOME carries (4 bytes
                                     each, so it stays well inside LF_WIRE_MAX) */

typedef enum lf_wire_type {
    LF_MSG_HELLO = 1,
    LF_MSG_WELCOME = 2,
    LF_MSG_START = 3,
    LF_MSG_READY = 4,
    LF_MSG_RELEASE = 5,
    LF_MSG_STEP = 6,
    LF_MSG_END = 7,
    LF_MSG_BYE = 8,
    LF_MSG_HEARTBEAT = 9,
    LF_MSG_ERROR = 10,
    LF_MSG_STATS_REQ = 11,
    LF_MSG_STATS = 12,
    LF_MSG_PLANNING = 13,
    LF_MSG_REPORT_REQ = 14,
    LF_MSG_REPORT = 15,
    LF_MSG_WAITING = 16,
    LF_MSG_TRACE_REQ = 17,
    LF_MSG_TRACE = 18,
    LF_MSG_EVAL_REQ = 19,
    LF_MSG_EVAL_READY = 20,
    LF_MSG_EVAL_END = 21,
    LF_MSG_EPOCH = 22,
} lf_wire_type;

typedef struct lf_msg_hello {
    uint32_t rank;               /* global rank of the client */
    uint32_t world_size;         /* as the client sees it; the server checks it */
    uint32_t pid;                /* client process id, for logs and stats */
} lf_msg_hello;

typedef struct lf_msg_welcome {
    uint32_t rank;
    uint32_t nslots;             /* slots in the ring */
    uint64_t slot_size;          /* bytes per slot */
    uint64_t segment_size;       /* bytes of the whole segment */
    uint64_t token;              /* one-time secret to present on the fd socket */
    uint32_t heartbeat_ms;       /* both sides send a heartbeat this often when idle */
    uint32_t server_pid;
    uint64_t plan_id;            /* hash of dataset + plan parameters; in saved states */
    uint64_t fingerprint;        /* plan_id + the blocks + the epochs served: equal on
                                    every node of a job exactly when they agree */
    uint32_t first_epoch;        /* the first epoch served (lf-server --epoch) */
    uint32_t epochs;             /* epochs served from it (--epochs) */
    uint32_t nsteps;             /* epochs whose step count follows, from the first:
                                    those planned so far (at least the first, at most
                                    LF_WIRE_EPOCHS_MAX); EPOCH tells each later one */
    const uint32_t *steps;       /* encode: the nsteps counts (steps of the epoch = each
                                    rank's batches in it); decode: NULL */
    const unsigned char *steps_le; /* decode: the same counts as received (little-endian
                                    u32), pointing into the buffer: lf_wire_steps */
    uint32_t eval_slots;         /* the ring's last eval_slots slots take eval batches
                                    only (0: the server has no --eval-data) */
    uint32_t eval_steps;         /* each rank's batches in one eval pass */
    char fd_path[LF_WIRE_PATH_MAX]; /* Unix socket that hands out the memfd */
    /* after the path on the wire (version 6): what a resume across a change
     * of mixture weights checks (host.c, lf_state_restore) */
    uint64_t base_id;            /* plan_id with the mixture's weights left out
                                    (= plan_id without a mixture) */
    uint32_t nweights;           /* the mixture's sources; 0: no mixture */
    uint32_t weights[LF_WIRE_WEIGHTS_MAX]; /* each source's weight, parts per million */
} lf_msg_welcome;

typedef struct lf_msg_position {  /* START */
    uint32_t epoch;
    uint64_t step;               /* step within the epoch (may equal the epoch's length) */
    uint64_t plan_id;            /* from a restored state, or 0 for a fresh start */
    uint64_t base_id;            /* the state's plan id without the weights (version 6);
                                    0: a fresh start or a state from before it */
} lf_msg_position;

typedef struct lf_msg_ready {    /* READY and EVAL_READY */
    uint32_t slot;
    uint32_t epoch;
    uint64_t step;
    uint64_t seq;                /* per-rank batch sequence number, from 0 (EVAL_READY:
                                    from 0 in each pass) */
} lf_msg_ready;

typedef struct lf_msg_release {
    uint32_t slot;
    uint64_t seq;
} lf_msg_release;

typedef struct lf_msg_step {
    uint32_t epoch;
    uint64_t step;
    uint64_t compute_ns;         /* trainer's compute time, reported by the trainer */
    uint64_t wait_ns;            /* time the client waited in lf_next for this batch */
    uint64_t sync_ns;            /* trainer's wait for the other ranks (its all-reduce),
                                    reported by the trainer; LF_WIRE_UNKNOWN: not reported */
    uint64_t start_ns;           /* CLOCK_MONOTONIC as the trainer's lf_next for this batch
                                    began (client and server share the node's clock);
                                    LF_WIRE_UNKNOWN: not known */
} lf_msg_step;

typedef struct lf_msg_trace_req { /* TRACE_REQ: where the server writes the node's trace */
    uint32_t trace_len, chart_len; /* bytes of each absolute path; 0: not wanted (not both),
                                    at most LF_WIRE_TRACE_PATH_MAX - 1 */
    const char *trace, *chart;   /* decode: pointing into the buffer, no NUL */
} lf_msg_trace_req;

typedef struct lf_msg_waiting {  /* WAITING */
    uint32_t rank;               /* the first local rank the server waits for */
    uint32_t connected;          /* 0: no client has said HELLO for it; 1: its client
                                    connected but has not sent START (asked for a batch) */
    uint32_t others;             /* further local ranks the server waits for */
    uint64_t waited_ms;          /* how long: since the server began serving (0) or
                                    since that client's WELCOME (1) */
} lf_msg_waiting;

typedef struct lf_msg_epoch {    /* EPOCH: an epoch planned after WELCOME */
    uint32_t index;              /* the epoch's index in the run (0: --epoch), less
                                    than LF_WIRE_EPOCHS_MAX */
    uint32_t steps;              /* its steps: each rank's batches in it */
} lf_msg_epoch;

typedef struct lf_msg_text {      /* ERROR, STATS, REPORT and TRACE */
    int32_t code;                /* ERROR: a negative lf_status; STATS, REPORT: 0; TRACE:
                                    0 written, else -errno of the failed write */
    uint32_t len;                /* bytes in text, <= LF_WIRE_TEXT_MAX */
    const char *text;            /* points into the decoded buffer; not NUL-terminated */
} lf_msg_text;

typedef struct lf_msg {
    uint16_t type;               /* lf_wire_type */
    union {
        lf_msg_hello hello;
        lf_msg_welcome welcome;
        lf_msg_position start;
        lf_msg_ready ready;
        lf_msg_release release;
        lf_msg_step step;
        lf_msg_text text;
        uint64_t heartbeat_ns;   /* HEARTBEAT: sender's monotonic clock */
        uint32_t planning_pct;   /* PLANNING: start-up planning done, 0..100 */
        lf_msg_waiting waiting;
        lf_msg_trace_req trace_req;
        lf_msg_epoch epoch;
    } u;
} lf_msg;

/* Encodes msg into buf. Returns the byte count, or -EINVAL for an unknown
 * type or an out-of-range field, -ENOBUFS when cap is too small. */
int lf_wire_encode(const lf_msg *msg, void *buf, size_t cap);

/* Decodes len bytes. Returns 0, or -EPROTO for bad magic/version/length/
 * type/field, -EMSGSIZE for len > LF_WIRE_MAX. Text fields of *msg point
 * into buf, which must outlive their use. *msg is untouched on failure. */
int lf_wire_decode(const void *buf, size_t len, lf_msg *msg);

/* Copies a decoded WELCOME's nsteps step counts into out. */
void lf_wire_steps(const lf_msg_welcome *w, uint32_t *out);

/* "HELLO", "READY", ...; "?" for an unknown type. */
const char *lf_wire_type_name(unsigned type);

#endif
