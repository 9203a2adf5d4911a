/* lua/bind_module.c: assembling the library and finding its Lua half.
 * defines: luaopen_ddplua_core, luaopen_ddplua, ddpl_lua_open.
 *
 * Two modules: 'ddplua.core' is the C table (tensor type, ops, autograd, F.* in
 * package.loaded['ddplua.core.functional']); 'ddplua' is lua/ddplua/init.lua, which requires
 * the core and adds the Lua parts. A stock lua5.4 with LUA_PATH pointing at lua/ loads init.lua
 * first, whose require 'ddplua.core' finds luaopen_ddplua_core in ddplua.so through the
 * all-in-one C loader. When the C searcher finds ddplua.so for 'ddplua' itself (no LUA_PATH) and
 * in the ddplua executable (preloaded), luaopen_ddplua locates init.lua: package.path first, so
 * a user's LUA_PATH wins; then share/lua/5.4 beside the executable or the shared object (an
 * installed tree), then the source tree and install prefix this build was configured with. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "binding.h"

/* Names of methods that are also functions of the ddpl table (torch.exp(x) == x.exp()). */
static const char *const function_forms[] = {
    "add",         "sub",          "mul",      "div",    "pow",     "maximum",     "minimum",
    "eq",          "ne",           "lt",       "le",     "gt",      "ge",          "neg",
    "exp",         "log",          "sqrt",     "rsqrt",  "abs",     "sign",        "sin",
    "cos",         "tanh",         "sigmoid",  "relu",   "gelu",    "silu",        "clamp",
    "masked_fill", "matmul",       "mm",       "bmm",    "sum",     "mean",        "prod",
    "var",         "std",          "max",      "min",    "argmax",  "argmin",      "logsumexp",
    "norm",        "index_select", "gather",   "topk",   "softmax", "log_softmax", "flatten",
    "reshape",     "transpose",    "permute",  "narrow", "select",  "squeeze",     "unsqueeze",
    "t",           "chunk",        "split",    "unbind", "clone",   "detach",      "numel",
    "cumsum",      "cumprod",      "cummax",   "cummin", "any",     "all",         "count_nonzero",
    "amax",        "amin",         "aminmax",  "nansum", "nanmean", "sort",        "argsort",
    "kthvalue",    "unique",       "bincount", "histc",  NULL,
};

/* luaL_setfuncs with the library's two upvalues (metatable, methods); see binding.h. */
static void register_into(lua_State *L, int table, int mt, int methods, const luaL_Reg *regs)
{
    lua_pushvalue(L, table);
    lua_pushvalue(L, mt);
    lua_pushvalue(L, methods);
    luaL_setfuncs(L, regs, 2);
    lua_pop(L, 1);
}

/* lua_close() unloads C modules with dlclose. Unloading the engine would also unload libgomp
 * while its idle worker threads still run (a crash at exit), and would lose tensors that C
 * code still holds; so the loaded object pins itself for the life of the process. */
static void pin_module(void)
{
    Dl_info info;
    if (dladdr((void *)luaopen_ddplua_core, &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

int luaopen_ddplua_core(lua_State *L)
{
    pin_module();
    lb_hooks_open(L);
    lb_autograd_open(L);
    luaL_newmetatable(L, LB_TENSOR_MT);
    int mt = lua_gettop(L);
    lua_newtable(L);
    int methods = lua_gettop(L);
    lua_newtable(L);
    int ddpl = lua_gettop(L);

    register_into(L, mt, mt, methods, lb_tensor_meta);
    const luaL_Reg *method_sets[] = {lb_value_methods,      lb_view_methods,    lb_math_methods,
                                     lb_reduce_methods,     lb_hook_methods,    lb_autograd_methods,
                                     lb_functional_methods, lb_math_fn_methods, lb_scan_methods,
                                     lb_sort_methods,       lb_median_methods,  lb_shape_methods,
                                     lb_linalg_methods,     lb_scatter_methods};
    for (size_t i = 0; i < sizeof method_sets / sizeof *method_sets; i++)
        register_into(L, methods, mt, methods, method_sets[i]);
    const luaL_Reg *function_sets[] = {
        lb_create_functions,   lb_math_functions, lb_reduce_functions, lb_autograd_functions,
        lb_util_functions,     lb_data_functions, lb_io_functions,     lb_optim_functions,
        lb_autocast_functions, lb_rng_functions,  lb_math_fn_methods,  lb_sort_functions,
        lb_median_methods,     lb_shape_methods,  lb_shape_functions,  lb_linalg_methods,
        lb_linalg_functions,   lb_scatter_methods};
    for (size_t i = 0; i < sizeof function_sets / sizeof *function_sets; i++)
        register_into(L, ddpl, mt, methods, function_sets[i]);
    for (const char *const *name = function_forms; *name; name++) {
        lua_getfield(L, methods, *name);
        lua_setfield(L, ddpl, *name);
    }

    lua_newtable(L); /* ddpl.autograd (gradcheck is added by lua/ddplua/autograd.lua) */
    register_into(L, lua_gettop(L), mt, methods, lb_autograd_table);
    register_into(L, lua_gettop(L), mt, methods, lb_function_table);
    lua_setfield(L, ddpl, "autograd");
    lua_newtable(L); /* ddpl.linalg */
    register_into(L, lua_gettop(L), mt, methods, lb_linalg_table);
    lua_setfield(L, ddpl, "linalg");
    lua_newtable(L);
    register_into(L, lua_gettop(L), mt, methods, lb_cuda_functions);
    /* one generator serves both device types: ddpl.cuda.manual_seed/get_rng_state/set_rng_state
     * are ddpl's */
    register_into(L, lua_gettop(L), mt, methods, lb_rng_functions);
    lua_setfield(L, ddpl, "cuda");
    lb_store_open(L, ddpl); /* ddplua.core._store.TCPStore, for ddpl.distributed */
    lb_cuda_install_oom_hook(L);
    lua_pushstring(L, DDPL_VERSION);
    lua_setfield(L, ddpl, "version");

    /* F.* for lua/ddplua/nn/functional.lua, kept out of the user-visible ddpl table */
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_newtable(L);
    register_into(L, lua_gettop(L), mt, methods, lb_functional);
    lua_setfield(L, -2, "ddplua.core.functional");
    lua_newtable(L); /* process groups, for lua/ddplua/distributed.lua */
    register_into(L, lua_gettop(L), mt, methods, lb_dist_functions);
    lua_setfield(L, -2, "ddplua.core.dist");
    lua_newtable(L); /* the DDP reducer, for lua/ddplua/nn/parallel */
    register_into(L, lua_gettop(L), mt, methods, lb_ddp_functions);
    lua_setfield(L, -2, "ddplua.core.ddp");
    lua_newtable(L); /* the object collectives' wire format, for lua/ddplua/distributed */
    register_into(L, lua_gettop(L), mt, methods, lb_serialize_functions);
    lua_setfield(L, -2, "ddplua.core.serialize");
    lua_newtable(L); /* fork, wait, kill, pipes: for lua/ddplua/multiprocessing.lua */
    register_into(L, lua_gettop(L), mt, methods, lb_process_functions);
    lua_setfield(L, -2, "ddplua.core.process");
    lua_newtable(L); /* batches through shared memory: for lua/ddplua/data/worker_pool.lua */
    register_into(L, lua_gettop(L), mt, methods, lb_worker_ipc_functions);
    lua_setfield(L, -2, "ddplua.core.worker_ipc");
    lua_newtable(L); /* the JSON codec, for lua/ddplua/json.lua */
    register_into(L, lua_gettop(L), mt, methods, lb_json_functions);
    lua_setfield(L, -2, "ddplua.core.json");
    lua_pop(L, 1);

    lua_pushvalue(L, ddpl);
    return 1;
}

static bool readable(const char *path)
{
    return access(path, R_OK) == 0;
}

/* Appends dir/?.lua;dir/?/init.lua to package.path when dir holds ddplua/init.lua. */
static bool try_dir(lua_State *L, const char *dir)
{
    char probe[PATH_MAX];
    if (!dir || snprintf(probe, sizeof probe, "%s/ddplua/init.lua", dir) >= (int)sizeof probe ||
        !readable(probe))
        return false;
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    lua_pushfstring(L, "%s;%s/?.lua;%s/?/init.lua", lua_tostring(L, -1), dir, dir);
    lua_setfield(L, -3, "path");
    lua_pop(L, 2);
    return true;
}

/* dir of `file` + suffix into buf */
static const char *sibling(char *buf, size_t n, const char *file, const char *suffix)
{
    const char *slash = strrchr(file, '/');
    if (!slash) return NULL;
    int len = (int)(slash - file);
    if (snprintf(buf, n, "%.*s/%s", len, file, suffix) >= (int)n) return NULL;
    return buf;
}

static bool add_library_dir(lua_State *L)
{
    char exe[PATH_MAX], buf[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = '\0';
        if (try_dir(L, sibling(buf, sizeof buf, exe, "../share/lua/5.4"))) return true;
    }
    Dl_info info;
    if (dladdr((void *)luaopen_ddplua, &info) && info.dli_fname && info.dli_fname[0] == '/') {
        /* lib/lua/5.4/ddplua.so or lib/libddplua.so of an installed tree, or the same under
         * Debian's multiarch lib/x86_64-linux-gnu/ (cmake/packaging.cmake) */
        static const char *const up[] = {"../../../share/lua/5.4", "../share/lua/5.4",
                                         "../../../../share/lua/5.4", "../../share/lua/5.4"};
        for (size_t i = 0; i < sizeof up / sizeof up[0]; i++)
            if (try_dir(L, sibling(buf, sizeof buf, info.dli_fname, up[i]))) return true;
    }
#ifdef DDPL_LUA_SOURCE_DIR
    if (try_dir(L, DDPL_LUA_SOURCE_DIR)) return true;
#endif
#ifdef DDPL_LUA_INSTALL_DIR
    if (try_dir(L, DDPL_LUA_INSTALL_DIR)) return true;
#endif
    return false;
}

/* package.searchpath('ddplua.init', package.path), or nil */
static const char *search_init(lua_State *L)
{
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchpath");
    lua_pushliteral(L, "ddplua.init");
    lua_getfield(L, -3, "path");
    lua_call(L, 2, 1);
    lua_remove(L, -2);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return NULL;
    }
    return lua_tostring(L, -1); /* left on the stack */
}

int luaopen_ddplua(lua_State *L)
{
    luaL_requiref(L, "ddplua.core", luaopen_ddplua_core, 0);
    lua_pop(L, 1);
    const char *path = search_init(L);
    if (!path && add_library_dir(L)) path = search_init(L);
    if (!path)
        return luaL_error(L, "ddplua: cannot find the library's Lua files (ddplua/init.lua); add "
                             "their folder to LUA_PATH, e.g. LUA_PATH='/path/to/lua/?.lua;;'");
    if (luaL_loadfile(L, path) != LUA_OK) return lua_error(L);
    lua_pushliteral(L, "ddplua");
    lua_pushstring(L, path);
    lua_call(L, 2, 1);
    return 1;
}

int ddpl_lua_open(lua_State *L)
{
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_ddplua);
    lua_setfield(L, -2, "ddplua");
    lua_pushcfunction(L, luaopen_ddplua_core);
    lua_setfield(L, -2, "ddplua.core");
    lua_pop(L, 1);
    return 0;
}
