/*
 * stat.c — the server's metrics as the JSON text of a STATS reply (what
 * lf-stat shows): the counters, the queues' depths and each local rank's
 * state and figures, copied under srv.mu so they are of one moment. What
 * each wait measures: data_wait_ns, the client's time in lf_next (from its
 * STEP reports); sync_wait_ns, the trainer's wait for the other ranks (its
 * all-reduce, as the trainer reports it; null where it reports none); ring_empty_ns, the server's time with no batch of the rank
 * out, split by cause (observe.c); planner_waited_ns, the planner's wait
 * for a free slot of this rank's ring (this rank held the others back).
 */
#include "srv.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>

static json_t *ns_or_null(int known, uint64_t ns)
{
    return known ? json_integer((json_int_t)ns) : json_null();
}

/* One rank's figures; mean from srv_obs_compute_per_cost. Under mu. */
static json_t *rank_json(const srv *s, uint32_t li, const srv_client_view *v, uint64_t now,
                         double mean)
{
    const srv_rank *r = &s->ranks[li];
    const srv_rank_metrics *m = &r->m;
    const char *state = r->gone ? "gone" : r->obs.stalled ? "stalled" : r->ended ? "ended"
                      : r->started && r->catchup_gen ? "catching up"
                      : r->started ? "running" : v->connected ? "connected" : "waiting";
    uint64_t back, path;
    srv_obs_empty(s, li, now, &back, &path);
    int holder = srv_obs_holder(s, li);
    int ratio = mean > 0 && m->cost_reported > 0;
    json_t *o = json_pack("{s:i,s:s,s:I,s:I,s:I,s:f,s:I,s:I,s:I,s:f}",
        "rank", (int)r->rank, "state", state, "batches", (json_int_t)m->batches,
        "samples", (json_int_t)m->samples, "tokens", (json_int_t)m->tokens, "cost", m->cost,
        "data_wait_ns", (json_int_t)m->wait_ns, "compute_ns", (json_int_t)m->compute_ns,
        "steps_reported", (json_int_t)m->steps_reported, "cost_reported", m->cost_reported);
    json_object_set_new(o, "sync_wait_ns", ns_or_null(m->sync_steps > 0, m->sync_ns));
    json_object_set_new(o, "sync_steps", json_integer((json_int_t)m->sync_steps));
    json_object_set_new(o, "cost_ratio", ratio ? json_real((double)m->compute_costed_ns /
                                                           m->cost_reported / mean)
                                               : json_null());
    json_object_set_new(o, "last_batch", m->batches ? json_pack("{s:i,s:I}",
        "epoch", (int)r->obs.epoch, "step", (json_int_t)r->obs.step) : json_null());
    json_object_set_new(o, "slots_held", json_integer(r->obs.held));
    json_object_set_new(o, "slots", json_integer(s->cfg.slots));
    json_object_set_new(o, "oldest_held_ns", ns_or_null(v->oldest_ns != 0,
                                                        now - v->oldest_ns));
    json_object_set_new(o, "ring_empty_ns", json_pack("{s:I,s:I}",
        "held_back", (json_int_t)back, "data_path", (json_int_t)path));
    json_object_set_new(o, "held_back_by", holder >= 0 && back > 0
                                               ? json_integer(s->ranks[holder].rank)
                                               : json_null());
    json_object_set_new(o, "planner_waited_ns", json_integer((json_int_t)m->planner_wait_ns));
    return o;
}

/* A mixture's sources: each one's --data, weight (its target share of the
 * tokens), tokens delivered to the local ranks so far and their share. */
static json_t *sources_json(const srv *s, const srv_metrics *m)
{
    json_t *a = json_array();
    uint64_t total = 0;
    const lf_plan_mix *mix = &s->cfg.plan.mix;
    for (uint32_t i = 0; i < mix->sources; i++) total += m->source_tokens[i];
    for (uint32_t i = 0; i < mix->sources; i++)
        json_array_append_new(a, json_pack("{s:s,s:f,s:I,s:f}", "data", s->cfg.mix.data[i],
            "weight", mix->weight[i] / (double)LF_PLAN_WEIGHT_ONE,
            "tokens", (json_int_t)m->source_tokens[i],
            "share", total ? (double)m->source_tokens[i] / (double)total : 0.0));
    return a;
}

char *srv_stats_json(srv *s, uint64_t start_ns, const srv_client_view *views)
{
    json_t *o = json_object(), *ranks = json_array();
    srv_depths d;
    pthread_mutex_lock(&s->mu);
    srv_pipeline_depths(s, &d);
    srv_metrics m = s->m;
    char fp[17];
    snprintf(fp, sizeof fp, "%016" PRIx64, s->fingerprint);
    json_object_set_new(o, "state", json_string("serving"));
    json_object_set_new(o, "plan_fingerprint", json_string(fp));
    json_object_set_new(o, "uptime_ns", json_integer((json_int_t)(srv_now_ns() - start_ns)));
    json_object_set_new(o, "bytes_read", json_integer((json_int_t)m.bytes_read));
    json_object_set_new(o, "blocks_read", json_integer((json_int_t)m.blocks_read));
    json_object_set_new(o, "blocks_decoded", json_integer((json_int_t)m.blocks_decoded));
    json_object_set_new(o, "cache_hits", json_integer((json_int_t)m.cache_hits));
    json_object_set_new(o, "cache_misses", json_integer((json_int_t)m.cache_misses));
    json_object_set_new(o, "cache_evictions", json_integer((json_int_t)m.evictions));
    json_object_set_new(o, "cache_done", json_integer((json_int_t)m.blocks_done));
    json_object_set_new(o, "cache_bytes", json_integer((json_int_t)d.cache_bytes));
    json_object_set_new(o, "cache_limit", json_integer((json_int_t)s->cache_limit));
    json_object_set_new(o, "batches", json_integer((json_int_t)m.batches));
    json_object_set_new(o, "samples", json_integer((json_int_t)m.samples));
    json_object_set_new(o, "uring_retries", json_integer((json_int_t)m.uring_retries));
    json_object_set_new(o, "quarantined_blocks", json_integer((json_int_t)m.quarantined_blocks));
    json_object_set_new(o, "quarantined_samples", json_integer((json_int_t)m.quarantined_samples));
    json_object_set_new(o, "quarantined_images", json_integer((json_int_t)m.quarantined_images));
    json_t *refused = json_array(); /* the first ones, as the summary names them */
    for (uint64_t i = 0; i < m.quarantined_images && i < SRV_QUARANTINE_LIST; i++)
        json_array_append_new(refused, json_integer((json_int_t)s->refused[i]));
    json_object_set_new(o, "quarantined_image_ids", refused);
    json_object_set_new(o, "busy_ns", json_pack("{s:I,s:I,s:I,s:I}",
        "plan", (json_int_t)m.plan_busy_ns, "read", (json_int_t)m.read_busy_ns,
        "decode", (json_int_t)m.decode_busy_ns, "assemble", (json_int_t)m.assemble_busy_ns));
    json_object_set_new(o, "queue_depth", json_pack("{s:i,s:i,s:i,s:i}",
        "read", (int)d.read_q, "decode", (int)d.decode_q, "assemble", (int)d.assemble_q,
        "jobs_in_flight", (int)d.jobs_in_flight));
    uint64_t now = srv_now_ns();
    double mean = srv_obs_compute_per_cost(s);
    for (uint32_t li = 0; li < s->cfg.nlocal; li++)
        json_array_append_new(ranks, rank_json(s, li, &views[li], now, mean));
    pthread_mutex_unlock(&s->mu);
    json_object_set_new(o, "ranks", ranks);
    if (s->mixture) json_object_set_new(o, "sources", sources_json(s, &m));
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

uint32_t srv_startup_pct(const srv *s)
{
    uint64_t total = atomic_load_explicit(&s->plan_total, memory_order_relaxed);
    uint64_t done = atomic_load_explicit(&s->planned, memory_order_relaxed);
    if (total == 0) return 0;
    uint64_t pct = done >= total ? 100 : (uint64_t)((double)done * 100 / (double)total);
    return pct > 99 ? 99 : (uint32_t)pct; /* 100 %: served, WELCOME */
}

char *srv_stats_planning_json(const srv *s, uint64_t start_ns)
{
    json_t *o = json_pack("{s:s,s:i,s:I}", "state", "planning", "planning_pct",
                          (int)srv_startup_pct(s), "uptime_ns",
                          (json_int_t)(srv_now_ns() - start_ns));
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}
