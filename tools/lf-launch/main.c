/*
 * lf-launch — one command per node: this node's lf-server around the
 * user's trainer.
 *
 *   lf-launch [LAUNCH OPTIONS] [SERVER FLAGS] -- TRAINER COMMAND...
 *
 * Starts lf-server (in a private runtime directory unless --endpoint is
 * among the server flags), waits until it answers, runs the trainer with
 * LEVELFEED_ENDPOINT set, passes signals on to it, and when the trainer
 * ends, whatever its end, stops the server and removes the directory.
 * Exits with the trainer's status (128 + N for signal N, as a shell does).
 *
 * The flow is in main(); the processes and signals are in proc.c, the
 * runtime directory in rundir.c, the readiness probe in probe.c.
 */
#include "launch.h"
#include "parse_num.h"
#include "version.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f,
"usage: lf-launch [LAUNCH OPTIONS] [SERVER FLAGS] -- TRAINER COMMAND...\n"
"Runs this node's lf-server, waits until it answers, runs the trainer with\n"
"LEVELFEED_ENDPOINT set and passes SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1\n"
"and SIGUSR2 on to it; when the trainer ends, stops the server and removes its\n"
"runtime directory. One lf-launch per node: srun --ntasks-per-node=1, mpirun\n"
"--map-by ppr:1:node, or alone (docs/MULTINODE.md).\n"
"\n"
"Every flag before -- that is not a launch option goes to lf-server, as given\n"
"(lf-server --help): --data DIR --world N, --node-rank K --ranks-per-node M or\n"
"--ranks LIST, the plan flags; the server reads those of the job left out from\n"
"the launcher's environment (srun's, mpirun's), which it inherits from lf-launch\n"
"(one task a node: give --ranks-per-node M, the trainer's ranks a node, and the\n"
"world is M x the nodes). Without --endpoint among them, the server serves\n"
"in a new private directory, $XDG_RUNTIME_DIR/levelfeed/job-NAME.XXXXXX (else\n"
"/tmp/levelfeed-$UID/job-NAME.XXXXXX), so jobs on one node never meet.\n"
"\n"
"launch options:\n"
"  --server PATH        the lf-server to run (default: the one beside lf-launch,\n"
"                       else the first on PATH)\n"
"  --server-log FILE    the server's output appended to FILE (default: this\n"
"                       program's stderr; the server's lines say lf-server:)\n"
"  --job NAME           names the runtime directory (default: $LEVELFEED_JOB,\n"
"                       $SLURM_JOB_ID, $TORCHELASTIC_RUN_ID, else job)\n"
"  --ready-timeout S    seconds to wait for the server to serve; planning a large\n"
"                       dataset's epochs takes a while (600)\n"
"  --stop-timeout S     seconds the server gets to end after the trainer (on its\n"
"                       own when the trainer succeeded, then after SIGTERM), the\n"
"                       trainer to end after its server failed under it (then\n"
"                       SIGTERM), and the trainer's leftover processes after\n"
"                       SIGTERM, before SIGKILL (10)\n"
"  --help, --version\n"
"\n"
"Exit status: the trainer's (128 + N when signal N ended it; 127 when it cannot\n"
"be run); 1 when the server cannot start or answer, or when the trainer had to\n"
"be ended after the server failed under it; 2 for a usage error (or a\n"
"server that refused its flags); 128 + N for signal N before the trainer ran.\n");
}

/* Launch option `name` at argv[*i] ("--name V" or "--name=V"): its value,
 * *i moved past it; NULL when argv[*i] is another flag. *missing is set
 * when the option came without its value. */
static const char *option_value(char **argv, int argc, int *i, const char *name, int *missing)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] != 0) return NULL;
    if (*i + 1 >= argc || strcmp(argv[*i + 1], "--") == 0) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

static int parse_seconds(const char *flag, const char *v, uint64_t *ms)
{
    double s;
    if (parse_double(v, 0.001, 1e7, &s) != 0) {
        fprintf(stderr, "lf-launch: %s: want seconds (0.001 .. 1e7), not '%s'\n", flag, v);
        return -1;
    }
    *ms = (uint64_t)(s * 1000);
    return 0;
}

/* One argument before --: a launch option (taken), else a server flag
 * (kept, and --endpoint's value noted). Returns 0, 1 (--help/--version:
 * done), or -1 for a usage error. */
static int take_arg(launch *L, char **argv, int argc, int *i)
{
    static const char *const own[] = {"--server", "--server-log", "--job", "--ready-timeout",
                                      "--stop-timeout"};
    if (strcmp(argv[*i], "--help") == 0 || strcmp(argv[*i], "-h") == 0) {
        usage(stdout);
        return 1;
    }
    if (strcmp(argv[*i], "--version") == 0) {
        cli_print_version("lf-launch");
        return 1;
    }
    int missing = 0;
    for (size_t k = 0; k < sizeof own / sizeof own[0]; k++) {
        const char *v = option_value(argv, argc, i, own[k], &missing);
        if (missing) {
            fprintf(stderr, "lf-launch: %s wants a value\n", own[k]);
            return -1;
        }
        if (!v) continue;
        switch (k) {
        case 0: L->server_opt = v; return 0;
        case 1: L->server_log = v; return 0;
        case 2: L->job = v; return 0;
        case 3: return parse_seconds(own[k], v, &L->ready_timeout_ms);
        default: return parse_seconds(own[k], v, &L->stop_timeout_ms);
        }
    }
    int at = *i;
    const char *endpoint = option_value(argv, argc, i, "--endpoint", &missing);
    if (endpoint) L->endpoint_opt = endpoint;
    for (; at <= *i; at++) L->server_flags[L->nserver_flags++] = argv[at];
    return 0;
}

static int parse_args(launch *L, int argc, char **argv)
{
    L->ready_timeout_ms = 600000;
    L->stop_timeout_ms = 10000;
    L->server_flags = calloc((size_t)argc, sizeof *L->server_flags);
    if (!L->server_flags) return -1;
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        int rc = take_arg(L, argv, argc, &i);
        if (rc != 0) return rc;
    }
    if (i + 1 >= argc) {
        fprintf(stderr, "lf-launch: no trainer command: lf-launch [SERVER FLAGS] -- TRAINER "
                "COMMAND... (see lf-launch --help)\n");
        return -1;
    }
    L->trainer = argv + i + 1; /* argv[argc] is NULL */
    return 0;
}

/* How the server ended, once it was stopped (by lf-launch or on its own). */
static void say_server_end(const launch *L)
{
    char how[96];
    if (L->server_status == -1) return; /* not reaped: launch_stop said why */
    fprintf(stderr, "lf-launch: lf-server %s%s%s\n",
            launch_status_text(L->server_status, how, sizeof how),
            L->server_sent ? " after lf-launch sent it " : "",
            L->server_sent ? (L->server_sent == SIGKILL ? "SIGKILL" : "SIGTERM") : "");
}

/* The server could not start, answer, or a signal came first: stop it
 * and say how lf-launch ends. */
static int fail_before_trainer(launch *L)
{
    int server_rc = L->server_pid ? -1 : launch_status_code(L->server_status);
    if (L->server_pid) {
        launch_stop(L, 0);
        say_server_end(L);
    }
    launch_remove_rundir(L);
    if (L->stop_signal) return 128 + L->stop_signal;
    return server_rc == 2 ? 2 : 1; /* 2: the server refused its flags */
}

static void say_trainer_end(const launch *L)
{
    char how[96];
    if (L->trainer_status != -1)
        fprintf(stderr, "lf-launch: the trainer %s\n",
                launch_status_text(L->trainer_status, how, sizeof how));
}

/* Runs the trainer to its end. A server that fails under it is named at
 * once, and the trainer is left to decide for --stop-timeout: its ranks
 * see the server gone (LF_E_GONE, or the server's error, "rank N stalled")
 * and end as they choose, saving what they will. A rank that never asks
 * for data again (a hung trainer, the very one a stall names) would keep
 * it running for good, and the job with it: past that time the trainer
 * is ended (launch_stop). A server that ends well has served every rank:
 * the trainer is finishing. Returns 1 when the trainer ended, 0 when it
 * outlived its failed server. */
static int run_trainer(launch *L)
{
    char how[96];
    fprintf(stderr, "lf-launch: running %s (pid %d) with LEVELFEED_ENDPOINT=ipc://%s\n",
            L->trainer[0], (int)L->trainer_pid, L->endpoint);
    uint64_t deadline = 0; /* set when the server failed */
    while (L->trainer_pid) {
        uint64_t now = launch_now_ms();
        if (deadline && now >= deadline) {
            fprintf(stderr, "lf-launch: the trainer still runs %.1f s after lf-server failed under "
                    "it; ending it (a rank that never asks for data again, hung or stopped, would "
                    "keep it running for good)\n", (double)L->stop_timeout_ms / 1000);
            return 0;
        }
        launch_wait(L, NULL, deadline ? (int)(deadline - now) : -1);
        if (!deadline && !L->server_pid && L->server_status != 0) {
            deadline = launch_now_ms() + L->stop_timeout_ms;
            fprintf(stderr, "lf-launch: lf-server %s while the trainer runs (its messages: %s)\n",
                    launch_status_text(L->server_status, how, sizeof how),
                    L->server_log ? L->server_log : "above");
        }
    }
    say_trainer_end(L);
    return 1;
}

int main(int argc, char **argv)
{
    static launch L = {.sigfd = -1, .server_status = -1, .trainer_status = -1};
    int rc = parse_args(&L, argc, argv);
    if (rc != 0) return rc > 0 ? 0 : 2;
    if (launch_find_server(&L) != 0 || launch_signals_init(&L) != 0) return 1;
    if (launch_make_rundir(&L) != 0) return 1;
    if (launch_spawn_server(&L) != 0) {
        launch_remove_rundir(&L);
        return 1;
    }
    if (launch_wait_ready(&L) != 0 || launch_spawn_trainer(&L) != 0)
        return fail_before_trainer(&L);
    int ended = run_trainer(&L);
    int trainer_rc = ended ? launch_status_code(L.trainer_status) : 1;
    launch_stop(&L, trainer_rc == 0);
    if (!ended) say_trainer_end(&L);
    say_server_end(&L);
    launch_remove_rundir(&L);
    return trainer_rc;
}
