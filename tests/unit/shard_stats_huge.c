/*
 * shard_stats_huge.c — `lf-shard stats` on costs past 2^53.
 *
 * A JPEG field's cost is width x height from the index, which a forged
 * index (or the writer, given such sizes) can set to any 64-bit value. The
 * histogram once placed its edges with doubles: past 2^53 the top edge fell
 * below the largest value, the bin search ran past the array and wrote out
 * of bounds (AddressSanitizer: stack-buffer-overflow), and the samples it
 * counted there were missing from the output. Every sample must be counted
 * once, the last bin must end at the maximum, and the command must exit 0.
 */
#include "lf_shard.h"
#include "test.h"

#include <jansson.h>

static const uint32_t sides[] = {1, 300, 70000, 0x8000001, 0xFFFFFFFFu};
#define NSIDES (sizeof sides / sizeof sides[0])

int main(void)
{
    const char *bin = getenv("LF_BIN");
    if (!bin || !*bin) TEST_SKIP("LF_BIN not set (run through tests/run.sh)");
    char dir[600], cmd[1400];
    snprintf(dir, sizeof dir, "%.500s/huge", test_tmpdir());
    lf_schema sc = {.nfields = 1, .cost_field = 0};
    strcpy(sc.fields[0].name, "image");
    sc.fields[0].type = LF_FIELD_JPEG;
    lf_writer *w;
    lf_shard_error err;
    ASSERT_EQ(lf_writer_create(dir, &sc, NULL, &w, &err), 0);
    unsigned char bytes[16] = {0};
    for (size_t i = 0; i < NSIDES; i++) {
        lf_field_input in = {.data = bytes, .size = sizeof bytes, .width = sides[i],
                             .height = sides[i]};
        ASSERT_GE(lf_writer_add(w, &in, &err), 0);
    }
    ASSERT_EQ(lf_writer_finish(w, NULL, &err), 0);

    snprintf(cmd, sizeof cmd, "'%.600s/lf-shard' stats '%.600s' --json", bin, dir);
    FILE *p = popen(cmd, "r");
    ASSERT_TRUE(p != NULL);
    json_error_t je;
    json_t *o = json_loadf(p, 0, &je);
    ASSERT_EQ(pclose(p), 0);
    if (!o) TEST_FAIL_("lf-shard stats --json: not JSON: %s", je.text);
    json_t *hist = json_object_get(o, "histogram");
    ASSERT_TRUE(json_is_array(hist) && json_array_size(hist) > 0);
    uint64_t counted = 0;
    size_t i;
    json_t *bin_obj;
    json_array_foreach(hist, i, bin_obj) counted += (uint64_t)json_integer_value(
        json_object_get(bin_obj, "count"));
    ASSERT_EQ(counted, NSIDES);
    /* The top bin ends at the largest cost; jansson's integers are signed,
     * so it reads back as the same 64 bits. */
    uint64_t max = (uint64_t)sides[NSIDES - 1] * sides[NSIDES - 1];
    json_t *last = json_array_get(hist, json_array_size(hist) - 1);
    ASSERT_EQ((uint64_t)json_integer_value(json_object_get(last, "hi")), max);
    ASSERT_EQ((uint64_t)json_integer_value(json_object_get(o, "max")), max);
    json_decref(o);
    printf("stats: %zu costs up to %llu, each counted once\n", NSIDES, (unsigned long long)max);
    return 0;
}
