/*
 * job.c — which ranks this node's server serves, out of which world: from
 * the flags, else from the environment of the launcher that started it.
 *
 * A node serves the ranks K*M .. K*M+M-1 of world N (node rank K, M ranks
 * per node: block placement), or the list --ranks gives. Each of K, M and N
 * comes from its flag when given, else from the first launcher whose
 * variables are set, in the order below: torchrun's (a worker's), then
 * Open MPI's (a rank's), then Slurm's (a task's, or a job script's), since
 * torchrun and mpirun run inside Slurm jobs and describe the ranks more
 * closely than the allocation does:
 *
 *   torchrun  K GROUP_RANK (else NODE_RANK), M LOCAL_WORLD_SIZE, N WORLD_SIZE
 *   Open MPI  K OMPI_COMM_WORLD_RANK when OMPI_COMM_WORLD_LOCAL_SIZE is 1 (one
 *             process a node: its rank numbers the node; Open MPI exports no
 *             node index otherwise), M OMPI_COMM_WORLD_LOCAL_SIZE,
 *             N OMPI_COMM_WORLD_SIZE
 *   Slurm     K SLURM_NODEID, M SLURM_NTASKS_PER_NODE (else SLURM_TASKS_PER_NODE
 *             when even: "8" or "8(x4)"), N SLURM_NTASKS, nodes SLURM_NNODES
 *
 * The environment describes the processes the launcher started: a server
 * started by `srun --ntasks-per-node=1 lf-launch` sees one task a node,
 * while the trainer under it runs 8. So a flag given takes the place of
 * its variable and the rest follows from the node count: with
 * --ranks-per-node 8 there, N is 8 x SLURM_NNODES.
 *
 * Block placement is assumed only where it is stated: by --node-rank /
 * --ranks-per-node, by torchrun (its global rank is GROUP_RANK x
 * LOCAL_WORLD_SIZE + LOCAL_RANK), by srun unless SLURM_DISTRIBUTION names
 * another than block; otherwise, and where the nodes hold unequal counts,
 * the server stops and asks for --ranks LIST. Values that disagree (a
 * world that is not nodes x ranks per node, a node rank past the nodes, a
 * --world the environment's node count contradicts) stop it too, naming
 * the variables and flags. A --world alone with another world than the
 * environment's belongs to another job than the launcher's (a rank's own
 * server): the variables are then set aside, saying so. Where a
 * launcher's variables were read, start-up prints where each value came
 * from.
 */
#include "srv.h"

#include "parse_num.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One of K, M, N (or the node count): its value and where it came from. */
typedef struct job_value {
    uint32_t v;
    int set;
    char from[80];               /* "--world", "SLURM_NTASKS", "SLURM_NNODES=2 x --ranks-per-node" */
} job_value;

/* What the launcher's environment says, before the flags are laid over it. */
typedef struct job_env {
    const char *name;            /* "torchrun", "Open MPI", "Slurm"; NULL: no launcher */
    job_value node, per_node, world, nodes;
    const char *no_node;         /* why there is no node rank, when K is missing */
    const char *no_block;        /* why ranks are not placed in blocks, when not */
} job_env;

static void set_value(job_value *x, uint32_t v, const char *from)
{
    x->v = v;
    x->set = 1;
    snprintf(x->from, sizeof x->from, "%.*s", (int)sizeof x->from - 1, from);
}

/* Variable var, if set, into *x. Returns 0 (set or not), -1 (not a
 * number; reported). */
static int env_value(const char *var, job_value *x)
{
    const char *s = getenv(var);
    uint64_t v;
    if (!s || !*s || x->set) return 0;
    if (parse_u64(s, 0, UINT32_MAX, &v) != 0) {
        fprintf(stderr, "lf-server: %s=%s in the environment is not a rank count or number; "
                "unset it or give --node-rank, --ranks-per-node and --world\n", var, s);
        return -1;
    }
    set_value(x, (uint32_t)v, var);
    return 0;
}

/* SLURM_TASKS_PER_NODE as "8" or "8(x4)": the same count on every node. */
static int slurm_even_tasks(job_env *e)
{
    const char *s = getenv("SLURM_TASKS_PER_NODE");
    uint64_t v;
    if (!s || !*s || e->per_node.set) return 0;
    size_t n = strspn(s, "0123456789");
    if (n == 0 || parse_u64_head(s, n, 1, UINT32_MAX, &v) != 0 ||
        (s[n] && strspn(s + n, "(x0123456789)") != strlen(s + n)) || strchr(s, ',')) {
        e->no_block = "SLURM_TASKS_PER_NODE says the nodes run unequal task counts";
        return 0;
    }
    set_value(&e->per_node, (uint32_t)v, "SLURM_TASKS_PER_NODE");
    return 0;
}

static int read_torchrun(job_env *e)
{
    if (!getenv("LOCAL_WORLD_SIZE") && !getenv("GROUP_RANK")) return 0;
    e->name = "torchrun";
    return env_value("GROUP_RANK", &e->node) || env_value("NODE_RANK", &e->node) ||
           env_value("LOCAL_WORLD_SIZE", &e->per_node) || env_value("WORLD_SIZE", &e->world)
               ? -1 : 1;
}

static int read_openmpi(job_env *e)
{
    if (!getenv("OMPI_COMM_WORLD_SIZE")) return 0;
    e->name = "Open MPI";
    if (env_value("OMPI_COMM_WORLD_LOCAL_SIZE", &e->per_node) ||
        env_value("OMPI_COMM_WORLD_SIZE", &e->world))
        return -1;
    if (e->per_node.set && e->per_node.v == 1) return env_value("OMPI_COMM_WORLD_RANK", &e->node) ? -1 : 1;
    e->no_node = "Open MPI exports no node index (OMPI_COMM_WORLD_LOCAL_SIZE is not 1)";
    return 1;
}

static int read_slurm(job_env *e)
{
    if (!getenv("SLURM_NODEID") && !getenv("SLURM_NTASKS") && !getenv("SLURM_NNODES")) return 0;
    e->name = "Slurm";
    if (env_value("SLURM_NODEID", &e->node) || env_value("SLURM_NTASKS_PER_NODE", &e->per_node) ||
        slurm_even_tasks(e) || env_value("SLURM_NTASKS", &e->world) ||
        env_value("SLURM_NNODES", &e->nodes))
        return -1;
    const char *d = getenv("SLURM_DISTRIBUTION");
    if (d && *d && strncmp(d, "block", 5) != 0)
        e->no_block = "SLURM_DISTRIBUTION does not place the tasks in blocks";
    return 1;
}

/* The node count from the others, and the environment checked against
 * itself; its world against its count a node only where that count is
 * used (with --ranks-per-node the environment's counts the launcher's
 * tasks, one a node under lf-launch, and its world is not used either).
 * Returns 0 or -1 (reported). */
static int env_consistent(job_env *e, int per_node_given)
{
    job_value *w = &e->world, *m = &e->per_node, *n = &e->nodes;
    if (m->set && m->v == 0) {
        fprintf(stderr, "lf-server: %s=0 in the environment (%s): no ranks on this node\n",
                m->from, e->name);
        return -1;
    }
    if (w->set && m->set && n->set && !per_node_given && (uint64_t)n->v * m->v != w->v) {
        fprintf(stderr, "lf-server: %s=%u is not %s=%u x %s=%u (%s): the nodes do not run "
                "the same number of ranks, so which ranks are this node's is not known; "
                "give --ranks LIST and --world N\n", w->from, w->v, n->from, n->v, m->from,
                m->v, e->name);
        return -1;
    }
    if (w->set && m->set && !n->set) {
        if (w->v % m->v) {
            fprintf(stderr, "lf-server: %s=%u is not a multiple of %s=%u (%s): give --ranks "
                    "LIST and --world N\n", w->from, w->v, m->from, m->v, e->name);
            return -1;
        }
        char from[2 * sizeof e->nodes.from + 16];
        snprintf(from, sizeof from, "%s / %s", w->from, m->from);
        set_value(n, w->v / m->v, from);
    }
    if (e->node.set && n->set && e->node.v >= n->v) {
        fprintf(stderr, "lf-server: %s=%u, but %s=%u nodes (%s): the node rank is past the "
                "nodes\n", e->node.from, e->node.v, n->from, n->v, e->name);
        return -1;
    }
    if (!e->node.set && n->set && n->v == 1) set_value(&e->node, 0, "the only node");
    return 0;
}

/* Returns 1 (a launcher's variables read), 0 (none) or -1 (reported). */
static int read_env(job_env *e, const srv_job_flags *f)
{
    int rc = read_torchrun(e);
    if (rc == 0) rc = read_openmpi(e);
    if (rc == 0) rc = read_slurm(e);
    if (rc > 0 && env_consistent(e, f->have_per_node) < 0) rc = -1;
    return rc;
}

/* --ranks: a rank number at *s, digits only; *s moves past it. */
static int rank_number(const char **s, uint64_t *out)
{
    size_t n = strspn(*s, "0123456789");
    int rc = n ? parse_u64_head(*s, n, 0, UINT32_MAX, out) : -1;
    *s += n;
    return rc;
}

/* --ranks: a comma-separated list of ranks and ranges A-B. */
static int parse_ranks(const char *s, srv_config *c)
{
    c->nlocal = 0;
    for (;;) {
        uint64_t a, b;
        if (rank_number(&s, &a)) return -1;
        b = a;
        if (*s == '-') {
            s++;
            if (rank_number(&s, &b) || b < a) return -1;
        }
        for (uint64_t r = a; r <= b; r++) {
            if (c->nlocal == SRV_MAX_RANKS) return -1;
            c->local[c->nlocal++] = (uint32_t)r;
        }
        if (*s == '\0') return 0;
        if (*s++ != ',') return -1; /* after a comma, another item must follow */
    }
}

void srv_format_ranks(const srv_config *c, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    for (uint32_t i = 0; i < c->nlocal && n < cap; i++) {
        uint32_t j = i;
        while (j + 1 < c->nlocal && c->local[j + 1] == c->local[j] + 1) j++;
        int w = j > i ? snprintf(buf + n, cap - n, "%s%u-%u", i ? "," : "", c->local[i], c->local[j])
                      : snprintf(buf + n, cap - n, "%s%u", i ? "," : "", c->local[i]);
        n += w > 0 ? (size_t)w : 0;
        i = j;
    }
}

/* The world: its flag, else the environment's: with M from the
 * environment, its world; with M from the flag, nodes x M. A --world the
 * environment's node count contradicts is refused. Returns 0 or -1. */
static int pick_world(const srv_job_flags *f, const job_env *e, const job_value *m, job_value *w)
{
    job_value from_env = e->world;
    if (f->have_per_node && e->nodes.set) {
        char from[2 * sizeof e->nodes.from + 16];
        snprintf(from, sizeof from, "%s=%u x %s", e->nodes.from, e->nodes.v, m->from);
        memset(&from_env, 0, sizeof from_env);
        if ((uint64_t)e->nodes.v * m->v <= UINT32_MAX)
            set_value(&from_env, e->nodes.v * m->v, from);
    }
    if (!f->have_world) {
        *w = from_env;
        return 0;
    }
    set_value(w, f->world, "--world");
    if (!from_env.set || !m->set || from_env.v == f->world) return 0;
    fprintf(stderr, "lf-server: --world %u, but %s gives %u (%s): the environment describes "
            "another job shape; give --node-rank K --ranks-per-node M, or --ranks LIST "
            "(--ranks 0-%u serves them all here)\n", f->world, from_env.from, from_env.v,
            e->name, f->world - 1);
    return -1;
}

/* K and M from the flags, else the environment; -1 (reported) where one
 * cannot be had. */
static int pick_node(const srv_job_flags *f, const job_env *e, job_value *k, job_value *m)
{
    if (f->have_node_rank) set_value(k, f->node_rank, "--node-rank");
    else *k = e->node;
    if (f->have_per_node) set_value(m, f->per_node, "--ranks-per-node");
    else *m = e->per_node;
    if (!k->set || !m->set) {
        const char *why = !k->set ? e->no_node : e->no_block;
        fprintf(stderr, "lf-server: no %s: given by no flag, nor by %s%s%s%s%s; give --node-rank "
                "K --ranks-per-node M (node K serves ranks K*M .. K*M+M-1), or --ranks LIST\n",
                !k->set ? "node rank" : "number of ranks per node",
                e->name ? "the environment of " : "a launcher's environment (torchrun, Open MPI "
                "or Slurm)", e->name ? e->name : "", why ? " (" : "", why ? why : "",
                why ? ")" : "");
        return -1;
    }
    if (!f->have_per_node && m->v > 1 && e->no_block) {
        fprintf(stderr, "lf-server: %s: which ranks are this node's is not known; give "
                "--ranks LIST (or --node-rank K --ranks-per-node M where node K runs ranks "
                "K*M .. K*M+M-1)\n", e->no_block);
        return -1;
    }
    if (m->v == 0 || m->v > SRV_MAX_RANKS) {
        fprintf(stderr, "lf-server: %u ranks per node (%s): must be 1..%d\n", m->v, m->from,
                SRV_MAX_RANKS);
        return -1;
    }
    return 0;
}

/* Said where the environment was read: the flags alone say what they say. */
static void say_job(const srv_config *c, const job_env *e, const char *how)
{
    char ranks[1024];
    if (c->quiet || !e->name) return;
    srv_format_ranks(c, ranks, sizeof ranks);
    fprintf(stderr, "lf-server: job: %s: serving ranks %s\n", how, ranks);
}

/* Block placement from K, M (and N). Returns 0 or -1 (reported). */
static int node_ranks(srv_config *c, const job_value *k, const job_value *m, const job_value *w,
                      const job_env *e)
{
    /* In 64 bits: the 32-bit product could wrap to ranks below the world. */
    if ((uint64_t)k->v * m->v + m->v > w->v) {
        char world[sizeof w->from + 32];
        if (strcmp(w->from, "--world") == 0) snprintf(world, sizeof world, "--world %u", w->v);
        else snprintf(world, sizeof world, "the world, %u (%s)", w->v, w->from);
        fprintf(stderr, "lf-server: node rank %u (%s) x %u ranks per node (%s): ranks past "
                "%s\n", k->v, k->from, m->v, m->from, world);
        return -1;
    }
    c->nlocal = m->v;
    for (uint32_t i = 0; i < m->v; i++) c->local[i] = k->v * m->v + i;
    char how[400];
    snprintf(how, sizeof how, "%s%s%snode rank %u (%s), %u ranks per node (%s), world %u (%s)",
             e->name ? "from the environment of " : "", e->name ? e->name : "",
             e->name ? ": " : "", k->v, k->from, m->v, m->from, w->v, w->from);
    say_job(c, e, how);
    return 0;
}

/* --world alone, and the environment's world is another: the variables
 * describe another job than this server's (a rank that starts a server of
 * its own, a shell inside an allocation), so they are set aside, saying
 * so, and the server serves every rank of --world as without them. */
static int env_other_job(const srv_config *c, const srv_job_flags *f, const job_env *e)
{
    if (!e->name || !f->have_world || f->have_node_rank || f->have_per_node || !e->world.set ||
        e->world.v == f->world)
        return 0;
    if (!c->quiet)
        fprintf(stderr, "lf-server: job: --world %u, but %s=%u (%s): the environment "
                "describes another job; not using it (give --node-rank/--ranks-per-node or "
                "--ranks for a node's share)\n", f->world, e->world.from, e->world.v, e->name);
    return 1;
}

int srv_job_resolve(srv_config *c, const srv_job_flags *f)
{
    job_env e = {0};
    job_value k = {0}, m = {0}, w = {0};
    int flags_only = f->have_world && (f->ranks || (f->have_node_rank && f->have_per_node));
    int rc = flags_only ? 0 : read_env(&e, f);
    if (rc < 0) return -1;
    if (!f->ranks && env_other_job(c, f, &e)) memset(&e, 0, sizeof e);
    if (f->ranks) {
        if (parse_ranks(f->ranks, c)) { fprintf(stderr, "lf-server: bad --ranks\n"); return -1; }
        if (f->have_world) set_value(&w, f->world, "--world");
        else w = e.world;
    } else if (f->have_node_rank || f->have_per_node || e.name) {
        if (pick_node(f, &e, &k, &m) < 0 || pick_world(f, &e, &m, &w) < 0) return -1;
    } else if (f->have_world) {
        set_value(&w, f->world, "--world");
    }
    if (!w.set || w.v == 0 || w.v > 1u << 20) {
        fprintf(stderr, "lf-server: --world N (1..2^20) is required%s (see --help)\n",
                e.name ? ", the environment's world being missing or out of range" : "");
        return -1;
    }
    c->world = w.v;
    if (k.set) return node_ranks(c, &k, &m, &w, &e);
    if (!f->ranks) {
        if (c->world > SRV_MAX_RANKS) { fprintf(stderr, "lf-server: give --ranks\n"); return -1; }
        c->nlocal = c->world;
        for (uint32_t i = 0; i < c->world; i++) c->local[i] = i;
    }
    for (uint32_t i = 0; i < c->nlocal; i++)
        if (c->local[i] >= c->world || (i && c->local[i] <= c->local[i - 1])) {
            fprintf(stderr, "lf-server: --ranks: local ranks must be ascending and < the "
                    "world, %u (%s)\n", c->world, w.from);
            return -1;
        }
    char how[160];
    snprintf(how, sizeof how, "%s of world %u (%s)", f->ranks ? "--ranks" : "every rank",
             c->world, w.from);
    say_job(c, &e, how);
    return 0;
}
