/* lua/bind_dist_pg.c: the C half of ddpl.distributed: process-group and work-handle boxes.
 * defines: lb_dist_functions (package.loaded['ddplua.core.dist']): check_backend, init, destroy,
 *          new_group, group_id, group_ranks, is_group, debug_level, rank, size, backend,
 *          timeout, all_reduce, broadcast, all_gather, all_gather_into_tensor,
 *          reduce_scatter_tensor, send, recv, barrier, reduce, gather, scatter, all_to_all,
 *          all_to_all_single; the "ddplua.Work" handle type with
 *          wait([timeout_s]), is_completed(), exception().
 *
 * These are the raw calls that lua/ddplua/distributed.lua builds the PyTorch-shaped API on:
 * each collective takes the group box first and returns a work handle (async); the Lua side
 * waits when async_op is off, reads the environment, and keeps the default group. Argument
 * messages name the API function; the engine's messages already do. */
#include <string.h>

#include "binding.h"
#include "distributed/pg.h"

#define PG_MT   "ddplua.ProcessGroup"
#define WORK_MT "ddplua.Work"

typedef struct pg_box {
    ddpl_pg *pg; /* NULL once destroyed */
} pg_box;

typedef struct work_box {
    ddpl_work *w;
} work_box;

/* ---- work handles ---- */
static work_box *check_work(lua_State *L, int idx)
{
    return luaL_checkudata(L, idx, WORK_MT);
}

static int w_gc(lua_State *L)
{
    work_box *b = check_work(L, 1);
    ddpl_work_release(b->w);
    b->w = NULL;
    return 0;
}

/* work:wait([timeout_s]) -> true, or raises the operation's error */
static int w_wait(lua_State *L)
{
    work_box *b = check_work(L, 1);
    double timeout = luaL_optnumber(L, 2, -1.0);
    if (!b->w) return luaL_error(L, "wait: attempt to use a released work handle");
    if (ddpl_work_wait(b->w, timeout) < 0) return lb_error(L);
    lua_pushboolean(L, 1);
    return 1;
}

static int w_is_completed(lua_State *L)
{
    work_box *b = check_work(L, 1);
    lua_pushboolean(L, !b->w || ddpl_work_is_completed(b->w));
    return 1;
}

/* work:exception() -> the failure message, or nil (pending or succeeded) */
static int w_exception(lua_State *L)
{
    work_box *b = check_work(L, 1);
    const char *e = b->w ? ddpl_work_error(b->w) : NULL;
    if (e)
        lua_pushstring(L, e);
    else
        lua_pushnil(L);
    return 1;
}

static int w_tostring(lua_State *L)
{
    work_box *b = check_work(L, 1);
    if (!b->w) {
        lua_pushliteral(L, "Work(released)");
        return 1;
    }
    const char *state = !ddpl_work_is_completed(b->w) ? "pending"
                        : ddpl_work_error(b->w)       ? "failed"
                                                      : "completed";
    lua_pushfstring(L, "Work(%s, %s)", ddpl_work_name(b->w), state);
    return 1;
}

static const luaL_Reg work_methods[] = {
    {"wait", w_wait}, {"is_completed", w_is_completed}, {"exception", w_exception}, {NULL, NULL}};

/* Boxes w (taking over its reference), or raises the engine's error when w is NULL. */
static int push_work(lua_State *L, ddpl_work *w, const char *fname)
{
    if (!w) return lb_error_in(L, fname);
    work_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->w = w;
    if (luaL_newmetatable(L, WORK_MT)) {
        lua_pushcfunction(L, w_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, w_gc);
        lua_setfield(L, -2, "__close");
        lua_pushcfunction(L, w_tostring);
        lua_setfield(L, -2, "__tostring");
        luaL_newlib(L, work_methods);
        lua_setfield(L, -2, "__index");
    }
    lua_setmetatable(L, -2);
    return 1;
}

/* ---- process groups ---- */
static int pg_gc(lua_State *L)
{
    pg_box *b = luaL_checkudata(L, 1, PG_MT);
    ddpl_pg_free(b->pg);
    b->pg = NULL;
    return 0;
}

static ddpl_pg *check_pg(lua_State *L, const char *fname)
{
    pg_box *b = luaL_testudata(L, 1, PG_MT);
    if (!b) lb_argerror(L, 1, fname, "a process group");
    if (!b->pg)
        luaL_error(L, "%s: the process group was destroyed (call init_process_group first)", fname);
    return b->pg;
}

/* A group box (no group yet) on the stack, with its metatable. */
static pg_box *new_pg_box(lua_State *L)
{
    pg_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->pg = NULL;
    if (luaL_newmetatable(L, PG_MT)) {
        lua_pushcfunction(L, pg_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, pg_gc);
        lua_setfield(L, -2, "__close");
    }
    lua_setmetatable(L, -2);
    return b;
}

static const char *opt_string(lua_State *L, int t, const char *field, const char *dflt)
{
    lua_getfield(L, t, field);
    const char *s = lua_isnil(L, -1) ? dflt : lua_tostring(L, -1);
    if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
        lb_opterror(L, lua_gettop(L), "init_process_group", field, "a string");
    lua_pop(L, 1); /* the string stays referenced by the table */
    return s;
}

static lua_Integer opt_int(lua_State *L, int t, const char *field)
{
    lua_getfield(L, t, field);
    if (!lua_isinteger(L, -1))
        lb_opterror(L, lua_gettop(L), "init_process_group", field, "an integer");
    lua_Integer v = lua_tointeger(L, -1);
    lua_pop(L, 1);
    return v;
}

/* init{backend, master_addr, master_port, rank, world_size, timeout, token, agent_store,
 *      key_prefix, heartbeat} -> group box (heartbeat: seconds, -1 for none, nil the default) */
static int d_init(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    ddpl_pg_config cfg = {0};
    cfg.backend = opt_string(L, 1, "backend", "gloo");
    cfg.master_addr = opt_string(L, 1, "master_addr", NULL);
    cfg.token = opt_string(L, 1, "token", NULL);
    cfg.key_prefix = opt_string(L, 1, "key_prefix", NULL);
    lua_getfield(L, 1, "agent_store");
    cfg.agent_store = lua_toboolean(L, -1);
    lua_pop(L, 1);
    cfg.master_port = (int)opt_int(L, 1, "master_port");
    cfg.rank = (int)opt_int(L, 1, "rank");
    cfg.world_size = (int)opt_int(L, 1, "world_size");
    lua_getfield(L, 1, "timeout");
    cfg.timeout_s = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : 1800.0;
    lua_pop(L, 1);
    lua_getfield(L, 1, "heartbeat");
    cfg.heartbeat_s = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : 0.0;
    lua_pop(L, 1);
    pg_box *b = new_pg_box(L);
    b->pg = ddpl_pg_create(&cfg);
    if (!b->pg) return lb_error_in(L, "init_process_group");
    return 1;
}

/* new_group(world, {global ranks...}, timeout_s) -> group box (rank -1 on a non-member) */
static int d_new_group(lua_State *L)
{
    const char *f = "new_group";
    ddpl_pg *world = check_pg(L, f);
    luaL_checktype(L, 2, LUA_TTABLE);
    double timeout = luaL_optnumber(L, 3, 0.0);
    lua_Integer n = (lua_Integer)lua_rawlen(L, 2);
    if (n < 1 || n > ddpl_pg_size(world))
        return luaL_error(L, "%s: expected a list of 1 to %d ranks (world_size), got %d", f,
                          ddpl_pg_size(world), (int)n);
    int *ranks = lua_newuserdatauv(L, (size_t)n * sizeof *ranks, 0); /* freed by the GC */
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 2, i);
        if (!lua_isinteger(L, -1))
            return luaL_error(L, "%s: rank %d of the list is not an integer (%s)", f, (int)i,
                              luaL_typename(L, -1));
        ranks[i - 1] = (int)lua_tointeger(L, -1);
        lua_pop(L, 1);
    }
    pg_box *b = new_pg_box(L);
    b->pg = ddpl_pg_new_group(world, (int)n, ranks, timeout);
    if (!b->pg) return lb_error_in(L, f);
    return 1;
}

static int d_group_id(lua_State *L)
{
    lua_pushinteger(L, ddpl_pg_group_id(check_pg(L, "group_id")));
    return 1;
}

/* group_ranks(g) -> {global rank of group rank 0, 1, ...} */
static int d_group_ranks(lua_State *L)
{
    ddpl_pg *pg = check_pg(L, "get_process_group_ranks");
    int n = ddpl_pg_size(pg);
    lua_createtable(L, n, 0);
    for (int r = 0; r < n; r++) {
        lua_pushinteger(L, ddpl_pg_global_rank(pg, r));
        lua_rawseti(L, -2, r + 1);
    }
    return 1;
}

/* debug_level() -> 'OFF', 'INFO' or 'DETAIL' (DDPLUA_DISTRIBUTED_DEBUG, as the engine reads it) */
static int d_debug_level(lua_State *L)
{
    static const char *const names[] = {"OFF", "INFO", "DETAIL"};
    lua_pushstring(L, names[ddpl_pg_debug_level()]);
    return 1;
}

/* is_group(x) -> whether x is a process-group box (destroyed or not) */
static int d_is_group(lua_State *L)
{
    lua_pushboolean(L, luaL_testudata(L, 1, PG_MT) != NULL);
    return 1;
}

/* check_backend(name): nothing when the backend can run here, else raises why ("backend 'nccl'
 * ... this build has no NCCL"), so init fails before any rendezvous */
static int d_check_backend(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    if (ddpl_pg_backend_check(name) < 0) return lb_error(L);
    return 0;
}

static int d_destroy(lua_State *L)
{
    luaL_checkudata(L, 1, PG_MT);
    return pg_gc(L);
}

static int d_rank(lua_State *L)
{
    lua_pushinteger(L, ddpl_pg_rank(check_pg(L, "get_rank")));
    return 1;
}

static int d_size(lua_State *L)
{
    lua_pushinteger(L, ddpl_pg_size(check_pg(L, "get_world_size")));
    return 1;
}

static int d_backend(lua_State *L)
{
    lua_pushstring(L, ddpl_pg_backend(check_pg(L, "get_backend")));
    return 1;
}

static int d_timeout(lua_State *L)
{
    lua_pushnumber(L, ddpl_pg_timeout(check_pg(L, "timeout")));
    return 1;
}

/* monitored_barrier(pg, timeout_s or nil, wait_all_ranks): synchronous, raises rank 0's verdict
 * (also defined here, beside the queries, as it is not a queued collective) */
static int d_monitored_barrier(lua_State *L)
{
    ddpl_pg *pg = check_pg(L, "monitored_barrier");
    double timeout = luaL_optnumber(L, 2, -1.0);
    if (ddpl_pg_monitored_barrier(pg, timeout, lua_toboolean(L, 3)) < 0)
        return lb_error_in(L, "monitored_barrier");
    return 0;
}

static ddpl_reduce_op check_reduce_op(lua_State *L, int idx, const char *fname)
{
    if (lua_isnoneornil(L, idx)) return DDPL_REDUCE_SUM;
    const char *name = lua_tostring(L, idx);
    int op = name && lua_type(L, idx) == LUA_TSTRING ? ddpl_reduce_op_parse(name) : -1;
    if (op < 0)
        luaL_error(L, "%s: unknown op '%s' (expected 'sum', 'avg', 'max', 'min' or 'product')",
                   fname, name ? name : luaL_typename(L, idx));
    return (ddpl_reduce_op)op;
}

static int check_peer(lua_State *L, int idx, const char *fname, const char *what)
{
    if (!lua_isinteger(L, idx)) lb_argerror(L, idx, fname, what);
    return (int)lua_tointeger(L, idx);
}

/* all_reduce(pg, t [, op]) */
static int d_all_reduce(lua_State *L)
{
    ddpl_pg *pg = check_pg(L, "all_reduce");
    ddpl_tensor *t = lb_check(L, 2, "all_reduce");
    ddpl_reduce_op op = check_reduce_op(L, 3, "all_reduce");
    return push_work(L, ddpl_pg_allreduce(pg, t, op), "all_reduce");
}

/* broadcast(pg, t, src) */
static int d_broadcast(lua_State *L)
{
    ddpl_pg *pg = check_pg(L, "broadcast");
    ddpl_tensor *t = lb_check(L, 2, "broadcast");
    int src = check_peer(L, 3, "broadcast", "an integer rank (src)");
    return push_work(L, ddpl_pg_broadcast(pg, t, src), "broadcast");
}

/* all_gather(pg, list_of_out, t) */
static int d_all_gather(lua_State *L)
{
    ddpl_pg *pg = check_pg(L, "all_gather");
    ddpl_tensor **outs;
    int n = lb_tensor_list(L, 2, "all_gather", &outs);
    ddpl_tensor *t = lb_check(L, 3, "all_gather");
    return push_work(L, ddpl_pg_allgather(pg, outs, n, t), "all_gather");
}

/* all_gather_into_tensor(pg, out, t) */
static int d_all_gather_into_tensor(lua_State *L)
{
    const char *f = "all_gather_into_tensor";
    ddpl_pg *pg = check_pg(L, f);
    ddpl_tensor *out = lb_check(L, 2, f);
    ddpl_tensor *t = lb_check(L, 3, f);
    return push_work(L, ddpl_pg_allgather_into(pg, out, t), f);
}

/* reduce_scatter_tensor(pg, out, in [, op]) */
static int d_reduce_scatter_tensor(lua_State *L)
{
    const char *f = "reduce_scatter_tensor";
    ddpl_pg *pg = check_pg(L, f);
    ddpl_tensor *out = lb_check(L, 2, f);
    ddpl_tensor *in = lb_check(L, 3, f);
    ddpl_reduce_op op = check_reduce_op(L, 4, f);
    return push_work(L, ddpl_pg_reduce_scatter(pg, out, in, op), f);
}

static int d_send(lua_State *L)
{
    ddpl_pg *pg = check_pg(L, "send");
    ddpl_tensor *t = lb_check(L, 2, "send");
    int dst = check_peer(L, 3, "send", "an integer rank (dst)");
    return push_work(L, ddpl_pg_send(pg, t, dst), "send");
}

static int d_recv(lua_State *L)
{
    ddpl_pg *pg = check_pg(L, "recv");
    ddpl_tensor *t = lb_check(L, 2, "recv");
    int src = check_peer(L, 3, "recv", "an integer rank (src)");
    return push_work(L, ddpl_pg_recv(pg, t, src), "recv");
}

static int d_barrier(lua_State *L)
{
    return push_work(L, ddpl_pg_barrier(check_pg(L, "barrier")), "barrier");
}

/* reduce(pg, t, dst [, op]) */
static int d_reduce(lua_State *L)
{
    const char *f = "reduce";
    ddpl_pg *pg = check_pg(L, f);
    ddpl_tensor *t = lb_check(L, 2, f);
    int dst = check_peer(L, 3, f, "an integer rank (dst)");
    ddpl_reduce_op op = check_reduce_op(L, 4, f);
    return push_work(L, ddpl_pg_reduce(pg, t, dst, op), f);
}

/* A list of tensors at idx, or nil (*out NULL, 0). */
static int opt_tensor_list(lua_State *L, int idx, const char *fname, ddpl_tensor ***out)
{
    *out = NULL;
    return lua_isnoneornil(L, idx) ? 0 : lb_tensor_list(L, idx, fname, out);
}

/* gather(pg, t, list_or_nil, dst) and scatter(pg, t, list_or_nil, src): one shape, the list
 * only on the root (pg_ops.c checks where it must be) */
typedef ddpl_work *(*rooted_list_fn)(ddpl_pg *pg, ddpl_tensor *t, ddpl_tensor *const *list, int n,
                                     int root);

static int rooted_list_call(lua_State *L, const char *f, const char *root_what, rooted_list_fn fn)
{
    ddpl_pg *pg = check_pg(L, f);
    ddpl_tensor *t = lb_check(L, 2, f);
    ddpl_tensor **list;
    int n = opt_tensor_list(L, 3, f, &list);
    int root = check_peer(L, 4, f, root_what);
    return push_work(L, fn(pg, t, list, n, root), f);
}

static int d_gather(lua_State *L)
{
    return rooted_list_call(L, "gather", "an integer rank (dst)", ddpl_pg_gather);
}

static int d_scatter(lua_State *L)
{
    return rooted_list_call(L, "scatter", "an integer rank (src)", ddpl_pg_scatter);
}

/* all_to_all(pg, out_list, in_list) */
static int d_all_to_all(lua_State *L)
{
    const char *f = "all_to_all";
    ddpl_pg *pg = check_pg(L, f);
    ddpl_tensor **outs, **ins;
    int nouts = lb_tensor_list(L, 2, f, &outs);
    int nins = lb_tensor_list(L, 3, f, &ins);
    return push_work(L, ddpl_pg_alltoall(pg, outs, nouts, ins, nins), f);
}

/* A list of split sizes (non-negative integers; the engine checks their sum) at idx, or nil /
 * an empty list (*out NULL, 0: equal splits). */
static int opt_splits(lua_State *L, int idx, const char *fname, const char *name, int64_t **out)
{
    *out = NULL;
    if (lua_isnoneornil(L, idx)) return 0;
    if (lua_type(L, idx) != LUA_TTABLE) lb_opterror(L, idx, fname, name, "a list of integers");
    lua_Integer n = luaL_len(L, idx);
    if (n < 0 || n > 1 << 20) luaL_error(L, "%s: %s has %d entries", fname, name, (int)n);
    int64_t *v = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *v, 0);
    for (lua_Integer i = 0; i < n; i++) {
        lua_rawgeti(L, idx, i + 1);
        if (!lua_isinteger(L, -1))
            luaL_error(L, "%s: %s must hold integers, got %s at position %d", fname, name,
                       luaL_typename(L, -1), (int)i + 1);
        v[i] = (int64_t)lua_tointeger(L, -1);
        lua_pop(L, 1);
    }
    lua_replace(L, idx); /* keeps the array alive for the call, in the table's place */
    *out = n ? v : NULL;
    return (int)n;
}

/* all_to_all_single(pg, out, in [, output_split_sizes [, input_split_sizes]]) */
static int d_all_to_all_single(lua_State *L)
{
    const char *f = "all_to_all_single";
    ddpl_pg *pg = check_pg(L, f);
    ddpl_tensor *out = lb_check(L, 2, f);
    ddpl_tensor *in = lb_check(L, 3, f);
    int64_t *out_splits, *in_splits;
    int n_out = opt_splits(L, 4, f, "output_split_sizes", &out_splits);
    int n_in = opt_splits(L, 5, f, "input_split_sizes", &in_splits);
    return push_work(L, ddpl_pg_alltoall_single(pg, out, in, out_splits, n_out, in_splits, n_in),
                     f);
}

const luaL_Reg lb_dist_functions[] = {
    {"check_backend", d_check_backend},
    {"init", d_init},
    {"destroy", d_destroy},
    {"new_group", d_new_group},
    {"group_id", d_group_id},
    {"group_ranks", d_group_ranks},
    {"is_group", d_is_group},
    {"debug_level", d_debug_level},
    {"rank", d_rank},
    {"size", d_size},
    {"backend", d_backend},
    {"timeout", d_timeout},
    {"monitored_barrier", d_monitored_barrier},
    {"all_reduce", d_all_reduce},
    {"broadcast", d_broadcast},
    {"all_gather", d_all_gather},
    {"all_gather_into_tensor", d_all_gather_into_tensor},
    {"reduce_scatter_tensor", d_reduce_scatter_tensor},
    {"send", d_send},
    {"recv", d_recv},
    {"barrier", d_barrier},
    {"reduce", d_reduce},
    {"gather", d_gather},
    {"scatter", d_scatter},
    {"all_to_all", d_all_to_all},
    {"all_to_all_single", d_all_to_all_single},
    {NULL, NULL},
};
