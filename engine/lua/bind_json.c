/* lua/bind_json.c: JSON text <-> Lua values over the engine's one JSON codec (io/json.c), for
 * lua/ddplua/json.lua (the timeline and metrics tools) and ddpl.load's metadata tree.
 * defines: lb_json_functions (package.loaded['ddplua.core.json']: decode, encode),
 *          lb_json_hold, lb_json_push_scalar.
 *
 * decode(text, name, null) -> value: objects become tables with string keys (a repeated key:
 * the last wins), arrays sequences (1-based), numbers integers where the text has no fraction or
 * exponent and fits 64 bits, else floats, JSON null the value `null` (json.lua's sentinel, so an
 * array keeps its length). An error names the line, the column, what was expected and what was
 * there: "NAME: line 3, column 14: expected ',' or '}' in an object, got ']'".
 *
 * encode(value, name, null) -> one line of JSON text: tables whose keys are exactly 1..n (n >= 1)
 * become arrays, other tables objects with their keys sorted bytewise (a record always reads
 * alike; keys must be strings); `null` is null. Integers are written as integers, floats as the
 * shortest decimal that reads back as the same double, with ".0" when whole (a reader that tells
 * integers from floats sees a float again); NaN and the infinities, which JSON cannot express,
 * become null. Strings must be UTF-8 (JSON text is). Anything else (functions, userdata, cycles,
 * non-string keys, nesting deeper than DDPL_JSON_MAX_DEPTH) is an error naming NAME and the path
 * of the value: "json.encode: .loss: cannot encode a userdata". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "io/json.h"

#define JSON_TREE_MT "ddplua.json.tree"
#define JSON_BUF_MT  "ddplua.json.buffer"

static int tree_gc(lua_State *L)
{
    ddpl_json_free(luaL_checkudata(L, 1, JSON_TREE_MT));
    return 0;
}

static int buf_gc(lua_State *L)
{
    ddpl_buf_free(luaL_checkudata(L, 1, JSON_BUF_MT));
    return 0;
}

ddpl_json *lb_json_hold(lua_State *L, const ddpl_json *tree)
{
    ddpl_json *held = lb_owner(L, sizeof *held, JSON_TREE_MT, tree_gc);
    *held = *tree;
    return held;
}

/* ---- decode ---- */

bool lb_json_push_scalar(lua_State *L, const ddpl_json *j)
{
    switch (j->type) {
    case DDPL_JSON_BOOL:
        lua_pushboolean(L, j->boolean);
        return true;
    case DDPL_JSON_NUMBER:
        if (j->is_int)
            lua_pushinteger(L, (lua_Integer)j->integer);
        else
            lua_pushnumber(L, j->number);
        return true;
    case DDPL_JSON_STRING:
        lua_pushlstring(L, j->str, j->len);
        return true;
    default:
        return false;
    }
}

static void push_value(lua_State *L, const ddpl_json *j, int null_idx)
{
    luaL_checkstack(L, 4, "json.decode: nesting too deep");
    if (lb_json_push_scalar(L, j)) return;
    switch (j->type) {
    case DDPL_JSON_NULL:
        lua_pushvalue(L, null_idx);
        break;
    case DDPL_JSON_ARRAY:
        lua_createtable(L, j->len > INT32_MAX ? 0 : (int)j->len, 0);
        for (size_t i = 0; i < j->len; i++) {
            push_value(L, &j->items[i], null_idx);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        break;
    default: /* DDPL_JSON_OBJECT */
        lua_createtable(L, 0, j->len > INT32_MAX ? 0 : (int)j->len);
        for (size_t i = 0; i < j->len; i++) {
            lua_pushlstring(L, j->keys[i].str, j->keys[i].len);
            push_value(L, &j->items[i], null_idx);
            lua_rawset(L, -3);
        }
        break;
    }
}

/* "NAME: line L, column C: expected X, got Y" for a parse that stopped at byte pos. */
static LB_NORETURN decode_error(lua_State *L, const char *name, const char *text, size_t n,
                                const char *err, size_t pos)
{
    if (strncmp(err, "expected ", 9) != 0) {
        lua_pushfstring(L, "%s: %s", name, err);
        lua_error(L);
    }
    int line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < pos && i < n; i++)
        if (text[i] == '\n') line++, line_start = i + 1;
    char got[32];
    unsigned char c = pos < n ? (unsigned char)text[pos] : 0;
    if (pos >= n)
        snprintf(got, sizeof got, "the end of the text");
    else if (c < 0x20 || c == 0x7f)
        snprintf(got, sizeof got, "'\\x%02x'", c);
    else
        snprintf(got, sizeof got, "'%c'", c);
    /* no "file:line:" in front: the message names the text's own line and column */
    lua_pushfstring(L, "%s: line %d, column %d: %s, got %s", name, line,
                    (int)(pos - line_start + 1), err, got);
    lua_error(L);
    abort(); /* not reached: lua_error does not return */
}

static int l_decode(lua_State *L)
{
    size_t n;
    const char *text = luaL_checklstring(L, 1, &n);
    const char *name = luaL_checkstring(L, 2);
    luaL_checkany(L, 3);
    ddpl_json tree;
    const char *err;
    size_t pos;
    if (ddpl_json_parse(text, n, &tree, &err, &pos) < 0) decode_error(L, name, text, n, err, pos);
    ddpl_json *held = lb_json_hold(L, &tree); /* freed even if building the tables raises */
    push_value(L, held, 3);
    ddpl_json_free(held);
    return 1;
}

/* ---- encode ---- */

typedef struct encoder {
    lua_State *L;
    const char *name;
    int null_idx;
    ddpl_buf *out;
    ddpl_buf *path;    /* ".a[2].b": where the value being written is, for errors */
    const void **open; /* the tables being written, outermost first: a cycle repeats one */
    int depth;
} encoder;

static LB_NORETURN encode_error(encoder *e, const char *what)
{
    ddpl_buf_put(e->path, "", 1);
    const char *path = e->path->failed ? "" : e->path->data;
    lua_pushfstring(e->L, "%s: %s%s%s", e->name, path, *path ? ": " : "", what);
    lua_error(e->L); /* the message names the path; a "file:line:" in front would not help */
    abort();         /* not reached */
}

static void write_value(encoder *e, int idx);

typedef struct key_ref {
    const char *s; /* anchored by the table being written */
    size_t len;
} key_ref;

static int cmp_key(const void *a, const void *b)
{
    const key_ref *x = a, *y = b;
    int r = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
    return r ? r : (x->len > y->len) - (x->len < y->len);
}

static void write_table(encoder *e, int idx)
{
    lua_State *L = e->L;
    const void *self = lua_topointer(L, idx);
    for (int i = 0; i < e->depth; i++)
        if (e->open[i] == self) encode_error(e, "the table contains itself");
    if (e->depth >= DDPL_JSON_MAX_DEPTH) {
        char what[64];
        snprintf(what, sizeof what, "more than %d levels of nesting", DDPL_JSON_MAX_DEPTH);
        encode_error(e, what);
    }
    luaL_checkstack(L, 6, "json.encode: nesting too deep");
    e->open[e->depth++] = self;
    size_t path_len = e->path->len;

    size_t count = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        count++;
    }
    lua_Unsigned len = lua_rawlen(L, idx);
    if (len > 0 && count == len) { /* an array: keys 1..len exactly */
        ddpl_buf_put(e->out, "[", 1);
        for (lua_Unsigned i = 1; i <= len; i++) {
            if (i > 1) ddpl_buf_put(e->out, ",", 1);
            ddpl_buf_printf(e->path, "[%llu]", (unsigned long long)i);
            lua_rawgeti(L, idx, (lua_Integer)i);
            write_value(e, lua_gettop(L));
            lua_pop(L, 1);
            e->path->len = path_len;
        }
        ddpl_buf_put(e->out, "]", 1);
    } else {
        key_ref *keys = lua_newuserdatauv(L, count * sizeof *keys + 1, 0); /* collected by GC */
        size_t k = 0;
        lua_pushnil(L);
        while (lua_next(L, idx)) {
            lua_pop(L, 1);
            if (lua_type(L, -1) != LUA_TSTRING) {
                const char *type = luaL_typename(L, -1);
                const char *shown = luaL_tolstring(L, -1, NULL);
                lua_pushfstring(L, "object keys must be strings, got the %s key %s", type, shown);
                encode_error(e, lua_tostring(L, -1));
            }
            keys[k].s = lua_tolstring(L, -1, &keys[k].len);
            k++;
        }
        qsort(keys, count, sizeof *keys, cmp_key);
        ddpl_buf_put(e->out, "{", 1);
        for (size_t i = 0; i < count; i++) {
            if (i) ddpl_buf_put(e->out, ",", 1);
            if (!ddpl_utf8_valid(keys[i].s, keys[i].len))
                encode_error(e, "an object key that is not valid UTF-8 (JSON text is UTF-8)");
            ddpl_buf_json_string(e->out, keys[i].s, keys[i].len);
            ddpl_buf_put(e->out, ":", 1);
            ddpl_buf_put(e->path, ".", 1);
            ddpl_buf_put(e->path, keys[i].s, keys[i].len);
            lua_pushlstring(L, keys[i].s, keys[i].len);
            lua_rawget(L, idx);
            write_value(e, lua_gettop(L));
            lua_pop(L, 1);
            e->path->len = path_len;
        }
        ddpl_buf_put(e->out, "}", 1);
        lua_pop(L, 1); /* keys */
    }
    e->depth--;
}

static void write_value(encoder *e, int idx)
{
    lua_State *L = e->L;
    switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            ddpl_buf_printf(e->out, LUA_INTEGER_FMT, lua_tointeger(L, idx));
        } else {
            double v = lua_tonumber(L, idx);
            if (isfinite(v))
                ddpl_buf_json_double(e->out, v);
            else
                ddpl_buf_puts(e->out, "null");
        }
        break;
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        if (!ddpl_utf8_valid(s, n))
            encode_error(e, "a string that is not valid UTF-8 (JSON text is UTF-8)");
        ddpl_buf_json_string(e->out, s, n);
        break;
    }
    case LUA_TBOOLEAN:
        ddpl_buf_puts(e->out, lua_toboolean(L, idx) ? "true" : "false");
        break;
    case LUA_TTABLE:
        if (lua_rawequal(L, idx, e->null_idx))
            ddpl_buf_puts(e->out, "null");
        else
            write_table(e, idx);
        break;
    default: {
        char what[64];
        snprintf(what, sizeof what, "cannot encode a %s", luaL_typename(L, idx));
        encode_error(e, what);
    }
    }
}

static int l_encode(lua_State *L)
{
    luaL_checkany(L, 1);
    const char *name = luaL_checkstring(L, 2);
    luaL_checkany(L, 3);
    lua_settop(L, 3);
    encoder e = {.L = L, .name = name, .null_idx = 3};
    e.out = lb_owner(L, sizeof *e.out, JSON_BUF_MT, buf_gc);
    e.path = lb_owner(L, sizeof *e.path, JSON_BUF_MT, buf_gc);
    e.open = lua_newuserdatauv(L, DDPL_JSON_MAX_DEPTH * sizeof *e.open, 0);
    write_value(&e, 1);
    if (e.out->failed) {
        lua_pushfstring(L, "%s: out of memory", name);
        lua_error(L);
    }
    lua_pushlstring(L, e.out->data ? e.out->data : "", e.out->len);
    return 1;
}

const luaL_Reg lb_json_functions[] = {
    {"decode", l_decode},
    {"encode", l_encode},
    {NULL, NULL},
};
