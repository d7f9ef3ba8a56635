/*
 * catchup.c — the catch-up of a rejoined rank, and a rank's leaving.
 *
 * A rank whose client died can rejoin the run (control.c): its new client
 * starts from its saved position, usually behind the planner. A catch-up
 * thread then runs a plan of its own, replayed to that position (planning
 * reads no data), and makes that rank's jobs until it reaches the step the
 * planner has not decided yet for the rank; there it hands over and the
 * planner makes the rank's jobs again. Meanwhile the planner skips the rank
 * and the other ranks go on. Which thread owns a step is decided under
 * srv.mu with step keys (srv_pos_key): the planner records, per rank, the
 * next step it will decide (planner_key) and skips steps before the rank's
 * from_key (its START position); the catch-up thread makes every step
 * below planner_key and hands over at the first one that is not.
 *
 * Pending counts stay exact through deaths and rejoins: each step of each
 * rank counts its samples off once, either through its job (assembled or
 * discarded because the rank died) or, when the planner skips a rank that
 * is gone or that starts later, at the skip. counted_key per rank remembers
 * how far that went, so a catch-up job for a step already counted (one
 * delivered before the client died, or skipped while it was gone) does not
 * count again. The planner counts nothing off for a rank being caught up;
 * if that rank's client dies too, its catch-up thread still walks on to
 * the planner, counting the steps off without serving them, and hands
 * over (a client gone before its START gets such a thread then). A block
 * freed too early costs a re-read, never a wrong byte; one never counted
 * down stays cached, with no reason, until evicted or the next epoch.
 */
#include "stages.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct catchup {
    srv *s;
    uint32_t li, gen;
    uint64_t from_key;
} catchup;

/* One step of the catch-up: hands over to the planner at the first step it
 * has not decided for the rank, else makes the rank's job. Returns 0 to go
 * on, 1 when done (handed over, rank gone again, stop), <0 on error. */
static int catchup_step(const catchup *cu, lf_plan *plan, const lf_plan_step *st,
                        uint64_t **scratch)
{
    srv *s = cu->s;
    srv_rank *r = &s->ranks[cu->li];
    uint64_t key = srv_pos_key(st->epoch, st->step);
    pthread_mutex_lock(&s->mu);
    int done = s->stop || r->catchup_gen != cu->gen; /* a newer client's catch-up took over */
    if (key < cu->from_key) {
        pthread_mutex_unlock(&s->mu);
        return done; /* replaying up to the rank's position */
    }
    if (!done && key >= r->planner_key) {
        r->catchup_gen = 0;
        r->from_key = key; /* the planner takes the rank from this step on */
        done = 1;
    }
    pthread_mutex_unlock(&s->mu);
    if (done) return 1;
    lf_plan_batch b;
    int rc = srv_plan_errno(lf_plan_rank_batch(plan, s->cfg.local[cu->li], &b));
    if (rc < 0) return rc;
    srv_job *j = srv_job_from_batch(s, cu->li, st, &b, scratch);
    if (!j) return -ENOMEM;
    int submitted = 0;
    pthread_mutex_lock(&s->mu);
    rc = srv_wait_for_room(s, j, cu->gen, key);
    if (rc == 0) {
        rc = srv_submit_job(s, j, key);
        submitted = rc == 0;
    } else if (rc == 1 && r->catchup_gen == cu->gen) {
        /* The rank is gone, but the planner left this step to us: it
         * counts off here, and the walk goes on to the planner. */
        if (srv_claim_count(r, key)) srv_count_off(s, j);
        rc = 0;
    }
    pthread_mutex_unlock(&s->mu);
    if (!submitted) srv_job_free(j);
    return rc == -1 ? 1 : rc; /* -1: stopping, not an error of ours */
}

/* Walks a plan of its own through the run's epochs, from the first, to the
 * rank's position (no data is read for the steps before it), then feeds
 * the rank until it meets the planner or the plan ends. */
static void *catchup_main(void *arg)
{
    catchup *cu = arg;
    srv *s = cu->s;
    lf_plan *plan = NULL;
    uint64_t *scratch = NULL;
    int rc = srv_plan_create(s, &plan);
    for (uint32_t e = 0; rc == 0 && e < s->cfg.epochs; e++) {
        lf_plan_step st;
        while (rc == 0 && (rc = srv_plan_errno(lf_plan_next_step(plan, &st))) == 1)
            rc = catchup_step(cu, plan, &st, &scratch);
    }
    if (rc < 0) srv_fail(s, "catch-up of rank %u: %s", s->cfg.local[cu->li], strerror(-rc));
    lf_plan_free(plan);
    free(scratch);
    srv_rank *r = &s->ranks[cu->li];
    uint32_t gen = cu->gen;
    free(cu);
    pthread_mutex_lock(&s->mu);
    if (r->catchup_gen == gen) r->catchup_gen = 0; /* the plan ended first */
    srv_notify_control(s); /* the rank may be due its END now */
    srv_end_own_thread(s);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Starts the catch-up thread of rank li's current generation, serving
 * from step key `from`. Under mu. Returns 0 or -errno. */
static int start_catchup(srv *s, uint32_t li, uint64_t from)
{
    srv_rank *r = &s->ranks[li];
    catchup *cu = malloc(sizeof *cu);
    if (!cu) return -ENOMEM;
    *cu = (catchup){.s = s, .li = li, .gen = r->catchup_gen, .from_key = from};
    int rc = cu->gen ? srv_start_own_thread(s, catchup_main, cu) : -EINVAL;
    if (rc < 0) {
        free(cu);
        return rc;
    }
    r->catchup_thread = cu->gen;
    return 0;
}


void srv_rank_gone(srv *s, uint32_t li)
{
    srv_rank *r = &s->ranks[li];
    r->gone = 1;
    for (srv_job *j = r->jobs_head; j; j = j->next) j->discard = 1;
    srv_eval_gone(s, li);
    /* While catchup_gen is set the planner counts nothing off for the
     * rank, so it stays set: the generation's catch-up thread walks on to
     * the planner, counting off the steps it has not reached, and hands
     * over. A client gone before its START has no thread yet: one is
     * started now to do that walk (nothing is served to a gone rank). */
    if (r->catchup_gen && r->catchup_thread != r->catchup_gen && start_catchup(s, li, 0) < 0)
        r->catchup_gen = 0; /* the steps left to it stay pending: cache room only */
    pthread_cond_broadcast(&s->cv_plan);
    pthread_cond_broadcast(&s->cv_catchup);
}

void srv_rank_attach(srv *s, uint32_t li, int rejoin)
{
    srv_rank *r = &s->ranks[li];
    r->gone = r->started = r->ended = 0;
    r->next_seq = 0; /* the new client counts READYs from 0 */
    if (rejoin) {
        /* Nonzero from now on: the planner leaves the rank alone. */
        if (++s->pl->last_gen == 0) s->pl->last_gen = 1;
        r->catchup_gen = s->pl->last_gen;
    }
}

int srv_rank_catch_up(srv *s, uint32_t li)
{
    srv_rank *r = &s->ranks[li];
    pthread_mutex_lock(&s->mu);
    int rc = start_catchup(s, li, srv_pos_key(r->start_epoch, r->start_step));
    pthread_mutex_unlock(&s->mu);
    return rc;
}
