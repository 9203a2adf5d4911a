/* lua/bind_ddp.c: the C half of nn.parallel.DistributedDataParallel: the reducer box.
 * defines: lb_ddp_functions (package.loaded['ddplua.core.ddp']): reducer(pg, params, names,
 *          opts); the "ddplua.Reducer" type with prepare_forward(), prepare_backward(outputs,
 *          sync), set_comm_hook(name_or_fn, state), buckets(), bucket_tensor(b), rebuilt(),
 *          timeline(), shadow_backward(), set_divisor(n), graph_walks(), close().
 *
 * lua/ddplua/nn/parallel/DistributedDataParallel.lua drives it; engine/distributed/reducer.h says
 * what each step does. A Lua comm hook is called from inside backward (the reducer runs in the
 * gradient-ready hooks) on the state that created the reducer's main thread, under lua_pcall: its
 * error becomes the backward's error. */
#include <string.h>

#include "binding.h"
#include "distributed/reducer.h"

#define REDUCER_MT "ddplua.Reducer"
#define PG_MT      "ddplua.ProcessGroup" /* bind_dist_pg.c's box: a single ddpl_pg pointer */

typedef struct reducer_box {
    ddpl_reducer *r; /* NULL once closed */
    lua_State *main; /* where a Lua comm hook runs */
    int hook_ref;    /* registry: {fn, state} of a Lua comm hook, or LUA_NOREF */
} reducer_box;

static reducer_box *check_reducer(lua_State *L, const char *fname)
{
    reducer_box *b = luaL_checkudata(L, 1, REDUCER_MT);
    if (!b->r) luaL_error(L, "%s: the reducer was closed", fname);
    return b;
}

static int r_close(lua_State *L)
{
    reducer_box *b = luaL_checkudata(L, 1, REDUCER_MT);
    ddpl_reducer_free(b->r);
    b->r = NULL;
    if (b->hook_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, b->hook_ref);
    b->hook_ref = LUA_NOREF;
    return 0;
}

/* reducer(pg, {params}, {names}, {bucket_cap_mb, first_bucket_mb, find_unused_parameters,
 * gradient_as_bucket_view, static_graph}) */
static int d_reducer(lua_State *L)
{
    const char *f = "DistributedDataParallel";
    void **pgb = luaL_testudata(L, 1, PG_MT);
    if (!pgb) lb_argerror(L, 1, f, "a process group");
    if (!*pgb) return luaL_error(L, "%s: the process group was destroyed", f);
    ddpl_tensor **params;
    int n = lb_tensor_list(L, 2, f, &params);
    luaL_checktype(L, 3, LUA_TTABLE);
    luaL_checktype(L, 4, LUA_TTABLE);
    const char **names = lua_newuserdatauv(L, (size_t)(n + 1) * sizeof *names, 0);
    for (int i = 0; i < n; i++) {
        lua_geti(L, 3, i + 1);
        names[i] = lua_tostring(L, -1); /* kept alive by the table */
        lua_pop(L, 1);
        if (!names[i]) return luaL_error(L, "%s: parameter name %d is not a string", f, i + 1);
    }
    ddpl_reducer_config cfg = {0};
    lua_getfield(L, 4, "bucket_cap_mb");
    cfg.bucket_cap_mb = luaL_optnumber(L, -1, 25.0);
    lua_getfield(L, 4, "first_bucket_mb");
    cfg.first_bucket_mb = luaL_optnumber(L, -1, 1.0);
    lua_getfield(L, 4, "find_unused_parameters");
    cfg.find_unused = lua_toboolean(L, -1);
    lua_getfield(L, 4, "gradient_as_bucket_view");
    cfg.grad_as_bucket_view = lua_toboolean(L, -1);
    lua_getfield(L, 4, "static_graph");
    cfg.static_graph = lua_toboolean(L, -1);
    lua_pop(L, 5);
    reducer_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->r = NULL;
    b->hook_ref = LUA_NOREF;
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    b->main = lua_tothread(L, -1);
    lua_pop(L, 1);
    luaL_setmetatable(L, REDUCER_MT);
    b->r = ddpl_reducer_new(*(ddpl_pg **)pgb, n, params, names, &cfg);
    if (!b->r) return lb_error(L);
    return 1;
}

static int m_prepare_forward(lua_State *L)
{
    reducer_box *b = check_reducer(L, "forward");
    if (ddpl_reducer_prepare_forward(b->r) < 0) return lb_error(L);
    return 0;
}

/* prepare_backward({outputs}, sync) */
static int m_prepare_backward(lua_State *L)
{
    reducer_box *b = check_reducer(L, "forward");
    ddpl_tensor **outs;
    int n = lb_tensor_list(L, 2, "forward", &outs);
    if (ddpl_reducer_prepare_backward(b->r, n, outs, lua_toboolean(L, 3)) < 0) return lb_error(L);
    return 0;
}

/* Runs under lua_pcall on the hook's state: (box, lightuserdata bucket, index) -> nothing; the
 * hook's result is copied into the bucket. */
static int hook_trampoline(lua_State *L)
{
    reducer_box *b = lua_touserdata(L, 1);
    ddpl_tensor *bucket = lua_touserdata(L, 2);
    int index = (int)lua_tointeger(L, 3);
    lua_rawgeti(L, LUA_REGISTRYINDEX, b->hook_ref);
    lua_geti(L, -1, 1); /* fn */
    lua_geti(L, -2, 2); /* state */
    ddpl_lua_push_tensor(L, bucket);
    lua_pushinteger(L, index + 1);
    lua_call(L, 3, 1);
    ddpl_tensor *res = ddpl_lua_test_tensor(L, -1);
    if (!res)
        return luaL_error(L, "register_comm_hook: the hook must return a tensor, got %s",
                          luaL_typename(L, -1));
    if (ddpl_tensor_numel(res) != ddpl_tensor_numel(bucket))
        return luaL_error(L,
                          "register_comm_hook: the hook returned %d elements for bucket %d of %d "
                          "elements",
                          (int)ddpl_tensor_numel(res), index + 1, (int)ddpl_tensor_numel(bucket));
    if (res != bucket) {
        ddpl_tensor *flat = ddpl_reshape(res, 1, (int64_t[]){ddpl_tensor_numel(res)});
        int rc = flat ? ddpl_copy_(bucket, flat) : -1;
        ddpl_tensor_release(flat);
        if (rc < 0) return lb_error(L);
    }
    return 0;
}

static int call_lua_hook(ddpl_tensor *bucket, int index, void *ud)
{
    reducer_box *b = ud;
    lua_State *L = b->main;
    if (!lua_checkstack(L, 8)) return ddpl_error("register_comm_hook: Lua stack overflow");
    int top = lua_gettop(L);
    lua_pushcfunction(L, hook_trampoline);
    lua_pushlightuserdata(L, b);
    lua_pushlightuserdata(L, bucket);
    lua_pushinteger(L, index);
    int rc = 0;
    if (lua_pcall(L, 3, 0, 0) != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        rc = ddpl_error("register_comm_hook: %s", msg ? msg : "the hook raised a non-string error");
    }
    lua_settop(L, top);
    return rc;
}

/* set_comm_hook('allreduce'|'fp16_compress'|'bf16_compress' | fn, state) */
static int m_set_comm_hook(lua_State *L)
{
    reducer_box *b = check_reducer(L, "register_comm_hook");
    if (lua_isfunction(L, 2)) {
        lua_createtable(L, 2, 0);
        lua_pushvalue(L, 2);
        lua_rawseti(L, -2, 1);
        lua_pushvalue(L, 3);
        lua_rawseti(L, -2, 2);
        if (b->hook_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, b->hook_ref);
        b->hook_ref = luaL_ref(L, LUA_REGISTRYINDEX);
        ddpl_reducer_set_comm_hook(b->r, DDPL_COMM_CUSTOM, call_lua_hook, b);
        return 0;
    }
    const char *name = lua_tostring(L, 2);
    ddpl_comm_kind k;
    if (name && strcmp(name, "allreduce") == 0)
        k = DDPL_COMM_ALLREDUCE;
    else if (name && strcmp(name, "fp16_compress") == 0)
        k = DDPL_COMM_FP16;
    else if (name && strcmp(name, "bf16_compress") == 0)
        k = DDPL_COMM_BF16;
    else
        return luaL_error(L,
                          "register_comm_hook: expected 'allreduce', 'fp16_compress', "
                          "'bf16_compress' or a function, got %s",
                          name ? name : luaL_typename(L, 2));
    ddpl_reducer_set_comm_hook(b->r, k, NULL, NULL);
    return 0;
}

/* buckets() -> { {param indices (1-based)}, ... } with field bytes per bucket */
static int m_buckets(lua_State *L)
{
    reducer_box *b = check_reducer(L, "buckets");
    int nb = ddpl_reducer_num_buckets(b->r);
    lua_createtable(L, nb, 0);
    for (int i = 0; i < nb; i++) {
        int cnt = ddpl_reducer_bucket_params(b->r, i, NULL, 0);
        int *idx = lua_newuserdatauv(L, (size_t)cnt * sizeof(int) + 1, 0);
        ddpl_reducer_bucket_params(b->r, i, idx, cnt);
        lua_createtable(L, cnt, 1);
        for (int j = 0; j < cnt; j++) {
            lua_pushinteger(L, idx[j] + 1);
            lua_rawseti(L, -2, j + 1);
        }
        lua_pushinteger(L, ddpl_reducer_bucket_bytes(b->r, i));
        lua_setfield(L, -2, "bytes");
        lua_rawseti(L, -3, i + 1);
        lua_pop(L, 1); /* idx */
    }
    return 1;
}

static int m_bucket_tensor(lua_State *L)
{
    reducer_box *b = check_reducer(L, "bucket_tensor");
    int i = (int)luaL_checkinteger(L, 2) - 1;
    ddpl_tensor *t = ddpl_reducer_bucket_tensor(b->r, i);
    if (!t) return luaL_error(L, "bucket_tensor: no bucket %d", i + 1);
    ddpl_lua_push_tensor(L, t);
    return 1;
}

/* join: a joined rank's turn in the others' synchronised backward */
static int m_shadow_backward(lua_State *L)
{
    reducer_box *b = check_reducer(L, "join");
    if (ddpl_reducer_shadow_backward(b->r) < 0) return lb_error(L);
    return 0;
}

/* set_divisor(n): average the gradients over n ranks (join) */
static int m_set_divisor(lua_State *L)
{
    reducer_box *b = check_reducer(L, "join");
    lua_Integer n = luaL_checkinteger(L, 2);
    if (ddpl_reducer_set_divisor(b->r, n < 1 || n > 1 << 30 ? -1 : (int)n) < 0) return lb_error(L);
    return 0;
}

static int m_graph_walks(lua_State *L)
{
    reducer_box *b = check_reducer(L, "graph_walks");
    lua_pushinteger(L, ddpl_reducer_graph_walks(b->r));
    return 1;
}

static int m_rebuilt(lua_State *L)
{
    reducer_box *b = check_reducer(L, "rebuilt");
    lua_pushboolean(L, ddpl_reducer_rebuilt(b->r));
    return 1;
}

/* timeline() -> { {name=, bucket=, ready=, start=, ['end']=, copied_bytes= (buckets)}, ... }
 * (seconds, monotonic; bytes) */
static int m_timeline(lua_State *L)
{
    reducer_box *b = check_reducer(L, "timeline");
    int n = ddpl_reducer_timeline(b->r, NULL, 0);
    ddpl_reducer_event *ev = lua_newuserdatauv(L, (size_t)n * sizeof *ev, 0);
    ddpl_reducer_timeline(b->r, ev, n);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_createtable(L, 0, 5);
        lua_pushstring(L, ev[i].name);
        lua_setfield(L, -2, "name");
        lua_pushinteger(L, ev[i].bucket + 1);
        lua_setfield(L, -2, "bucket");
        lua_pushnumber(L, ev[i].ready);
        lua_setfield(L, -2, "ready");
        lua_pushnumber(L, ev[i].start);
        lua_setfield(L, -2, "start");
        lua_pushnumber(L, ev[i].end);
        lua_setfield(L, -2, "end");
        if (ev[i].bucket >= 0) {
            lua_pushinteger(L, ev[i].copied_bytes);
            lua_setfield(L, -2, "copied_bytes");
        }
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static const luaL_Reg reducer_methods[] = {
    {"prepare_forward", m_prepare_forward},
    {"prepare_backward", m_prepare_backward},
    {"set_comm_hook", m_set_comm_hook},
    {"buckets", m_buckets},
    {"bucket_tensor", m_bucket_tensor},
    {"rebuilt", m_rebuilt},
    {"timeline", m_timeline},
    {"shadow_backward", m_shadow_backward},
    {"set_divisor", m_set_divisor},
    {"graph_walks", m_graph_walks},
    {"close", r_close},
    {NULL, NULL},
};

/* Creates the reducer metatable (idempotent), then makes the reducer. */
static int d_new(lua_State *L)
{
    if (luaL_newmetatable(L, REDUCER_MT)) {
        lua_pushcfunction(L, r_close);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, r_close);
        lua_setfield(L, -2, "__close");
        /* methods get the library's upvalues too: lb_tensor_list recognises tensors by them */
        luaL_newlibtable(L, reducer_methods);
        lua_pushvalue(L, LB_MT_UPV);
        lua_pushvalue(L, LB_METHODS_UPV);
        luaL_setfuncs(L, reducer_methods, 2);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
    return d_reducer(L);
}

const luaL_Reg lb_ddp_functions[] = {{"reducer", d_new}, {NULL, NULL}};
