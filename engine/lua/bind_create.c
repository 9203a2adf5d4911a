/* lua/bind_create.c: the ddpl.* functions that make tensors.
 * defines: lb_create_functions: tensor zeros ones empty full eye arange linspace logspace rand
 *          randn randint randperm zeros_like ones_like empty_like full_like rand_like randn_like
 *          frombytes is_tensor.
 *
 * Every factory takes {dtype=, device=, requires_grad=} last. ddpl.tensor infers the dtype as
 * PyTorch does from Python values: all integers -> int64, any float -> float32, booleans ->
 * bool (Lua's integer/float subtypes play the role of Python's int/float). */
#include <string.h>

#include "binding.h"
#include "core/core.h"

/* ---- ddpl.tensor(data) ---- */

enum { KIND_BOOL, KIND_INT, KIND_FLOAT };

typedef struct nested {
    int ndim;
    int64_t sizes[DDPL_MAX_DIMS];
    int kind;
    ddpl_dtype target; /* the tensor's dtype: fill() refuses numbers it cannot hold */
} nested;

/* The shape is read along the first elements; check() then verifies every table against it. */
static void probe_shape(lua_State *L, int idx, nested *n)
{
    lua_pushvalue(L, idx);
    while (lua_type(L, -1) == LUA_TTABLE) {
        if (n->ndim == DDPL_MAX_DIMS)
            luaL_error(L, "tensor: nested tables deeper than %d dimensions", DDPL_MAX_DIMS);
        int64_t len = (int64_t)luaL_len(L, -1);
        n->sizes[n->ndim++] = len;
        if (len == 0) break;
        lua_rawgeti(L, -1, 1);
        lua_remove(L, -2);
    }
    lua_pop(L, 1);
}

static void check_leaf(lua_State *L, int idx, int depth, nested *n)
{
    switch (lua_type(L, idx)) {
    case LUA_TNUMBER:
        if (!lua_isinteger(L, idx))
            n->kind = KIND_FLOAT;
        else if (n->kind < KIND_INT)
            n->kind = KIND_INT;
        break;
    case LUA_TBOOLEAN:
        break;
    default:
        luaL_error(L, "tensor: expected a number or boolean at depth %d, got %s", depth,
                   luaL_typename(L, idx));
    }
}

static void check(lua_State *L, int idx, int d, nested *n)
{
    if (d == n->ndim) {
        check_leaf(L, idx, d, n);
        return;
    }
    if (lua_type(L, idx) != LUA_TTABLE)
        luaL_error(L,
                   "tensor: ragged nested table at depth %d: expected a table of %I "
                   "elements, got %s",
                   d + 1, (lua_Integer)n->sizes[d], luaL_typename(L, idx));
    int64_t len = (int64_t)luaL_len(L, idx);
    if (len != n->sizes[d])
        luaL_error(L, "tensor: ragged nested table at depth %d: expected %I elements, got %I",
                   d + 1, (lua_Integer)n->sizes[d], (lua_Integer)len);
    luaL_checkstack(L, 2, "tensor: too deep");
    for (int64_t i = 1; i <= len; i++) {
        lua_rawgeti(L, idx, i);
        check(L, lua_gettop(L), d + 1, n);
        lua_pop(L, 1);
    }
}

/* Writes the leaves in row-major order as int64, double or bool bytes. */
static void fill(lua_State *L, int idx, int d, const nested *n, char **p)
{
    if (d == n->ndim) {
        /* torch.tensor refuses what an integer dtype cannot hold, but rounds a float that
         * overflows a floating dtype to inf (tensor({1e10}, {dtype='float16'})) */
        if (!ddpl_dtype_is_floating(n->target)) lb_check_value_fits(L, idx, "tensor", n->target);
        if (n->kind == KIND_FLOAT) {
            *(double *)*p = lua_tonumber(L, idx); /* booleans read as 0 here */
            if (lua_type(L, idx) == LUA_TBOOLEAN) *(double *)*p = lua_toboolean(L, idx);
            *p += sizeof(double);
        } else if (n->kind == KIND_INT) {
            *(int64_t *)*p = lua_type(L, idx) == LUA_TBOOLEAN ? lua_toboolean(L, idx)
                                                              : (int64_t)lua_tointeger(L, idx);
            *p += sizeof(int64_t);
        } else {
            *(uint8_t *)*p = (uint8_t)lua_toboolean(L, idx);
            *p += 1;
        }
        return;
    }
    for (int64_t i = 1; i <= n->sizes[d]; i++) {
        lua_rawgeti(L, idx, i);
        fill(L, lua_gettop(L), d + 1, n, p);
        lua_pop(L, 1);
    }
}

static ddpl_dtype kind_dtype(int kind)
{
    return kind == KIND_FLOAT ? DDPL_FLOAT64 : kind == KIND_INT ? DDPL_INT64 : DDPL_BOOL;
}

static int f_tensor(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    if (a.opts == 1) a = (lb_args){1, 0}; /* ddpl.tensor({}): the data, an empty list */
    if (a.n < 1) return lb_argerror(L, 1, "tensor", "a number, boolean or nested table");
    /* a tensor argument is copied, as torch.tensor(t) does */
    lb_box *src = lb_testbox(L, 1);
    if (src) {
        ddpl_tensor *t = lb_check(L, 1, "tensor");
        lb_create_opts o = lb_parse_create_opts(L, a.opts, "tensor", ddpl_tensor_dtype(t));
        lb_box *box = lb_newbox(L);
        bool prev = ddpl_set_grad_enabled(false);
        ddpl_tensor *d = ddpl_detach(t);
        box->t = d ? ddpl_to(d, o.dtype, o.device) : NULL;
        if (box->t == d && d) {
            box->t = ddpl_clone(d);
            ddpl_tensor_release(d);
        } else {
            ddpl_tensor_release(d);
        }
        ddpl_set_grad_enabled(prev);
        lb_finish_in(L, box, "tensor");
        lb_apply_requires_grad(L, box, &o);
        return 1;
    }
    int t1 = lua_type(L, 1);
    if (t1 != LUA_TTABLE && t1 != LUA_TNUMBER && t1 != LUA_TBOOLEAN)
        return lb_argerror(L, 1, "tensor", "a number, boolean or nested table");
    nested n = {0, {0}, KIND_BOOL, DDPL_BOOL};
    probe_shape(L, 1, &n);
    if (n.ndim && n.sizes[n.ndim - 1] == 0) n.kind = KIND_FLOAT; /* empty: default float */
    check(L, 1, 0, &n);
    lb_create_opts o = lb_parse_create_opts(L, a.opts, "tensor", kind_dtype(n.kind));
    if (!o.has_dtype && n.kind == KIND_FLOAT) o.dtype = DDPL_FLOAT32;
    if (!o.has_dtype && n.kind == KIND_INT) o.dtype = DDPL_INT64;
    /* values go through a host buffer owned by the Lua stack, then one conversion */
    int64_t numel = 1;
    for (int i = 0; i < n.ndim; i++) numel *= n.sizes[i];
    ddpl_dtype staged = kind_dtype(n.kind);
    char *buf = lua_newuserdatauv(L, (size_t)(numel ? numel : 1) * ddpl_dtype_size(staged), 0);
    char *p = buf;
    n.target = o.dtype;
    fill(L, 1, 0, &n, &p);
    lb_box *box = lb_newbox(L);
    ddpl_tensor *host = ddpl_from_data(n.ndim, n.sizes, staged, buf, ddpl_cpu());
    box->t = host ? ddpl_to(host, o.dtype, o.device) : NULL;
    ddpl_tensor_release(host);
    lb_finish_in(L, box, "tensor");
    lb_apply_requires_grad(L, box, &o);
    return 1;
}

/* ---- factories ---- */

typedef ddpl_tensor *(*factory_fn)(int, const int64_t *, ddpl_dtype, ddpl_device);

/* f(d0, d1, ... [, opts]) or f({d0, d1} [, opts]) */
static int sized(lua_State *L, const char *fname, factory_fn fn)
{
    lb_args a = lb_parse_args(L);
    int64_t sizes[DDPL_MAX_DIMS];
    int nd = lb_sizes(L, 1, a.n, fname, sizes);
    lb_create_opts o = lb_parse_create_opts(L, a.opts, fname, DDPL_FLOAT32);
    lb_box *box = lb_newbox(L);
    box->t = fn(nd, sizes, o.dtype, o.device);
    lb_finish_in(L, box, fname);
    lb_apply_requires_grad(L, box, &o);
    return 1;
}

static int f_zeros(lua_State *L)
{
    return sized(L, "zeros", ddpl_zeros);
}
static int f_ones(lua_State *L)
{
    return sized(L, "ones", ddpl_ones);
}
static int f_empty(lua_State *L)
{
    return sized(L, "empty", ddpl_empty);
}
static int f_rand(lua_State *L)
{
    return sized(L, "rand", ddpl_rand);
}
static int f_randn(lua_State *L)
{
    return sized(L, "randn", ddpl_randn);
}

/* The dtype PyTorch infers from a fill value: bool, int64 or the default float. */
static ddpl_dtype value_dtype(lua_State *L, int idx)
{
    if (lua_type(L, idx) == LUA_TBOOLEAN) return DDPL_BOOL;
    return lua_isinteger(L, idx) ? DDPL_INT64 : DDPL_FLOAT32;
}

static double value_number(lua_State *L, int idx, const char *fname)
{
    if (lua_type(L, idx) == LUA_TBOOLEAN) return lua_toboolean(L, idx);
    if (lua_type(L, idx) != LUA_TNUMBER) lb_argerror(L, idx, fname, "a number or boolean");
    return lua_tonumber(L, idx);
}

/* ddpl.full(size, value [, opts]) */
static int f_full(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    int64_t sizes[DDPL_MAX_DIMS];
    if (lua_type(L, 1) != LUA_TTABLE) return lb_argerror(L, 1, "full", "a table of sizes");
    int nd = lb_sizes_table(L, 1, "full", "size", sizes);
    double v = value_number(L, 2, "full");
    lb_create_opts o = lb_parse_create_opts(L, a.opts, "full", value_dtype(L, 2));
    lb_check_value_fits(L, 2, "full", o.dtype);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_full(nd, sizes, v, o.dtype, o.device);
    lb_finish_in(L, box, "full");
    lb_apply_requires_grad(L, box, &o);
    return 1;
}

/* ddpl.eye(n [, m] [, opts]) */
static int f_eye(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    int64_t n = lb_int(L, 1, "eye", "n", 0);
    int64_t m = a.n >= 2 ? lb_int(L, 2, "eye", "m", n) : n;
    lb_create_opts o = lb_parse_create_opts(L, a.opts, "eye", DDPL_FLOAT32);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_eye(n, m, o.dtype, o.device);
    lb_finish_in(L, box, "eye");
    lb_apply_requires_grad(L, box, &o);
    return 1;
}

/* ddpl.linspace(start, end, steps [, opts]) and ddpl.logspace(start, end, steps [, base]
 * [, opts]) (base also {base=}, as PyTorch's keyword): float32 unless opts say otherwise */
static int spaced(lua_State *L, const char *fname, bool log)
{
    lb_args a = lb_parse_args(L);
    int max_pos = log ? 4 : 3;
    if (a.n < 3 || a.n > max_pos)
        return luaL_error(L, "%s: expected start, end, steps%s, got %d arguments", fname,
                          log ? " [, base]" : "", a.n);
    double start = lb_num(L, 1, fname, "start", 0), end = lb_num(L, 2, fname, "end", 0);
    int64_t steps = lb_int(L, 3, fname, "steps", 0);
    double base = 10;
    int opts = a.opts;
    if (log) {
        base = lb_num(L, lb_arg(L, &a, 4, "base"), fname, "base", 10.0);
        if (opts) { /* the factory options without base */
            lua_newtable(L);
            for (lua_pushnil(L); lua_next(L, opts); lua_pop(L, 1)) {
                if (lua_type(L, -2) == LUA_TSTRING && strcmp(lua_tostring(L, -2), "base") == 0)
                    continue;
                lua_pushvalue(L, -2);
                lua_pushvalue(L, -2);
                lua_settable(L, -5);
            }
            opts = lua_gettop(L);
        }
    }
    lb_create_opts o = lb_parse_create_opts(L, opts, fname, DDPL_FLOAT32);
    lb_box *box = lb_newbox(L);
    box->t = log ? ddpl_logspace(start, end, steps, base, o.dtype, o.device)
                 : ddpl_linspace(start, end, steps, o.dtype, o.device);
    lb_finish_in(L, box, fname);
    lb_apply_requires_grad(L, box, &o);
    return 1;
}

static int f_linspace(lua_State *L)
{
    return spaced(L, "linspace", false);
}
static int f_logspace(lua_State *L)
{
    return spaced(L, "logspace", true);
}

/* ddpl.arange([start,] stop [, step] [, opts]): int64 unless a bound or the step is a float */
static int f_arange(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    if (a.n < 1 || a.n > 3) return luaL_error(L, "arange: expected 1 to 3 numbers, got %d", a.n);
    double v[3] = {0, 0, 1};
    int64_t iv[3] = {0, 0, 1}; /* the same, exact, when all are integers */
    bool any_float = false;
    for (int i = 1; i <= a.n; i++) {
        if (lua_type(L, i) != LUA_TNUMBER) return lb_argerror(L, i, "arange", "a number");
        any_float |= !lua_isinteger(L, i);
    }
    for (int i = 1; i <= a.n; i++) {
        int slot = a.n == 1 ? 1 : i - 1;
        v[slot] = lua_tonumber(L, i);
        if (!any_float) iv[slot] = lua_tointeger(L, i);
    }
    lb_create_opts o =
        lb_parse_create_opts(L, a.opts, "arange", any_float ? DDPL_FLOAT32 : DDPL_INT64);
    lb_box *box = lb_newbox(L);
    box->t = !any_float && !ddpl_dtype_is_floating(o.dtype)
                 ? ddpl_arange_int(iv[0], iv[1], iv[2], o.dtype, o.device)
                 : ddpl_arange(v[0], v[1], v[2], o.dtype, o.device);
    lb_finish_in(L, box, "arange");
    lb_apply_requires_grad(L, box, &o);
    return 1;
}

/* ddpl.randint(low, high, size [, opts]) or ddpl.randint(high, size [, opts]) */
static int f_randint(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    int64_t low = 0, high;
    int size_idx;
    if (a.n == 2) {
        high = lb_int(L, 1, "randint", "high", 0);
        size_idx = 2;
    } else {
        low = lb_int(L, 1, "randint", "low", 0);
        high = lb_int(L, 2, "randint", "high", 0);
        size_idx = 3;
    }
    int64_t sizes[DDPL_MAX_DIMS];
    if (lua_type(L, size_idx) != LUA_TTABLE)
        return lb_argerror(L, size_idx, "randint", "a table of sizes");
    int nd = lb_sizes_table(L, size_idx, "randint", "size", sizes);
    lb_create_opts o = lb_parse_create_opts(L, a.opts, "randint", DDPL_INT64);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_randint(low, high, nd, sizes, o.dtype, o.device);
    return lb_finish_in(L, box, "randint");
}

static int f_randperm(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    int64_t n = lb_int(L, 1, "randperm", "n", 0);
    lb_create_opts o = lb_parse_create_opts(L, a.opts, "randperm", DDPL_INT64);
    lb_box *box = lb_newbox(L);
    ddpl_tensor *p = ddpl_randperm(n, o.device);
    box->t = p ? ddpl_to(p, o.dtype, o.device) : NULL;
    ddpl_tensor_release(p);
    return lb_finish_in(L, box, "randperm");
}

/* ---- *_like(x [, opts]): x's shape, and its dtype and device unless given ---- */

static int like(lua_State *L, const char *fname, factory_fn fn, bool has_value)
{
    lb_args a = lb_parse_args(L);
    ddpl_tensor *x = lb_check(L, 1, fname);
    double v = has_value ? value_number(L, 2, fname) : 0.0;
    lb_create_opts o = lb_parse_create_opts(L, a.opts, fname, ddpl_tensor_dtype(x));
    if (!a.opts || (lua_getfield(L, a.opts, "device"), lua_isnil(L, -1)))
        o.device = ddpl_tensor_device(x);
    if (has_value) lb_check_value_fits(L, 2, fname, o.dtype);
    lb_box *box = lb_newbox(L);
    if (has_value)
        box->t = ddpl_full(ddpl_tensor_ndim(x), ddpl_tensor_sizes(x), v, o.dtype, o.device);
    else
        box->t = fn(ddpl_tensor_ndim(x), ddpl_tensor_sizes(x), o.dtype, o.device);
    lb_finish_in(L, box, fname);
    lb_apply_requires_grad(L, box, &o);
    return 1;
}

static int f_zeros_like(lua_State *L)
{
    return like(L, "zeros_like", ddpl_zeros, false);
}
static int f_ones_like(lua_State *L)
{
    return like(L, "ones_like", ddpl_ones, false);
}
static int f_empty_like(lua_State *L)
{
    return like(L, "empty_like", ddpl_empty, false);
}
static int f_rand_like(lua_State *L)
{
    return like(L, "rand_like", ddpl_rand, false);
}
static int f_randn_like(lua_State *L)
{
    return like(L, "randn_like", ddpl_randn, false);
}
static int f_full_like(lua_State *L)
{
    return like(L, "full_like", NULL, true);
}

/* ddpl.frombytes(str, dtype [, shape]): the string's bytes reinterpreted as elements of dtype
 * (native byte order), copied into a new CPU tensor: the fast path for binary files. */
static int f_frombytes(lua_State *L)
{
    size_t len;
    if (lua_type(L, 1) != LUA_TSTRING) return lb_argerror(L, 1, "frombytes", "a string");
    const char *bytes = lua_tolstring(L, 1, &len);
    if (lua_isnoneornil(L, 2)) return lb_argerror(L, 2, "frombytes", "a dtype name");
    ddpl_dtype dt = lb_dtype(L, 2, "frombytes");
    size_t esz = ddpl_dtype_size(dt);
    int64_t sizes[DDPL_MAX_DIMS];
    int nd = 1;
    sizes[0] = (int64_t)(len / esz);
    if (!lua_isnoneornil(L, 3)) {
        nd = lb_sizes(L, 3, lua_gettop(L), "frombytes", sizes);
        int64_t numel;
        size_t nbytes;
        if (ddpl_check_shape("frombytes", nd, sizes, &numel) < 0) return lb_error(L);
        if (ddpl_bytes_overflow(numel, esz, &nbytes) || nbytes != len) {
            char shape[160];
            return luaL_error(L, "frombytes: shape %s of %s does not hold the string's %I bytes",
                              ddpl_sizes_str(nd, sizes, shape, sizeof shape), ddpl_dtype_name(dt),
                              (lua_Integer)len);
        }
    } else if (len % esz) {
        return luaL_error(L, "frombytes: %I bytes is not a whole number of %s elements",
                          (lua_Integer)len, ddpl_dtype_name(dt));
    }
    lb_box *box = lb_newbox(L);
    box->t = ddpl_from_data(nd, sizes, dt, bytes, ddpl_cpu());
    return lb_finish_in(L, box, "frombytes");
}

static int f_is_tensor(lua_State *L)
{
    lua_pushboolean(L, lb_testbox(L, 1) != NULL);
    return 1;
}

const luaL_Reg lb_create_functions[] = {
    {"tensor", f_tensor},
    {"zeros", f_zeros},
    {"ones", f_ones},
    {"empty", f_empty},
    {"full", f_full},
    {"eye", f_eye},
    {"arange", f_arange},
    {"linspace", f_linspace},
    {"logspace", f_logspace},
    {"rand", f_rand},
    {"randn", f_randn},
    {"randint", f_randint},
    {"randperm", f_randperm},
    {"zeros_like", f_zeros_like},
    {"ones_like", f_ones_like},
    {"empty_like", f_empty_like},
    {"full_like", f_full_like},
    {"rand_like", f_rand_like},
    {"randn_like", f_randn_like},
    {"frombytes", f_frombytes},
    {"is_tensor", f_is_tensor},
    {NULL, NULL},
};
