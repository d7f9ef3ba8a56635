/*
 * json_line.c — differential fuzz target for lf-shard's JSON line parser
 * (tools/lf-shard/json_line.c) against jansson, the DOM parser it replaced.
 *
 * Input: one JSONL line. Whenever jansson reads it as an object whose
 * "tokens" member is an array of integers in 0..UINT32_MAX, the parser must
 * accept it with the same ids; whenever "text" is a string, the same bytes.
 * The other way, an ASCII line the parser accepts jansson must accept too,
 * unless jansson refuses a duplicate key the parser does not look for.
 * Lines nested deeper than the parser's 512 levels (jansson allows 2048)
 * and lines with a NUL byte are left out of the comparison.
 */
#include "../../tools/lf-shard/json_line.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct sink {
    uint64_t *ids;
    char *bytes;
    size_t n;
} sink;

static int on_id(void *arg, size_t index, uint64_t id)
{
    sink *s = arg;
    if (id == JL_NOT_AN_ID || index != s->n)
        return -1;
    s->ids[s->n++] = id;
    return 0;
}

static int on_text(void *arg, const char *bytes, size_t n)
{
    sink *s = arg;
    memcpy(s->bytes + s->n, bytes, n);
    s->n += n;
    return 0;
}

/* Runs the parser for `field`: 0 when it accepts (s filled). */
static int parse(const uint8_t *data, size_t size, const char *field, int text, sink *s)
{
    char msg[512];
    jl_field f = {.name = field, .text = text, .on_id = on_id, .on_text = on_text, .arg = s,
                  .msg = msg, .msg_size = sizeof msg};
    s->n = 0;
    return jl_take_field((const char *)data, size, &f);
}

/* 1 when jansson's `v` is an array of ids, which must then equal s's. */
static int ids_match(json_t *v, const sink *s)
{
    size_t i;
    json_t *e;
    if (json_array_size(v) != s->n)
        return 0;
    json_array_foreach(v, i, e)
        if ((uint64_t)json_integer_value(e) != s->ids[i])
            return 0;
    return 1;
}

static int all_ids(json_t *v)
{
    size_t i;
    json_t *e;
    if (!json_is_array(v))
        return 0;
    json_array_foreach(v, i, e)
        if (!json_is_integer(e) || json_integer_value(e) < 0 ||
            json_integer_value(e) > (json_int_t)UINT32_MAX)
            return 0;
    return 1;
}

/* 1 for a line left out: nested too deep to compare, or holding a NUL byte
 * (never valid there; jansson's reader takes it for the end of its input).
 * *binary: a byte past ASCII (jansson checks UTF-8, the parser does not). */
static int left_out(const uint8_t *data, size_t size, int *binary)
{
    size_t open = 0;
    *binary = 0;
    for (size_t i = 0; i < size; i++) {
        if (data[i] == 0)
            return 1;
        open += data[i] == '[' || data[i] == '{';
        *binary |= data[i] >= 0x80;
    }
    return open > 512;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int binary;
    if (left_out(data, size, &binary))
        return 0;
    sink s = {malloc((size + 1) * sizeof *s.ids), malloc(size + 1), 0};
    if (!s.ids || !s.bytes)
        abort();
    json_error_t err;
    json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL,
                              &err);
    json_t *tokens = json_is_object(root) ? json_object_get(root, "tokens") : NULL;
    json_t *text = json_is_object(root) ? json_object_get(root, "text") : NULL;
    int ok_ids = parse(data, size, "tokens", 0, &s) == 0;
    if (tokens && all_ids(tokens) && (!ok_ids || !ids_match(tokens, &s)))
        abort();
    if (ok_ids && !root && !binary && !strstr(err.text, "duplicate"))
        abort();
    int ok_text = parse(data, size, "text", 1, &s) == 0;
    if (json_is_string(text) && (!ok_text || s.n != json_string_length(text) ||
                                 memcmp(s.bytes, json_string_value(text), s.n) != 0))
        abort();
    json_decref(root);
    free(s.bytes);
    free(s.ids);
    return 0;
}
