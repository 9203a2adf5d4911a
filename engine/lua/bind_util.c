/* lua/bind_util.c: utilities of the ddpl table and the ddpl.cuda queries.
 * defines: lb_util_functions (time set_num_threads get_num_threads config memory_allocated
 *          memory_stats reset_peak_memory_stats empty_cache),
 *          lb_cuda_functions (is_available device_count synchronize memory_allocated
 *          max_memory_allocated memory_reserved max_memory_reserved reset_peak_memory_stats
 *          set_device current_device empty_cache), lb_cuda_install_oom_hook. */
#include <time.h>

#include "binding.h"
#include "ops/nn_common.h"
#include "core/alloc.h"
#include "core/core.h"
#include "cpu/cpu_gemm_bf16.h"

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

/* "12.4" from 1000*major + 10*minor (CUDA), or "9.1.0" from 10000*major + 100*minor + patch */
static void set_version(lua_State *L, const char *key, int v, bool cuda_style)
{
    if (v <= 0) return;
    if (cuda_style)
        lua_pushfstring(L, "%d.%d", v / 1000, (v % 1000) / 10);
    else
        lua_pushfstring(L, "%d.%d.%d", v / 10000, (v % 10000) / 100, v % 100);
    lua_setfield(L, -2, key);
}

/* ddpl.config(): what this build contains, for bug reports. cuDNN and NCCL are optional parts of
 * a CUDA build (cmake/cuda_libs.cmake); their versions are read from the libraries.
 * cuda_emulated: the CUDA backend runs on the CPU emulation (cmake/cuemu.cmake). cpu_bf16_gemm:
 * how a bfloat16 product runs on this CPU, 'amx' or 'avx512_bf16' (cpu/cpu_gemm_bf16.c) or
 * 'widened' (float32 sgemm on widened copies). */
static int f_config(lua_State *L)
{
    lua_createtable(L, 0, 15);
    lua_pushstring(L, DDPL_VERSION);
    lua_setfield(L, -2, "version");
    lua_pushboolean(L, DDPL_HAVE_CUDA);
    lua_setfield(L, -2, "cuda");
    lua_pushboolean(L, DDPL_HAVE_NCCL);
    lua_setfield(L, -2, "nccl");
    lua_pushboolean(L, DDPL_HAVE_CUDNN);
    lua_setfield(L, -2, "cudnn");
    lua_pushboolean(L, DDPL_CUDA_EMU); /* on tools/cuemu: kernels run on the CPU */
    lua_setfield(L, -2, "cuda_emulated");
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "gloo");
    lua_pushstring(L, "openblas");
    lua_setfield(L, -2, "blas");
    lua_pushstring(L, cpu_bf16_gemm_kernel());
    lua_setfield(L, -2, "cpu_bf16_gemm");
    lua_pushstring(L, LUA_RELEASE);
    lua_setfield(L, -2, "lua");
    lua_pushinteger(L, ddpl_get_num_threads());
    lua_setfield(L, -2, "num_threads");
    ddpl_cuda_version_info v;
    ddpl_cuda_versions(&v);
    set_version(L, "cuda_runtime", v.runtime, true);
    set_version(L, "cuda_driver", v.driver, true); /* the newest CUDA the driver supports */
    set_version(L, "cudnn_version", v.cudnn, false);
    set_version(L, "nccl_version", v.nccl, false);
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

/* Sets the integer fields of the table on top. */
typedef struct {
    const char *key;
    int64_t value;
} stat_field;

static void set_fields(lua_State *L, const stat_field *fields, int n)
{
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)fields[i].value);
        lua_setfield(L, -2, fields[i].key);
    }
}

/* ddpl.memory_stats([device]): the allocator's figures as a table of integers (byte counts and
 * block counts; docs/internals/allocators.md). Names follow PyTorch's memory_stats where it has one
 * (allocated, reserved, num_alloc_retries), flattened: Lua tables read badly with dotted keys.
 * PyTorch's own dotted keys for the current and peak tensor bytes are there too
 * ("allocated_bytes.current", ".peak"), for the host (default) or a CUDA device. */
static int f_memory_stats(lua_State *L)
{
    ddpl_device d = ddpl_cpu();
    if (!lua_isnoneornil(L, 1)) d = lb_device(L, 1, "memory_stats");
    if (d.type == DDPL_CUDA) {
        if (d.index >= ddpl_cuda_device_count()) {
            char buf[32];
            return luaL_error(L, "memory_stats: device '%s' does not exist (%d CUDA devices)",
                              ddpl_device_str(d, buf, sizeof buf), ddpl_cuda_device_count());
        }
        int i = d.index;
        stat_field fields[] = {
            {"allocated_bytes.current", ddpl_cuda_memory_allocated(i)},
            {"allocated_bytes.peak", ddpl_cuda_max_memory_allocated(i)},
            {"allocated_bytes", ddpl_cuda_memory_allocated(i)},
            {"peak_allocated_bytes", ddpl_cuda_max_memory_allocated(i)},
            {"reserved_bytes", ddpl_cuda_memory_reserved(i)},
            {"peak_reserved_bytes", ddpl_cuda_max_memory_reserved(i)},
        };
        lua_createtable(L, 0, (int)(sizeof fields / sizeof fields[0]));
        set_fields(L, fields, (int)(sizeof fields / sizeof fields[0]));
        return 1;
    }
    ddpl_host_cache_stats s;
    ddpl_host_cache_get_stats(&s);
    stat_field fields[] = {
        {"allocated_bytes.current", ddpl_memory_allocated(DDPL_CPU)},
        {"allocated_bytes.peak", ddpl_memory_max_allocated(DDPL_CPU)},
        {"allocated_bytes", ddpl_memory_allocated(DDPL_CPU)},
        {"peak_allocated_bytes", ddpl_memory_max_allocated(DDPL_CPU)},
        {"reserved_bytes", s.reserved_bytes},
        {"peak_reserved_bytes", s.peak_reserved_bytes},
        {"cached_bytes", s.cached_bytes},
        {"blocks_mapped", s.blocks_mapped},
        {"blocks_reused", s.blocks_reused},
        {"blocks_released", s.blocks_released},
        {"page_faults_avoided", s.page_faults_avoided},
        {"num_alloc_retries", s.alloc_retries},
        {"num_pressure_releases", s.pressure_releases},
        {"large_block_bytes", (int64_t)DDPL_HOST_LARGE_BLOCK},
    };
    int n = (int)(sizeof fields / sizeof fields[0]);
    lua_createtable(L, 0, n);
    set_fields(L, fields, n);
    return 1;
}

/* ddpl.reset_peak_memory_stats([device]): the peaks of memory_stats start again from the
 * current figures (the host's by default; a CUDA device's when given) */
static int f_reset_peak_memory_stats(lua_State *L)
{
    ddpl_device d = ddpl_cpu();
    if (!lua_isnoneornil(L, 1)) d = lb_device(L, 1, "reset_peak_memory_stats");
    if (d.type == DDPL_CUDA) {
        if (d.index >= ddpl_cuda_device_count()) {
            char buf[32];
            return luaL_error(L, "reset_peak_memory_stats: device '%s' does not exist",
                              ddpl_device_str(d, buf, sizeof buf));
        }
        ddpl_cuda_reset_peak_memory_stats(d.index);
    } else {
        ddpl_memory_reset_peak(DDPL_CPU);
        ddpl_host_cache_reset_peak();
    }
    return 0;
}

/* ddpl._release_memory(t) and ddpl._restore_memory(t): FSDP's storage release and refill
 * (core.h, ddpl_storage_release_memory); internal to lua/ddplua/nn/parallel/fsdp_unit.lua. The
 * tensor is taken without lb_check, which refuses a released one. */
static ddpl_tensor *memory_arg(lua_State *L, const char *fname)
{
    lb_box *b = luaL_testudata(L, 1, LB_TENSOR_MT);
    if (!b || !b->t) return luaL_error(L, "%s: expected a live tensor", fname), NULL;
    if (b->t->storage->deleter)
        luaL_error(L, "%s: the tensor's memory is not the engine's (from_blob)", fname);
    return b->t;
}

static int f_release_memory(lua_State *L)
{
    if (ddpl_storage_release_memory(memory_arg(L, "_release_memory")->storage) < 0) lb_error(L);
    return 0;
}

/* _restore_memory(t [, src [, move]]): new memory for t's storage, filled with src's bytes when
 * given (src: contiguous, of t's dtype and device, as many bytes as the storage). The storage's
 * version does not move: the graph's saved views of it stay valid, as after PyTorch's
 * storage.resize_ and copy in FSDP. move (src over the whole of its storage, which the engine
 * owns): t's storage takes src's memory instead of a copy of it, and src's is left released
 * (every later use of src is refused): no second buffer and no copy (FSDP's regather: a unit's
 * worth of bytes at the backward's memory peak). */
static int f_restore_memory(lua_State *L)
{
    ddpl_tensor *t = memory_arg(L, "_restore_memory");
    ddpl_tensor *src = lua_isnoneornil(L, 2) ? NULL : lb_check(L, 2, "_restore_memory");
    bool move = lua_toboolean(L, 3);
    ddpl_storage *s = t->storage;
    if (src &&
        (src->dtype != t->dtype || !ddpl_tensor_is_contiguous(src) ||
         src->device.type != s->device.type || src->device.index != s->device.index ||
         (size_t)ddpl_tensor_numel(src) * ddpl_dtype_size((ddpl_dtype)src->dtype) != s->nbytes))
        return luaL_error(L, "_restore_memory: the source must be a contiguous tensor of the "
                             "storage's dtype, device and size");
    if (move && (!src || src->offset != 0 || src->storage->nbytes != s->nbytes ||
                 src->storage->deleter || src->storage == s))
        return luaL_error(L, "_restore_memory: moving needs a source over the whole of another "
                             "storage of the engine's");
    if (move && !ddpl_storage_released(s)) {
        if (ddpl_storage_release_memory(s) < 0) lb_error_in(L, "_restore_memory");
    }
    if (move) {
        ddpl_storage_swap_memory(s, src->storage); /* src's storage now holds none */
        return 0;
    }
    if (ddpl_storage_restore_memory(s) < 0) lb_error_in(L, "_restore_memory");
    if (src &&
        ddpl_device_copy(s->data, s->device, ddpl_tensor_data(src), src->device, s->nbytes) < 0)
        lb_error_in(L, "_restore_memory");
    return 0;
}

/* ddpl.empty_cache(): gives the host allocator's cached blocks back to the system. Tensors not
 * yet collected still hold theirs: collectgarbage() first to return those too. */
static int f_empty_cache(lua_State *L)
{
    (void)L;
    ddpl_host_empty_cache();
    return 0;
}

/* ---- the out-of-memory hook: a full GC of the state that uses CUDA ---- */

#define OOM_SENTINEL "ddplua.cuda.oom_hook"
static lua_State *hooked; /* main thread of the state whose GC the hook runs */

static void oom_collect(void *ud)
{
    lua_gc((lua_State *)ud, LUA_GCCOLLECT);
}

/* __gc of a registry sentinel: the state is closing, its GC must not be called any more */
static int oom_sentinel_gc(lua_State *L)
{
    lua_State *main = *(lua_State **)lua_touserdata(L, 1);
    if (hooked == main) {
        ddpl_set_oom_hook(NULL, NULL);
        hooked = NULL;
    }
    return 0;
}

/* Registers this state's full GC as the engine's out-of-memory hook (engine/core/alloc.h), so a
 * device allocation that fails, or a host one that would pass DDPLUA_MEMORY_LIMIT_MB, collects
 * unreferenced tensors and retries. Installed when the module opens (bind_module.c), in every
 * build; the hook runs on this thread only. */
LB_HIDDEN void lb_cuda_install_oom_hook(lua_State *L)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    lua_State *main = lua_tothread(L, -1);
    lua_pop(L, 1);
    if (hooked == main) return;
    if (lua_getfield(L, LUA_REGISTRYINDEX, OOM_SENTINEL) == LUA_TNIL) {
        lua_State **box = lua_newuserdatauv(L, sizeof *box, 0);
        *box = main;
        lua_createtable(L, 0, 1);
        lua_pushcfunction(L, oom_sentinel_gc);
        lua_setfield(L, -2, "__gc");
        lua_setmetatable(L, -2);
        lua_setfield(L, LUA_REGISTRYINDEX, OOM_SENTINEL);
    }
    lua_pop(L, 1);
    ddpl_set_oom_hook(oom_collect, main);
    hooked = main;
}

/* ---- ddpl.cuda ---- */

/* The device argument at idx: nil (the current device, -1), an index or 'cuda:N'. */
static int device_arg(lua_State *L, int idx, const char *fname)
{
    if (lua_isnoneornil(L, idx)) return -1;
    int64_t index;
    if (lua_type(L, idx) == LUA_TSTRING) {
        ddpl_device d = lb_device(L, idx, fname);
        if (d.type != DDPL_CUDA)
            return luaL_error(L, "%s: expected a CUDA device, got '%s'", fname,
                              lua_tostring(L, idx));
        index = d.index;
    } else {
        index = lb_int(L, idx, fname, "device", 0);
    }
    int n = ddpl_cuda_device_count();
    if (index < 0 || index >= n)
        return luaL_error(L, "%s: device cuda:%d does not exist (%d CUDA device%s)", fname,
                          (int)index, n, n == 1 ? "" : "s");
    return (int)index;
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

static int c_set_device(lua_State *L)
{
    int64_t n = lb_int(L, 1, "cuda.set_device", "device", 0);
    if (n < 0 || n > INT32_MAX)
        return luaL_error(L, "cuda.set_device: invalid device index %I", (lua_Integer)n);
    if (ddpl_cuda_set_device((int)n) < 0) lb_error_in(L, "cuda.set_device");
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

/* memory_allocated([device]) and friends: bytes, 0 where CUDA was never used */
#define MEMORY_QUERY(name, fn)                                                                     \
    static int c_##name(lua_State *L)                                                              \
    {                                                                                              \
        lua_pushinteger(L, fn(device_arg(L, 1, "cuda." #name)));                                   \
        return 1;                                                                                  \
    }
MEMORY_QUERY(memory_allocated, ddpl_cuda_memory_allocated)
MEMORY_QUERY(max_memory_allocated, ddpl_cuda_max_memory_allocated)
MEMORY_QUERY(memory_reserved, ddpl_cuda_memory_reserved)
MEMORY_QUERY(max_memory_reserved, ddpl_cuda_max_memory_reserved)

static int c_reset_peak_memory_stats(lua_State *L)
{
    ddpl_cuda_reset_peak_memory_stats(device_arg(L, 1, "cuda.reset_peak_memory_stats"));
    return 0;
}

/* ddpl._sdpa_cpu_fused_min_bytes([n]) -> previous: from which score size CPU attention uses the
 * fused kernel (ops/nn_common.h; default 0); specs and bench/attention raise it to force the
 * composition */
static int f_sdpa_cpu_fused_min_bytes(lua_State *L)
{
    int64_t n = lua_isnoneornil(L, 1) ? -1 : lb_int(L, 1, "_sdpa_cpu_fused_min_bytes", "n", 0);
    if (!lua_isnoneornil(L, 1) && n < 0)
        return luaL_error(L, "_sdpa_cpu_fused_min_bytes: expected bytes >= 0, got %I",
                          (lua_Integer)n);
    lua_pushinteger(L, (lua_Integer)ddpl_sdpa_cpu_fused_min_bytes(n));
    return 1;
}

const luaL_Reg lb_util_functions[] = {
    {"time", f_time},
    {"set_num_threads", f_set_num_threads},
    {"get_num_threads", f_get_num_threads},
    {"config", f_config},
    {"memory_allocated", f_memory_allocated},
    {"memory_stats", f_memory_stats},
    {"reset_peak_memory_stats", f_reset_peak_memory_stats},
    {"_release_memory", f_release_memory},
    {"_restore_memory", f_restore_memory},
    {"empty_cache", f_empty_cache},
    {"_sdpa_cpu_fused_min_bytes", f_sdpa_cpu_fused_min_bytes},
    {NULL, NULL},
};

const luaL_Reg lb_cuda_functions[] = {
    {"is_available", c_is_available},
    {"device_count", c_device_count},
    {"synchronize", c_synchronize},
    {"memory_allocated", c_memory_allocated},
    {"max_memory_allocated", c_max_memory_allocated},
    {"memory_reserved", c_memory_reserved},
    {"max_memory_reserved", c_max_memory_reserved},
    {"reset_peak_memory_stats", c_reset_peak_memory_stats},
    {"set_device", c_set_device},
    {"current_device", c_current_device},
    {"empty_cache", c_empty_cache},
    {NULL, NULL},
};
