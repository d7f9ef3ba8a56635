/*
 * eval.c — evaluation passes over the held-out set (--eval-data).
 *
 * A trainer evaluates when it wants: every few hundred steps, at an
 * epoch's end, once at the start. Each time, its rank asks for one pass
 * (EVAL_REQ) and gets its share of every held-out sample once, the same
 * batches in the same order every time: the pass is one epoch of a plan of
 * its own over the held-out samples, with the run's plan parameters at
 * epoch 0, made anew for each pass, so passes do not depend on each other
 * or on when they are asked for. Each rank's share comes from that plan as
 * the training batches come from the run's, so a pass is balanced across
 * the ranks by cost and gives every rank the same number of batches.
 *
 * The training stream must not notice. Its planner fills every rank's ring
 * ahead, and a full ring waits for the trainer's releases: an eval batch
 * behind those would wait for the trainer to take training batches it
 * does not want yet, and one put among them would reorder them. So each
 * ring has SRV_EVAL_SLOTS slots more than --slots, which only eval batches
 * use, announced by EVAL_READY with a sequence of their own; the planner
 * never sees them. The training batches filled ahead stay where they
 * are, their READYs wait in the client's queue, and lf_next returns them
 * after the pass as it would have; the resume position (the client's)
 * does not move, and the pending counts of the cache (the training
 * epoch's) are not touched: an eval job counts nothing off.
 *
 * A pass is a thread of the rank's own, as a catch-up is (catchup.c): it
 * makes the rank's job for each step of the pass, waits for a free eval
 * slot and cache room, submits it, and marks the pass planned at its end;
 * the control thread announces the jobs in order and then sends EVAL_END.
 * Ranks are independent: a rank that never asks holds no other up, and a
 * rank whose client goes mid-pass stops its pass (eval_gen moves on).
 */
#include "stages.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct eval_pass {
    srv *s;
    uint32_t li, gen;
} eval_pass;

/* Waits for room for the pass's job j and submits it (under mu). 0, 1
 * when the pass is over for this thread (rank gone, a newer pass), -1 on
 * stop, or -errno. */
static int submit(const eval_pass *ep, srv_job *j)
{
    srv *s = ep->s;
    srv_rank *r = &s->ranks[ep->li];
    for (;;) {
        if (s->stop) return -1;
        if (r->gone || r->eval_gen != ep->gen) return 1;
        if (srv_job_room(s, j)) return srv_submit_job(s, j, 0);
        srv_wait_own(s, j);
    }
}

/* The rank's job of one step of the pass. 0 to go on, 1 done, <0 error. */
static int eval_step(const eval_pass *ep, lf_plan *plan, const lf_plan_step *st,
                     uint64_t **scratch)
{
    srv *s = ep->s;
    lf_plan_batch b;
    int rc = srv_plan_errno(lf_plan_rank_batch(plan, s->cfg.local[ep->li], &b));
    if (rc < 0) return rc;
    srv_job *j = srv_job_from_batch(s, ep->li, st, &b, scratch);
    if (!j) return -ENOMEM;
    j->eval = 1;
    pthread_mutex_lock(&s->mu);
    rc = submit(ep, j);
    pthread_mutex_unlock(&s->mu);
    if (rc != 0) srv_job_free(j);
    return rc == -1 ? 1 : rc; /* -1: stopping, not an error of ours */
}

static void *eval_main(void *arg)
{
    eval_pass *ep = arg;
    srv *s = ep->s;
    lf_plan *plan = NULL;
    uint64_t *scratch = NULL;
    lf_plan_step st;
    int rc = srv_plan_eval_create(s, &plan);
    while (rc == 0 && (rc = srv_plan_errno(lf_plan_next_step(plan, &st))) == 1)
        rc = eval_step(ep, plan, &st, &scratch);
    if (rc < 0) srv_fail(s, "eval pass of rank %u: %s", s->cfg.local[ep->li], strerror(-rc));
    lf_plan_free(plan);
    free(scratch);
    pthread_mutex_lock(&s->mu);
    srv_rank *r = &s->ranks[ep->li];
    if (r->eval_gen == ep->gen) r->eval_planned = 1; /* EVAL_END once its jobs are out */
    srv_end_own_thread(s);
    pthread_mutex_unlock(&s->mu);
    free(ep);
    srv_notify_control(s);
    return NULL;
}

int srv_eval_begin(srv *s, uint32_t li)
{
    srv_rank *r = &s->ranks[li];
    if (r->eval_on) return -EBUSY;
    eval_pass *ep = malloc(sizeof *ep);
    if (!ep) return -ENOMEM;
    *ep = (eval_pass){.s = s, .li = li, .gen = ++r->eval_gen};
    r->eval_next_seq = 0;
    r->eval_planned = 0;
    int rc = srv_start_own_thread(s, eval_main, ep);
    if (rc < 0) {
        free(ep);
        return rc;
    }
    r->eval_on = 1;
    return 0;
}

void srv_eval_gone(srv *s, uint32_t li)
{
    srv_rank *r = &s->ranks[li];
    for (srv_job *j = r->eval_head; j; j = j->next) j->discard = 1;
    r->eval_on = 0;
    r->eval_gen++; /* its thread stops at its next job */
    pthread_cond_broadcast(&s->cv_catchup);
}
