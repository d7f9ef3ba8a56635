/*
 * main.c — lf-server: flags, the dataset, the rings, and the summary at exit.
 */
#include "srv.h"

#include "batch_names.h"
#include "lf_ipc.h"
#include "lf_ring.h"
#include "open_limit.h"
#include "image_cli.h"
#include "index_only.h"
#include "parse_num.h"
#include "plan_cli.h"
#include "version.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f,
"usage: lf-server --data DIR [--weight W --data DIR --weight W ...] --world N\n"
"                 (--ranks LIST | --node-rank K --ranks-per-node M)\n"
"                 [options]\n"
"Serves the planned batches of the local ranks of a job through shared-memory rings.\n"
"\n"
"job (a flag left out comes from the launcher's environment: torchrun's GROUP_RANK\n"
"or NODE_RANK, LOCAL_WORLD_SIZE, WORLD_SIZE; else Open MPI's OMPI_COMM_WORLD_SIZE,\n"
"_LOCAL_SIZE, and _RANK where the local size is 1; else Slurm's SLURM_NODEID,\n"
"SLURM_NTASKS_PER_NODE, SLURM_NTASKS, SLURM_NNODES; start-up says which):\n"
"  --data DIR              dataset directory (shards + manifest); repeated, with\n"
"                          --weight W after each, a mixture: W is the dataset's\n"
"                          share of the tokens, the weights summing to 1 (within\n"
"                          1e-6); every batch then carries `source` (int32, each\n"
"                          sample's --data number, from 0; balancer/README.md)\n"
"  --weight W              the share of the --data before it (see --data)\n"
"  --eval-data DIR         a held-out dataset of the same fields (lf-shard split\n"
"                          makes one): each rank's trainer asks for a pass over it\n"
"                          whenever it evaluates (lf_eval_begin, loader.eval_batches())\n"
"                          and gets its share of every sample once, in batches of\n"
"                          the same plan parameters, the same in every pass, into\n"
"                          2 ring slots of their own; the training stream stays as\n"
"                          without it\n"
"  --world N               ranks in the job (default: the environment's; with\n"
"                          --ranks-per-node M, M x its node count)\n"
"  --ranks LIST            local ranks, e.g. 0,1 or 0-3 (default: all, or the node's)\n"
"  --node-rank K --ranks-per-node M   local ranks K*M .. K*M+M-1 (block placement;\n"
"                          from the environment only where the launcher places\n"
"                          ranks so: torchrun, srun unless SLURM_DISTRIBUTION)\n"
"  --epochs E              epochs to serve, 1..65536 (1); start-up plans each\n"
"                          once to size the rings, so a longer schedule is\n"
"                          served by runs started at --epoch E\n"
"  --sampler balanced|naive|sorted     (balanced)\n"
"  plan options (the same as lf-plan's): see below\n"
"transform:\n"
"  --token-dtype i32|i64|u16|u32   token tensor type (i32); u16/u32 copy the\n"
"                          stored tokens as they are (u16: half the bytes of i32\n"
"                          to write, share and copy; widen on the GPU). Lengths,\n"
"                          positions and cu_seqlens stay i32 (i64 with i64)\n"
"  --pad-id N              padding token id (0)\n"
"  --micro-batches         tokens, pad layout: deliver the plan's micro-batches, each\n"
"                          padded to its own longest (tokens [cells], micro [m, 2] =\n"
"                          rows and padded length of each), instead of one [n, longest]\n"
"  --image-size WxH        images: output size, each side 1..1024 (224x224)\n"
"  --crop random|center|full   images: random-resized crop, center crop or the whole\n"
"                          image (random)\n"
"  --flip P                images: horizontal flip probability (0.5)\n"
"  --resize bilinear|area  images: resize filter (bilinear)\n"
"  --image-dtype u8|f16|f32    images: u8 HWC, or f16/f32 CHW normalized with the\n"
"                          ImageNet mean/std (f32)\n"
"stages and memory:\n"
"  --readers N             reader threads (1)\n"
"  --workers N             decode/transform/assembly threads (2)\n"
"  --io uring|pread        force an I/O method (default: io_uring, pread if unavailable)\n"
"  --read-depth N          reads in flight per reader (8)\n"
"  --slots N               ring depth per rank (4)\n"
"  --memory-limit BYTES    rings + read buffers + block cache (1G; K/M/G/T suffixes)\n"
"  --on-corrupt fail|skip  a block failing its checksum or decompression, or a\n"
"                          JPEG the transform refuses (too large, damaged): stop\n"
"                          with an error naming shard and block or sample (fail),\n"
"                          or leave those samples out of their batches and report\n"
"                          them (skip)\n"
"control:\n"
"  --endpoint PATH         ipc://PATH or PATH (default $LEVELFEED_ENDPOINT, as the\n"
"                          client's, else $XDG_RUNTIME_DIR/levelfeed/ctl-JOB, else\n"
"                          /tmp/levelfeed-$UID/ctl-JOB; .../ctl without a job)\n"
"  --job NAME              the job, in the default endpoint (default: $LEVELFEED_JOB,\n"
"                          $SLURM_JOB_ID, $TORCHELASTIC_RUN_ID, as the client's), so\n"
"                          two jobs on one node never meet\n"
"  --heartbeat-ms N        heartbeat interval (1000)\n"
"  --stall-ms N            a rank whose client holds a batch this long stalls the run:\n"
"                          named in the log and lf-stat, every rank gets that error\n"
"                          and the server ends; above the longest pause between\n"
"                          lf_next calls (evaluation, checkpoints) (1800000; 0: never)\n"
"other:\n"
"  --print-plan            print the local ranks' plan (epoch step rank n ids) and exit\n"
"  --quiet                 no start-up line or summary (warnings still print)\n"
"  --help, --version\n\n");
    fputs(plan_cli_help, f);
}

static int parse_u32(const char *s, uint32_t *out)
{
    uint64_t v;
    if (parse_u64(s, 0, UINT32_MAX, &v)) return -1;
    *out = (uint32_t)v;
    return 0;
}

enum {
    O_DATA = 256, O_WEIGHT, O_WORLD, O_RANKS, O_NODE_RANK, O_PER_NODE, O_EPOCHS, O_SAMPLER, O_TDTYPE, O_PADID, O_ISIZE, O_CROP, O_IDTYPE, O_FLIP, O_RESIZE, O_READERS, O_WORKERS, O_IO, O_DEPTH, O_SLOTS, O_MEM, O_CORRUPT,
    O_MICRO, O_ENDPOINT, O_JOB, O_HB, O_STALL, O_PRINT, O_QUIET, O_HELP, O_VERSION, O_EVAL,
};

static const struct option long_opts[] = {
    {"data", 1, 0, O_DATA}, {"weight", 1, 0, O_WEIGHT}, {"eval-data", 1, 0, O_EVAL},
    {"world", 1, 0, O_WORLD}, {"ranks", 1, 0, O_RANKS},
    {"node-rank", 1, 0, O_NODE_RANK}, {"ranks-per-node", 1, 0, O_PER_NODE},
    {"epochs", 1, 0, O_EPOCHS}, {"sampler", 1, 0, O_SAMPLER}, {"token-dtype", 1, 0, O_TDTYPE}, {"pad-id", 1, 0, O_PADID},
    {"image-size", 1, 0, O_ISIZE}, {"crop", 1, 0, O_CROP}, {"image-dtype", 1, 0, O_IDTYPE},
    {"flip", 1, 0, O_FLIP}, {"resize", 1, 0, O_RESIZE},
    {"readers", 1, 0, O_READERS}, {"workers", 1, 0, O_WORKERS}, {"io", 1, 0, O_IO},
    {"read-depth", 1, 0, O_DEPTH}, {"slots", 1, 0, O_SLOTS}, {"memory-limit", 1, 0, O_MEM},
    {"on-corrupt", 1, 0, O_CORRUPT}, {"micro-batches", 0, 0, O_MICRO},
    {"endpoint", 1, 0, O_ENDPOINT}, {"job", 1, 0, O_JOB}, {"heartbeat-ms", 1, 0, O_HB},
    {"stall-ms", 1, 0, O_STALL},
    {"print-plan", 0, 0, O_PRINT}, {"quiet", 0, 0, O_QUIET}, {"help", 0, 0, O_HELP},
    {"version", 0, 0, O_VERSION}, PLAN_CLI_OPTIONS, {0, 0, 0, 0},
};

static const char *option_name(int code)
{
    for (const struct option *o = long_opts; o->name; o++)
        if (o->val == code) return o->name;
    return "?";
}

static const char *const samplers[] = {"balanced", "naive", "sorted", NULL};
static const char *const ios[] = {"pread", "uring", NULL};
static const char *const on_corrupt[] = {"fail", "skip", NULL};

static int parse_opt(int opt, const char *a, srv_config *c, srv_job_flags *ps)
{
    lf_plan_params *p = &c->cli.params;
    if (plan_cli_owns(opt)) return plan_cli_set(&c->cli, opt, a);
    switch (opt) {
    case O_DATA: return mix_cli_data(&c->mix, a, c->cli.why, sizeof c->cli.why);
    case O_WEIGHT: return mix_cli_weight(&c->mix, a, c->cli.why, sizeof c->cli.why);
    case O_EVAL: c->eval_dir = a; return 0;
    case O_WORLD: ps->have_world = 1; return parse_u32(a, &ps->world);
    case O_RANKS: ps->ranks = a; return 0;
    case O_NODE_RANK: ps->have_node_rank = 1; return parse_u32(a, &ps->node_rank);
    case O_PER_NODE: ps->have_per_node = 1; return parse_u32(a, &ps->per_node);
    case O_EPOCHS: return parse_u32(a, &c->epochs);
    case O_SAMPLER: return parse_word(a, samplers, &p->sampler);
    case O_TDTYPE:
        if (strcmp(a, "i32") == 0) c->token_dtype = LF_DTYPE_I32;
        else if (strcmp(a, "i64") == 0) c->token_dtype = LF_DTYPE_I64;
        else if (strcmp(a, "u16") == 0) c->token_dtype = LF_DTYPE_U16;
        else if (strcmp(a, "u32") == 0) c->token_dtype = LF_DTYPE_U32;
        else return -1;
        return 0;
    case O_PADID: return parse_i64(a, 0, INT64_MAX, &c->pad_id);
    case O_MICRO: c->micro_batches = 1; return 0;
    case O_ISIZE: return image_cli_set(&c->image, IMAGE_CLI_SIZE, a);
    case O_CROP: return image_cli_set(&c->image, IMAGE_CLI_CROP, a);
    case O_IDTYPE: return image_cli_set(&c->image, IMAGE_CLI_DTYPE, a);
    case O_FLIP: return image_cli_set(&c->image, IMAGE_CLI_FLIP, a);
    case O_RESIZE: return image_cli_set(&c->image, IMAGE_CLI_RESIZE, a);
    case O_READERS: return parse_u32(a, &c->readers);
    case O_WORKERS: return parse_u32(a, &c->workers);
    case O_IO: {
        uint32_t w;
        if (parse_word(a, ios, &w)) return -1;
        c->io_uring = (int)w;
        c->io_forced = 1;
        return 0;
    }
    case O_DEPTH: return parse_u32(a, &c->read_depth);
    case O_SLOTS: return parse_u32(a, &c->slots);
    case O_MEM: return parse_size(a, 1, UINT64_MAX, &c->memory_limit);
    case O_CORRUPT: {
        uint32_t w;
        if (parse_word(a, on_corrupt, &w)) return -1;
        c->skip_corrupt = (int)w;
        return 0;
    }
    case O_ENDPOINT: c->endpoint = a; return 0;
    case O_JOB: c->job = a; return 0;
    case O_HB: return parse_u32(a, &c->heartbeat_ms);
    case O_STALL: return parse_u32(a, &c->stall_ms);
    case O_PRINT: c->print_plan = 1; return 0;
    case O_QUIET: c->quiet = 1; return 0;
    default: return -1;
    }
}

/* Epochs past SRV_EPOCH_MAX would share step keys with it (and past
 * 2^32 - 1 the epoch numbers wrap to 0): their steps' samples would not be
 * counted off the block cache, and positions would not order. */
static int check_last_epoch(const srv_config *c)
{
    uint64_t last = (uint64_t)c->cli.params.epoch + c->epochs - 1;
    if (last <= SRV_EPOCH_MAX) return 0;
    fprintf(stderr, "lf-server: --epoch %u --epochs %u: the last epoch, %" PRIu64
            ", is past %u, the last one the server orders steps by\n",
            c->cli.params.epoch, c->epochs, last, SRV_EPOCH_MAX);
    return -1;
}

/* The --help text and the refusal in finish_config spell the limit out. */
_Static_assert(SRV_MAX_EPOCHS == 65536, "--epochs: update the help and the message");

static int finish_config(srv_config *c, srv_job_flags *ps)
{
    const char *why = NULL;
    if (mix_cli_check(&c->mix, &c->cli.params.mix, c->cli.why, sizeof c->cli.why))
        why = c->cli.why;
    else if (ps->ranks && (ps->have_node_rank || ps->have_per_node))
        why = "give --ranks or --node-rank/--ranks-per-node";
    else if (c->epochs == 0 || c->epochs > SRV_MAX_EPOCHS)
        why = "--epochs must be 1..65536 (start-up plans every epoch once to size the rings; "
              "serve a longer schedule in runs started at --epoch E)";
    else if (c->slots < 2 || c->slots > LF_RING_MAX_SLOTS) why = "--slots must be 2..1024";
    else if (c->readers < 1 || c->readers > 64 || c->workers < 1 || c->workers > 256)
        why = "--readers 1..64, --workers 1..256";
    else if (c->read_depth < 1 || c->read_depth > 4096) why = "--read-depth must be 1..4096";
    else if (c->heartbeat_ms < 10) why = "--heartbeat-ms must be at least 10";
    else if (c->cli.params.sampler != LF_PLAN_BALANCED &&
             (c->cli.params.rank_max_tokens || c->cli.params.rank_max_padded ||
              c->cli.params.micro_max_padded))
        why = "--max-tokens, --max-padded and --micro-max-padded bind --sampler balanced only "
              "(naive and sorted take a fixed count a rank)";
    if (why) { fprintf(stderr, "lf-server: %s (see --help)\n", why); return -1; }
    if (check_last_epoch(c)) return -1;
    char path[LF_IPC_PATH_MAX + 1];
    if (srv_endpoint_path(c->endpoint, c->job, path, sizeof path) < 0) return -1;
    if (c->pad_id > lf_tf_token_max(c->token_dtype)) {
        fprintf(stderr, "lf-server: --pad-id %" PRId64 " does not fit --token-dtype %s\n",
                c->pad_id, lf_dtype_name(c->token_dtype));
        return -1;
    }
    if (srv_job_resolve(c, ps) < 0) return -1;
    c->cli.params.world = c->world;
    c->image.seed = c->cli.params.seed;
    return 0;
}

/* The test hook LF_TEST_URING_FAULTS=PERCENT,SEED (see pipeline.c). */
static int parse_fault_hook(srv_config *c)
{
    const char *v = getenv("LF_TEST_URING_FAULTS");
    if (!v || !*v) return 0;
    if (strcmp(v, "stuck") == 0) {
        c->uring_stuck = 1;
        return 0;
    }
    const char *comma = strchr(v, ',');
    uint64_t p;
    if (comma) {
        if (parse_u64_head(v, (size_t)(comma - v), 0, 100, &p) == 0 &&
            parse_u64(comma + 1, 0, UINT64_MAX, &c->uring_fault_seed) == 0) {
            c->uring_fault_pct = (uint32_t)p;
            return 0;
        }
    }
    fprintf(stderr, "lf-server: LF_TEST_URING_FAULTS=%s: want PERCENT(0..100),SEED or stuck\n", v);
    return -1;
}

static int parse_args(int argc, char **argv, srv_config *c)
{
    memset(c, 0, sizeof *c);
    c->epochs = 1;
    c->token_dtype = LF_DTYPE_I32;
    c->readers = 1;
    c->workers = 2;
    c->io_uring = 1;
    c->read_depth = 8;
    c->slots = 4;
    c->memory_limit = 1ull << 30;
    plan_cli_init(&c->cli);
    lf_tf_image_params_default(&c->image, 224, 224);
    c->heartbeat_ms = 1000;
    /* Thirty minutes: above a trainer's evaluation or checkpoint pauses, in
     * which it may hold prefetched batches; a hung collective fails after
     * PyTorch's NCCL timeout (ten minutes) or gloo's (thirty) anyway, but a
     * rank stopped outside a collective hangs the job for good. */
    c->stall_ms = 1800000;
    srv_job_flags ps = {0};
    int opt;
    while ((opt = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
        if (opt == 'h' || opt == O_HELP) { usage(stdout); exit(0); }
        if (opt == O_VERSION) { cli_print_version("lf-server"); exit(0); }
        if (opt == '?' || parse_opt(opt, optarg, c, &ps) != 0) {
            if (opt != '?') fprintf(stderr, "lf-server: bad value for --%s: %s%s%s\n",
                                    option_name(opt), optarg, c->cli.why[0] ? ": " : "",
                                    c->cli.why);
            fprintf(stderr, "see lf-server --help\n");
            return -1;
        }
    }
    if (optind < argc) { fprintf(stderr, "lf-server: unexpected argument %s\n", argv[optind]); return -1; }
    /* As the client does: an lf-launch'ed trainer's clients and a server
     * started in the same environment meet without --endpoint. */
    if (!c->endpoint) c->endpoint = getenv("LEVELFEED_ENDPOINT");
    if (parse_fault_hook(c)) return -1;
    return finish_config(c, &ps);
}

/* Completes the plan parameters from the data by c, as lf-plan does (one
 * definition: common/plan_cli.c): s->cfg.cli and plan, the pieces. Returns
 * plan_cli_finish's status. */
static int finish_plan(srv *s, plan_cli *c)
{
    int rc = s->plan_input.block_start ? 0 : plan_cli_input_open(&s->plan_input, s->ds);
    if (rc) return rc;
    /* drawn from the training samples alone (the first blocks): the held-out
     * set changes nothing */
    plan_cli_input_count(&s->plan_input, (size_t)s->train_samples);
    lf_plan_view v = s->plan_input.view;
    v.blocks = (uint32_t)s->train_blocks;
    c->params.view = v;
    rc = plan_cli_finish(c, plan_cli_preset_of(lf_dataset_schema(s->ds)), NULL,
                         (size_t)s->train_samples, c->params.sampler != LF_PLAN_BALANCED);
    s->cfg.cli = *c;
    s->cfg.plan = c->params;
    s->mixture = s->cfg.plan.mix.sources > 1;
    s->piece_len = lf_plan_piece_len(&s->cfg.plan);
    s->plan_samples = 0;
    lf_plan_lengths w = lf_plan_lengths_of(&s->cfg.plan, NULL, (size_t)s->train_samples,
                                           s->piece_len);
    uint64_t len, n;
    while (lf_plan_lengths_next(&w, &len, &n)) s->plan_samples += n;
    s->pieces = s->plan_samples != s->train_samples;
    /* cut once for every plan the server makes (lf_plan_cut; a completion
     * made again, the cut decided on the walk, follows srv_plan_spare_free,
     * which freed the cut before) */
    if (rc == 0 && s->pieces)
        rc = lf_plan_cut_make(&s->cfg.plan, (size_t)s->train_samples, &s->cut);
    s->cfg.plan.view.cut = s->cut;
    plan_cli_input_release(&s->plan_input);
    return rc;
}

/* Says what the completion chose (pad's cut, pack's row, pieces, what the
 * plan cannot keep), or why it refused. Returns 0 or -ECANCELED. */
static int say_plan(const srv *s, int rc)
{
    const plan_cli *c = &s->cfg.cli;
    if (rc >= 0 && c->seq_len_why[0]) fprintf(stderr, "lf-server: plan: %s\n", c->seq_len_why);
    if (rc >= 0 && c->overflow[0]) fprintf(stderr, "lf-server: plan: %s\n", c->overflow);
    if (rc >= 0 && c->note[0]) fprintf(stderr, "lf-server: plan: note: %s\n", c->note);
    if (rc >= 0) return 0;
    fprintf(stderr, "lf-server: plan: %s\n", c->why[0] ? c->why : lf_plan_strerror(rc));
    return -ECANCELED; /* reported */
}

/* The plan parameters from the data. Serving walks epoch 0 of a balanced
 * plan from epoch 0 at start-up anyway: pad's default cut is then decided
 * on that walk (plan_cli.h, defer_cut; srv_plan_prepass), not on a
 * balanced epoch planned for it alone, and what the completion says waits
 * for the decision (decide_cut). */
static int dataset_defaults(srv *s)
{
    plan_cli *c = &s->cfg.cli;
    if (plan_cli_preset_of(lf_dataset_schema(s->ds)) != LF_PLAN_PRESET_TEXT)
        c->params.overflow = LF_PLAN_OVERFLOW_DROP; /* an image or a frame sequence is not cut */
    c->defer_cut = !s->cfg.print_plan && c->params.sampler == LF_PLAN_BALANCED &&
                   c->params.epoch == 0;
    s->cli_given = *c;
    plan_cli done = *c;
    int rc = finish_plan(s, &done);
    return rc >= 0 && c->cut_pending ? 0 : say_plan(s, rc);
}

/* --token-dtype against the shards: a u16 tensor cannot hold the u32
 * tokens a shard stores (refused here rather than at the first large token). */
static int check_token_dtype(const srv *s, const lf_field_def *f)
{
    if (s->cfg.token_dtype == LF_DTYPE_U16 && s->token_in_dtype == LF_DTYPE_U32) {
        fprintf(stderr, "lf-server: --token-dtype u16: field '%s' stores u32 tokens; use u32, "
                "i32 or i64\n", f->name);
        return -ECANCELED;
    }
    return 0;
}

/* Token path: every per-token and per-sample (label_i64) field is served
 * beside the tokens under its own name, which must not be one of the
 * batch's own tensors. */
static int pick_extras(srv *s, const lf_schema *sc)
{
    for (uint32_t i = 0; i < sc->nfields; i++) {
        const lf_field_def *f = &sc->fields[i];
        if (!lf_field_is_per_token(f->type) && f->type != LF_FIELD_LABEL_I64) continue;
        if (batch_own_name(f->name)) {
            fprintf(stderr, "lf-server: field '%s' has the name of one of a token batch's own "
                    "tensors (" BATCH_OWN_NAMES "): re-create the dataset with another name "
                    "for it\n", f->name);
            return -ECANCELED;
        }
        s->extra_field[s->nextras++] = i;
    }
    return 0;
}

/* The cost field says what is served: a token array (token path), a JPEG
 * (image path) or a frame array (frames path); images and frames carry the
 * first int64 label field as labels. */
static int pick_fields(srv *s)
{
    const lf_schema *sc = lf_dataset_schema(s->ds);
    const lf_field_def *f = &sc->fields[sc->cost_field];
    s->token_field = sc->cost_field;
    s->label_field = -1;
    if (f->type == LF_FIELD_TOKENS_U16) s->token_in_dtype = LF_DTYPE_U16;
    else if (f->type == LF_FIELD_TOKENS_U32) s->token_in_dtype = LF_DTYPE_U32;
    else if (f->type == LF_FIELD_JPEG) s->images = 1;
    else if (f->type == LF_FIELD_FRAMES_F16 || f->type == LF_FIELD_FRAMES_F32 ||
             f->type == LF_FIELD_FRAMES_I16) {
        s->frames = 1;
        s->frame_width = f->row_width;
        s->frame_dtype = f->type == LF_FIELD_FRAMES_F16   ? LF_DTYPE_F16
                         : f->type == LF_FIELD_FRAMES_F32 ? LF_DTYPE_F32
                                                          : LF_DTYPE_I16;
    } else {
        fprintf(stderr, "lf-server: cost field '%s' is %s: this server serves token, JPEG "
                "and frame datasets\n", f->name, lf_field_type_name(f->type));
        return -ECANCELED;
    }
    for (uint32_t i = 0; (s->images || s->frames) && i < sc->nfields; i++)
        if (sc->fields[i].type == LF_FIELD_LABEL_I64 && s->label_field < 0) s->label_field = (int)i;
    if (s->token_in_dtype && pick_extras(s, sc) < 0) return -ECANCELED;
    if ((s->images || s->frames) && s->cfg.plan.layout == LF_PLAN_PACK) {
        fprintf(stderr, "lf-server: --layout pack is for tokens; images and frames use pad\n");
        return -ECANCELED;
    }
    if (s->cfg.micro_batches && (s->images || s->frames || s->cfg.plan.layout == LF_PLAN_PACK)) {
        fprintf(stderr, "lf-server: --micro-batches is for tokens in the pad layout (pack's "
                "micro-batches are its rows)\n");
        return -ECANCELED;
    }
    if (s->token_in_dtype && check_token_dtype(s, f) < 0) return -ECANCELED;
    if (s->images && lf_tf_image_out_size(&s->cfg.image) == 0) {
        fprintf(stderr, "lf-server: bad --image-size or --image-dtype\n");
        return -ECANCELED;
    }
    return 0;
}

static int create_ring(srv *s, srv_rank *r)
{
    char name[48];
    snprintf(name, sizeof name, "levelfeed-rank-%u", r->rank);
    r->seg_size = lf_ring_segment_size(srv_ring_slots(s), s->slot_size);
    r->memfd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (r->memfd < 0) return -errno;
    if (fchmod(r->memfd, 0600) != 0) return -errno;
    /* Reserve the memory now: a full tmpfs fails here, not as SIGBUS later. */
    int rc = posix_fallocate(r->memfd, 0, (off_t)r->seg_size);
    if (rc != 0) return -rc;
    /* The client gets this descriptor: sealed, it cannot truncate the ring
     * under the workers' mapping (their next write would be a SIGBUS that
     * kills the server and every local rank with it). */
    if (fcntl(r->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        return -errno;
    /* Populated: the workers' first writes into each slot would otherwise
     * take a page fault per page, inside the delivery. */
    void *p = mmap(NULL, r->seg_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                   r->memfd, 0);
    if (p == MAP_FAILED) return -errno;
    r->seg = p;
    lf_ring_touch(r->seg, r->seg_size);   /* here, not in the workers' writes */
    lf_ring_header_write(r->seg, r->rank, srv_ring_slots(s), s->slot_size, (uint32_t)getpid());
    r->free_slots = malloc(s->cfg.slots * sizeof *r->free_slots);
    if (!r->free_slots) return -ENOMEM;
    for (uint32_t i = s->cfg.slots; i-- > 0;) r->free_slots[r->nfree++] = i;
    for (uint32_t i = srv_ring_slots(s); i-- > s->cfg.slots;) r->eval_free[r->eval_nfree++] = i;
    return 0;
}

static void destroy_rings(srv *s)
{
    for (uint32_t li = 0; li < s->cfg.nlocal; li++) {
        srv_rank *r = &s->ranks[li];
        if (r->seg) munmap(r->seg, r->seg_size);
        if (r->memfd > 0) close(r->memfd);
        free(r->free_slots);
    }
}

/* The process's resident bytes now (VmRSS), 0 where /proc cannot say. */
static uint64_t resident_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[160];
    uint64_t kib = 0;
    while (fgets(line, sizeof line, f) && sscanf(line, "VmRSS: %" SCNu64, &kib) != 1) kib = 0;
    fclose(f);
    return kib * 1024;
}

/* What an image worker holds outside the decode accounting: its stack,
 * its workspace's scratch and the crop region of the image it decodes.
 * Measured, not derived: 16 workers on 7000x7000 progressive files grew
 * the server by 5.2 MB after start-up (2.3 MB of it the one crop region of
 * the image decoding in strips), 325 KB a worker. */
#define IMAGE_WORKER_EXTRA (320u << 10)

/* The test hook LF_TEST_CACHE_BYTES=N caps the block cache at N bytes (at
 * least two blocks), so that a test exercises eviction on a small dataset
 * whatever the process's resident memory: under ASan that is ~35 MB and
 * varies by megabytes from run to run, more than the small dataset. */
static void cache_hook(srv *s)
{
    uint64_t n;
    if (!parse_env_u64("LF_TEST_CACHE_BYTES", 0, UINT64_MAX, &n)) return;
    n = n > srv_cache_floor(s) ? n : srv_cache_floor(s);
    if (n < s->cache_limit) s->cache_limit = n;
}

/* Splits the memory limit: what the process holds already (code, shared
 * libraries, the dataset's index, the plan and its pending counts: its
 * resident memory before the rings exist) and, on the image path, what
 * its workers will hold beside it, then the rings and read buffers, the
 * rest caches. They count because the limit is meant as the server's RSS:
 * uncounted, the 7 MB base and the workers' 5 MB took 16 image workers to
 * 1.15x a 42 MiB limit (server/README.md, "JPEG decode memory").
 * Unplanned (before the walk that sizes the rings): the same check without
 * the rings, so a limit the process is over already is refused before a
 * start-up of minutes, not after it (issue #35: at 10^9 samples the default
 * 1 GiB was refused after 12 minutes of planning). */
static int budget_memory(srv *s, int planned)
{
    if (!planned) plan_cli_input_release(&s->plan_input);   /* the scans' pages */
    uint64_t base = resident_bytes() + (s->images ? (uint64_t)s->cfg.workers *
                                                    IMAGE_WORKER_EXTRA : 0);
    uint64_t rings = planned ? (uint64_t)s->cfg.nlocal *
                                   lf_ring_segment_size(srv_ring_slots(s), s->slot_size) : 0;
    uint64_t bufs = (uint64_t)s->cfg.readers * s->cfg.read_depth *
                    ((lf_dataset_max_block_stored(s->ds) + 4095u) / 4096u * 4096u);
    uint64_t min_cache = srv_cache_floor(s);
    if (base + rings + bufs + min_cache > s->cfg.memory_limit) {
        uint64_t need = base + rings + bufs + min_cache;
        fprintf(stderr, "lf-server: --memory-limit %" PRIu64 " is below rings %" PRIu64
                " + read buffers %" PRIu64 " + two blocks %" PRIu64 " + the process's own %"
                PRIu64 " (resident now: code, libraries, index, plan; and the image "
                "workers' stacks and scratch)%s; give --memory-limit %" PRIu64 "M or more%s (the "
                "default is 1G; what it leaves over them caches blocks)\n",
                s->cfg.memory_limit, rings, bufs, min_cache, base,
                planned ? "" : ", before planning: the rings are sized by the plan, 0 here",
                (need >> 20) + 1, planned ? "" : " and room for the rings");
        return -ECANCELED;
    }
    if (!planned) return 0;
    s->cache_limit = s->cfg.memory_limit - base - rings - bufs;
    cache_hook(s);
    return 0;
}

static double tv_s(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* --on-corrupt=skip: what was left out, and the first blocks by shard
 * file; then the images the transform refused, by sample and shard file. */
static void print_quarantine(const srv *s)
{
    if (!s->cfg.skip_corrupt) return;
    const srv_metrics *m = &s->m;
    fprintf(stderr, "lf-server: quarantined %" PRIu64 " samples in %" PRIu64 " blocks",
            m->quarantined_samples, m->quarantined_blocks);
    for (uint64_t i = 0; i < m->quarantined_blocks && i < SRV_QUARANTINE_LIST; i++) {
        uint64_t b = s->quarantine[i], k = 0; /* k: the block's number in its shard */
        uint32_t shard = lf_dataset_block(s->ds, b)->shard;
        while (k < b && lf_dataset_block(s->ds, b - k - 1)->shard == shard) k++;
        fprintf(stderr, "%s %s block %" PRIu64 " (dataset block %" PRIu64 ")", i ? "," : ":",
                lf_dataset_shard_path(s->ds, shard), k, b);
    }
    fprintf(stderr, "%s\n", m->quarantined_blocks > SRV_QUARANTINE_LIST ? ", ..." : "");
    if (!s->images) return;
    fprintf(stderr, "lf-server: quarantined %" PRIu64 " images the JPEG transform refuses",
            m->quarantined_images);
    for (uint64_t i = 0; i < m->quarantined_images && i < SRV_QUARANTINE_LIST; i++)
        fprintf(stderr, "%s sample %" PRIu64 " (%s)", i ? "," : ":", s->refused[i],
                srv_sample_shard(s, s->refused[i]));
    fprintf(stderr, "%s\n", m->quarantined_images > SRV_QUARANTINE_LIST ? ", ..." : "");
}

/* Each rank's end-of-run report (observe.c), a line at a time, and the
 * rank the others waited for. */
static void print_report(const srv *s)
{
    mix_cli_report(stderr, "lf-server: delivered from ", &s->cfg.mix, &s->cfg.plan.mix,
                   s->m.source_tokens);
    char buf[2048];
    for (uint32_t li = 0; li < s->cfg.nlocal; li++) {
        srv_obs_report(s, li, buf, sizeof buf);
        char *save = NULL;
        for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
            fprintf(stderr, "lf-server: %s\n", line);
    }
    double ms = 0;
    int late = srv_obs_late_rank(s, &ms);
    if (s->cfg.nlocal >= 2 && late >= 0)
        fprintf(stderr, "lf-server: report: rank %u is this node's late rank: its own work "
                "(compute and data path) takes the most time a step, %.1f ms; the others' "
                "sync wait and held-back time wait for it\n", s->ranks[late].rank, ms);
}

static void print_summary(srv *s, uint64_t elapsed_ns)
{
    const srv_metrics *m = &s->m;
    double secs = (double)elapsed_ns / 1e9;
    /* The run above counts start-up (clients connecting, the first scout)
     * and the wind-down; the steady figure is the delivery itself. */
    double steady = m->last_ready_ns > m->started_ns && m->started_ns
                        ? (double)(m->last_ready_ns - m->started_ns) / 1e9 : 0;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) memset(&ru, 0, sizeof ru);
    fprintf(stderr, "lf-server: %" PRIu64 " batches, %" PRIu64 " samples in %.2f s; read %"
            PRIu64 " bytes in %" PRIu64 " blocks, decoded %" PRIu64 ", cache %" PRIu64
            " hits / %" PRIu64 " misses / %" PRIu64 " evictions / %" PRIu64 " done\n",
            m->batches, m->samples, secs, m->bytes_read, m->blocks_read, m->blocks_decoded,
            m->cache_hits, m->cache_misses, m->evictions, m->blocks_done);
    fprintf(stderr, "lf-server: busy: plan %.3f s, read %.3f s, decode %.3f s, assemble %.3f s\n",
            (double)m->plan_busy_ns / 1e9, (double)m->read_busy_ns / 1e9,
            (double)m->decode_busy_ns / 1e9, (double)m->assemble_busy_ns / 1e9);
    fprintf(stderr, "lf-server: thread cpu: planner %.3f s, readers %.3f s, workers %.3f s "
            "(the rest of the cpu below: control and ZeroMQ threads, start-up)\n",
            (double)m->plan_cpu_ns / 1e9, (double)m->read_cpu_ns / 1e9,
            (double)m->worker_cpu_ns / 1e9);
    fprintf(stderr, "lf-server: steady %.3f s from every rank's START to the last READY; "
            "cpu user %.3f s, sys %.3f s\n", steady, tv_s(ru.ru_utime), tv_s(ru.ru_stime));
    if (m->uring_retries || s->cfg.uring_fault_pct)
        fprintf(stderr, "lf-server: io_uring: %" PRIu64 " reads resubmitted (short or -EAGAIN), "
                "%" PRIu64 " of them injected by LF_TEST_URING_FAULTS\n",
                m->uring_retries, m->uring_injected);
    print_quarantine(s);
    for (uint32_t li = 0; li < s->cfg.nlocal; li++) {
        const srv_rank *r = &s->ranks[li];
        uint64_t back, path;
        srv_obs_empty(s, li, srv_now_ns(), &back, &path);
        fprintf(stderr, "lf-server: rank %u: %" PRIu64 " batches, %" PRIu64 " samples, %" PRIu64
                " tokens, cost %.0f, compute %.3f s, sync wait %.3f s; data wait (lf_next) "
                "%.3f s, held back %.3f s, data path %.3f s%s\n", r->rank, r->m.batches,
                r->m.samples, r->m.tokens, r->m.cost, (double)r->m.compute_ns / 1e9,
                (double)r->m.sync_ns / 1e9,
                (double)r->m.wait_ns / 1e9, (double)back / 1e9, (double)path / 1e9,
                r->gone && !r->ended ? " (left early)" : "");
    }
    print_report(s);
}

/* The dataset, its fields and the plan's parameters, checked, and the plan
 * id: what --print-plan and serving share. Returns 0 or -ECANCELED
 * (reported). */
/* The training data, and with --eval-data the held-out set after it as
 * one dataset (its last source): ids, blocks and shards of the training
 * data stay what they are alone, so its plan does too. */
static int open_data(srv *s)
{
    lf_shard_error err;
    if (mix_cli_open(&s->cfg.mix, s->cfg.eval_dir, DATASET_MAPPED, &s->cfg.cli.params.mix, &s->ds,
                     &err) < 0) {
        fprintf(stderr, "lf-server: %s\n", err.msg);
        return -ECANCELED;
    }
    s->train_samples = lf_dataset_samples(s->ds);
    s->train_blocks = lf_dataset_blocks(s->ds);
    if (!s->cfg.eval_dir) return 0;
    s->train_samples = lf_dataset_source_first(s->ds, s->cfg.mix.ndata);
    s->train_blocks = s->train_samples < lf_dataset_samples(s->ds)
                          ? lf_dataset_sample_block(s->ds, s->train_samples)
                          : lf_dataset_blocks(s->ds);
    s->eval_slots = SRV_EVAL_SLOTS;
    if (s->train_samples < lf_dataset_samples(s->ds)) return 0;
    fprintf(stderr, "lf-server: --eval-data %s holds no sample\n", s->cfg.eval_dir);
    return -ECANCELED;
}

static int open_job(srv *s)
{
    int rc = open_data(s);
    if (rc < 0) return rc;
    rc = dataset_defaults(s);
    if (rc == 0) rc = pick_fields(s);
    if (rc == 0) rc = srv_plan_identify(s);
    return rc;
}

static int print_plan(srv *s)
{
    int rc = open_job(s);
    if (rc == 0 && (rc = srv_print_plan(s)) < 0)
        fprintf(stderr, "lf-server: plan: %s\n", strerror(-rc));
    srv_plan_spare_free(s);
    lf_dataset_close(s->ds);
    return rc < 0 ? 1 : 0;
}

/* Says, before the planning (after it, where pad's default cut waited on
 * its epoch 0), which plan this node serves to which ranks: every node's
 * server of a job must print the same fingerprint (the trainers compare it
 * too: docs/MULTINODE.md). */
static void print_fingerprint(const srv *s)
{
    char ranks[1024];
    srv_format_ranks(&s->cfg, ranks, sizeof ranks);
    char mix[LF_PLAN_MAX_SOURCES * 24 + 32] = "";
    for (uint32_t i = 0, n = 0; i < s->cfg.plan.mix.sources && n < sizeof mix; i++)
        n += (size_t)snprintf(mix + n, sizeof mix - n, "%s%.6f", i ? " " : "; mixture weights ",
                              s->cfg.plan.mix.weight[i] / (double)LF_PLAN_WEIGHT_ONE);
    fprintf(stderr, "lf-server: plan fingerprint %016" PRIx64 " for ranks %s of world %u "
            "(every node of the job must show the same%s)\n", s->fingerprint, ranks,
            s->cfg.world, mix);
}

/* What serving needs after the job: every epoch planned (the slot size,
 * each epoch's block uses), the memory split, the rings, the pipeline.
 * Returns 0, -EINTR (stopped by a signal while planning) or -ECANCELED
 * (reported). */
/* pad's default cut, deferred to the prepass's walk of epoch 0, decided
 * there (rc: the prepass's status, -EAGAIN where the plan cannot be
 * balanced uncut). Cut, the options are completed again with that figure
 * (the cut, as lf-plan makes it) and the job's plan is made and walked
 * anew. Either way, what dataset_defaults left unsaid is said now. Returns
 * the prepass's status or -ECANCELED (reported). */
static int decide_cut(srv *s, int rc)
{
    if (rc != 0 && rc != -EAGAIN) return rc;
    if (rc == 0) {
        if ((rc = say_plan(s, 0)) == 0 && !s->cfg.quiet) print_fingerprint(s);
        return rc;
    }
    plan_cli again = s->cli_given;
    again.cut_known = 1;
    again.cut_figure = s->cut_figure;
    srv_plan_spare_free(s);
    if ((rc = say_plan(s, finish_plan(s, &again))) < 0) return rc;
    if ((rc = srv_plan_identify(s)) < 0) return rc;
    if (!s->cfg.quiet) print_fingerprint(s);
    return srv_plan_prepass(s);
}

static int prepare(srv *s)
{
    int pending = s->cfg.cli.cut_pending;
    int rc = srv_plan_prepass(s);
    if (pending) rc = decide_cut(s, rc);
    if (rc == -EINTR || rc == -ECANCELED) return rc;
    if (rc < 0) {
        fprintf(stderr, "lf-server: plan: %s\n", strerror(-rc));
        return -ECANCELED;
    }
    if ((rc = budget_memory(s, 1)) < 0) return rc;
    s->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->notify_fd < 0) return -errno;
    for (uint32_t li = 0; li < s->cfg.nlocal; li++)
        if ((rc = create_ring(s, &s->ranks[li])) < 0) {
            fprintf(stderr, "lf-server: cannot reserve %" PRIu64 " bytes of shared memory for "
                    "rank %u's ring (%u slots of %" PRIu64 " bytes): %s; lower --slots or the "
                    "batch size, or raise the limit (memory cgroup, ulimit -f)\n",
                    s->ranks[li].seg_size, s->cfg.local[li], srv_ring_slots(s), s->slot_size,
                    strerror(-rc));
            return -ECANCELED;
        }
    if ((rc = srv_pipeline_init(s)) < 0 && rc != -ECANCELED) {
        fprintf(stderr, "lf-server: pipeline: %s\n", strerror(-rc));
        rc = -ECANCELED;
    }
    return rc;
}

/* The test hook LF_TEST_STARTUP_HOLD_MS=N: start-up stays in its planning
 * state N ms longer, answering as it does while it plans, so that
 * e2e/server_startup can show clients waiting through a planning longer
 * than their timeout on a machine of any speed (a real one takes a large
 * dataset: ~1 s at 4 M samples here). A signal ends the hold as it ends the
 * planning. */
static int startup_hold(srv *s)
{
    uint64_t ms;
    if (!parse_env_u64("LF_TEST_STARTUP_HOLD_MS", 0, 600000, &ms)) return 0;
    for (; ms > 0; ms -= ms < 10 ? ms : 10) {
        if (atomic_load_explicit(&s->startup_stop, memory_order_relaxed)) return -EINTR;
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000000L}, NULL);
    }
    return 0;
}

/* Takes the endpoint and answers on it while the job is opened and
 * planned (startup.c): a second server is refused before it plans, and
 * clients wait for the plan instead of timing out. */
static int start(srv *s, srv_endpoint *ep)
{
    srv_startup u;
    int rc = srv_endpoint_open(s->cfg.endpoint, s->cfg.job, ep);
    if (rc < 0 && rc != -ECANCELED)
        fprintf(stderr, "lf-server: cannot serve on %s: %s\n", ep->path, strerror(-rc));
    if (rc < 0) return -ECANCELED;
    if ((rc = srv_startup_begin(s, ep, &u)) < 0) return rc;
    rc = open_job(s);
    if (rc == 0 && !s->cfg.quiet && !s->cfg.cli.cut_pending) print_fingerprint(s);
    if (rc == 0) rc = budget_memory(s, 0);
    if (rc == 0) rc = prepare(s);
    if (rc == 0) rc = startup_hold(s);
    int sig = srv_startup_end(&u);
    if (sig) {
        fprintf(stderr, "lf-server: stopped by signal %d while planning\n", sig);
        rc = -ECANCELED;
    }
    return rc;
}

int main(int argc, char **argv)
{
    static srv s; /* large: ranks[] */
    if (parse_args(argc, argv, &s.cfg) != 0) return 2;
    raise_open_file_limit(); /* one descriptor per shard file */
    signal(SIGPIPE, SIG_IGN);
    /* A file-size limit then fails the rings' fallocate with EFBIG, reported
     * at start-up, instead of killing the server. */
    signal(SIGXFSZ, SIG_IGN);
    if (s.cfg.print_plan) return print_plan(&s);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv_plan, NULL);
    pthread_cond_init(&s.cv_read, NULL);
    pthread_cond_init(&s.cv_work, NULL);
    pthread_cond_init(&s.cv_catchup, NULL);
    pthread_cond_init(&s.cv_decode, NULL);
    s.notify_fd = -1;
    for (uint32_t li = 0; li < s.cfg.nlocal; li++) s.ranks[li].rank = s.cfg.local[li];
    /* From here SIGINT/SIGTERM arrive through the endpoint's signalfd, read
     * by the start-up thread, then the control thread (every thread
     * inherits the mask), so they end the run cleanly. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    srv_endpoint ep = {.lockfd = -1, .listenfd = -1, .sigfd = -1};
    int rc = start(&s, &ep);
    uint64_t t0 = srv_now_ns();
    if (rc == 0) rc = srv_control_run(&s, &ep);
    srv_endpoint_close(&ep);
    /* Nobody reads the signalfd now: a second SIGINT or SIGTERM ends the
     * process at once, as users expect when a thread is stuck in I/O below.
     * Nothing is lost: the sockets are already removed and the rings are
     * memfds, freed with the process. */
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    srv_pipeline_stop(&s);
    /* -ECANCELED was reported where it happened. */
    if (s.failed) fprintf(stderr, "lf-server: error: %s\n", s.fail_msg);
    else if (rc < 0 && rc != -EINTR && rc != -ECANCELED && rc > -4096)
        fprintf(stderr, "lf-server: %s\n", strerror(-rc));
    if (s.serving && !s.cfg.quiet) print_summary(&s, srv_now_ns() - t0);
    destroy_rings(&s);
    free(s.epoch_uses);
    free(s.epoch_steps);
    free(s.eval_set);
    srv_plan_spare_free(&s);
    if (s.notify_fd >= 0) close(s.notify_fd);
    lf_dataset_close(s.ds);
    return rc == 0 && !s.failed ? 0 : 1; /* a thread may fail after the last rank left */
}
