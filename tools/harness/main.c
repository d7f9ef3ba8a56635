/*
 * lf-train — the reference DDP trainer (see tools/harness/README.md).
 *
 *   mpirun -np N lf-train --data DIR [--sampler S | --compare] [options] [-- lf-server args]
 *   mpirun -np N lf-train --endpoint EP --sampler S [options]
 *
 * With --data, the first rank of each node (MPI's shared-memory split, or
 * --fake-nodes N consecutive blocks of ranks, to test many nodes on one
 * machine) starts that node's lf-server per sampler run, serving the
 * node's ranks (--ranks) of the world (the sampler, seed, epochs, cost
 * model and pad id come from lf-train's own options, so the plan and the
 * labels cannot disagree; every node's server plans the same sequence) in
 * a private runtime directory; the node's ranks connect to it, and the
 * node's first rank reaps it when the plan is done.
 * With --endpoint the server is the caller's, and --sampler is only a label
 * that must match how that server was started.
 */
#include "harness.h"
#include "cost_file.h"
#include "parse_num.h"
#include "version.h"

#include <mpi.h>

#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *const samplers[] = {"balanced", "naive", "sorted"};
#define NSAMPLERS 3

typedef struct opts {
    lt_train_opts t;
    const char *data, *server, *sampler, *report, *trace, *chart, *batches, *tmpdir;
    const char *cost_file;       /* --cost-file: read, or with --calibrate written */
    int compare, calibrate, gradcheck, epochs;
    int fake_nodes;              /* --fake-nodes N: N nodes of consecutive ranks (0: real) */
    lt_calib_opts calib;
    int64_t seed;
    char **server_args;          /* after "--" */
    int nserver_args;
} opts;

static void usage(FILE *f)
{
    fprintf(f,
"usage: mpirun -np N lf-train --data DIR [--sampler S | --compare] [options] [-- SERVER ARGS]\n"
"       mpirun -np N lf-train --endpoint EP --sampler S [options]\n"
"       mpirun -np N lf-train --calibrate [--cost-file F] [model options]\n"
"Trains a small causal transformer on batches from lf-server, one rank per process\n"
"(GPU with --device cuda), and reports per-rank data wait, compute and sync wait.\n\n"
"data:\n"
"  --data DIR          start lf-server on DIR for each run (the first rank of each\n"
"                      node, as MPI's shared-memory split finds the nodes, spawns\n"
"                      the node's, serving the node's ranks)\n"
"  --fake-nodes N      tests: split the ranks into N \"nodes\" of consecutive ranks,\n"
"                      a server each, instead of by shared memory (N divides -np)\n"
"  --server PATH       the lf-server binary (default: beside lf-train)\n"
"  --tmpdir DIR        parent of the servers' runtime directories ($TMPDIR or /tmp)\n"
"  -- ARGS             more lf-server arguments (--budget, --layout, --max-tokens, ...)\n"
"  --endpoint EP       use a running lf-server instead of --data\n"
"  --sampler S         balanced, naive or sorted (default balanced)\n"
"  --compare           run all three samplers back to back and print a table (--data);\n"
"                      the caps after -- (--max-tokens, --max-padded,\n"
"                      --micro-max-padded) bind balanced only\n"
"  --epochs E, --seed S   plan epochs and seed given to lf-server (1, 0)\n"
"  --cost A,B,C0,D     cost model for lf-server and the planned cost column\n"
"                      (default: lf-server's text preset, hidden 4096)\n"
"  --cost-file F       the same from a cost file (as lf-plan, lf-server)\n"
"  --pad-id N          padding id, as lf-server's (0)\n"
"model and training:\n"
"  --device cpu|cuda|sim   (cpu); sim: a simulated accelerator, so many ranks share\n"
"                      few cores: a rank's compute sleeps for the time a hidden\n"
"                      cost gives (--sim-cost; the planner is not told it) plus\n"
"                      jitter, and the model does nothing (the loss stays 0)\n"
"  --sim-cost A,B,C0,D the hidden cost in ns: per token, token^2, sample, batch\n"
"                      (10000,20,50000,100000)\n"
"  --sim-jitter X      relative standard deviation of a sim step (0.03)\n"
"  --vocab N --dim N --hidden N --window N   model size (512, 32, 64, 1024);\n"
"                      token ids are taken modulo --vocab, attention spans --window\n"
"  --lr X              SGD learning rate (0.5)\n"
"  --log-every N       print the loss every N steps (25; 0: never)\n"
"outputs (rank 0; with --compare the sampler name goes before the extension):\n"
"  --report FILE.json  summary; --trace FILE.json  Chrome trace; --chart FILE.svg  chart\n"
"  --batches PREFIX    each rank writes PREFIX.rR.txt: \"epoch step rank n ids\"\n"
"calibration (alone: no --data, no --endpoint; every rank times its model at once):\n"
"  --calibrate         time forward + backward over a spread of lengths and batch\n"
"                      sizes, fit c(L) = a*L + b*L^2 + c0 per sample + d per batch,\n"
"                      print each term's standard error, R^2, the terms the data\n"
"                      cannot separate (fixed at 0) and the --cost flags;\n"
"                      with --cost-file F, write the cost file F\n"
"  --calibrate-lengths MIN,MAX   the lengths' span (16 and --window; MAX <= --window)\n"
"  --calibrate-repeats N         timings of each point per rank, median taken (9)\n"
"checks:\n"
"  --gradcheck         compare the CPU model's gradients with central differences on\n"
"                      a tiny model (no MPI, no server); exit 1 past 2%% relative error;\n"
"                      with --fault-step, one gradient component is spoiled first;\n"
"                      with --device cuda, also the GPU model's gradients against\n"
"                      the CPU model's on the same weights (exit 1 past 1e-4)\n"
"  --fault-step N --fault-rank R   perturb a parameter of rank R after step N\n"
"                      (the cross-rank parameter check must then fail the run)\n"
"  --help, --version\n"
"this build: %s\n", LT_CUDA ? "CPU and CUDA (NCCL)" : "CPU only (no CUDA)");
}

enum { O_DATA = 256, O_SERVER, O_ENDPOINT, O_SAMPLER, O_COMPARE, O_EPOCHS, O_SEED, O_COST,
       O_PADID, O_DEVICE, O_VOCAB, O_DIM, O_HIDDEN, O_WINDOW, O_LR, O_LOG, O_REPORT,
       O_TRACE, O_CHART, O_BATCHES, O_CALIBRATE, O_FSTEP, O_FRANK, O_TMPDIR, O_GRADCHECK,
       O_FAKE_NODES, O_COSTFILE, O_CLENGTHS, O_CREPEATS, O_SIMCOST, O_SIMJITTER, O_HELP,
       O_VERSION };

static int int_in(const char *s, int64_t lo, int64_t hi, int *out)
{
    int64_t v;
    if (parse_i64(s, lo, hi, &v) < 0) return -1;
    *out = (int)v;
    return 0;
}

static int positive(const char *s, int *out)
{
    return int_in(s, 1, 1 << 20, out);
}

static int learning_rate(const char *s, float *out)
{
    double v;
    if (parse_double(s, 0, FLT_MAX, &v) || v <= 0) return -1;
    *out = (float)v;
    return 0;
}

/* --calibrate-lengths MIN,MAX: 2 <= MIN < MAX (a one-token sequence has
 * no target). */
static int lengths(const char *a, lt_calib_opts *c)
{
    double v[2];
    if (parse_doubles(a, 2, 2, 1 << 24, v) || v[0] != floor(v[0]) || v[1] != floor(v[1]) ||
        v[0] >= v[1])
        return -1;
    c->min_len = (uint32_t)v[0];
    c->max_len = (uint32_t)v[1];
    return 0;
}

static int option(opts *o, int c, const char *a)
{
    lt_config *m = &o->t.model;
    switch (c) {
    case O_DATA: o->data = a; return 0;
    case O_SERVER: o->server = a; return 0;
    case O_TMPDIR: o->tmpdir = a; return 0;
    case O_ENDPOINT: o->t.endpoint = a; return 0;
    case O_SAMPLER: o->sampler = a; return 0;
    case O_COMPARE: o->compare = 1; return 0;
    case O_EPOCHS: return positive(a, &o->epochs);
    case O_SEED: return parse_i64(a, 0, INT64_MAX, &o->seed);
    case O_COST: return parse_doubles(a, 4, 0, DBL_MAX, o->t.cost);
    case O_PADID: return parse_i64(a, 0, INT64_MAX, &o->t.pad_id);
    case O_DEVICE:
        o->t.cuda = strcmp(a, "cuda") == 0;
        o->t.sim = strcmp(a, "sim") == 0;
        return o->t.cuda || o->t.sim || strcmp(a, "cpu") == 0 ? 0 : -1;
    case O_SIMCOST: return parse_doubles(a, 4, 0, 1e12, o->t.sim_cost);
    case O_SIMJITTER: return parse_double(a, 0, 1, &o->t.sim_jitter);
    case O_VOCAB: return positive(a, &m->vocab);
    case O_DIM: return positive(a, &m->dim);
    case O_HIDDEN: return positive(a, &m->hidden);
    case O_WINDOW: return positive(a, &m->window) || m->window < 2 ? -1 : 0;
    case O_LR: return learning_rate(a, &o->t.lr);
    case O_LOG: return int_in(a, 0, INT_MAX, &o->t.log_every);
    case O_REPORT: o->report = a; return 0;
    case O_TRACE: o->trace = a; return 0;
    case O_CHART: o->chart = a; return 0;
    case O_BATCHES: o->batches = a; return 0;
    case O_CALIBRATE: o->calibrate = 1; return 0;
    case O_COSTFILE: o->cost_file = a; return 0;
    case O_CLENGTHS: return lengths(a, &o->calib);
    case O_CREPEATS: return int_in(a, 1, LT_CALIB_REPEATS_MAX, &o->calib.repeats);
    case O_GRADCHECK: o->gradcheck = 1; return 0;
    case O_FAKE_NODES: return positive(a, &o->fake_nodes);
    case O_FSTEP: return parse_i64(a, -1, INT64_MAX, &o->t.fault_step);
    case O_FRANK: return int_in(a, -1, INT_MAX, &o->t.fault_rank);
    default: return -1;
    }
}

/* Whether the directory an output goes to can take it, said before any
 * training, not after it; 0 or -1 with the message printed. */
static int output_writable(const char *what, const char *path)
{
    if (!path) return 0;
    const char *slash = strrchr(path, '/');
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path + 1) : 1, slash ? path : ".");
    if (access(dir, W_OK | X_OK) == 0) return 0;
    fprintf(stderr, "lf-train: %s %s: cannot write in %s: %s\n", what, path, dir, strerror(errno));
    return -1;
}

/* --calibrate runs alone: it times the model, it trains on no plan. */
static int calibrate_options(opts *o)
{
    lt_calib_opts *c = &o->calib;
    if (!c->max_len) c->max_len = (uint32_t)o->t.model.window;
    c->cost_file = o->cost_file;
    const char *err = o->data || o->t.endpoint || o->compare || o->nserver_args
                          ? "--calibrate runs alone (no --data, --endpoint, --compare or server "
                            "arguments): pass its --cost-file to a later run"
                      : c->max_len > (uint32_t)o->t.model.window
                          ? "--calibrate-lengths: MAX is above --window, past which attention "
                            "is cut into windows and the cost is no longer a*L + b*L^2"
                      : c->min_len >= c->max_len ? "--calibrate-lengths: MIN must be below MAX"
                      : NULL;
    if (err) fprintf(stderr, "lf-train: %s\n", err);
    return err || output_writable("--cost-file", c->cost_file) ? -1 : 0;
}

/* Returns 0, 1 (--help), 2 (--version) or -1 (usage error, message printed). */
static int parse(int argc, char **argv, opts *o)
{
    static const struct option lo[] = {
        {"data", 1, 0, O_DATA}, {"server", 1, 0, O_SERVER}, {"endpoint", 1, 0, O_ENDPOINT},
        {"sampler", 1, 0, O_SAMPLER}, {"compare", 0, 0, O_COMPARE}, {"epochs", 1, 0, O_EPOCHS},
        {"seed", 1, 0, O_SEED}, {"cost", 1, 0, O_COST}, {"pad-id", 1, 0, O_PADID},
        {"device", 1, 0, O_DEVICE}, {"vocab", 1, 0, O_VOCAB}, {"dim", 1, 0, O_DIM},
        {"hidden", 1, 0, O_HIDDEN}, {"window", 1, 0, O_WINDOW}, {"lr", 1, 0, O_LR},
        {"log-every", 1, 0, O_LOG}, {"report", 1, 0, O_REPORT}, {"trace", 1, 0, O_TRACE},
        {"chart", 1, 0, O_CHART}, {"batches", 1, 0, O_BATCHES},
        {"calibrate", 0, 0, O_CALIBRATE}, {"fault-step", 1, 0, O_FSTEP},
        {"fault-rank", 1, 0, O_FRANK}, {"tmpdir", 1, 0, O_TMPDIR},
        {"gradcheck", 0, 0, O_GRADCHECK}, {"cost-file", 1, 0, O_COSTFILE},
        {"fake-nodes", 1, 0, O_FAKE_NODES},
        {"calibrate-lengths", 1, 0, O_CLENGTHS}, {"calibrate-repeats", 1, 0, O_CREPEATS},
        {"sim-cost", 1, 0, O_SIMCOST}, {"sim-jitter", 1, 0, O_SIMJITTER},
        {"help", 0, 0, O_HELP}, {"version", 0, 0, O_VERSION},
        {0, 0, 0, 0}};
    *o = (opts){.sampler = "balanced", .epochs = 1, .calib = {.min_len = 16, .repeats = 9}};
    o->t = (lt_train_opts){.model = {512, 32, 64, 1024, 1}, .lr = 0.5f, .log_every = 25,
                           .fault_step = -1, .fault_rank = -1, .timeout_ms = 60000,
                           .cost = {16, 16.0 / (12.0 * 4096), 0, 0},
                           .sim_cost = {10000, 20, 50000, 100000}, .sim_jitter = 0.03};
    int c, at = -1;
    while ((c = getopt_long(argc, argv, "", lo, &at)) != -1) {
        if (c == O_HELP) return 1;
        if (c == O_VERSION) return 2;
        if (option(o, c, optarg) < 0) {
            if (c != '?' && at >= 0)
                fprintf(stderr, "lf-train: --%s: bad value '%s'\n", lo[at].name,
                        optarg ? optarg : "");
            return -1;
        }
        at = -1;
    }
    o->server_args = argv + optind;
    o->nserver_args = argc - optind;
    if (o->gradcheck) return 0;
    if (o->calibrate) return calibrate_options(o);
    if (o->cost_file) {
        char why[512];
        if (cost_file_read(o->cost_file, o->t.cost, why, sizeof why) < 0) {
            fprintf(stderr, "lf-train: --cost-file: %s\n", why);
            return -1;
        }
    }
    int known = 0;
    for (int i = 0; i < NSAMPLERS; i++) known |= strcmp(o->sampler, samplers[i]) == 0;
    const char *err = !known ? "--sampler must be balanced, naive or sorted"
                    : !o->data == !o->t.endpoint ? "give exactly one of --data and --endpoint"
                    : o->compare && !o->data ? "--compare needs --data"
                    : o->nserver_args && !o->data ? "server arguments need --data"
                    : o->fake_nodes && !o->data ? "--fake-nodes needs --data"
                    : NULL;
    if (err) fprintf(stderr, "lf-train: %s\n", err);
    if (err || output_writable("--report", o->report) || output_writable("--trace", o->trace) ||
        output_writable("--chart", o->chart) || output_writable("--batches", o->batches))
        return -1;
    return 0;
}

/* ---- the nodes ---------------------------------------------------------- */

/* This rank's node: the ranks that share it, and which node it is. */
typedef struct node_info {
    MPI_Comm comm;               /* the node's ranks, in world order */
    int local, size;             /* this rank's place on the node; the node's ranks */
    int index, count;            /* the node's number (its first ranks' order); the nodes */
    char ranks[4096];            /* the node's world ranks, "2,3": its server's --ranks */
} node_info;

/* The nodes, by shared memory (the ranks that can share it run on one
 * machine) or by --fake-nodes; the first rank of each numbers them in
 * world order. Collective. Returns 0 or -1 (rank 0 said why). */
static int find_node(const opts *o, int rank, int world, node_info *n)
{
    if (o->fake_nodes && world % o->fake_nodes) {
        if (rank == 0)
            fprintf(stderr, "lf-train: --fake-nodes %d does not divide the %d ranks\n",
                    o->fake_nodes, world);
        return -1;
    }
    if (o->fake_nodes)
        MPI_Comm_split(MPI_COMM_WORLD, rank / (world / o->fake_nodes), rank, &n->comm);
    else
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &n->comm);
    MPI_Comm_rank(n->comm, &n->local);
    MPI_Comm_size(n->comm, &n->size);
    MPI_Comm firsts;
    MPI_Comm_split(MPI_COMM_WORLD, n->local == 0 ? 0 : MPI_UNDEFINED, rank, &firsts);
    if (firsts != MPI_COMM_NULL) {
        MPI_Comm_rank(firsts, &n->index);
        MPI_Comm_size(firsts, &n->count);
        MPI_Comm_free(&firsts);
    }
    MPI_Bcast(&n->index, 1, MPI_INT, 0, n->comm);
    MPI_Bcast(&n->count, 1, MPI_INT, 0, n->comm);
    int *all = malloc((size_t)n->size * sizeof *all), ok = all != NULL;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!ok) {
        free(all);
        return -1;
    }
    MPI_Allgather(&rank, 1, MPI_INT, all, 1, MPI_INT, n->comm);
    size_t len = 0;
    for (int i = 0; i < n->size && len < sizeof n->ranks; i++)
        len += (size_t)snprintf(n->ranks + len, sizeof n->ranks - len, "%s%d", i ? "," : "",
                                all[i]);
    free(all);
    ok = len < sizeof n->ranks;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!ok && rank == 0) fprintf(stderr, "lf-train: too many ranks on a node for --ranks\n");
    return ok ? 0 : -1;
}

/* ---- the server of one run (each node's first rank) --------------------- */

/* What a server killed before its own clean-up leaves in its directory:
 * its sockets, and the lock file it always leaves (see server/README.md). */
#define SERVER_LEFT 3
static const char *const server_left[SERVER_LEFT] = {"ctl.lock", "ctl.fd", "ctl"};

typedef struct server {
    pid_t pid;
    char dir[96];                /* private runtime directory, under $TMPDIR */
    char endpoint[108];          /* dir/ctl: fits a unix socket address */
    char left[SERVER_LEFT][112]; /* dir/server_left[k], made before the server
                                    starts, so a signal handler can unlink them */
} server;

/* This node's running server (its first rank's), for on_signal. */
static server *volatile live_server;

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void default_server(char *buf, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", buf, size - 16);
    char *slash = n > 0 ? memrchr(buf, '/', (size_t)n) : NULL;
    if (slash) strcpy(slash + 1, "lf-server");
    else snprintf(buf, size, "lf-server");
}

/* A waitpid status in words: "exit status N" or "killed by signal N". */
static const char *status_words(int status, char *buf, size_t size)
{
    if (WIFEXITED(status)) snprintf(buf, size, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, size, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else snprintf(buf, size, "status %d", status);
    return buf;
}

/* Starts bin; the child gets SIGTERM if this rank dies first (MPI_Abort,
 * a crash), so a failed job leaves no server behind. Returns the pid or -1. */
static pid_t spawn(const char *bin, char **argv)
{
    pid_t parent = getpid(), pid = fork();
    if (pid != 0) return pid;
    live_server = NULL; /* a signal before exec must not clean up the parent's */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent) _exit(127);
    execv(bin, argv);
    fprintf(stderr, "lf-train: exec %s: %s\n", bin, strerror(errno));
    _exit(127);
}

/* How many words of the server arguments at a to leave out for a baseline
 * sampler in --compare: the per-rank caps (--max-tokens, --max-padded and
 * their values) bind balanced only, and naive and sorted servers refuse
 * them, as lf-plan plans the baselines without them. */
static int baseline_skips(char **a, int left)
{
    static const char *const caps[] = {"--max-tokens", "--max-padded", "--micro-max-padded"};
    for (size_t i = 0; i < sizeof caps / sizeof *caps; i++) {
        size_t n = strlen(caps[i]);
        if (strncmp(a[0], caps[i], n) != 0) continue;
        if (a[0][n] == '=') return 1;
        if (a[0][n] == '\0') return left > 1 ? 2 : 1;
    }
    return 0;
}

/* The server's argument list: the fixed words, then the caller's server
 * arguments (less the caps for a baseline in --compare), NULL-terminated. */
static char **server_argv(const opts *o, const char *sampler, const char *const *fixed,
                          size_t nf)
{
    char **argv = calloc(nf + (size_t)o->nserver_args + 1, sizeof *argv);
    if (!argv) return NULL;
    memcpy(argv, fixed, nf * sizeof *argv);
    int drop = o->compare && strcmp(sampler, "balanced") != 0, dropped = 0;
    for (int i = 0; i < o->nserver_args;) {
        int k = drop ? baseline_skips(o->server_args + i, o->nserver_args - i) : 0;
        if (k == 0) argv[nf++] = o->server_args[i++];
        dropped |= k > 0;
        i += k;
    }
    if (dropped)
        printf("lf-train: %s runs without --max-tokens/--max-padded/--micro-max-padded "
               "(they bind balanced only)\n", sampler);
    return argv;
}

static int server_start(const opts *o, const char *sampler, int world, const char *ranks,
                        server *s)
{
    char bin[4096], sw[16], se[16], sseed[32], scost[128], spad[32];
    if (o->server) snprintf(bin, sizeof bin, "%s", o->server);
    else default_server(bin, sizeof bin);
    const char *tmp = o->tmpdir ? o->tmpdir : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if ((size_t)snprintf(s->dir, sizeof s->dir, "%s/lf-train.XXXXXX", tmp) >= sizeof s->dir) {
        fprintf(stderr, "lf-train: %s is too long a directory for a socket path\n", tmp);
        return -ENAMETOOLONG;
    }
    if (!mkdtemp(s->dir)) {
        int e = errno;
        fprintf(stderr, "lf-train: mkdtemp %s: %s\n", s->dir, strerror(e));
        return -e;
    }
    snprintf(s->endpoint, sizeof s->endpoint, "%s/ctl", s->dir);
    for (int k = 0; k < SERVER_LEFT; k++)
        snprintf(s->left[k], sizeof s->left[k], "%s/%s", s->dir, server_left[k]);
    snprintf(sw, sizeof sw, "%d", world);
    snprintf(se, sizeof se, "%d", o->epochs);
    snprintf(sseed, sizeof sseed, "%" PRId64, o->seed);
    snprintf(scost, sizeof scost, "%.17g,%.17g,%.17g,%.17g", o->t.cost[0], o->t.cost[1],
             o->t.cost[2], o->t.cost[3]);
    snprintf(spad, sizeof spad, "%lld", (long long)o->t.pad_id);
    const char *fixed[] = {bin, "--data", o->data, "--world", sw, "--ranks", ranks,
                           "--sampler", sampler,
                           "--epochs", se, "--seed", sseed, "--cost", scost, "--pad-id", spad,
                           "--endpoint", s->endpoint, "--quiet"};
    char **argv = server_argv(o, sampler, fixed, sizeof fixed / sizeof *fixed);
    if (!argv) return -ENOMEM;
    s->pid = spawn(bin, argv);
    free(argv);
    if (s->pid < 0) {
        int e = errno;
        fprintf(stderr, "lf-train: cannot start %s: %s\n", bin, strerror(e));
        return -e;
    }
    /* Wait for the control socket, or for the server to give up. */
    struct stat st;
    for (int i = 0; i < 400; i++) {
        if (stat(s->endpoint, &st) == 0) return 0;
        int status;
        char words[64];
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            fprintf(stderr, "lf-train: lf-server exited at start (%s)\n",
                    status_words(status, words, sizeof words));
            s->pid = 0;
            return -1;
        }
        sleep_ms(50);
    }
    fprintf(stderr, "lf-train: lf-server did not open %s\n", s->endpoint);
    return -1;
}

/* Async-signal-safe: unlink and rmdir only. */
static void remove_runtime_dir(const server *s)
{
    for (int k = 0; k < SERVER_LEFT; k++) unlink(s->left[k]);
    rmdir(s->dir);
}

/* mpirun ends every rank with SIGTERM when one dies or the job is
 * interrupted: each node's first rank takes its server and runtime
 * directory with it, then
 * dies of the signal. Async-signal-safe calls only. */
static void on_signal(int sig)
{
    server *s = live_server;
    if (s) {
        pid_t pid = s->pid;
        if (pid > 0 && kill(pid, SIGTERM) == 0)
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
        remove_runtime_dir(s);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void catch_signals(void)
{
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) sigaction(sigs[i], &sa, NULL);
}

/* Reaps the server (it exits once every rank has its plan), killing it if
 * it lingers or the run failed, and removes the runtime directory. */
static int server_stop(server *s, int failed)
{
    int status = 0, rc = 0;
    if (s->pid > 0) {
        if (failed) kill(s->pid, SIGTERM);
        int i = 0;
        while (waitpid(s->pid, &status, WNOHANG) == 0 && i++ < 200) sleep_ms(50);
        if (i > 200) {
            fprintf(stderr, "lf-train: lf-server did not exit; killing it\n");
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &status, 0);
        }
        s->pid = 0; /* reaped: on_signal must not signal the number again */
        rc = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
        char words[64];
        if (rc < 0 && !failed)
            fprintf(stderr, "lf-train: lf-server failed (%s)\n",
                    status_words(status, words, sizeof words));
    }
    remove_runtime_dir(s);
    live_server = NULL;
    return rc;
}

/* ---- runs ------------------------------------------------------------- */

/* path with ".SAMPLER" before its extension (compare mode). */
static const char *named(const opts *o, const char *path, const char *sampler, char *buf,
                         size_t size)
{
    if (!path || !o->compare) return path;
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) dot = path + strlen(path);
    snprintf(buf, size, "%.*s.%s%s", (int)(dot - path), path, sampler, dot);
    return buf;
}

/* After an lt_write_* failed: errno is the stdio call's. */
static int write_failed(const char *path)
{
    fprintf(stderr, "lf-train: cannot write %s: %s\n", path, strerror(errno));
    return -1;
}

static int write_outputs(const opts *o, const lt_run *run, const lt_summary *s)
{
    char b1[4096], b2[4096], b3[4096];
    const char *rp = named(o, o->report, run->sampler, b1, sizeof b1);
    const char *tp = named(o, o->trace, run->sampler, b2, sizeof b2);
    const char *cp = named(o, o->chart, run->sampler, b3, sizeof b3);
    int rc = 0;
    if (rp && lt_write_report(run, s, rp) < 0) rc = write_failed(rp);
    if (tp && lt_write_trace(run, tp) < 0) rc = write_failed(tp);
    if (cp && lt_write_chart(run, cp) < 0) rc = write_failed(cp);
    if (rc == 0 && (rp || tp || cp))
        printf("%s:%s%s%s%s%s%s\n", run->sampler, rp ? " report " : "", rp ? rp : "",
               tp ? " trace " : "", tp ? tp : "", cp ? " chart " : "", cp ? cp : "");
    return rc;
}

/* lt_train_opts.on_abort on a node's first rank: the server goes, and its
 * directory. */
static void abort_server(void *arg)
{
    server_stop(arg, 1);
}

/* One sampler: server up (with --data), train, outputs. Collective. */
static int run_one(const opts *o, const char *sampler, const char *device, int rank, int world,
                   const node_info *node, lt_summary *s)
{
    server srv = {0};
    char endpoint[108] = "", b[4096];
    int rc = 0, first = o->data && node->local == 0; /* this rank starts the node's server */
    if (first) {
        live_server = &srv; /* before the fork: a signal from then on cleans up */
        rc = server_start(o, sampler, world, node->ranks, &srv);
        snprintf(endpoint, sizeof endpoint, "%s", srv.endpoint);
        if (rc == 0 && node->count > 1)
            printf("lf-train: node %d of %d (ranks %s): lf-server pid %d on %s\n", node->index,
                   node->count, node->ranks, (int)srv.pid, endpoint);
    }
    MPI_Bcast(endpoint, sizeof endpoint, MPI_CHAR, 0, node->comm);
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD); /* any node's failure */
    lt_train_opts t = o->t;
    if (o->data) t.endpoint = endpoint;
    if (first) {
        t.on_abort = abort_server;
        t.on_abort_arg = &srv;
    }
    t.batches = o->compare ? named(o, o->batches, sampler, b, sizeof b) : o->batches;
    if (rank == 0) printf("== sampler %s, %d ranks, %s\n", sampler, world, device);
    lt_run run = {.sampler = sampler, .device = device};
    if (rc == 0) rc = lt_train(&t, &run);
    if (first && server_stop(&srv, rc < 0) < 0) rc = -1;
    if (rank == 0 && rc == 0) {
        if ((rc = lt_summarize(&run, s)) < 0)
            fprintf(stderr, "lf-train: %s: %s\n", sampler,
                    run.steps ? "out of memory" : "no step was trained (the plan has none)");
        if (rc == 0) rc = write_outputs(o, &run, s);
        if (rc == 0 && s->floor_p50 == 0)
            printf("%s: compute max/mean p50 %.3f p99 %.3f; noise floor not measured (fewer "
                   "than %d steps)\n", sampler, s->imbalance_p50, s->imbalance_p99,
                   LT_FLOOR_EVERY);
        else if (rc == 0)
            printf("%s: compute max/mean p50 %.3f p99 %.3f; noise floor (every rank the same "
                   "batch, %llu steps) p50 %.3f p99 %.3f; against the floor p50 %.3fx p99 %.3fx\n",
                   sampler, s->imbalance_p50, s->imbalance_p99,
                   (unsigned long long)run.floor_steps, s->floor_p50,
                   s->floor_p99, s->floor_p50 > 0 ? s->imbalance_p50 / s->floor_p50 : 0,
                   s->floor_p99 > 0 ? s->imbalance_p99 / s->floor_p99 : 0);
        if (rc == 0)
            printf("%s: %llu steps, %.0f tokens/s, step p50 %.2f ms, sync wait %.1f%%, "
                   "data wait %.1f%%, loss %.3f -> %.3f\n", sampler,
                   (unsigned long long)run.steps, s->tokens_per_s, s->step_p50_ms,
                   100 * s->sync_wait_fraction, 100 * s->data_wait_fraction, s->loss_first,
                   s->loss_last);
    }
    free(run.rec);
    free(run.floor);
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD); /* rank 0's, a server's */
    return rc;
}

/* The comparison's one line: each sampler's compute max/mean p50 over its
 * noise floor, measured in the same job under the same load, so it holds
 * from run to run where ranks share cores; tokens/s there moves by tens of
 * percent between runs (a rank waiting in the all-reduce yields its core),
 * so it is printed as this run's only. */
static void print_headline(const lt_summary *s)
{
    printf("balance against the noise floor (compute max/mean p50 / floor p50):");
    for (int i = 0; i < NSAMPLERS; i++)
        if (s[i].floor_p50 > 0) printf(" %s %.3fx", samplers[i], s[i].imbalance_p50 / s[i].floor_p50);
        else printf(" %s not measured", samplers[i]);
    printf("\n");
    if (s[1].tokens_per_s > 0 && s[2].tokens_per_s > 0)
        printf("tokens/s, this run only: balanced vs naive %+.1f%%, vs sorted %+.1f%% (not a "
               "headline where ranks share cores or a GPU: it moves between runs)\n",
               100 * (s[0].tokens_per_s / s[1].tokens_per_s - 1),
               100 * (s[0].tokens_per_s / s[2].tokens_per_s - 1));
}

static void print_table(const lt_summary *s)
{
    printf("\n%-24s %12s %12s %12s\n", "", samplers[0], samplers[1], samplers[2]);
#define ROW(label, fmt, expr)                                                     \
    do {                                                                          \
        printf("%-24s", label);                                                   \
        for (int i = 0; i < NSAMPLERS; i++) printf(" %12" fmt, (expr));           \
        printf("\n");                                                             \
    } while (0)
    ROW("tokens/s", ".0f", s[i].tokens_per_s);
    ROW("step ms p50", ".2f", s[i].step_p50_ms);
    ROW("step ms p99", ".2f", s[i].step_p99_ms);
    ROW("sync wait %", ".1f", 100 * s[i].sync_wait_fraction);
    ROW("data wait %", ".1f", 100 * s[i].data_wait_fraction);
    ROW("compute max/mean p50", ".3f", s[i].imbalance_p50);
    ROW("compute max/mean p99", ".3f", s[i].imbalance_p99);
    /* every step counted, the last too; 0 is "not measured", not perfect */
#define ROW_MEASURED(label, expr)                                                 \
    do {                                                                          \
        printf("%-24s", label);                                                   \
        for (int i = 0; i < NSAMPLERS; i++)                                       \
            if ((expr) > 0) printf(" %12.3f", (expr));                            \
            else printf(" %12s", "not measured");                                 \
        printf("\n");                                                             \
    } while (0)
    /* identical work on every rank, interleaved: what noise alone gives */
    ROW_MEASURED("noise floor p50", s[i].floor_p50);
    ROW_MEASURED("noise floor p99", s[i].floor_p99);
    ROW_MEASURED("p50 / floor", s[i].floor_p50 > 0 ? s[i].imbalance_p50 / s[i].floor_p50 : 0);
    ROW_MEASURED("p99 / floor", s[i].floor_p99 > 0 ? s[i].imbalance_p99 / s[i].floor_p99 : 0);
    ROW_MEASURED("compute epoch max/mean", s[i].epoch_imbalance);
    ROW_MEASURED("step tokens min/median", s[i].tokens_min);
    ROW_MEASURED("step tokens max/median", s[i].tokens_max);
#undef ROW_MEASURED
    ROW("CPU time max/mean p50", ".3f", s[i].work_imbalance_p50);
    ROW("compute s (all ranks)", ".2f", s[i].work_total_s);
    ROW("loss first 10%", ".3f", s[i].loss_first);
    ROW("loss last 10%", ".3f", s[i].loss_last);
#undef ROW
    print_headline(s);
}


static void device_name(const opts *o, char *buf, size_t size)
{
    snprintf(buf, size, o->t.sim ? "sim" : "cpu");
#if LT_CUDA
    if (o->t.cuda && lt_gpu_name(0, buf, size) < 0) snprintf(buf, size, "cuda");
#else
    (void)o;
#endif
}

/* A tiny model (odd sizes, a window shorter than a sequence) so every
 * parameter is probed in well under a second. */
static int gradcheck(int plant)
{
    lt_config c = {.vocab = 11, .dim = 4, .hidden = 6, .window = 5, .seed = 3};
    double e = lt_cpu_gradcheck(&c, plant);
    printf("gradcheck: %zu parameters, largest relative error %.2e\n", lt_param_count(&c), e);
    return e >= 0 && e < 0.02 ? 0 : 1;
}

#if LT_CUDA
/* --device cuda: the GPU model's gradients (and loss) against the CPU
 * model's on the same weights and batch: three sequences, one longer than
 * the window, a vocabulary and widths that are no multiples of a warp, so
 * the kernels' edges and the atomic sums of shared rows are all exercised.
 * The two sum in different orders, so they agree to float rounding, far
 * under the 1e-4 bound; a wrong kernel misses it by orders of magnitude.
 * Returns the relative error ||g_gpu - g_cpu|| / ||g_cpu||, or -1. */
static double gpu_vs_cpu(double *loss_gpu, double *loss_cpu)
{
    lt_config c = {.vocab = 97, .dim = 24, .hidden = 40, .window = 48, .seed = 5};
    enum { NTOK = 130 };
    int32_t tok[NTOK];
    for (int i = 0; i < NTOK; i++) tok[i] = (int32_t)((i * 37 + 11) % c.vocab);
    lt_seq seqs[3] = {{0, 80}, {80, 33}, {113, NTOK - 113}};
    lt_batch b = {tok, seqs, 3};
    size_t n = lt_param_count(&c);
    float *gc = calloc(n + LT_EXTRA, sizeof *gc), *gg = calloc(n + LT_EXTRA, sizeof *gg);
    char why[256] = "", id[256];
    lt_cpu *cpu = NULL;
    lt_gpu *gpu = NULL;
    int rc = gc && gg && lt_cpu_create(&c, &cpu) == 0 && lt_gpu_nccl_id_size() <= sizeof id ? 0 : -1;
    if (rc == 0) rc = lt_gpu_nccl_id(id, why, sizeof why);
    if (rc == 0) rc = lt_gpu_create(&c, 0, 0, 1, id, &gpu, why, sizeof why);
    if (rc == 0) rc = lt_gpu_step(gpu, &b, 1.0f, why, sizeof why);
    if (rc == 0) rc = lt_gpu_grads(gpu, gg, why, sizeof why);
    double diff = 0, norm = 0;
    if (rc == 0) {
        lt_cpu_step(cpu, &b, gc);
        for (size_t i = 0; i < n; i++) {
            diff += ((double)gg[i] - gc[i]) * ((double)gg[i] - gc[i]);
            norm += (double)gc[i] * gc[i];
        }
        *loss_gpu = gg[n];
        *loss_cpu = gc[n];
    } else {
        fprintf(stderr, "lf-train: --gradcheck --device cuda: %s\n", why[0] ? why : "out of memory");
    }
    lt_gpu_free(gpu);
    lt_cpu_free(cpu);
    free(gc);
    free(gg);
    return rc == 0 && norm > 0 ? sqrt(diff / norm) : -1;
}
#endif

/* --gradcheck: the CPU model against central differences; with --device
 * cuda also the GPU model against the CPU model. 0 when every check holds. */
static int gradchecks(int cuda, int plant)
{
    int rc = gradcheck(plant);
#if LT_CUDA
    if (cuda) {
        double lg = 0, lc = 0, e = gpu_vs_cpu(&lg, &lc);
        printf("gradcheck gpu: gradients vs the CPU model, relative error %.2e "
               "(loss %.6g vs %.6g)\n", e, lg, lc);
        if (e < 0 || e > 1e-4 || fabs(lg - lc) > 1e-4 * fabs(lc)) rc = 1;
    }
#else
    if (cuda) {
        fprintf(stderr, "lf-train: --gradcheck --device cuda: built without CUDA\n");
        rc = 1;
    }
#endif
    return rc;
}

int main(int argc, char **argv)
{
    opts o;
    int p = parse(argc, argv, &o);
    if (p == 1) {
        usage(stdout);
        return 0;
    }
    if (p == 2) {
        cli_print_version("lf-train");
        return 0;
    }
    if (p < 0) {
        fprintf(stderr, "usage: see lf-train --help\n");
        return 2;
    }
    if (o.gradcheck) return gradchecks(o.t.cuda, o.t.fault_step >= 0);
    MPI_Init(&argc, &argv);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (o.calibrate) {
        int rc = lt_calibrate(&o.t, &o.calib);
        MPI_Finalize();
        return rc == 0 ? 0 : 1;
    }
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    node_info node = {.comm = MPI_COMM_NULL};
    int rc = find_node(&o, rank, world, &node);
    if (rc == 0 && node.local == 0) catch_signals();
    char device[256];
    device_name(&o, device, sizeof device);
    lt_summary s[NSAMPLERS] = {{0}};
    if (rc == 0 && o.compare) {
        for (int i = 0; i < NSAMPLERS && rc == 0; i++)
            rc = run_one(&o, samplers[i], device, rank, world, &node, &s[i]);
        if (rc == 0 && rank == 0) print_table(s);
    } else if (rc == 0) {
        rc = run_one(&o, o.sampler, device, rank, world, &node, &s[0]);
    }
    if (node.comm != MPI_COMM_NULL) MPI_Comm_free(&node.comm);
    MPI_Finalize();
    return rc == 0 ? 0 : 1;
}
