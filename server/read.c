/*
 * read.c — the reader threads: a queued block's stored bytes into a buffer.
 *
 * Readers take queued entries, read their stored bytes into buffers they
 * own (registered with their io_uring, or plain pread) and pass them to the
 * workers (the decode queue). A reader takes as many entries as it has
 * free buffers and submits them together; a worker gives the buffer back
 * once the block is decoded. Beside the reads: the test hook that fakes
 * short and -EAGAIN completions (LF_TEST_URING_FAULTS), so the
 * resubmission path runs on every test run.
 */
#include "stages.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* Reads len bytes at off; *done: the bytes read (where a failure is). */
static int pread_full(int fd, unsigned char *buf, uint32_t len, uint64_t off, uint32_t *done)
{
    for (*done = 0; *done < len;) {
        ssize_t n = pread(fd, buf + *done, len - *done, (off_t)(off + *done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        if (n == 0) return -ENODATA; /* the file is shorter than its index says */
        *done += (uint32_t)n;
    }
    return 0;
}

/* Stops the server on a failed read of entry e, naming the shard, the byte
 * and the block (got: the bytes of the block already read). Returns err. */
static int read_failed(reader *rd, const cache_entry *e, uint32_t got, int err)
{
    const lf_block_info *bi = lf_dataset_block(rd->s->ds, e->block);
    srv_fail(rd->s, "read: %s at byte %" PRIu64 " (block %" PRIu64 "): %s",
             lf_dataset_shard_path(rd->s->ds, bi->shard), bi->file_offset + got, e->block,
             err == -ENODATA ? "the file ends before its index says it does" : strerror(-err));
    return err;
}

/* Queues the rest of entry i's read: from byte got[i] of its block on. */
static int queue_read(reader *rd, cache_entry *e, uint32_t i)
{
    srv *s = rd->s;
    const lf_block_info *bi = lf_dataset_block(s->ds, e->block);
    struct io_uring_sqe *sqe = io_uring_get_sqe(&rd->ring);
    if (!sqe) return -EBUSY; /* cannot happen: at most depth == nbufs in flight */
    uint32_t got = rd->got[i];
    io_uring_prep_read_fixed(sqe, s->pl->shard_fds[bi->shard], rd->bufs[e->buf] + got,
                             bi->stored_size - got, bi->file_offset + got, (int)e->buf);
    io_uring_sqe_set_data64(sqe, i);
    return 0;
}

/* The test hook (LF_TEST_URING_FAULTS=PERCENT,SEED): turns that share of
 * the completions that read something into -EAGAIN or a shorter read, so
 * the resubmission below is exercised on every run of the test;
 * LF_TEST_URING_FAULTS=stuck makes every completion -EAGAIN (a file that
 * never gives a byte). */
static int inject_fault(reader *rd, int res)
{
    const srv_config *c = &rd->s->cfg;
    if (c->uring_stuck) {
        rd->injected++;
        return -EAGAIN;
    }
    if (c->uring_fault_pct == 0 || res <= 0) return res;
    uint64_t x = rd->fault_rng; /* xorshift64 */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rd->fault_rng = x;
    if (x % 100 >= c->uring_fault_pct) return res;
    rd->injected++;
    return (x >> 32) % 2 || res == 1 ? -EAGAIN : 1 + (int)((x >> 33) % (uint64_t)(res - 1));
}

/* A block whose reads give nothing this many times in a row (-EAGAIN or
 * -EINTR each time) fails the server instead of spinning forever. */
#define MAX_STALLS 1000

/* Reads the batch with io_uring: one fixed-buffer read per entry, submitted
 * together. A short read (or -EAGAIN/-EINTR) is not an error: the rest of
 * that block is submitted again until it is whole (MAX_STALLS resubmissions
 * in a row without a byte end it); reading nothing before the end means the
 * file is shorter than its index says. */
static int read_batch_uring(reader *rd, cache_entry **v, uint32_t n)
{
    srv *s = rd->s;
    int rc = 0, err = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        rd->got[i] = rd->stalls[i] = 0;
        rc = queue_read(rd, v[i], i);
    }
    for (uint32_t pending = n; rc == 0 && pending > 0;) {
        struct io_uring_cqe *cqe;
        if ((rc = io_uring_submit_and_wait(&rd->ring, 1)) < 0) break;
        if ((rc = io_uring_wait_cqe(&rd->ring, &cqe)) < 0) break;
        uint64_t i = io_uring_cqe_get_data64(cqe);
        int res = inject_fault(rd, cqe->res);
        io_uring_cqe_seen(&rd->ring, cqe);
        if (i >= n) return -EIO; /* not ours: the ring is confused */
        const lf_block_info *bi = lf_dataset_block(s->ds, v[i]->block);
        uint32_t want = bi->stored_size - rd->got[i];
        int again = res == -EAGAIN || res == -EINTR;
        if (again && ++rd->stalls[i] >= MAX_STALLS) {
            srv_fail(s, "read: %s at byte %" PRIu64 ": %s %u times in a row, nothing read",
                     lf_dataset_shard_path(s->ds, bi->shard), bi->file_offset + rd->got[i],
                     strerror(-res), MAX_STALLS);
            rc = res;
            break;
        }
        if (again || (res > 0 && (uint32_t)res < want)) {
            if (res > 0) {
                rd->got[i] += (uint32_t)res;
                rd->stalls[i] = 0;
            }
            rd->retries++;
            rc = queue_read(rd, v[i], (uint32_t)i);
            continue;
        }
        pending--;
        if (err == 0 && (res < 0 || (res == 0 && want > 0)))
            err = read_failed(rd, v[i], rd->got[i], res < 0 ? res : -ENODATA);
    }
    return rc < 0 ? rc : err;
}

/* An index-only dataset (lf-shard synth --index-only) has no bytes: the
 * first block a batch needs stops the server with the reader's words,
 * which name the dataset and say what it is for. */
static int read_batch_refused(reader *rd, cache_entry **v)
{
    lf_shard_error err;
    char one[1];
    lf_dataset_read_block(rd->s->ds, v[0]->block, one, sizeof one, &err);
    srv_fail(rd->s, "read: %s", err.msg);
    return -ENODATA;
}

static int read_batch_pread(reader *rd, cache_entry **v, uint32_t n)
{
    srv *s = rd->s;
    for (uint32_t i = 0; i < n; i++) {
        const lf_block_info *bi = lf_dataset_block(s->ds, v[i]->block);
        uint32_t got;
        int rc = pread_full(s->pl->shard_fds[bi->shard], rd->bufs[v[i]->buf],
                            bi->stored_size, bi->file_offset, &got);
        if (rc < 0) return read_failed(rd, v[i], got, rc);
    }
    return 0;
}

void *srv_reader_main(void *arg)
{
    reader *rd = arg;
    srv *s = rd->s;
    cache_entry **v = calloc(rd->nbufs, sizeof *v);
    if (!v) { srv_fail(s, "reader: out of memory"); return NULL; }
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stop && (s->pl->read_q.len == 0 || rd->nfree == 0))
            pthread_cond_wait(&s->cv_read, &s->mu);
        if (s->stop) { pthread_mutex_unlock(&s->mu); break; }
        uint32_t n = 0;
        while (n < rd->nfree && s->pl->read_q.len > 0) {
            cache_entry *e = srv_q_pop(&s->pl->read_q);
            e->state = CE_READING;
            e->owner = rd;
            e->buf = rd->free_bufs[--rd->nfree];
            v[n++] = e;
        }
        pthread_mutex_unlock(&s->mu);
        uint64_t t0 = srv_now_ns(), bytes = 0;
        int rc = lf_dataset_index_only(s->ds) ? read_batch_refused(rd, v)
                 : rd->use_uring                 ? read_batch_uring(rd, v, n)
                                                 : read_batch_pread(rd, v, n);
        for (uint32_t i = 0; i < n; i++) bytes += lf_dataset_block(s->ds, v[i]->block)->stored_size;
        uint64_t t1 = srv_now_ns();
        pthread_mutex_lock(&s->mu);
        s->m.read_busy_ns += t1 - t0;
        srv_trace_span(s, SRV_STAGE_READ, rd->index, t0, t1, n, bytes);
        s->m.bytes_read += bytes;
        s->m.blocks_read += n;
        s->m.uring_retries += rd->retries;
        s->m.uring_injected += rd->injected;
        rd->retries = rd->injected = 0;
        /* After a failed read nothing of the batch is decoded: a block not
         * read whole would decode as damage (and --on-corrupt=skip would
         * quarantine sound data). */
        for (uint32_t i = 0; rc >= 0 && i < n; i++) {
            v[i]->state = CE_DECODING;
            srv_q_push(&s->pl->decode_q, v[i]);
        }
        pthread_cond_broadcast(&s->cv_work);
        pthread_mutex_unlock(&s->mu);
        if (rc < 0) {
            srv_fail(s, "read: %s", strerror(-rc)); /* unless read_failed said more */
            break;
        }
    }
    free(v);
    srv_add_thread_cpu(s, &s->m.read_cpu_ns);
    return NULL;
}

int srv_reader_init(srv *s, reader *rd, uint32_t depth, size_t buf_size)
{
    rd->s = s;
    rd->nbufs = depth;
    rd->bufs = calloc(depth, sizeof *rd->bufs);
    rd->free_bufs = calloc(depth, sizeof *rd->free_bufs);
    rd->got = calloc(depth, sizeof *rd->got);
    rd->stalls = calloc(depth, sizeof *rd->stalls);
    if (!rd->bufs || !rd->free_bufs || !rd->got || !rd->stalls) return -ENOMEM;
    rd->fault_rng = s->cfg.uring_fault_seed * 0x9e3779b97f4a7c15ull + (uint64_t)(rd - s->pl->readers) + 1;
    for (uint32_t i = 0; i < depth; i++) {
        if (posix_memalign((void **)&rd->bufs[i], 4096, buf_size) != 0) return -ENOMEM;
        rd->free_bufs[rd->nfree++] = i;
    }
    if (!s->cfg.io_uring) return 0;
    int rc = io_uring_queue_init(depth, &rd->ring, 0);
    if (rc == 0) {
        struct iovec *iov = calloc(depth, sizeof *iov);
        if (!iov) rc = -ENOMEM;
        for (uint32_t i = 0; iov && i < depth; i++)
            iov[i] = (struct iovec){.iov_base = rd->bufs[i], .iov_len = buf_size};
        if (iov) rc = io_uring_register_buffers(&rd->ring, iov, depth);
        free(iov);
        if (rc < 0) io_uring_queue_exit(&rd->ring);
    }
    if (rc < 0 && s->cfg.io_forced) {
        fprintf(stderr, "lf-server: io_uring set-up failed (%s), and --io uring forbids "
                "falling back to pread\n", strerror(-rc));
        return -ECANCELED; /* reported */
    }
    if (rc < 0 && !s->cfg.quiet)
        fprintf(stderr, "lf-server: io_uring unavailable (%s): reading with pread\n",
                strerror(-rc));
    rd->use_uring = rc == 0;
    return 0;
}

void srv_reader_exit(reader *rd)
{
    if (rd->use_uring) io_uring_queue_exit(&rd->ring);
    for (uint32_t i = 0; rd->bufs && i < rd->nbufs; i++) free(rd->bufs[i]);
    free(rd->bufs);
    free(rd->free_bufs);
    free(rd->got);
    free(rd->stalls);
}
