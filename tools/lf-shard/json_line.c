/*
 * json_line.c — one field out of a JSON object line, without a tree.
 *
 * A JSONL line of an LLM corpus is one object with one big member: an array
 * of token ids or a document's text. A DOM parser (jansson) holds each array
 * element as a separate heap object, some 20 times the line's size: a 100 MB
 * line took 2.2 GB. This parser walks the line once, left to right, and hands
 * the wanted member's ids or decoded bytes to the caller as it meets them;
 * every other member is checked and skipped. So memory is the caller's
 * output, and a recursion of at most JL_DEPTH_MAX frames for nested values.
 *
 * It is strict JSON (RFC 8259): what it accepts json.loads accepts, apart
 * from duplicate keys other than the wanted one, which are not looked for,
 * and bytes that are not UTF-8 inside strings, which are passed through.
 * Errors name the column (1-based byte offset) where the line stops being
 * JSON, or say that the line ended first.
 */
#include "json_line.h"

#include <stdio.h>
#include <string.h>

#define JL_DEPTH_MAX 512

typedef struct cursor {
    const char *s;
    size_t n;                    /* bytes in s */
    size_t i;                    /* next byte to look at */
    const jl_field *f;
    int found;                   /* the wanted member was met */
} cursor;

typedef int (*bytes_fn)(void *arg, const char *bytes, size_t n);

static int syntax(cursor *c, const char *what)
{
    if (c->i >= c->n)
        snprintf(c->f->msg, c->f->msg_size, "invalid JSON at the end of the line: %s", what);
    else
        snprintf(c->f->msg, c->f->msg_size, "invalid JSON at column %zu: %s", c->i + 1, what);
    return -1;
}

static void skip_ws(cursor *c)
{
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\n' ||
                           c->s[c->i] == '\r'))
        c->i++;
}

/* The next byte, or 0 at the end of the line (never valid where it is asked). */
static char peek(const cursor *c)
{
    return c->i < c->n ? c->s[c->i] : 0;
}

static int is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* ---- strings ------------------------------------------------------------------ */

static int hex4(cursor *c, unsigned *out)
{
    unsigned v = 0;
    for (int k = 0; k < 4; k++, c->i++) {
        char ch = peek(c);
        unsigned d = is_digit(ch) ? (unsigned)(ch - '0')
                   : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10)
                   : ch >= 'A' && ch <= 'F' ? (unsigned)(ch - 'A' + 10) : 16u;
        if (d == 16)
            return syntax(c, "expected 4 hex digits after \\u");
        v = v * 16 + d;
    }
    *out = v;
    return 0;
}

/* A \uXXXX escape (c->i on the 'u'), a surrogate pair taken whole, as UTF-8. */
static int unicode_escape(cursor *c, char *out, size_t *len)
{
    unsigned cp, lo;
    c->i++;
    if (hex4(c, &cp) < 0)
        return -1;
    if (cp >= 0xdc00 && cp <= 0xdfff)
        return syntax(c, "a low surrogate \\u escape without a high one before it");
    if (cp >= 0xd800 && cp <= 0xdbff) {
        if (c->i + 1 >= c->n || c->s[c->i] != '\\' || c->s[c->i + 1] != 'u')
            return syntax(c, "a high surrogate \\u escape without a low one after it");
        c->i += 2;
        if (hex4(c, &lo) < 0)
            return -1;
        if (lo < 0xdc00 || lo > 0xdfff)
            return syntax(c, "a high surrogate \\u escape without a low one after it");
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    }
    c->i--;                      /* the caller steps over the escape's last byte */
    if (cp < 0x80) {
        out[0] = (char)cp;
        *len = 1;
    } else if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        *len = 2;
    } else if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        *len = 3;
    } else {
        out[0] = (char)(0xf0 | cp >> 18);
        out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
        out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[3] = (char)(0x80 | (cp & 0x3f));
        *len = 4;
    }
    return 0;
}

/* One escape after its backslash (c->i on the letter) into out. */
static int escape(cursor *c, char *out, size_t *len)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    char ch = peek(c);
    if (ch == 'u')
        return unicode_escape(c, out, len);
    const char *p = ch ? strchr(from, ch) : NULL;
    if (!p)
        return syntax(c, "invalid escape in a string");
    out[0] = to[p - from];
    *len = 1;
    return 0;
}

/* The string at c->i (its opening quote), its decoded bytes handed to out
 * in runs when out is set. */
static int scan_string(cursor *c, bytes_fn out, void *arg)
{
    const char *s = c->s;
    c->i++;
    for (;;) {
        size_t start = c->i;
        while (c->i < c->n && s[c->i] != '"' && s[c->i] != '\\' &&
               (unsigned char)s[c->i] >= 0x20)
            c->i++;
        int rc = out && c->i > start ? out(arg, s + start, c->i - start) : 0;
        if (rc)
            return rc;
        if (c->i >= c->n)
            return syntax(c, "the line ends inside a string");
        if (s[c->i] == '"') {
            c->i++;
            return 0;
        }
        if (s[c->i] != '\\')
            return syntax(c, "a control character inside a string (it must be escaped)");
        char buf[4];
        size_t len = 0;
        c->i++;
        if (escape(c, buf, &len) < 0)
            return -1;
        c->i++;
        if (out && (rc = out(arg, buf, len)) != 0)
            return rc;
    }
}

/* Compares a key's decoded bytes with the wanted name as they come. */
typedef struct key_match {
    const char *name;
    size_t len;                  /* strlen(name) */
    size_t at;                   /* bytes of the key seen */
    int differs;
} key_match;

static int match_key(void *arg, const char *bytes, size_t n)
{
    key_match *k = arg;
    if (!k->differs && (n > k->len - k->at || memcmp(k->name + k->at, bytes, n) != 0))
        k->differs = 1;
    k->at += n;
    return 0;
}

/* ---- numbers and other values ------------------------------------------------- */

/* A JSON number at c->i: its magnitude, sign, and whether it is an integer
 * in int64's range. */
typedef struct jl_number {
    uint64_t mag;
    int minus, integer;
} jl_number;

static int scan_number(cursor *c, jl_number *num)
{
    const char *s = c->s;
    int plain = 1, minus = peek(c) == '-', over = 0;
    uint64_t v = 0, big = (uint64_t)1 << 63;
    c->i += (size_t)minus;
    if (!is_digit(peek(c)))
        return syntax(c, "expected a digit");
    if (s[c->i] == '0') {
        c->i++;
    } else {
        for (; c->i < c->n && is_digit(s[c->i]); c->i++) {
            over |= v > (UINT64_MAX - 9) / 10; /* past it the value no longer matters */
            if (!over)
                v = v * 10 + (uint64_t)(s[c->i] - '0');
        }
    }
    if (peek(c) == '.') {
        plain = 0;
        c->i++;
        if (!is_digit(peek(c)))
            return syntax(c, "expected a digit after the decimal point");
        while (is_digit(peek(c)))
            c->i++;
    }
    if (peek(c) == 'e' || peek(c) == 'E') {
        plain = 0;
        c->i++;
        if (peek(c) == '+' || peek(c) == '-')
            c->i++;
        if (!is_digit(peek(c)))
            return syntax(c, "expected a digit in the exponent");
        while (is_digit(peek(c)))
            c->i++;
    }
    *num = (jl_number){v, minus && v, plain && !over && (v < big || (minus && v == big))};
    return 0;
}

/* A token id: an integer in 0..UINT32_MAX, else JL_NOT_AN_ID (-0 is 0). */
static uint64_t number_id(const jl_number *n)
{
    return n->integer && !n->minus && n->mag <= UINT32_MAX ? n->mag : JL_NOT_AN_ID;
}

/* Hands a number to the signed callback. */
static int give_int(const jl_field *f, size_t index, const jl_number *n)
{
    int64_t v = n->minus ? (int64_t)(0 - n->mag) : (int64_t)n->mag;
    return f->on_int(f->arg, index, n->integer ? v : 0, n->integer);
}

static int scan_literal(cursor *c, const char *word)
{
    size_t len = strlen(word);
    if (c->n - c->i < len || memcmp(c->s + c->i, word, len) != 0)
        return syntax(c, "expected a value");
    c->i += len;
    return 0;
}

/* Steps over a container's opening byte: 1 when `close` follows at once. */
static int open_container(cursor *c, char close)
{
    c->i++;
    skip_ws(c);
    if (peek(c) != close)
        return 0;
    c->i++;
    return 1;
}

/* After an element or member: 1 at the container's `close`, 0 at a ','
 * (each stepped over), -1 on anything else. */
static int next_item(cursor *c, char close)
{
    skip_ws(c);
    if (peek(c) == close) {
        c->i++;
        return 1;
    }
    if (peek(c) != ',')
        return syntax(c, close == ']' ? "expected ',' or ']'" : "expected ',' or '}'");
    c->i++;
    return 0;
}

static int scan_members(cursor *c, int depth);

static int scan_value(cursor *c, int depth)
{
    if (depth > JL_DEPTH_MAX)
        return syntax(c, "values nested deeper than 512 levels");
    jl_number ignored;
    switch (peek(c)) {
    case '{': return scan_members(c, depth + 1);
    case '"': return scan_string(c, NULL, NULL);
    case 't': return scan_literal(c, "true");
    case 'f': return scan_literal(c, "false");
    case 'n': return scan_literal(c, "null");
    case '[':
        if (open_container(c, ']'))
            return 0;
        for (;;) {
            skip_ws(c);
            if (scan_value(c, depth + 1) < 0)
                return -1;
            int rc = next_item(c, ']');
            if (rc)
                return rc < 0 ? rc : 0;
        }
    default:
        if (peek(c) == '-' || is_digit(peek(c)))
            return scan_number(c, &ignored);
        return syntax(c, "expected a value");
    }
}

/* ---- the wanted member ------------------------------------------------------- */

static int take_ids(cursor *c)
{
    const jl_field *f = c->f;
    if (open_container(c, ']'))
        return 0;
    for (size_t k = 0;; k++) {
        skip_ws(c);
        jl_number num = {0, 0, 0};
        int number = peek(c) == '-' || is_digit(peek(c));
        int rc = number ? scan_number(c, &num) : scan_value(c, 2);
        if (!rc)
            rc = f->on_int ? give_int(f, k, &num) : f->on_id(f->arg, k, number_id(&num));
        if (rc)
            return rc;
        if ((rc = next_item(c, ']')) != 0)
            return rc < 0 ? rc : 0;
    }
}

static int take_member(cursor *c, size_t key_at)
{
    const jl_field *f = c->f;
    if (c->found) {
        snprintf(f->msg, f->msg_size, "field '%s' appears twice (column %zu)", f->name,
                 key_at + 1);
        return -1;
    }
    c->found = 1;
    if (f->text) {
        if (peek(c) != '"') {
            snprintf(f->msg, f->msg_size, "field '%s' is not a string", f->name);
            return -1;
        }
        return scan_string(c, f->on_text, f->arg);
    }
    if (f->scalar) {
        jl_number num;
        if (peek(c) != '-' && !is_digit(peek(c))) {
            snprintf(f->msg, f->msg_size, "field '%s' is not a number", f->name);
            return -1;
        }
        return scan_number(c, &num) ? -1 : give_int(f, 0, &num);
    }
    if (peek(c) != '[') {
        snprintf(f->msg, f->msg_size, "field '%s' is not an array of %s", f->name,
                 f->on_int ? "integers" : "token ids");
        return -1;
    }
    return take_ids(c);
}

/* The object at c->i (its '{'); at depth 1 the wanted member is taken. */
static int scan_members(cursor *c, int depth)
{
    if (open_container(c, '}'))
        return 0;
    for (;;) {
        skip_ws(c);
        if (peek(c) != '"')
            return syntax(c, "expected a key in double quotes");
        size_t key_at = c->i;
        key_match k = {c->f->name, strlen(c->f->name), 0, depth != 1};
        int rc = scan_string(c, depth == 1 ? match_key : NULL, &k);
        if (rc)
            return rc;
        skip_ws(c);
        if (peek(c) != ':')
            return syntax(c, "expected ':' after a key");
        c->i++;
        skip_ws(c);
        if (!k.differs && k.at == k.len)
            rc = take_member(c, key_at);
        else
            rc = scan_value(c, depth);
        if (rc)
            return rc;           /* a callback's result passes as it is */
        if ((rc = next_item(c, '}')) != 0)
            return rc < 0 ? rc : 0;
    }
}

int jl_take_field(const char *line, size_t len, const jl_field *f)
{
    cursor c = {line, len, 0, f, 0};
    skip_ws(&c);
    if (peek(&c) != '{') {
        snprintf(f->msg, f->msg_size, "expected a JSON object");
        return -1;
    }
    int rc = scan_members(&c, 1);
    if (rc)
        return rc;
    skip_ws(&c);
    if (c.i < c.n)
        return syntax(&c, "more after the object");
    if (!c.found) {
        snprintf(f->msg, f->msg_size, "no field '%s'", f->name);
        return -1;
    }
    return 0;
}
