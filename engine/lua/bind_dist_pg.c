/* lua/bind_dist_pg.c: the C half of ddpl.distributed: process-group and work-handle boxes.
 * defines: lb_dist_functions (package.loaded['ddplua.core.dist']): check_backend, init, destroy,
 *          rank, size, backend, timeout, all_reduce, broadcast, all_gather, all_gather_into_tensor,
 *          reduce_scatter_tensor, send, recv, barrier; the "ddplua.Work" handle type with
 *          wait([timeout_s]), is_completed(), exception().
 *
 * These are the raw calls that lua/ddplua/distributed.lua builds the PyTorch-shaped API on:
 * each collective takes the group box first and returns a work handle (async); the Lua side
 * waits when async_op is off, reads the environment, and keeps the default group. Argument
 * messages name the API function; the engine's messages already do. */
#include <string.h>

#include "binding.h"
#include "dist/pg.h"

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

/* init{backend, master_addr, master_port, rank, world_size, timeout, token} -> group box */
static int d_init(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    ddpl_pg_config cfg = {0};
    cfg.backend = opt_string(L, 1, "backend", "gloo");
    cfg.master_addr = opt_string(L, 1, "master_addr", NULL);
    cfg.token = opt_string(L, 1, "token", NULL);
    cfg.master_port = (int)opt_int(L, 1, "master_port");
    cfg.rank = (int)opt_int(L, 1, "rank");
    cfg.world_size = (int)opt_int(L, 1, "world_size");
    lua_getfield(L, 1, "timeout");
    cfg.timeout_s = lua_isnumber(L, -1) ? lua_tonumber(L, -1) : 1800.0;
    lua_pop(L, 1);
    pg_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->pg = NULL;
    if (luaL_newmetatable(L, PG_MT)) {
        lua_pushcfunction(L, pg_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, pg_gc);
        lua_setfield(L, -2, "__close");
    }
    lua_setmetatable(L, -2);
    b->pg = ddpl_pg_create(&cfg);
    if (!b->pg) return lb_error_in(L, "init_process_group");
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

const luaL_Reg lb_dist_functions[] = {
    {"check_backend", d_check_backend},
    {"init", d_init},
    {"destroy", d_destroy},
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
    {NULL, NULL},
};
