/*
 * stages.h — the pipeline's internals, shared by its stage files
 * (pipeline.c, planner.c, cache.c, read.c, decode.c, assemble.c,
 * catchup.c) and by no other: control.c, plan.c and main.c see srv.h
 * only, so the cache's and the readers' insides stay out of their reach.
 * srv.h's locking rule covers every field here: under srv.mu, except the
 * memory the state machine hands to one thread at a time.
 */
#ifndef LF_SRV_STAGES_H
#define LF_SRV_STAGES_H

#include "srv.h"

#include <liburing.h>

enum { CE_QUEUED, CE_READING, CE_DECODING, CE_READY };

/* What the planner sleeps on: only an event that can end its wait wakes it
 * (a wake-up per finished job or per freed slot of another rank would cost
 * a context switch each for nothing). */
enum { PLAN_RUNS, PLAN_WAITS_SLOT, PLAN_WAITS_ROOM };

struct cache_entry {
    uint64_t block;
    unsigned char *raw;          /* decompressed bytes (CE_READY) */
    uint32_t *records;           /* each of its samples' record offset in raw, then
                                    raw_size (lf_block_records), in raw's allocation */
    uint32_t raw_size;
    int state;
    int bad;                     /* --on-corrupt=skip: failed to decode, raw NULL */
    uint32_t pins;               /* jobs that still need this block */
    srv_job_wait *waiters, *waiters_last; /* jobs waiting for it to be decoded, oldest first */
    cache_entry *hnext;          /* hash chain */
    cache_entry *qnext;          /* read or decode queue */
    cache_entry *lru_prev, *lru_next; /* unpinned and ready: eviction order */
    struct reader *owner;        /* reader whose buffer holds the stored bytes */
    uint32_t buf;                /* that buffer's index */
};

typedef struct reader {
    srv *s;
    uint32_t index;              /* its number: lf-reader<index> */
    pthread_t thread;
    struct io_uring ring;
    int use_uring;
    uint32_t nbufs;
    unsigned char **bufs;
    uint32_t *free_bufs, nfree;
    uint32_t *got;               /* io_uring: bytes read so far, per batch entry */
    uint32_t *stalls;            /* io_uring: resubmissions in a row that read nothing */
    uint64_t fault_rng;          /* LF_TEST_URING_FAULTS: this reader's draws */
    uint64_t retries, injected;  /* resubmitted reads; of them, faked ones */
} reader;

typedef struct queue {
    cache_entry *head, *tail;
    uint32_t len;
} queue;

/* The scout of the epoch after the planner's (planner.c): walks it on a
 * thread of its own while the planner serves the current one; of the
 * planner's own epoch where none walked it before (epoch 0 of a capped
 * plan: started at once, the planner serving meanwhile without counts). */
typedef struct scout_ahead {
    pthread_t thread;
    int started;                 /* not joined yet */
    atomic_int done;             /* its walk is over: joining it will not wait */
    uint32_t e;                  /* the epoch index it walks */
    uint32_t *counts;            /* per block: the local ranks' samples */
    uint32_t steps;
    srv_report *report;          /* epoch 0: the run's first epoch's report, printed
                                    at its end (NULL: another epoch) */
    int rc;
} scout_ahead;

typedef struct srv_pipeline {
    lf_plan *plan;
    scout_ahead ahead;           /* the planner's */
    pthread_t planner;
    int planner_started;
    reader *readers;
    uint32_t nreaders_started;
    struct worker *workers;
    uint32_t nworkers_started;
    int *shard_fds;              /* per shard: the dataset's descriptor (it closes them) */
    uint32_t nshards;
    cache_entry **buckets;
    uint64_t nbuckets;           /* a power of two */
    uint64_t cache_bytes;        /* raw bytes of every entry */
    uint64_t lru_bytes;          /* of them, the idle entries' (in the LRU) */
    cache_entry *lru_head, *lru_tail;
    uint32_t *uses;              /* per block: local samples still to come this epoch */
    uint32_t uses_epoch;         /* the epoch `uses` counts */
    uint32_t *taken;             /* uncounted: per block, the local samples of
                                    uses_epoch counted off so far (NULL: counted) */
    queue read_q, decode_q;
    srv_job **asm_q;             /* jobs ready to assemble (ring of cap entries) */
    uint32_t asm_head, asm_len, asm_cap;
    uint32_t jobs_in_flight;
    int plan_wait;               /* PLAN_*: what the planner sleeps on */
    uint32_t plan_wait_li;       /* PLAN_WAITS_SLOT: in this rank's ring */
    uint64_t plan_wait_since;    /* PLAN_WAITS_SLOT: since when (srv_planner_waits) */
    int plan_wait_held;          /* PLAN_WAITS_SLOT: that rank's trainer held a batch as
                                    the wait began (backpressure), else every slot of it
                                    was still being filled (the data path) */
    uint32_t catchup_waits;      /* catch-up and eval-pass threads waiting for cache room */
    uint32_t catchups_running;   /* catch-up and eval-pass threads not finished yet
                                    (srv_pipeline_stop waits for both) */
    uint32_t last_gen;           /* the last catch-up generation handed out */
    /* Image path, JPEG decode memory (assemble.c "decode memory"): carved
     * out of the cache's share of --memory-limit. */
    uint64_t decode_keep;        /* coefficient buffers a worker may keep between images */
    uint64_t decode_pool;        /* lent, one image at a time, for larger ones */
    uint64_t decode_lent;        /* of it, lent now */
    uint8_t *refused;            /* --on-corrupt=skip, images: a bit per sample the
                                  * transform refused (quarantined_images counts each once) */
} srv_pipeline;

typedef struct worker {           /* a worker thread, and what it is started with */
    pthread_t thread;
    srv *s;
    uint32_t index;              /* its number: lf-worker<index> */
} worker;

typedef struct worker_ctx {
    uint32_t index;              /* the worker's number (its trace tracks) */
    lf_block_decoder *dec;
    lf_tf_ws *ws;                /* image path: JPEG decode workspace */
    lf_tf_seq *seqs;             /* token path: one per sample */
    uint32_t seqs_cap;
    lf_tf_frames *frames;        /* frames path: one per sample */
    uint32_t frames_cap;
} worker_ctx;

/* cache.c: the block cache and the queues (every function under mu) */
void srv_q_push(queue *q, cache_entry *e);
cache_entry *srv_q_pop(queue *q);               /* NULL: empty */
cache_entry *srv_cache_find(srv_pipeline *p, uint64_t block); /* NULL: not cached */
void srv_cache_drop(srv_pipeline *p, cache_entry *e); /* unlinks and frees e */
/* The index of the first of job j's blocks (sorted, distinct) >= block. */
uint32_t srv_job_block_at(const srv_job *j, uint64_t block);
/* Evicts idle blocks until `need` more bytes fit, sparing job spare's. */
void srv_cache_make_room(srv *s, uint64_t need, const srv_job *spare);
/* Frees the idle blocks the epoch just counted takes nothing from. */
void srv_cache_drop_unwanted(srv *s);
/* The counts of the epoch served without them come (p->taken set): each
 * block's, less what it gave already, installed, and the cache counted
 * again (frees p->taken). Under mu. */
void srv_cache_counted(srv *s, const uint32_t *counts);
void srv_park(srv *s, cache_entry *e);          /* e unpinned and ready: freed or kept */
void srv_unpin(srv *s, cache_entry *e);
void srv_count_off(srv *s, const srv_job *j);   /* j's samples off the pending counts */
/* Pins `block` for a job (NULL: no memory); a missing block is queued to read. */
cache_entry *srv_pin_block(srv *s, uint64_t block, int *ready);
void srv_asm_push(srv *s, srv_job *j);          /* job j to the assembly queue */

/* planner.c: jobs from plan steps (also the catch-up thread's) */
/* A new job of rank li's batch b (not under mu; NULL: no memory). */
srv_job *srv_job_from_batch(srv *s, uint32_t li, const lf_plan_step *st,
                            const lf_plan_batch *b, uint64_t **scratch_blocks);
/* Under mu: 0 room, 1 not this caller's step, -1 stop. */
int srv_wait_for_room(srv *s, const srv_job *j, uint32_t gen, uint64_t key);
/* Whether job j can go now: a free slot of its lane (training or eval) and
 * cache room for its blocks, which is then made. Under mu. */
int srv_job_room(srv *s, const srv_job *j);
/* A catch-up or eval-pass thread sleeps until a slot or cache room may
 * have freed (cv_catchup). Under mu. */
void srv_wait_own(srv *s, const srv_job *j);
int srv_claim_count(srv_rank *r, uint64_t key); /* under mu */
int srv_submit_job(srv *s, srv_job *j, uint64_t key); /* under mu */
void *srv_planner_main(void *arg);              /* the planner thread (arg: srv) */
/* Starts a detached thread of the pipeline's own (catch-up, eval pass) that
 * srv_pipeline_stop waits for (catchups_running). Under mu. 0 or -errno. */
int srv_start_own_thread(srv *s, void *(*fn)(void *), void *arg);
void srv_end_own_thread(srv *s); /* its last act, under mu */

/* read.c: the readers (not under mu: they take it themselves) */
int srv_reader_init(srv *s, reader *rd, uint32_t depth, size_t buf_size);
void srv_reader_exit(reader *rd);               /* undoes srv_reader_init */
void *srv_reader_main(void *arg);               /* a reader thread (arg: its reader) */

/* decode.c: a worker decodes entry e, taken from the queue (not under mu) */
void srv_run_decode(srv *s, worker_ctx *w, cache_entry *e);

/* assemble.c: a worker assembles a job */
void srv_decode_budget(srv *s);                 /* at set-up: splits off decode memory */
void srv_drop_quarantined(srv *s, srv_job *j);  /* under mu */
void srv_run_assembly(srv *s, worker_ctx *w, srv_job *j, int discard); /* not under mu */

#endif
