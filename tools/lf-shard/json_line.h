/*
 * json_line.h — takes one field out of a JSON Lines line without building a
 * tree: the ids of an array of integers, or the bytes of a string.
 */
#ifndef LF_SHARD_JSON_LINE_H
#define LF_SHARD_JSON_LINE_H

#include <stddef.h>
#include <stdint.h>

/* Given to an id callback for an array element that is not an integer in
 * 0..UINT32_MAX (a negative number, a fraction, a string, ...). */
#define JL_NOT_AN_ID UINT64_MAX

typedef struct jl_field {
    const char *name;            /* the key to find in the line's top-level object */
    int text;                    /* it must hold a string; else an array of ids */
    /* Array elements in order (index from 0). */
    int (*on_id)(void *arg, size_t index, uint64_t id);
    /* The string's decoded bytes, in pieces. */
    int (*on_text)(void *arg, const char *bytes, size_t n);
    void *arg;
    char *msg;                   /* what is wrong, when jl_take_field returns -1 */
    size_t msg_size;
    /* When set, array elements go here instead of on_id, as signed values:
     * ok is 0 for one that is not an integer in int64's range. */
    int (*on_int)(void *arg, size_t index, int64_t v, int ok);
    int scalar;                  /* the member is one number (on_int, index 0), not an array */
} jl_field;

/* Parses `line` (len bytes, its newline optional) as one JSON object and
 * feeds field f->name to the callbacks. The whole line is checked: syntax,
 * the field present once, of the right type. Returns 0; a callback's
 * non-zero result as is (parsing stops there); or -1 with f->msg set.
 * Memory: none besides the callbacks' (nesting is bounded at 512 levels). */
int jl_take_field(const char *line, size_t len, const jl_field *f);

#endif
