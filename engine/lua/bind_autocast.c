/* lua/bind_autocast.c: mixed precision and the float32 matmul precision from Lua.
 * defines: lb_autocast_functions (autocast is_autocast_enabled get_autocast_dtype
 *          set_float32_matmul_precision get_float32_matmul_precision).
 *
 * ddpl.autocast(device_type [, opts], fn, ...) runs fn(...) with autocast set for
 * device_type ('cuda' or 'cpu'; opts.dtype 'bfloat16' (default) or 'float16', on both),
 * opts.enabled=false switches it off inside fn, as PyTorch's enabled=False; opts.cache_enabled
 * (default true) reuses one cast of each parameter within the outermost region, ops/autocast.h)
 * and returns fn's results. The previous state is restored by a guard in a to-be-closed slot of the
 * C frame, so it comes back even when fn raises (and after the message handler has seen the error,
 * as in no_grad). */
#include "binding.h"
#include "core/matmul_precision.h"
#include "ops/autocast.h"

#define GUARD_MT "ddplua.AutocastGuard"

typedef struct {
    ddpl_device_type type;
    ddpl_autocast_state prev;
    bool prev_cache_enabled;
} autocast_guard;

static int guard_close(lua_State *L)
{
    autocast_guard *g = luaL_checkudata(L, 1, GUARD_MT);
    ddpl_autocast_set(g->type, g->prev, NULL);  /* prev was valid when saved: cannot fail */
    ddpl_autocast_leave(g->prev_cache_enabled); /* the outermost region empties the cast cache */
    return 0;
}

static ddpl_device_type device_type_arg(lua_State *L, int idx, const char *fname)
{
    const char *s = lua_type(L, idx) == LUA_TSTRING ? lua_tostring(L, idx) : NULL;
    if (!s) lb_argerror(L, idx, fname, "a device type ('cuda' or 'cpu')");
    if (strcmp(s, "cuda") == 0) return DDPL_CUDA;
    if (strcmp(s, "cpu") == 0) return DDPL_CPU;
    luaL_error(L, "%s: expected device type 'cuda' or 'cpu', got '%s'", fname, s);
    return DDPL_CPU;
}

static const char *const autocast_opts[] = {"dtype", "enabled", "cache_enabled", NULL};

/* ddpl.autocast(device_type [, opts], fn, ...) -> fn's results */
static int f_autocast(lua_State *L)
{
    const char *fname = "autocast";
    ddpl_device_type type = device_type_arg(L, 1, fname);
    int fn = 3;
    if (lua_isfunction(L, 2)) { /* opts omitted */
        lua_pushnil(L);
        lua_insert(L, 2);
    } else if (!lua_isnoneornil(L, 2) && !lua_istable(L, 2)) {
        lb_argerror(L, 2, fname, "an options table");
    }
    if (!lua_isfunction(L, fn)) {
        if (luaL_getmetafield(L, fn, "__call") == LUA_TNIL)
            return lb_argerror(L, fn, fname, "a function");
        lua_pop(L, 1);
    }
    ddpl_autocast_state s = {true, DDPL_BFLOAT16};
    bool cache_enabled = true;
    if (lua_istable(L, 2)) {
        lb_check_opts(L, 2, fname, autocast_opts);
        lua_getfield(L, 2, "dtype");
        if (!lua_isnil(L, -1)) s.dtype = lb_dtype(L, lua_gettop(L), fname);
        lua_pop(L, 1);
        lua_getfield(L, 2, "enabled");
        if (!lua_isnil(L, -1)) s.enabled = lb_bool(L, lua_gettop(L), fname, "enabled", true);
        lua_pop(L, 1);
        lua_getfield(L, 2, "cache_enabled");
        if (!lua_isnil(L, -1))
            cache_enabled = lb_bool(L, lua_gettop(L), fname, "cache_enabled", true);
        lua_pop(L, 1);
    }
    ddpl_autocast_state prev;
    if (ddpl_autocast_set(type, s, &prev) < 0) return lb_error(L);
    /* the guard: from here on the previous state is restored however fn ends; it replaces
     * the device-type and options slots (1, 2), leaving fn and its arguments above */
    autocast_guard *g = lua_newuserdatauv(L, sizeof *g, 0);
    g->type = type;
    g->prev = prev;
    g->prev_cache_enabled = ddpl_autocast_enter(cache_enabled);
    if (luaL_newmetatable(L, GUARD_MT)) {
        lua_pushcfunction(L, guard_close);
        lua_setfield(L, -2, "__close");
    }
    lua_setmetatable(L, -2);
    lua_replace(L, 1);
    lua_remove(L, 2);
    lua_toclose(L, 1);
    int nargs = lua_gettop(L) - 2;
    lua_call(L, nargs, LUA_MULTRET);
    return lua_gettop(L) - 1;
}

/* ddpl.is_autocast_enabled([device_type='cuda']) */
static int f_is_autocast_enabled(lua_State *L)
{
    ddpl_device_type type =
        lua_isnoneornil(L, 1) ? DDPL_CUDA : device_type_arg(L, 1, "is_autocast_enabled");
    lua_pushboolean(L, ddpl_autocast_enabled(type));
    return 1;
}

/* ddpl.get_autocast_dtype(device_type) -> 'bfloat16' | 'float16' */
static int f_get_autocast_dtype(lua_State *L)
{
    ddpl_device_type type = device_type_arg(L, 1, "get_autocast_dtype");
    lua_pushstring(L, ddpl_dtype_name(ddpl_autocast_dtype(type)));
    return 1;
}

/* ddpl.set_float32_matmul_precision('highest' | 'high' | 'medium') */
static int f_set_float32_matmul_precision(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TSTRING)
        return lb_argerror(L, 1, "set_float32_matmul_precision",
                           "a string ('highest', 'high' or 'medium')");
    if (ddpl_set_float32_matmul_precision(lua_tostring(L, 1)) < 0)
        return lb_error_in(L, "set_float32_matmul_precision");
    return 0;
}

static int f_get_float32_matmul_precision(lua_State *L)
{
    lua_pushstring(L, ddpl_get_float32_matmul_precision());
    return 1;
}

const luaL_Reg lb_autocast_functions[] = {
    {"autocast", f_autocast},
    {"is_autocast_enabled", f_is_autocast_enabled},
    {"get_autocast_dtype", f_get_autocast_dtype},
    {"set_float32_matmul_precision", f_set_float32_matmul_precision},
    {"get_float32_matmul_precision", f_get_float32_matmul_precision},
    {NULL, NULL},
};
