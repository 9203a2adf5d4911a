/* lua/bind_io.c: ddpl.save and ddpl.load (safetensors checkpoints of nested Lua tables).
 * defines: lb_io_functions (save, load).
 *
 * ddpl.save(obj, path) stores every tensor of obj under its dotted path ("state.0.exp_avg";
 * integer keys in decimal). A flat table of string-keyed tensors (a model's state_dict) is
 * stored as exactly that. Anything else also records the table's shape in the metadata entry
 * "ddplua.tree", a JSON value from which ddpl.load rebuilds the same nested table:
 *   - a table whose keys are exactly 1..n (n >= 1) is a JSON array;
 *   - any other table is a JSON object; integer key k is written "#k", a string key that
 *     starts with '#' or '$' gets one more '#' in front, other string keys are as they are;
 *   - a tensor is {"$tensor": "<its name in the file>"};
 *   - integers and floats are JSON numbers (floats always with '.' or an exponent, so they
 *     come back as floats); inf and nan are {"$float": "inf" | "-inf" | "nan"};
 *   - strings and booleans are themselves.
 * ddpl.load(path [, {device | map_location}]) returns the table and, second, the file's
 * other metadata ({str = str}); a file without "ddplua.tree" (e.g. written by Python) loads as a
 * flat {name = tensor}. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "core/core.h"
#include "io/json.h"
#include "io/safetensors.h"

#define TREE_KEY       "ddplua.tree"
#define SAVE_MAX_DEPTH 64
#define SAVE_CTX_MT    "ddplua.io.save_ctx"

/* What save collects while walking the table: lives in a userdata whose __gc frees it, so a Lua
 * error in the middle of the walk leaks nothing. Tensors are borrowed (the table keeps them). */
typedef struct save_ctx {
    ddpl_buf tree;
    ddpl_buf name; /* the dotted path of the value being visited */
    char **names;
    ddpl_tensor **tensors;
    int n, cap;
    bool flat; /* so far: only string keys mapping to tensors at the top level */
} save_ctx;

static int save_ctx_gc(lua_State *L)
{
    save_ctx *c = luaL_checkudata(L, 1, SAVE_CTX_MT);
    ddpl_buf_free(&c->tree);
    ddpl_buf_free(&c->name);
    for (int i = 0; i < c->n; i++) free(c->names[i]);
    free(c->names);
    free(c->tensors);
    memset(c, 0, sizeof *c);
    return 0;
}

static void oom(lua_State *L)
{
    luaL_error(L, "save: out of memory");
}

/* The dotted path for messages ("<top>" for the table itself). */
static const char *where(save_ctx *c)
{
    if (c->name.len == 0) return "<top>";
    ddpl_buf_put(&c->name, "", 1);
    c->name.len--;
    return c->name.failed ? "?" : c->name.data;
}

static void add_tensor(lua_State *L, save_ctx *c, ddpl_tensor *t)
{
    if (c->n == c->cap) {
        int nc = c->cap ? c->cap * 2 : 16;
        char **nn = realloc(c->names, (size_t)nc * sizeof *nn);
        if (!nn) oom(L);
        c->names = nn;
        ddpl_tensor **nt = realloc(c->tensors, (size_t)nc * sizeof *nt);
        if (!nt) oom(L);
        c->tensors = nt;
        c->cap = nc;
    }
    const char *name = where(c);
    char *copy = strdup(name);
    if (!copy) oom(L);
    c->names[c->n] = copy;
    c->tensors[c->n++] = t;
}

/* A key of a table being saved, for sorting: integers first (by value), then strings. */
typedef struct key {
    bool is_int;
    lua_Integer i;
    const char *s; /* anchored by the table */
    size_t len;
} key;

static int cmp_key(const void *a, const void *b)
{
    const key *x = a, *y = b;
    if (x->is_int != y->is_int) return x->is_int ? -1 : 1;
    if (x->is_int) return (x->i > y->i) - (x->i < y->i);
    int r = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
    return r ? r : (x->len > y->len) - (x->len < y->len);
}

static void write_value(lua_State *L, save_ctx *c, int idx, int depth);

/* Table at idx: keys sorted so the same table always gives the same file. */
static void write_table(lua_State *L, save_ctx *c, int idx, int depth)
{
    if (depth > SAVE_MAX_DEPTH)
        luaL_error(L, "save: tables nested deeper than %d at '%s' (a cycle?)", SAVE_MAX_DEPTH,
                   where(c));
    luaL_checkstack(L, 8, "save: nesting too deep");
    size_t nkeys = 0, cap = 16;
    key *keys = lua_newuserdatauv(L, cap * sizeof *keys, 0); /* collected by the GC */
    int keys_idx = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        key k = {0};
        if (lua_type(L, -1) == LUA_TSTRING) {
            k.s = lua_tolstring(L, -1, &k.len);
        } else if (lua_isinteger(L, -1)) {
            k.is_int = true;
            k.i = lua_tointeger(L, -1);
        } else {
            luaL_error(L,
                       "save: table at '%s' has a %s key; only strings and integers can be "
                       "saved",
                       where(c), luaL_typename(L, -1));
        }
        if (nkeys == cap) {
            key *nk = lua_newuserdatauv(L, 2 * cap * sizeof *nk, 0);
            memcpy(nk, keys, cap * sizeof *nk);
            lua_replace(L, keys_idx);
            keys = nk;
            cap *= 2;
        }
        keys[nkeys++] = k;
    }
    qsort(keys, nkeys, sizeof *keys, cmp_key);
    bool array = nkeys > 0;
    for (size_t i = 0; i < nkeys && array; i++)
        array = keys[i].is_int && keys[i].i == (lua_Integer)i + 1;
    ddpl_buf_puts(&c->tree, array ? "[" : "{");
    size_t base = c->name.len;
    for (size_t i = 0; i < nkeys; i++) {
        key *k = &keys[i];
        if (i) ddpl_buf_puts(&c->tree, ",");
        /* the dotted name of the child */
        if (base) ddpl_buf_puts(&c->name, ".");
        if (k->is_int)
            ddpl_buf_printf(&c->name, "%lld", (long long)k->i);
        else
            ddpl_buf_put(&c->name, k->s, k->len);
        if (!array) {
            if (k->is_int) {
                char tmp[32];
                snprintf(tmp, sizeof tmp, "#%lld", (long long)k->i);
                ddpl_buf_json_string(&c->tree, tmp, strlen(tmp));
            } else {
                if (!ddpl_utf8_valid(k->s, k->len))
                    luaL_error(L, "save: key '%s' is not valid UTF-8", where(c));
                if (k->len && (k->s[0] == '#' || k->s[0] == '$')) {
                    ddpl_buf tmp = {0};
                    ddpl_buf_put(&tmp, "#", 1);
                    ddpl_buf_put(&tmp, k->s, k->len);
                    ddpl_buf_json_string(&c->tree, tmp.data, tmp.len);
                    ddpl_buf_free(&tmp);
                } else {
                    ddpl_buf_json_string(&c->tree, k->s, k->len);
                }
            }
            ddpl_buf_puts(&c->tree, ":");
        }
        if (k->is_int)
            lua_rawgeti(L, idx, k->i);
        else {
            lua_pushlstring(L, k->s, k->len);
            lua_rawget(L, idx);
        }
        if (depth > 0 || k->is_int || !lb_testbox(L, -1)) c->flat = false;
        write_value(L, c, lua_gettop(L), depth);
        lua_pop(L, 1);
        c->name.len = base;
    }
    ddpl_buf_puts(&c->tree, array ? "]" : "}");
    lua_settop(L, keys_idx - 1);
}

static void write_value(lua_State *L, save_ctx *c, int idx, int depth)
{
    switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            ddpl_buf_printf(&c->tree, "%lld", (long long)lua_tointeger(L, idx));
        } else {
            double v = lua_tonumber(L, idx);
            if (isnan(v))
                ddpl_buf_puts(&c->tree, "{\"$float\":\"nan\"}");
            else if (isinf(v))
                ddpl_buf_puts(&c->tree, v > 0 ? "{\"$float\":\"inf\"}" : "{\"$float\":\"-inf\"}");
            else
                ddpl_buf_json_double(&c->tree, v);
        }
        break;
    case LUA_TBOOLEAN:
        ddpl_buf_puts(&c->tree, lua_toboolean(L, idx) ? "true" : "false");
        break;
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        if (!ddpl_utf8_valid(s, len))
            luaL_error(L, "save: the string at '%s' is not valid UTF-8", where(c));
        ddpl_buf_json_string(&c->tree, s, len);
        break;
    }
    case LUA_TTABLE:
        write_table(L, c, idx, depth + 1);
        break;
    default: {
        lb_box *b = lb_testbox(L, idx);
        if (!b)
            luaL_error(L,
                       "save: cannot save a value of type %s (at '%s'); only tensors, "
                       "numbers, strings, booleans and tables of them",
                       luaL_typename(L, idx), where(c));
        if (!b->t) luaL_error(L, "save: the tensor at '%s' is closed", where(c));
        lb_check_box(L, b, "save");
        if (c->name.len == 0) luaL_error(L, "save: expected a table, got a tensor");
        ddpl_buf_puts(&c->tree, "{\"$tensor\":");
        ddpl_buf_json_string(&c->tree, where(c), c->name.len);
        ddpl_buf_puts(&c->tree, "}");
        add_tensor(L, c, b->t);
    }
    }
    if (c->tree.failed || c->name.failed) oom(L);
}

static int f_save(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TTABLE) lb_argerror(L, 1, "save", "a table");
    const char *path = luaL_checkstring(L, 2);
    lua_settop(L, 2);
    save_ctx *c = lb_owner(L, sizeof *c, SAVE_CTX_MT, save_ctx_gc);
    c->flat = true;
    write_table(L, c, 1, 0);
    const char *mkeys[1] = {TREE_KEY};
    const char *mvals[1] = {c->tree.data};
    size_t mlens[1] = {c->tree.len};
    int nmeta = c->flat ? 0 : 1;
    if (ddpl_safetensors_save(path, c->n, (const char *const *)c->names, c->tensors, nmeta, mkeys,
                              mvals, mlens) < 0)
        lb_error_in(L, "save");
    return 0;
}

/* ---- load ---- */

/* Owns a loaded file until its tensors are boxed (a __gc, for errors on the way). */
#define LOAD_CTX_MT "ddplua.io.load_ctx"

static int load_ctx_gc(lua_State *L)
{
    ddpl_st_file *f = luaL_checkudata(L, 1, LOAD_CTX_MT);
    ddpl_st_file_clear(f);
    return 0;
}

/* Pushes the tensor named name (boxed, moved to dev), or raises. */
static void push_tensor(lua_State *L, const char *path, ddpl_st_file *f, const char *name,
                        ddpl_device dev)
{
    int i = ddpl_st_find(f, name); /* a tree of 200k tensors: not 200k x 200k compares */
    if (i >= 0) {
        lb_box *box = lb_newbox(L);
        ddpl_tensor *t = f->tensors[i];
        box->t = dev.type == DDPL_CPU ? ddpl_tensor_retain(t)
                                      : ddpl_to(t, (ddpl_dtype)ddpl_tensor_dtype(t), dev);
        if (!box->t) lb_error_in(L, "load");
        return;
    }
    luaL_error(L, "load: %s: the metadata refers to tensor '%s', which is not in the file", path,
               name);
}

/* The integer a tree key "#<digits>" stands for, when k + 1 is the canonical decimal form save
 * writes ("%lld": no '+', no leading zero, no overflow); false otherwise, so "#1" and "#01"
 * cannot both name key 1. */
static bool canonical_int_key(const char *k, long long *v)
{
    char *end;
    errno = 0;
    *v = strtoll(k + 1, &end, 10);
    if (errno || *end != '\0' || end == k + 1) return false;
    char again[32];
    snprintf(again, sizeof again, "%lld", *v);
    return strcmp(again, k + 1) == 0;
}

/* Converts the JSON tree j to a Lua value (pushed); depth counts the tables around it, as
 * save counts them (it refuses more than SAVE_MAX_DEPTH, and so does load). */
static void push_tree(lua_State *L, const char *path, ddpl_st_file *f, const ddpl_json *j,
                      ddpl_device dev, int depth)
{
    luaL_checkstack(L, 4, "load: nesting too deep");
    if ((j->type == DDPL_JSON_ARRAY || j->type == DDPL_JSON_OBJECT) && depth > SAVE_MAX_DEPTH)
        luaL_error(L,
                   "load: %s: tables nested deeper than %d in the ddplua.tree metadata (save "
                   "writes no deeper)",
                   path, SAVE_MAX_DEPTH);
    if (lb_json_push_scalar(L, j)) return;
    switch (j->type) {
    case DDPL_JSON_NULL:
        luaL_error(L, "load: %s: null in the ddplua.tree metadata", path);
        break;
    case DDPL_JSON_ARRAY:
        lua_createtable(L, (int)j->len, 0);
        for (size_t i = 0; i < j->len; i++) {
            push_tree(L, path, f, &j->items[i], dev, depth + 1);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        break;
    default: { /* DDPL_JSON_OBJECT: the scalars were pushed above */
        if (j->len == 1 && strcmp(j->keys[0].str, "$tensor") == 0) {
            if (j->items[0].type != DDPL_JSON_STRING)
                luaL_error(L, "load: %s: a $tensor reference is not a string", path);
            push_tensor(L, path, f, j->items[0].str, dev);
            break;
        }
        if (j->len == 1 && strcmp(j->keys[0].str, "$float") == 0) {
            const ddpl_json *v = &j->items[0];
            const char *s = v->type == DDPL_JSON_STRING ? v->str : "";
            if (strcmp(s, "nan") == 0)
                lua_pushnumber(L, NAN);
            else if (strcmp(s, "inf") == 0)
                lua_pushnumber(L, HUGE_VAL);
            else if (strcmp(s, "-inf") == 0)
                lua_pushnumber(L, -HUGE_VAL);
            else
                luaL_error(L, "load: %s: bad $float value in the metadata", path);
            break;
        }
        lua_createtable(L, 0, (int)j->len);
        for (size_t i = 0; i < j->len; i++) {
            const char *k = j->keys[i].str;
            size_t klen = j->keys[i].len;
            if (strlen(k) != klen)
                luaL_error(L, "load: %s: a key in the ddplua.tree metadata contains a NUL byte",
                           path);
            if (k[0] == '#' && k[1] != '#' && k[1] != '$' && k[1] != '\0') {
                long long v;
                if (!canonical_int_key(k, &v))
                    luaL_error(L, "load: %s: bad integer key '%s' in the metadata", path, k);
                lua_pushinteger(L, (lua_Integer)v);
            } else if (k[0] == '#') {
                lua_pushlstring(L, k + 1, klen - 1);
            } else {
                lua_pushlstring(L, k, klen);
            }
            push_tree(L, path, f, &j->items[i], dev, depth + 1);
            lua_rawset(L, -3);
        }
        break;
    }
    }
}

static const char *const load_opts[] = {"device", "map_location", NULL};

static int f_load(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    ddpl_device dev = ddpl_cpu();
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        lb_check_opts(L, 2, "load", load_opts);
        /* map_location is PyTorch's name for it (a device name here, not a function) */
        lua_getfield(L, 2, "device");
        lua_getfield(L, 2, "map_location");
        if (!lua_isnil(L, -2) && !lua_isnil(L, -1))
            return luaL_error(L, "load: give device or map_location, not both");
        if (!lua_isnil(L, -2)) dev = lb_device(L, lua_gettop(L) - 1, "load");
        if (!lua_isnil(L, -1)) dev = lb_device(L, lua_gettop(L), "load");
        lua_pop(L, 2);
    }
    lua_settop(L, 2);
    ddpl_st_file *f = lb_owner(L, sizeof *f, LOAD_CTX_MT, load_ctx_gc);
    if (ddpl_safetensors_load(path, f) < 0) lb_error(L);
    int tree = -1;
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta_keys[i], TREE_KEY) == 0) tree = i;
    if (tree >= 0) {
        ddpl_json j;
        const char *err;
        size_t pos;
        if (ddpl_json_parse(f->meta_values[tree], f->meta_lens[tree], &j, &err, &pos) < 0)
            luaL_error(L, "load: %s: the ddplua.tree metadata is not valid JSON: %s at byte %d",
                       path, err, (int)pos);
        /* j must be freed even if building the table raises: a userdata with a __gc holds it */
        ddpl_json *held = lb_json_hold(L, &j);
        if (held->type != DDPL_JSON_OBJECT && held->type != DDPL_JSON_ARRAY)
            luaL_error(L, "load: %s: the ddplua.tree metadata is not a table", path);
        push_tree(L, path, f, held, dev, 0);
        if (!lua_istable(L, -1)) /* {"$tensor": ...} or {"$float": ...} at the top */
            luaL_error(L, "load: %s: the ddplua.tree metadata is not a table", path);
        ddpl_json_free(held);
    } else {
        lua_createtable(L, 0, f->n);
        for (int i = 0; i < f->n; i++) {
            push_tensor(L, path, f, f->names[i], dev);
            lua_setfield(L, -2, f->names[i]);
        }
    }
    lua_createtable(L, 0, f->nmeta);
    for (int i = 0; i < f->nmeta; i++) {
        if (i == tree) continue;
        lua_pushlstring(L, f->meta_values[i], f->meta_lens[i]);
        lua_setfield(L, -2, f->meta_keys[i]);
    }
    lb_gc_account(L);
    return 2;
}

const luaL_Reg lb_io_functions[] = {
    {"save", f_save},
    {"load", f_load},
    {NULL, NULL},
};
