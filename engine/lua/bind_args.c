/* lua/bind_args.c: argument checking and conversion for the bindings.
 * defines: lb_error, lb_error_in, lb_argerror, lb_opterror, lb_check_operand, lb_operand,
 *          lb_parse_args, lb_arg, lb_check_opts, lb_int, lb_num, lb_check_value_fits,
 *          lb_check_number_fits, lb_bool, lb_pair, lb_dim,
 *          lb_sizes, lb_sizes_table, lb_dtype, lb_device, lb_tensor_list, lb_parse_create_opts,
 *          lb_apply_requires_grad.
 *
 * Every message names the function the user called, so a failure deep in a training script
 * reads "conv2d: expected an integer for 'stride', got string" rather than a C-level detail.
 * All checks run before anything is allocated (STYLE.md): an error never leaks a tensor. */
#include <math.h>
#include <string.h>

#include "binding.h"
#include "core/core.h"

int lb_error(lua_State *L)
{
    luaL_error(L, "%s", ddpl_last_error());
    __builtin_unreachable();
}

/* The engine's message under fname: "op: what" from the op that fname is built on (sub on
 * add, fill_ on item, setindex on select) becomes "fname: what (in op)"; a message that names no
 * op is prefixed. An error of an asynchronous device check (DDPL_DEFERRED_ERROR_NOTE) already
 * names the op that failed and the call where it surfaced, and passes unchanged. */
int lb_error_in(lua_State *L, const char *fname)
{
    const char *msg = ddpl_last_error();
    size_t n = strlen(fname);
    if (strncmp(msg, fname, n) == 0 && msg[n] == ':') luaL_error(L, "%s", msg);
    /* the op an asynchronous device check names is not one fname is built on */
    if (strstr(msg, DDPL_DEFERRED_ERROR_NOTE)) luaL_error(L, "%s", msg);
    if (strncmp(msg, "tensor: ", 8) == 0) luaL_error(L, "%s: %s", fname, msg + 8);
    size_t op = strspn(msg, "abcdefghijklmnopqrstuvwxyz0123456789_");
    if (op > 0 && op < 64 && msg[op] == ':' && msg[op + 1] == ' ') {
        char name[64];
        memcpy(name, msg, op);
        name[op] = '\0';
        luaL_error(L, "%s: %s (in %s)", fname, msg + op + 2, name);
    }
    luaL_error(L, "%s: %s", fname, msg);
    __builtin_unreachable();
}

/* "no value" for missing arguments, as lauxlib says it. */
static const char *type_of(lua_State *L, int idx)
{
    if (lua_isnone(L, idx)) return "no value";
    if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING) {
        const char *name = lua_tostring(L, -1);
        lua_pop(L, 1);
        return strcmp(name, LB_TENSOR_MT) == 0 ? "tensor" : name;
    }
    return luaL_typename(L, idx);
}

int lb_argerror(lua_State *L, int idx, const char *fname, const char *expected)
{
    luaL_error(L, "%s: expected %s as argument %d, got %s", fname, expected, idx, type_of(L, idx));
    __builtin_unreachable();
}

int lb_opterror(lua_State *L, int idx, const char *fname, const char *name, const char *expected)
{
    luaL_error(L, "%s: expected %s for '%s', got %s", fname, expected, name, type_of(L, idx));
    __builtin_unreachable();
}

void lb_check_operand(lua_State *L, int idx, const char *fname)
{
    if (lua_type(L, idx) == LUA_TNUMBER) return;
    lb_box *b = lb_testbox(L, idx);
    if (!b) lb_argerror(L, idx, fname, "a tensor or number");
    lb_check_box(L, b, fname);
}

ddpl_tensor *lb_operand(lua_State *L, int idx, bool *owned)
{
    if (lua_type(L, idx) == LUA_TNUMBER) {
        *owned = true;
        if (lua_isinteger(L, idx)) return ddpl_wrapped_number((double)lua_tointeger(L, idx), true);
        return ddpl_wrapped_number(lua_tonumber(L, idx), false);
    }
    *owned = false;
    return ((lb_box *)lua_touserdata(L, idx))->t;
}

lb_args lb_parse_args(lua_State *L)
{
    lb_args a = {lua_gettop(L), 0};
    if (a.n > 0 && lua_type(L, a.n) == LUA_TTABLE) {
        /* a list ({2, 3}, {h, w}, a list of tensors) is a positional argument; only a table
         * without [1] is the options table */
        if (lua_rawgeti(L, a.n, 1) == LUA_TNIL) {
            a.opts = a.n;
            a.n--;
        }
        lua_pop(L, 1);
    }
    return a;
}

int lb_arg(lua_State *L, const lb_args *a, int pos, const char *name)
{
    if (pos > 0 && pos <= a->n && !lua_isnil(L, pos)) return pos;
    if (!a->opts || !name) return 0;
    luaL_checkstack(L, 2, "too many options");
    if (lua_getfield(L, a->opts, name) == LUA_TNIL) {
        lua_pop(L, 1);
        return 0;
    }
    return lua_gettop(L);
}

void lb_check_opts(lua_State *L, int opts, const char *fname, const char *const *names)
{
    if (!opts) return;
    lua_pushnil(L);
    while (lua_next(L, opts)) {
        lua_pop(L, 1);
        bool known = false;
        if (lua_type(L, -1) == LUA_TSTRING) {
            const char *key = lua_tostring(L, -1);
            for (const char *const *n = names; *n && !known; n++) known = strcmp(*n, key) == 0;
            if (!known) luaL_error(L, "%s: unknown option '%s'", fname, key);
        } else {
            luaL_error(L, "%s: option names must be strings, got %s", fname, luaL_typename(L, -1));
        }
    }
}

int64_t lb_int(lua_State *L, int idx, const char *fname, const char *name, int64_t dflt)
{
    if (!idx) return dflt;
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, idx, &isint);
    if (!isint || lua_type(L, idx) != LUA_TNUMBER) lb_opterror(L, idx, fname, name, "an integer");
    return (int64_t)v;
}

double lb_num(lua_State *L, int idx, const char *fname, const char *name, double dflt)
{
    if (!idx) return dflt;
    if (lua_type(L, idx) != LUA_TNUMBER) lb_opterror(L, idx, fname, name, "a number");
    return lua_tonumber(L, idx);
}

void lb_check_number_fits(lua_State *L, const char *fname, bool is_int, int64_t i, double d,
                          ddpl_dtype dt)
{
    if (!ddpl_value_overflows(dt, is_int, i, d)) return;
    if (is_int)
        luaL_error(L, "%s: value %I cannot be converted to dtype %s without overflow", fname,
                   (lua_Integer)i, ddpl_dtype_name(dt));
    luaL_error(L, "%s: value %f cannot be converted to dtype %s without overflow", fname,
               (lua_Number)d, ddpl_dtype_name(dt));
}

void lb_check_value_fits(lua_State *L, int idx, const char *fname, ddpl_dtype dt)
{
    if (lua_type(L, idx) != LUA_TNUMBER) return;
    bool is_int = lua_isinteger(L, idx);
    lb_check_number_fits(L, fname, is_int, is_int ? (int64_t)lua_tointeger(L, idx) : 0,
                         lua_tonumber(L, idx), dt);
}

bool lb_bool(lua_State *L, int idx, const char *fname, const char *name, bool dflt)
{
    if (!idx) return dflt;
    if (lua_type(L, idx) != LUA_TBOOLEAN) lb_opterror(L, idx, fname, name, "a boolean");
    return lua_toboolean(L, idx);
}

static int small_int(lua_State *L, int idx, const char *fname, const char *name)
{
    int64_t v = lb_int(L, idx, fname, name, 0);
    if (v < INT32_MIN || v > INT32_MAX)
        luaL_error(L, "%s: '%s' is out of range (%I)", fname, name, (lua_Integer)v);
    return (int)v;
}

void lb_pair(lua_State *L, int idx, const char *fname, const char *name, int dflt, int out[2])
{
    out[0] = out[1] = dflt;
    if (!idx) return;
    if (lua_type(L, idx) == LUA_TNUMBER) {
        out[0] = out[1] = small_int(L, idx, fname, name);
        return;
    }
    if (lua_type(L, idx) != LUA_TTABLE || luaL_len(L, idx) != 2)
        lb_opterror(L, idx, fname, name, "an integer or a pair {h, w}");
    for (int i = 0; i < 2; i++) {
        lua_rawgeti(L, idx, i + 1);
        out[i] = small_int(L, lua_gettop(L), fname, name);
        lua_pop(L, 1);
    }
}

int lb_dim(lua_State *L, int idx, const char *fname)
{
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, idx, &isint);
    if (!isint || lua_type(L, idx) != LUA_TNUMBER) lb_argerror(L, idx, fname, "an integer dim");
    /* within the int range the engine reports the tensor's own range; beyond it, the given
     * value is named here (it would otherwise be reported clamped) */
    if (v < -DDPL_MAX_DIMS - 1 || v > DDPL_MAX_DIMS + 1)
        luaL_error(L, "%s: dimension %I out of range (tensors have at most %d dimensions)", fname,
                   v, DDPL_MAX_DIMS);
    return (int)v;
}

static int64_t size_value(lua_State *L, int idx, const char *fname, const char *what)
{
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, idx, &isint);
    if (!isint || lua_type(L, idx) != LUA_TNUMBER)
        luaL_error(L, "%s: expected integer sizes, got %s in %s", fname, type_of(L, idx), what);
    return (int64_t)v;
}

int lb_sizes_table(lua_State *L, int idx, const char *fname, const char *name, int64_t *sizes)
{
    if (lua_type(L, idx) != LUA_TTABLE) lb_opterror(L, idx, fname, name, "a table of sizes");
    lua_Integer n = luaL_len(L, idx);
    if (n < 0 || n > DDPL_MAX_DIMS) /* __len may return anything */
        luaL_error(L, "%s: %I dimensions requested, at most %d are supported", fname, n,
                   DDPL_MAX_DIMS);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, idx, i + 1);
        sizes[i] = size_value(L, -1, fname, name);
        lua_pop(L, 1);
    }
    return (int)n;
}

int lb_sizes(lua_State *L, int first, int last, const char *fname, int64_t *sizes)
{
    if (first == last && lua_type(L, first) == LUA_TTABLE)
        return lb_sizes_table(L, first, fname, "size", sizes);
    int n = last - first + 1;
    if (n < 0) n = 0;
    if (n > DDPL_MAX_DIMS)
        luaL_error(L, "%s: %d dimensions requested, at most %d are supported", fname, n,
                   DDPL_MAX_DIMS);
    for (int i = 0; i < n; i++) {
        if (lua_type(L, first + i) != LUA_TNUMBER)
            lb_argerror(L, first + i, fname, "integer sizes or a table of sizes");
        sizes[i] = size_value(L, first + i, fname, "the sizes");
    }
    return n;
}

ddpl_dtype lb_dtype(lua_State *L, int idx, const char *fname)
{
    if (lua_type(L, idx) != LUA_TSTRING) lb_opterror(L, idx, fname, "dtype", "a dtype name");
    int dt = ddpl_dtype_from_name(lua_tostring(L, idx));
    if (dt < 0)
        luaL_error(L,
                   "%s: unknown dtype '%s' (expected float32, float64, float16, bfloat16, int64, "
                   "int32, int16, int8, uint8 or bool)",
                   fname, lua_tostring(L, idx));
    return (ddpl_dtype)dt;
}

ddpl_device lb_device(lua_State *L, int idx, const char *fname)
{
    if (lua_type(L, idx) != LUA_TSTRING)
        lb_opterror(L, idx, fname, "device", "a device name ('cpu', 'cuda', 'cuda:N')");
    ddpl_device d;
    if (ddpl_device_parse(lua_tostring(L, idx), &d) < 0)
        luaL_error(L, "%s: %s", fname, ddpl_last_error());
    return d;
}

int lb_tensor_list(lua_State *L, int idx, const char *fname, ddpl_tensor ***out)
{
    if (lua_type(L, idx) != LUA_TTABLE) lb_argerror(L, idx, fname, "a list of tensors");
    lua_Integer n = luaL_len(L, idx);
    if (n < 0) /* a __len metamethod may say anything */
        luaL_error(L, "%s: expected a list of tensors, got a table of length %I", fname, n);
    /* every entry is checked before the array is allocated: a table that claims a huge length
     * fails at its first missing entry, not in the allocator */
    for (lua_Integer i = 0; i < n; i++) {
        lua_rawgeti(L, idx, i + 1);
        lb_box *b = lb_testbox(L, -1);
        if (!b)
            luaL_error(L, "%s: expected a list of tensors, got %s at position %I", fname,
                       type_of(L, -1), i + 1);
        lb_check_box(L, b, fname);
        lua_pop(L, 1);
    }
    ddpl_tensor **ts = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *ts, 0);
    for (lua_Integer i = 0; i < n; i++) {
        lua_rawgeti(L, idx, i + 1);
        ts[i] = lb_testbox(L, -1)->t; /* the list keeps the box, hence the tensor, alive */
        lua_pop(L, 1);
    }
    *out = ts;
    return (int)n;
}

static const char *const create_opt_names[] = {"dtype", "device", "requires_grad", NULL};

lb_create_opts lb_parse_create_opts(lua_State *L, int opts, const char *fname, ddpl_dtype dflt)
{
    lb_create_opts o = {dflt, false, ddpl_cpu(), false};
    if (!opts) return o;
    lb_check_opts(L, opts, fname, create_opt_names);
    if (lua_getfield(L, opts, "dtype") != LUA_TNIL) {
        o.dtype = lb_dtype(L, lua_gettop(L), fname);
        o.has_dtype = true;
    }
    if (lua_getfield(L, opts, "device") != LUA_TNIL) o.device = lb_device(L, lua_gettop(L), fname);
    if (lua_getfield(L, opts, "requires_grad") != LUA_TNIL)
        o.requires_grad = lb_bool(L, lua_gettop(L), fname, "requires_grad", false);
    lua_pop(L, 3);
    return o;
}

void lb_apply_requires_grad(lua_State *L, lb_box *box, const lb_create_opts *o)
{
    if (o->requires_grad && ddpl_tensor_set_requires_grad(box->t, true) < 0) lb_error(L);
}
