/* lua/util.c: utilities of the ddpl table and the ddpl.cuda queries.
 * defines: lb_util_functions (time set_num_threads get_num_threads config memory_allocated),
 *          lb_cuda_functions (is_available device_count synchronize memory_allocated
 *          max_memory_allocated set_device current_device empty_cache). */
#include <time.h>

#include "binding.h"

/* Monotonic seconds with nanosecond resolution: Lua's os.clock is CPU time (it adds up all
 * threads of a parallel kernel) and os.time has whole seconds. */
static int f_time(lua_State *L)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
    return 1;
}

static int f_set_num_threads(lua_State *L)
{
    int64_t n = lb_int(L, 1, "set_num_threads", "n", 0);
    if (n < 1 || n > 4096)
        return luaL_error(L, "set_num_threads: expected a positive thread count, got %I",
                          (lua_Integer)n);
    ddpl_set_num_threads((int)n);
    return 0;
}

static int f_get_num_threads(lua_State *L)
{
    lua_pushinteger(L, ddpl_get_num_threads());
    return 1;
}

#ifndef DDPL_HAVE_NCCL
#define DDPL_HAVE_NCCL 0
#endif
#ifndef DDPL_HAVE_CUDNN
#define DDPL_HAVE_CUDNN 0
#endif
#ifndef DDPL_HAVE_GLOO
#define DDPL_HAVE_GLOO 0
#endif

/* ddpl.config(): what this build contains, for bug reports */
static int f_config(lua_State *L)
{
    lua_createtable(L, 0, 9);
    lua_pushstring(L, DDPL_VERSION);
    lua_setfield(L, -2, "version");
    lua_pushboolean(L, DDPL_HAVE_CUDA);
    lua_setfield(L, -2, "cuda");
    lua_pushboolean(L, DDPL_HAVE_NCCL);
    lua_setfield(L, -2, "nccl");
    lua_pushboolean(L, DDPL_HAVE_CUDNN);
    lua_setfield(L, -2, "cudnn");
    lua_pushboolean(L, DDPL_HAVE_GLOO);
    lua_setfield(L, -2, "gloo");
    lua_pushstring(L, "openblas");
    lua_setfield(L, -2, "blas");
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "openmp");
    lua_pushstring(L, LUA_RELEASE);
    lua_setfield(L, -2, "lua");
    lua_pushinteger(L, ddpl_get_num_threads());
    lua_setfield(L, -2, "num_threads");
    return 1;
}

/* ddpl.memory_allocated([device_type='cpu']): bytes of tensor storage alive */
static int f_memory_allocated(lua_State *L)
{
    ddpl_device d = ddpl_cpu();
    if (!lua_isnoneornil(L, 1)) d = lb_device(L, 1, "memory_allocated");
    lua_pushinteger(L, ddpl_memory_allocated((ddpl_device_type)d.type));
    return 1;
}

static int c_is_available(lua_State *L)
{
    lua_pushboolean(L, ddpl_cuda_is_available());
    return 1;
}

static int c_device_count(lua_State *L)
{
    lua_pushinteger(L, ddpl_cuda_device_count());
    return 1;
}

static int c_synchronize(lua_State *L)
{
    if (ddpl_cuda_synchronize() < 0) lb_error(L);
    return 0;
}

static int c_memory_allocated(lua_State *L)
{
    lua_pushinteger(L, ddpl_memory_allocated(DDPL_CUDA));
    return 1;
}

static int c_max_memory_allocated(lua_State *L)
{
    lua_pushinteger(L, ddpl_memory_max_allocated(DDPL_CUDA));
    return 1;
}

static int c_set_device(lua_State *L)
{
    if (ddpl_cuda_set_device((int)luaL_checkinteger(L, 1)) < 0) lb_error(L);
    return 0;
}

static int c_current_device(lua_State *L)
{
    int d = ddpl_cuda_current_device();
    if (d < 0) lb_error(L);
    lua_pushinteger(L, d);
    return 1;
}

static int c_empty_cache(lua_State *L)
{
    (void)L;
    ddpl_cuda_empty_cache();
    return 0;
}

const luaL_Reg lb_util_functions[] = {
    {"time", f_time},
    {"set_num_threads", f_set_num_threads},
    {"get_num_threads", f_get_num_threads},
    {"config", f_config},
    {"memory_allocated", f_memory_allocated},
    {NULL, NULL},
};

const luaL_Reg lb_cuda_functions[] = {
    {"is_available", c_is_available},
    {"device_count", c_device_count},
    {"synchronize", c_synchronize},
    {"memory_allocated", c_memory_allocated},
    {"max_memory_allocated", c_max_memory_allocated},
    {"set_device", c_set_device},
    {"current_device", c_current_device},
    {"empty_cache", c_empty_cache},
    {NULL, NULL},
};
