/* io/json.h: a small JSON reader (into a tree) and writer (into a growing buffer), enough for
 * safetensors headers and ddplua's metadata.
 * defines: ddpl_json, ddpl_json_parse, ddpl_json_free, ddpl_json_get, ddpl_buf and its
 *          appenders (ddpl_buf_put, ddpl_buf_printf, ddpl_buf_json_string,
 *          ddpl_buf_json_number), ddpl_utf8_valid.
 *
 * Numbers keep whether they were written as integers (no '.', 'e'), so Lua integers and floats
 * round-trip as what they were. Strings are byte strings with a length (\u0000 allowed). */
#ifndef DDPL_IO_JSON_H
#define DDPL_IO_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Deepest nesting of arrays and objects the reader accepts (and the Lua encoder writes): deep
 * enough for any real document, shallow enough that a hostile one cannot overflow the C stack. */
#define DDPL_JSON_MAX_DEPTH 500

typedef enum ddpl_json_type {
    DDPL_JSON_NULL,
    DDPL_JSON_BOOL,
    DDPL_JSON_NUMBER,
    DDPL_JSON_STRING,
    DDPL_JSON_ARRAY,
    DDPL_JSON_OBJECT,
} ddpl_json_type;

typedef struct ddpl_json {
    ddpl_json_type type;
    bool boolean;
    bool is_int;             /* a number written without fraction or exponent that fits int64 */
    int64_t integer;         /* when is_int */
    double number;           /* every number */
    char *str;               /* string: NUL-terminated copy, len bytes */
    size_t len;              /* string length; array/object: element count */
    struct ddpl_json *items; /* array elements or object values */
    struct ddpl_json *keys;  /* object keys (strings), parallel to items */
    struct ddpl_json_block *arena; /* the root's: the memory of the whole tree (json.c) */
} ddpl_json;

/* Parses text[0..n) into *out. Returns 0, or -1 with *err pointing at a static description of
 * what was expected ("expected ',' or ']' in an array") and *pos at the byte offset where it was
 * not found (n at the end of the text). */
int ddpl_json_parse(const char *text, size_t n, ddpl_json *out, const char **err, size_t *pos);
/* Frees the tree of a root that ddpl_json_parse filled (every node of it at once). */
void ddpl_json_free(ddpl_json *j);
/* The value of key in object j, or NULL. */
const ddpl_json *ddpl_json_get(const ddpl_json *j, const char *key);

/* A growing byte buffer; on allocation failure `failed` is set and appends are ignored. */
typedef struct ddpl_buf {
    char *data;
    size_t len, cap;
    bool failed;
} ddpl_buf;
void ddpl_buf_put(ddpl_buf *b, const char *s, size_t n);
void ddpl_buf_puts(ddpl_buf *b, const char *s);
void ddpl_buf_printf(ddpl_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal of s[0..n) (quotes and escapes added). */
void ddpl_buf_json_string(ddpl_buf *b, const char *s, size_t n);
/* The shortest decimal that reads back as v, with ".0" added to integral values so that a
 * reader sees a float. v must be finite. */
void ddpl_buf_json_double(ddpl_buf *b, double v);
void ddpl_buf_free(ddpl_buf *b);

/* Whether s[0..n) is valid UTF-8 (JSON text must be). */
bool ddpl_utf8_valid(const char *s, size_t n);

#endif
