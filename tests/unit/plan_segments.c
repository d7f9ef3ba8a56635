/*
 * plan_segments.c — a view whose lengths lie in several arrays
 * (lf_plan_segments: a union of datasets, each source's index.lfx mapped
 * on its own; issue #35: no copy of 4 bytes a sample on every node).
 *   - every sample's length read through the segments is the array's, with
 *     segments of odd sizes: shorter than a chunk (2^12 samples), of one
 *     sample, empty, ending one past a chunk's start, several in a chunk;
 *     each segment its own allocation, so a sample read from the wrong one
 *     (or at the wrong offset) reads another length;
 *   - a plan of the segmented view is the plan of the one-array view, step
 *     for step and state for state: balanced, naive, sorted, a mixture,
 *     pack with samples cut into pieces (and its budget), and the digest;
 *     its release is called as the array view's is;
 *   - a chunk table that is not the segments' is refused (LF_PLAN_E_ARG);
 *   - plan_cli_input of a union of datasets (two index-only, one of bytes,
 *     joined by mix_cli_open as lf-plan and lf-server open them) reads each
 *     source's mapped lengths in place: no copy (`own`), the view's
 *     segments those of the sources, every length the dataset's; and the
 *     union of index-only sources refuses a read, naming the block's
 *     source; plan_cli_input_release drops every source's pages read
 *     (none of their whole pages is left in the process: pagemap); an
 *     index-only source read from its index.lfx joined with one that has
 *     a per-sample table is refused, naming it.
 */
#include "unit/shard_gen.h"
#include "index_only.h"
#include "lf_plan.h"
#include "mix_cli.h"
#include "plan_cli.h"

#define N 50000u
#define BLOCK 64u

static uint32_t lengths[N];
static uint32_t block_start[N / BLOCK + 2];
static lf_plan_segments seg;
static uint8_t chunk[N / 4096 + 2];
/* the sizes of the segments, the last one taking the rest */
static const uint32_t sizes[] = {1000, 0, 4097, 3, 0, 12345, 1, 4096, 2, 0};
#define NSEG (sizeof sizes / sizeof sizes[0] + 1)

static size_t releases;
static void count_release(void *arg)
{
    ++*(size_t *)arg;
}

/* Each segment a copy of its part of lengths, in an allocation of its own
 * with a poisoned length either side. */
static void make_segments(void)
{
    uint64_t at = 0;
    seg.count = NSEG;
    for (uint32_t k = 0; k < NSEG; k++) {
        uint64_t n = k + 1 < NSEG ? sizes[k] : N - at;
        uint32_t *a = malloc((n + 2) * sizeof *a);
        ASSERT_TRUE(a != NULL);
        a[0] = a[n + 1] = 0xdead;
        memcpy(a + 1, lengths + at, n * sizeof *a);
        seg.lengths[k] = n ? a + 1 : NULL;   /* an empty one: never read */
        if (!n) free(a);
        seg.first[k] = at;
        at += n;
    }
    seg.first[NSEG] = at;
    ASSERT_EQ(at, N);
    ASSERT_EQ(lf_plan_segments_chunks(N), N / 4096 + 1);
    ASSERT_EQ(lf_plan_segments_index(&seg, chunk), 0);
}

static void free_segments(void)
{
    for (uint32_t k = 0; k < NSEG; k++)
        if (seg.lengths[k]) free((uint32_t *)(uintptr_t)(seg.lengths[k] - 1));
}

static void check_reads(void)
{
    lf_plan_view v = {.segments = &seg};
    for (uint32_t i = 0; i < N; i++) {
        ASSERT_EQ(lf_plan_segments_at(&seg, i), lengths[i]);
        ASSERT_EQ(lf_plan_view_length(&v, i), lengths[i]);
    }
    /* a bad description is refused */
    lf_plan_segments bad = seg;
    uint8_t c2[sizeof chunk];
    bad.first[2] = bad.first[3] + 1;   /* not ascending */
    ASSERT_EQ(lf_plan_segments_index(&bad, c2), LF_PLAN_E_ARG);
    bad = seg;
    bad.lengths[2] = NULL;             /* a non-empty segment without lengths */
    ASSERT_EQ(lf_plan_segments_index(&bad, c2), LF_PLAN_E_ARG);
    bad = seg;
    bad.count = LF_PLAN_MAX_SEGMENTS + 1;
    ASSERT_EQ(lf_plan_segments_index(&bad, c2), LF_PLAN_E_ARG);
}

/* The parameters: the array view (segmented 0) or the segmented one. */
static void params(lf_plan_params *p, int sampler, int segmented)
{
    lf_plan_params_default(p);
    p->world = 16;
    p->sampler = sampler;
    p->batch_per_rank = 8;
    p->step_budget = lf_plan_cost(&p->cost, 1200) * 8 * 16;
    uint32_t blocks = (N + BLOCK - 1) / BLOCK;
    for (uint32_t b = 0; b < blocks; b++) block_start[b] = BLOCK * b;
    block_start[blocks] = N;
    p->view = (lf_plan_view){.lengths = segmented ? NULL : lengths,
                             .segments = segmented ? &seg : NULL,
                             .block_start = block_start, .blocks = blocks,
                             .release = count_release, .release_arg = &releases};
}

/* Plans of the two views under the same parameters (tweak: what to change
 * in both), stepped in lockstep through an epoch and into the next: the
 * same steps, layouts and states; the releases as many. */
static void check_same(int sampler, void (*tweak)(lf_plan_params *))
{
    lf_plan_params pa, ps;
    params(&pa, sampler, 0);
    params(&ps, sampler, 1);
    if (tweak) {
        tweak(&pa);
        tweak(&ps);
    }
    lf_plan *a = NULL, *s = NULL;
    releases = 0;
    ASSERT_EQ(lf_plan_create(&pa, NULL, N, &a), 0);
    size_t ra = releases;
    releases = 0;
    ASSERT_EQ(lf_plan_create(&ps, NULL, N, &s), 0);
    ASSERT_EQ(releases, ra);
    static unsigned char ba[1 << 20], bs[1 << 20];
    long na = lf_plan_state_save(a, ba, sizeof ba), ns = lf_plan_state_save(s, bs, sizeof bs);
    ASSERT_TRUE(na > 0 && na == ns && memcmp(ba, bs, (size_t)na) == 0);
    int epochs = 0;
    for (int i = 0; i < 20000 && epochs < 2; i++) {
        lf_plan_step sa, ss;
        int ka = lf_plan_next_step(a, &sa), ks = lf_plan_next_step(s, &ss);
        ASSERT_EQ(ka, ks);
        ASSERT_GE(ka, 0);
        if (ka == 0) {
            epochs++;
            continue;
        }
        ASSERT_EQ(sa.nsamples, ss.nsamples);
        ASSERT_TRUE(memcmp(sa.ids, ss.ids, sa.nsamples * sizeof *sa.ids) == 0);
        ASSERT_TRUE(memcmp(sa.rank_start, ss.rank_start, 17 * sizeof(uint32_t)) == 0);
        ASSERT_TRUE(memcmp(sa.rank_cost, ss.rank_cost, 16 * sizeof(uint64_t)) == 0);
        ASSERT_TRUE(memcmp(sa.rank_tokens, ss.rank_tokens, 16 * sizeof(uint64_t)) == 0);
        lf_plan_batch x, y;
        uint32_t r = (uint32_t)i % 16;
        ASSERT_EQ(lf_plan_rank_batch(a, r, &x), 0);
        ASSERT_EQ(lf_plan_rank_batch(s, r, &y), 0);
        ASSERT_EQ(x.nsamples, y.nsamples);
        ASSERT_TRUE(memcmp(x.ids, y.ids, x.nsamples * sizeof *x.ids) == 0);
        ASSERT_TRUE(memcmp(x.lengths, y.lengths, x.nsamples * sizeof *x.lengths) == 0);
        for (uint32_t j = 0; j < y.nsamples; j++)   /* the lengths are the samples' */
            if (lf_plan_piece_index(y.ids[j]) == 0 && !lf_plan_piece_len(&ps))
                ASSERT_EQ(y.lengths[j], lengths[y.ids[j]]);
    }
    ASSERT_EQ(epochs, 2);
    na = lf_plan_state_save(a, ba, sizeof ba);
    ns = lf_plan_state_save(s, bs, sizeof bs);
    ASSERT_TRUE(na > 0 && na == ns && memcmp(ba, bs, (size_t)na) == 0);
    lf_plan_counts ca, cs;
    lf_plan_counts_get(a, &ca);
    lf_plan_counts_get(s, &cs);
    ASSERT_EQ(ca.epoch, cs.epoch);   /* field by field: the struct has padding */
    ASSERT_EQ(ca.emitted, cs.emitted);
    ASSERT_EQ(ca.rejected, cs.rejected);
    ASSERT_EQ(ca.rejected_cap, cs.rejected_cap);
    ASSERT_EQ(ca.pending, cs.pending);
    ASSERT_EQ(ca.rejected_tokens, cs.rejected_tokens);
    lf_plan_free(a);
    lf_plan_free(s);
}

static void mixture(lf_plan_params *p)
{
    p->mix.sources = 2;
    p->mix.weight[0] = 600000;
    p->mix.weight[1] = 400000;
    p->mix.first[1] = 25600;   /* a block's start */
}

static void pack_pieces(lf_plan_params *p)
{
    p->layout = LF_PLAN_PACK;
    p->seq_len = 4096;   /* longer samples cut into pieces: read while creating */
}

static void check_pack_budget(void)
{
    lf_plan_params pa, ps;
    params(&pa, LF_PLAN_BALANCED, 0);
    params(&ps, LF_PLAN_BALANCED, 1);
    pack_pieces(&pa);
    pack_pieces(&ps);
    uint64_t ba = 0, bs = 1;
    ASSERT_EQ(lf_plan_pack_budget(&pa, NULL, N, 4, &ba), 0);
    ASSERT_EQ(lf_plan_pack_budget(&ps, NULL, N, 4, &bs), 0);
    ASSERT_EQ(ba, bs);
}

static void check_digest(void)
{
    lf_plan_params pa, ps;
    params(&pa, LF_PLAN_BALANCED, 0);
    params(&ps, LF_PLAN_BALANCED, 1);
    ASSERT_EQ(lf_plan_view_digest(&ps.view, N), lf_plan_view_digest(&pa.view, N));
    /* given as the index summary would give it, the plan takes it */
    ps.view.digest = pa.view.digest = lf_plan_view_digest(&pa.view, N);
    ps.view.digest_n = pa.view.digest_n = N;
    ps.view.digest++;   /* a wrong one moves the state: it was taken, not read */
    lf_plan *a, *s;
    ASSERT_EQ(lf_plan_create(&pa, NULL, N, &a), 0);
    ASSERT_EQ(lf_plan_create(&ps, NULL, N, &s), 0);
    static unsigned char ba[1 << 20], bs[1 << 20];
    long na = lf_plan_state_save(a, ba, sizeof ba), ns = lf_plan_state_save(s, bs, sizeof bs);
    ASSERT_TRUE(na > 0 && na == ns && memcmp(ba, bs, (size_t)na) != 0);
    lf_plan_free(a);
    lf_plan_free(s);
}

/* A chunk entry that is not the segment of its run's first sample, or a
 * view of more samples than its segments hold: refused. */
static void check_refused(void)
{
    lf_plan_params p;
    params(&p, LF_PLAN_BALANCED, 1);
    lf_plan *plan = NULL;
    chunk[3]++;
    ASSERT_EQ(lf_plan_create(&p, NULL, N, &plan), LF_PLAN_E_ARG);
    chunk[3] -= 2;
    ASSERT_EQ(lf_plan_create(&p, NULL, N, &plan), LF_PLAN_E_ARG);
    chunk[3]++;
    seg.first[NSEG]--;
    ASSERT_EQ(lf_plan_create(&p, NULL, N, &plan), LF_PLAN_E_ARG);
    seg.first[NSEG]++;
    ASSERT_EQ(lf_plan_create(&p, NULL, N, &plan), 0);
    lf_plan_free(plan);
}

/* ---- a union of datasets, as lf-plan and lf-server open it -------------- */

static uint64_t idx_len(void *arg, uint64_t i)
{
    return 1 + (i * 7919 + (uint64_t)(uintptr_t)arg) % 9000;
}

static void idx_block(void *arg, uint64_t b, uint32_t *n, uint32_t *raw)
{
    (void)arg;
    (void)b;
    *n = 16;
    *raw = 100;
}

/* An index-only dataset of n samples (blocks of 16) in dir, its lengths
 * idx_len's with `salt`. */
static void make_index_only(const char *dir, uint64_t n, uintptr_t salt)
{
    index_only d = {.samples = n, .seed = 1, .len_median = 600, .len_sigma = 1, .len_min = 1,
                    .len_max = 9000, .block_samples = 16};
    char why[512];
    if (index_only_write(dir, &d, why, sizeof why) != 0) TEST_FAIL_("%s", why);
    lf_index_spec spec = {.samples = n, .blocks = n / 16, .block = idx_block,
                          .length = idx_len, .arg = (void *)salt};
    lf_shard_error err;
    if (lf_index_write(dir, &spec, &err) != 0) TEST_FAIL_("index: %s", err.msg);
}

/* Whole pages of [p, p + bytes) that are in the process (/proc/self/pagemap's
 * present bit: a page dropped by MADV_DONTNEED is not, until read again);
 * -1 where pagemap cannot be read. */
static long pages_present(const void *p, size_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + (uintptr_t)page - 1) / (uintptr_t)page;
    uintptr_t e = ((uintptr_t)p + bytes) / (uintptr_t)page;
    FILE *f = fopen("/proc/self/pagemap", "rb");
    long present = 0;
    for (uintptr_t v = a; f && v < e; v++) {
        uint64_t entry;
        if (fseek(f, (long)(v * 8), SEEK_SET) != 0 || fread(&entry, 8, 1, f) != 1) {
            fclose(f);
            return -1;
        }
        present += (long)(entry >> 63);
    }
    if (f) fclose(f);
    return f ? present : -1;
}

/* The whole pages of the segments' lengths in the process. */
static long input_pages(const plan_cli_input *in)
{
    long sum = 0;
    for (uint32_t s = 0; s < in->seg.count; s++) {
        long k = pages_present(in->seg.lengths[s],
                               (size_t)(in->seg.first[s + 1] - in->seg.first[s]) * 4);
        if (k < 0) return -1;
        sum += k;
    }
    return sum;
}

static void check_union(const char *root, unsigned flags)
{
    char a[4200], b[4200], c[4200];
    snprintf(a, sizeof a, "%s/io-a", root);
    snprintf(b, sizeof b, "%s/io-b", root);
    snprintf(c, sizeof c, "%s/bytes-c", root);
    mix_cli m = {.ndata = 2, .nweight = 2, .data = {a, b}, .weight = {0.5, 0.5}};
    lf_plan_mix mix = {.sources = 2};
    lf_dataset *ds;
    lf_shard_error err;
    if (mix_cli_open(&m, c, flags, &mix, &ds, &err) != 0) TEST_FAIL_("open: %s", err.msg);
    ASSERT_EQ(lf_dataset_sources(ds), 3);
    ASSERT_EQ(mix.first[1], 4096 + 48);
    ASSERT_EQ(lf_dataset_index_only(ds), 1);   /* an index-only source makes it one */
    plan_cli_input in;
    ASSERT_EQ(plan_cli_input_open(&in, ds), 0);
    ASSERT_TRUE(in.own == NULL);                /* no copy of the lengths */
    ASSERT_TRUE(in.view.lengths == NULL && in.view.segments == &in.seg);
    ASSERT_EQ(in.seg.count, 3);
    for (uint32_t s = 0; s < 3; s++) {
        ASSERT_EQ(in.seg.first[s], lf_dataset_source_first(ds, s));
        ASSERT_TRUE(in.seg.lengths[s] == lf_dataset_source_lengths(ds, s));
    }
    ASSERT_EQ(in.n, lf_dataset_samples(ds));
    for (size_t i = 0; i < in.n; i++)
        ASSERT_EQ(lf_plan_view_length(&in.view, i), lf_dataset_sample_length(ds, i));
    uint64_t total = 0;   /* the counts are of every sample */
    for (uint32_t l = 0; in.view.hist && l < in.view.hist_len; l++) total += in.view.hist[l];
    ASSERT_EQ(total, in.n);
    long touched = input_pages(&in);
    plan_cli_input_release(&in);   /* each source's pages leave: read again after */
    if (touched >= 0) {            /* pagemap readable */
        ASSERT_GT(touched, 0);
        ASSERT_EQ(input_pages(&in), 0);
    }
    ASSERT_EQ(lf_plan_view_length(&in.view, in.n - 1), lf_dataset_sample_length(ds, in.n - 1));
    /* a read is refused naming the block's source, an index-only one */
    uint8_t buf[1 << 16];
    uint64_t blk = lf_dataset_sample_block(ds, 4096 + 48 + 5);
    ASSERT_EQ(lf_dataset_read_block(ds, blk, buf, sizeof buf, &err), LF_SHARD_E_ARG);
    ASSERT_TRUE(strstr(err.msg, "io-b") != NULL && strstr(err.msg, "index-only") != NULL);
    plan_cli_input_free(&in);
    lf_dataset_close(ds);
}

int main(void)
{
    uint64_t st = 35;
    for (uint32_t i = 0; i < N; i++) {
        uint64_t r = test_rng(&st);
        lengths[i] = (uint32_t)(r % 97 == 0 ? 5000 + r % 20000 : 32 + r % 2500);
    }
    make_segments();
    check_reads();
    check_same(LF_PLAN_BALANCED, NULL);
    check_same(LF_PLAN_NAIVE, NULL);
    check_same(LF_PLAN_SORTED, NULL);
    check_same(LF_PLAN_BALANCED, mixture);
    check_same(LF_PLAN_NAIVE, mixture);
    check_same(LF_PLAN_BALANCED, pack_pieces);
    check_pack_budget();
    check_digest();
    check_refused();
    free_segments();

    const char *root = test_tmpdir();
    char a[4200], b[4200], c[4200];
    snprintf(a, sizeof a, "%s/io-a", root);
    snprintf(b, sizeof b, "%s/io-b", root);
    snprintf(c, sizeof c, "%s/bytes-c", root);
    make_index_only(a, 4096 + 48, 3);   /* a segment ending inside a chunk */
    make_index_only(b, 3200, 11);       /* one shorter than a chunk */
    lf_schema s = {.nfields = 1, .cost_field = 0};
    snprintf(s.fields[0].name, sizeof s.fields[0].name, "tokens");
    s.fields[0].type = LF_FIELD_TOKENS_U16;   /* an index-only dataset's schema */
    lf_writer_options o = {.block_bytes = 8192, .shard_bytes = 64 << 10, .threads = 2};
    gen_write(c, &s, &o, 700);
    lf_shard_error err;
    if (lf_dataset_write_index(c, &err) != 0) TEST_FAIL_("write index: %s", err.msg);
    check_union(root, DATASET_LENGTHS);   /* lf-plan's open */
    check_union(root, DATASET_MAPPED);    /* lf-server's */

    /* an index-only dataset without index.lfx (its lengths drawn into a
     * per-sample table) with one read from it: the mapped one cannot be
     * opened again with a table, so the join is refused, naming it */
    char d[4200];
    snprintf(d, sizeof d, "%s/io-d", root);
    index_only desc = {.samples = 64, .seed = 1, .len_median = 600, .len_sigma = 1,
                       .len_min = 1, .len_max = 9000, .block_samples = 16};
    char why[512];
    if (index_only_write(d, &desc, why, sizeof why) != 0) TEST_FAIL_("%s", why);
    char lfx[4300];   /* written beside it now: taken away, as made before */
    snprintf(lfx, sizeof lfx, "%s/%s", d, LF_INDEX_NAME);
    ASSERT_EQ(unlink(lfx), 0);
    snprintf(lfx, sizeof lfx, "%s/%s", d, LF_INDEX_SUMMARY_NAME);
    unlink(lfx);
    mix_cli m = {.ndata = 2, .nweight = 2, .data = {a, d}, .weight = {0.5, 0.5}};
    lf_plan_mix mix = {.sources = 2};
    lf_dataset *ds = NULL;
    ASSERT_EQ(mix_cli_open(&m, NULL, DATASET_LENGTHS, &mix, &ds, &err), LF_SHARD_E_ARG);
    ASSERT_TRUE(strstr(err.msg, "io-a") && strstr(err.msg, "cannot be joined"));
    return 0;
}
