/* lua/bind_dist_store.c: the TCP store in Lua, PyTorch's TCPStore with its method names.
 * defines: lb_store_open (ddplua.core._store.TCPStore and the "ddplua.TCPStore" type).
 *
 *   local store = core._store.TCPStore(host, port, {is_master=false, timeout=300, token=nil})
 *   store:set(key, value)           value: a string (numbers are converted)
 *   store:get(key) -> string        waits for the key up to the timeout
 *   store:add(key, n) -> integer    atomic; the value is kept as decimal text ("400")
 *   store:check(keys) -> boolean    keys: a string or a list of strings; never waits
 *   store:wait(keys [, timeout])    waits for all of them
 *   store:delete_key(key) -> boolean
 *   store:num_keys() -> integer     every key, the rendezvous' own included (as PyTorch's)
 *   store:set_timeout(seconds); store.port, store.host, store.timeout, store.is_master
 *   store:close() (also __close and __gc)
 * ddpl.distributed.TCPStore (lua/ddplua/distributed.lua) is this constructor. The token defaults
 * to $DDPLUA_STORE_TOKEN, so every store of a launched job carries the job's token. A server
 * store's close waits (up to 3 s) for the other clients to disconnect. */
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "distributed/store.h"

#define STORE_MT "ddplua.TCPStore"

typedef struct store_box {
    ddpl_store *s; /* NULL once closed */
    bool is_master;
    char host[256];
} store_box;

static store_box *check_box(lua_State *L, const char *fname)
{
    store_box *b = luaL_testudata(L, 1, STORE_MT);
    if (!b)
        luaL_error(L, "TCPStore.%s: expected a TCPStore as self, got %s", fname,
                   luaL_typename(L, 1));
    if (!b->s) luaL_error(L, "TCPStore.%s: attempt to use a closed TCPStore", fname);
    return b;
}

static const char *check_key(lua_State *L, int idx, const char *fname)
{
    if (lua_type(L, idx) != LUA_TSTRING)
        luaL_error(L, "TCPStore.%s: expected a string key as argument %d, got %s", fname, idx - 1,
                   luaL_typename(L, idx));
    return lua_tostring(L, idx);
}

static LB_NORETURN store_error(lua_State *L)
{
    luaL_error(L, "%s", ddpl_last_error());
    abort(); /* not reached: luaL_error does not return */
}

/* A key or a list of keys at idx into a userdata-owned array; returns the count. */
static int check_keys(lua_State *L, int idx, const char *fname, const char ***out)
{
    if (lua_type(L, idx) == LUA_TSTRING) {
        const char **keys = lua_newuserdatauv(L, sizeof *keys, 0);
        keys[0] = lua_tostring(L, idx);
        *out = keys;
        return 1;
    }
    if (lua_type(L, idx) != LUA_TTABLE)
        luaL_error(L, "TCPStore.%s: expected a key or a list of keys, got %s", fname,
                   luaL_typename(L, idx));
    int n = (int)luaL_len(L, idx);
    if (n < 1) luaL_error(L, "TCPStore.%s: the list of keys is empty", fname);
    const char **keys = lua_newuserdatauv(L, (size_t)n * sizeof *keys, 0);
    for (int i = 1; i <= n; i++) {
        lua_geti(L, idx, i);
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "TCPStore.%s: key %d is a %s, not a string", fname, i,
                       luaL_typename(L, -1));
        keys[i - 1] = lua_tostring(L, -1); /* kept alive by the table at idx */
        lua_pop(L, 1);
    }
    *out = keys;
    return n;
}

static int store_new(lua_State *L)
{
    static const char *const names[] = {"is_master", "timeout", "token", NULL};
    const char *fname = "TCPStore";
    const char *host = luaL_checkstring(L, 1);
    lua_Integer port = luaL_checkinteger(L, 2);
    int opts = lua_istable(L, 3) ? 3 : 0;
    if (!opts && !lua_isnoneornil(L, 3))
        luaL_error(L, "TCPStore: expected an options table as argument 3, got %s",
                   luaL_typename(L, 3));
    lb_check_opts(L, opts, fname, names);
    bool is_master = false;
    double timeout = 300.0; /* PyTorch's default */
    const char *token = getenv("DDPLUA_STORE_TOKEN");
    if (opts) {
        lua_getfield(L, opts, "is_master");
        is_master = lb_bool(L, lua_isnil(L, -1) ? 0 : lua_gettop(L), fname, "is_master", false);
        lua_getfield(L, opts, "timeout");
        timeout = lb_num(L, lua_isnil(L, -1) ? 0 : lua_gettop(L), fname, "timeout", timeout);
        lua_getfield(L, opts, "token");
        if (!lua_isnil(L, -1)) {
            if (lua_type(L, -1) != LUA_TSTRING)
                lb_opterror(L, lua_gettop(L), fname, "token", "a string");
            token = lua_tostring(L, -1);
        }
    }
    if (port < 0 || port > 65535)
        luaL_error(L, "TCPStore: port %I is out of range (0 to 65535)", port);
    if (strlen(host) >= sizeof((store_box *)0)->host)
        luaL_error(L, "TCPStore: the host name is too long");
    store_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->s = NULL;
    luaL_setmetatable(L, STORE_MT);
    b->s = ddpl_store_create(host, (int)port, is_master, timeout, token);
    if (!b->s) store_error(L);
    b->is_master = is_master;
    strcpy(b->host, host);
    return 1;
}

static int store_set(lua_State *L)
{
    store_box *b = check_box(L, "set");
    const char *key = check_key(L, 2, "set");
    if (lua_type(L, 3) != LUA_TSTRING && lua_type(L, 3) != LUA_TNUMBER)
        luaL_error(L, "TCPStore.set: expected a string value for key '%s', got %s", key,
                   luaL_typename(L, 3));
    size_t len;
    const char *v = lua_tolstring(L, 3, &len);
    if (ddpl_store_set(b->s, key, v, len) < 0) store_error(L);
    return 0;
}

static int store_get(lua_State *L)
{
    store_box *b = check_box(L, "get");
    const char *key = check_key(L, 2, "get");
    void *v;
    size_t len;
    if (ddpl_store_get(b->s, key, &v, &len) < 0) store_error(L);
    lua_pushlstring(L, v, len); /* may raise "not enough memory": v is then lost, as Lua's own */
    free(v);
    return 1;
}

static int store_num_keys(lua_State *L)
{
    store_box *b = check_box(L, "num_keys");
    int64_t n;
    if (ddpl_store_num_keys(b->s, &n) < 0) store_error(L);
    lua_pushinteger(L, (lua_Integer)n);
    return 1;
}

static int store_add(lua_State *L)
{
    store_box *b = check_box(L, "add");
    const char *key = check_key(L, 2, "add");
    int isint;
    lua_Integer delta = lua_tointegerx(L, 3, &isint);
    if (!isint)
        luaL_error(L, "TCPStore.add: expected an integer amount for key '%s', got %s", key,
                   luaL_typename(L, 3));
    int64_t result;
    if (ddpl_store_add(b->s, key, (int64_t)delta, &result) < 0) store_error(L);
    lua_pushinteger(L, (lua_Integer)result);
    return 1;
}

static int store_check(lua_State *L)
{
    store_box *b = check_box(L, "check");
    const char **keys;
    int n = check_keys(L, 2, "check", &keys);
    bool present;
    if (ddpl_store_check(b->s, n, keys, &present) < 0) store_error(L);
    lua_pushboolean(L, present);
    return 1;
}

static int store_wait(lua_State *L)
{
    store_box *b = check_box(L, "wait");
    double timeout = -1; /* the store's */
    if (!lua_isnoneornil(L, 3)) {
        if (lua_type(L, 3) != LUA_TNUMBER || lua_tonumber(L, 3) < 0)
            luaL_error(L,
                       "TCPStore.wait: expected a timeout in seconds (>= 0) as argument 2, got %s",
                       luaL_typename(L, 3));
        timeout = lua_tonumber(L, 3);
    }
    const char **keys;
    int n = check_keys(L, 2, "wait", &keys);
    if (ddpl_store_wait(b->s, n, keys, timeout) < 0) store_error(L);
    return 0;
}

static int store_delete_key(lua_State *L)
{
    store_box *b = check_box(L, "delete_key");
    const char *key = check_key(L, 2, "delete_key");
    bool deleted;
    if (ddpl_store_delete(b->s, key, &deleted) < 0) store_error(L);
    lua_pushboolean(L, deleted);
    return 1;
}

static int store_set_timeout(lua_State *L)
{
    store_box *b = check_box(L, "set_timeout");
    double t = luaL_checknumber(L, 2);
    if (!(t > 0)) luaL_error(L, "TCPStore.set_timeout: the timeout must be positive, got %f", t);
    ddpl_store_set_timeout(b->s, t);
    return 0;
}

static int store_close(lua_State *L)
{
    store_box *b = luaL_checkudata(L, 1, STORE_MT);
    ddpl_store *s = b->s;
    b->s = NULL;
    ddpl_store_free(s);
    return 0;
}

static int store_tostring(lua_State *L)
{
    store_box *b = luaL_checkudata(L, 1, STORE_MT);
    if (!b->s)
        lua_pushliteral(L, "TCPStore (closed)");
    else
        lua_pushfstring(L, "TCPStore(%s:%d%s)", b->host, ddpl_store_port(b->s),
                        b->is_master ? ", master" : "");
    return 1;
}

static const luaL_Reg store_methods[] = {
    {"set", store_set},           {"get", store_get},
    {"add", store_add},           {"check", store_check},
    {"wait", store_wait},         {"delete_key", store_delete_key},
    {"num_keys", store_num_keys}, {"set_timeout", store_set_timeout},
    {"close", store_close},       {NULL, NULL},
};

/* Properties first (store.port ...), then the methods (upvalue 1). */
static int store_index(lua_State *L)
{
    store_box *b = luaL_checkudata(L, 1, STORE_MT);
    const char *k = lua_tostring(L, 2);
    if (k && b->s) {
        if (strcmp(k, "port") == 0) return lua_pushinteger(L, ddpl_store_port(b->s)), 1;
        if (strcmp(k, "host") == 0) return lua_pushstring(L, b->host), 1;
        if (strcmp(k, "timeout") == 0) return lua_pushnumber(L, ddpl_store_timeout(b->s)), 1;
        if (strcmp(k, "is_master") == 0) return lua_pushboolean(L, b->is_master), 1;
    }
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(1));
    return 1;
}

void lb_store_open(lua_State *L, int ddpl)
{
    if (luaL_newmetatable(L, STORE_MT)) {
        lua_newtable(L);
        luaL_setfuncs(L, store_methods, 0);
        lua_pushcclosure(L, store_index, 1);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, store_close);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, store_close);
        lua_setfield(L, -2, "__close");
        lua_pushcfunction(L, store_tostring);
        lua_setfield(L, -2, "__tostring");
        lua_pushliteral(L, "TCPStore");
        lua_setfield(L, -2, "__name");
    }
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushcfunction(L, store_new);
    lua_setfield(L, -2, "TCPStore");
    lua_setfield(L, ddpl, "_store");
}
