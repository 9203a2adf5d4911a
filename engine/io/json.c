/* io/json.c: JSON reader and writer (RFC 8259), for safetensors headers and metadata.
 * defines: ddpl_json_parse, ddpl_json_free, ddpl_json_get, ddpl_buf_*, ddpl_utf8_valid.
 *
 * The reader is recursive descent over a length-delimited buffer (never reads past n, so a
 * header need not be NUL-terminated), with a nesting limit so a hostile file cannot overflow
 * the C stack. Duplicate object keys are kept; callers that care check for them.
 *
 * A tree lives in one arena (blocks of 64 KB and up, kept on the root): a safetensors header of
 * 200,000 tensors is some 2.4 million nodes and strings, and a malloc and a free for each cost
 * more than the parse (0.3 s just to free them). A container's children wait on a scratch stack
 * of the parser until the container closes, then move to the arena at their exact count. A
 * failed parse frees the arena and the stack: no half-built tree to walk. */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STR(x)     #x
#define XSTR(x)    STR(x)
#define DEPTH_TEXT XSTR(DDPL_JSON_MAX_DEPTH)

struct ddpl_json_block {
    struct ddpl_json_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

typedef struct parser {
    const char *s;
    size_t n, pos;
    const char *err;
    int depth;
    struct ddpl_json_block *arena; /* what the tree is made of */
    ddpl_json *stack;              /* children of the open containers, innermost last */
    size_t top, cap;
} parser;

/* n bytes from the arena, 16-byte aligned; NULL when out of memory. */
static void *arena_alloc(parser *p, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    struct ddpl_json_block *b = p->arena;
    if (!b || b->cap - b->used < n) {
        size_t cap = b && b->cap < ((size_t)4 << 20) ? 2 * b->cap : b ? b->cap : 65536;
        if (cap < n) cap = n;
        struct ddpl_json_block *nb = malloc(sizeof *nb + cap);
        if (!nb) return NULL;
        *nb = (struct ddpl_json_block){.next = b, .cap = cap};
        p->arena = b = nb;
    }
    void *r = b->data + b->used;
    b->used += n;
    return r;
}

static void arena_free(struct ddpl_json_block *b)
{
    while (b) {
        struct ddpl_json_block *next = b->next;
        free(b);
        b = next;
    }
}

/* A copy of s[0..len) with a NUL after it, in the arena. */
static char *arena_string(parser *p, const char *s, size_t len)
{
    char *str = len < SIZE_MAX - 16 ? arena_alloc(p, len + 1) : NULL;
    if (!str) return NULL;
    memcpy(str, s, len);
    str[len] = '\0';
    return str;
}

static int fail(parser *p, const char *msg)
{
    if (!p->err) p->err = msg;
    return -1;
}

static void skip_ws(parser *p)
{
    while (p->pos < p->n) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static bool take(parser *p, const char *word)
{
    size_t k = strlen(word);
    if (p->n - p->pos < k || memcmp(p->s + p->pos, word, k) != 0) return false;
    p->pos += k;
    return true;
}

static int hex4(parser *p, unsigned *out)
{
    if (p->n - p->pos < 4) return fail(p, "expected 4 hex digits after \\u");
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[p->pos++];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else {
            p->pos -= (size_t)k + 1;
            return fail(p, "expected 4 hex digits after \\u");
        }
    }
    *out = v;
    return 0;
}

static void put_utf8(ddpl_buf *b, unsigned cp)
{
    char u[4];
    size_t k;
    if (cp < 0x80)
        u[0] = (char)cp, k = 1;
    else if (cp < 0x800)
        u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3F)), k = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)),
        u[2] = (char)(0x80 | (cp & 0x3F)), k = 3;
    else
        u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), u[3] = (char)(0x80 | (cp & 0x3F)), k = 4;
    ddpl_buf_put(b, u, k);
}

/* At the opening quote. */
static int parse_string(parser *p, ddpl_json *out)
{
    /* most strings have no escape: copy them in one piece, at their exact size */
    size_t end = p->pos + 1;
    while (end < p->n && p->s[end] != '"' && p->s[end] != '\\' && (unsigned char)p->s[end] >= 0x20)
        end++;
    if (end < p->n && p->s[end] == '"') {
        size_t len = end - p->pos - 1;
        if (!ddpl_utf8_valid(p->s + p->pos + 1, len))
            return fail(p, "expected valid UTF-8 in a string (JSON text is UTF-8)");
        char *str = arena_string(p, p->s + p->pos + 1, len);
        if (!str) return fail(p, "out of memory");
        out->type = DDPL_JSON_STRING;
        out->str = str;
        out->len = len;
        p->pos = end + 1;
        return 0;
    }
    ddpl_buf b = {0};
    p->pos++;
    for (;;) {
        if (p->pos >= p->n) {
            ddpl_buf_free(&b);
            return fail(p, "expected a closing '\"'");
        }
        size_t start = p->pos;
        while (p->pos < p->n && p->s[p->pos] != '"' && p->s[p->pos] != '\\' &&
               (unsigned char)p->s[p->pos] >= 0x20)
            p->pos++;
        ddpl_buf_put(&b, p->s + start, p->pos - start);
        if (p->pos >= p->n) continue;
        char c = p->s[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c != '\\') {
            ddpl_buf_free(&b);
            return fail(p, "expected a character (control characters must be escaped in a string)");
        }
        if (++p->pos >= p->n) continue;
        char e = p->s[p->pos++];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char map[] = "\"\\/\b\f\n\r\t";
            ddpl_buf_put(&b, &map[simple - "\"\\/bfnrt"], 1);
        } else if (e == 'u') {
            unsigned cp, lo;
            if (hex4(p, &cp) < 0) {
                ddpl_buf_free(&b);
                return -1;
            }
            if (cp >= 0xD800 && cp < 0xDC00) {
                if (!take(p, "\\u") || hex4(p, &lo) < 0 || lo < 0xDC00 || lo >= 0xE000) {
                    ddpl_buf_free(&b);
                    p->err = NULL; /* hex4's complaint, if any, is less to the point */
                    return fail(p, "expected a low surrogate \\uDC00-\\uDFFF after a high one");
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                ddpl_buf_free(&b);
                p->pos -= 6;
                return fail(p, "expected a high surrogate before a low one");
            }
            put_utf8(&b, cp);
        } else {
            ddpl_buf_free(&b);
            p->pos--;
            return fail(p, "expected an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
        }
    }
    ddpl_buf_put(&b, "", 1); /* NUL terminator, not counted */
    if (b.failed) {
        ddpl_buf_free(&b);
        return fail(p, "out of memory");
    }
    if (!ddpl_utf8_valid(b.data, b.len - 1)) {
        ddpl_buf_free(&b);
        return fail(p, "expected valid UTF-8 in a string (JSON text is UTF-8)");
    }
    out->type = DDPL_JSON_STRING;
    out->len = b.len - 1;
    out->str = arena_string(p, b.data, out->len);
    ddpl_buf_free(&b);
    return out->str ? 0 : fail(p, "out of memory");
}

static bool is_digit(const parser *p)
{
    return p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9';
}

static void skip_digits(parser *p)
{
    while (is_digit(p)) p->pos++;
}

/* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][-+]?[0-9]+)? */
static int parse_number(parser *p, ddpl_json *out)
{
    size_t start = p->pos;
    bool integral = true;
    if (p->pos < p->n && p->s[p->pos] == '-') p->pos++;
    if (!is_digit(p)) return fail(p, "expected a digit after '-'");
    if (p->s[p->pos] == '0') {
        p->pos++;
        if (is_digit(p)) return fail(p, "expected a number without leading zeros");
    } else
        skip_digits(p);
    if (p->pos < p->n && p->s[p->pos] == '.') {
        integral = false;
        p->pos++;
        if (!is_digit(p)) return fail(p, "expected digits after the decimal point");
        skip_digits(p);
    }
    if (p->pos < p->n && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        integral = false;
        p->pos++;
        if (p->pos < p->n && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
        if (!is_digit(p)) return fail(p, "expected digits in the exponent");
        skip_digits(p);
    }
    /* strtod needs a terminated copy; numbers are short, but any length is valid JSON */
    char small[64], *tmp = small;
    size_t len = p->pos - start;
    if (len >= sizeof small && !(tmp = malloc(len + 1))) return fail(p, "out of memory");
    memcpy(tmp, p->s + start, len);
    tmp[len] = '\0';
    out->type = DDPL_JSON_NUMBER;
    out->number = strtod(tmp, NULL);
    if (integral) {
        errno = 0;
        long long v = strtoll(tmp, NULL, 10);
        if (errno == 0) {
            out->is_int = true;
            out->integer = v;
        }
    }
    if (tmp != small) free(tmp);
    return 0;
}

static int parse_value(parser *p, ddpl_json *out);

/* Puts v on the scratch stack. */
static int push(parser *p, const ddpl_json *v)
{
    if (p->top == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 64;
        ddpl_json *ns = realloc(p->stack, nc * sizeof *ns);
        if (!ns) return fail(p, "out of memory");
        p->stack = ns;
        p->cap = nc;
    }
    p->stack[p->top++] = *v;
    return 0;
}

/* The count entries of the stack from `from` on, every `stride`-th, in a new arena array. */
static ddpl_json *take_children(parser *p, size_t from, size_t count, size_t stride)
{
    ddpl_json *arr = count ? arena_alloc(p, count * sizeof *arr) : NULL;
    if (count && !arr) return NULL;
    for (size_t i = 0; i < count; i++) arr[i] = p->stack[from + i * stride];
    return arr;
}

/* At the opening bracket. An object's keys and values go on the stack in turn. */
static int parse_container(parser *p, ddpl_json *out, bool object)
{
    if (++p->depth > DDPL_JSON_MAX_DEPTH)
        return fail(p, "expected at most " DEPTH_TEXT " levels of nesting");
    char close = object ? '}' : ']';
    size_t base = p->top;
    out->type = object ? DDPL_JSON_OBJECT : DDPL_JSON_ARRAY;
    p->pos++;
    skip_ws(p);
    bool empty = p->pos < p->n && p->s[p->pos] == close;
    if (empty) p->pos++;
    while (!empty) {
        ddpl_json key = {0}, val = {0};
        skip_ws(p);
        if (object) {
            if (p->pos >= p->n || p->s[p->pos] != '"')
                return fail(p, "expected a string key in an object");
            if (parse_string(p, &key) < 0 || push(p, &key) < 0) return -1;
            skip_ws(p);
            if (p->pos >= p->n || p->s[p->pos] != ':')
                return fail(p, "expected ':' after an object key");
            p->pos++;
        }
        if (parse_value(p, &val) < 0 || push(p, &val) < 0) return -1;
        skip_ws(p);
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->n && p->s[p->pos] == close) {
            p->pos++;
            break;
        }
        return fail(p, object ? "expected ',' or '}' in an object"
                              : "expected ',' or ']' in an array");
    }
    size_t stride = object ? 2 : 1, count = (p->top - base) / stride;
    out->len = count;
    out->items = take_children(p, base + (object ? 1 : 0), count, stride);
    if (object) out->keys = take_children(p, base, count, stride);
    p->top = base;
    if (count && (!out->items || (object && !out->keys))) return fail(p, "out of memory");
    p->depth--;
    return 0;
}

static int parse_value(parser *p, ddpl_json *out)
{
    skip_ws(p);
    char c = p->pos < p->n ? p->s[p->pos] : '\0';
    if (c == '{') return parse_container(p, out, true);
    if (c == '[') return parse_container(p, out, false);
    if (c == '"') return parse_string(p, out);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, out);
    if (take(p, "true")) {
        out->type = DDPL_JSON_BOOL;
        out->boolean = true;
        return 0;
    }
    if (take(p, "false")) {
        out->type = DDPL_JSON_BOOL;
        return 0;
    }
    if (take(p, "null")) return 0;
    return fail(p, "expected a value (object, array, string, number, true, false or null)");
}

int ddpl_json_parse(const char *text, size_t n, ddpl_json *out, const char **err, size_t *pos)
{
    parser p = {.s = text, .n = n};
    memset(out, 0, sizeof *out);
    int rc = parse_value(&p, out);
    if (rc == 0) {
        skip_ws(&p);
        if (p.pos != n) rc = fail(&p, "expected the end of the text after the value");
    }
    free(p.stack);
    if (rc < 0) {
        arena_free(p.arena);
        memset(out, 0, sizeof *out);
        *err = p.err;
        *pos = p.pos;
        return -1;
    }
    out->arena = p.arena;
    return 0;
}

void ddpl_json_free(ddpl_json *j)
{
    if (!j) return;
    arena_free(j->arena); /* the whole tree; a node inside one owns nothing of its own */
    memset(j, 0, sizeof *j);
}

const ddpl_json *ddpl_json_get(const ddpl_json *j, const char *key)
{
    if (!j || j->type != DDPL_JSON_OBJECT) return NULL;
    for (size_t i = 0; i < j->len; i++)
        if (strcmp(j->keys[i].str, key) == 0) return &j->items[i];
    return NULL;
}

/* ---- writer ---- */

void ddpl_buf_put(ddpl_buf *b, const char *s, size_t n)
{
    if (b->failed) return;
    if (b->len + n > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->len + n) nc *= 2;
        char *nd = realloc(b->data, nc);
        if (!nd) {
            b->failed = true;
            return;
        }
        b->data = nd;
        b->cap = nc;
    }
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
}

void ddpl_buf_puts(ddpl_buf *b, const char *s)
{
    ddpl_buf_put(b, s, strlen(s));
}

void ddpl_buf_printf(ddpl_buf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof tmp) {
        b->failed = true;
        return;
    }
    ddpl_buf_put(b, tmp, (size_t)k);
}

void ddpl_buf_json_string(ddpl_buf *b, const char *s, size_t n)
{
    ddpl_buf_put(b, "\"", 1);
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        ddpl_buf_put(b, s + start, i - start);
        start = i + 1;
        if (c == '"')
            ddpl_buf_puts(b, "\\\"");
        else if (c == '\\')
            ddpl_buf_puts(b, "\\\\");
        else if (c == '\n')
            ddpl_buf_puts(b, "\\n");
        else if (c == '\t')
            ddpl_buf_puts(b, "\\t");
        else if (c == '\r')
            ddpl_buf_puts(b, "\\r");
        else
            ddpl_buf_printf(b, "\\u%04x", c);
    }
    ddpl_buf_put(b, s + start, n - start);
    ddpl_buf_put(b, "\"", 1);
}

void ddpl_buf_json_double(ddpl_buf *b, double v)
{
    char tmp[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v) break;
    }
    ddpl_buf_puts(b, tmp);
    if (!strpbrk(tmp, ".eE")) ddpl_buf_puts(b, ".0");
}

void ddpl_buf_free(ddpl_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

bool ddpl_utf8_valid(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t k;
        unsigned cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0)
            k = 1, cp = c & 0x1F;
        else if ((c & 0xF0) == 0xE0)
            k = 2, cp = c & 0x0F;
        else if ((c & 0xF8) == 0xF0)
            k = 3, cp = c & 0x07;
        else
            return false;
        if (n - i <= k) return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return false;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        /* overlong forms, surrogates, beyond U+10FFFF */
        if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
            (cp >= 0xD800 && cp < 0xE000) || cp > 0x10FFFF)
            return false;
        i += k + 1;
    }
    return true;
}
