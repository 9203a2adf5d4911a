/* lua/bind_hooks.c: Lua functions as tensor hooks, and the backward-pass bracket around them.
 * defines: lb_hooks_open, lb_backward_begin, lb_backward_end, lb_queue_callback, lb_ref_new,
 *          lb_ref_free,
 *          lb_backward_pcall, lb_hook_methods (register_hook), the ddplua.HookHandle type
 *          (handle:remove()).
 *
 * The engine calls a C hook with the gradient; ours calls the Lua function under lua_pcall, so a
 * Lua error never unwinds through the engine's C frames. The error value is kept in the registry
 * and re-raised, unchanged, by the binding that started backward once the engine has cleaned up.
 *
 * Lifetimes. A hook lives as long as the tensor's C object (or its grad_fn node), which may be
 * freed outside any Lua call: by the GC's finalizer of another tensor, by a C thread dropping a
 * reference, or after lua_close. So the hook's registry reference is not released there; it is
 * queued on the per-state record and unref'd by the next hook registration or backward pass,
 * and a hook whose lua_State has closed does nothing. Graph nodes of ddpl.autograd.Function
 * (bind_function.c) keep their Lua backward the same way (lb_ref_new, lb_ref_free). A hook function
 * that refers to its own tensor keeps that tensor alive (the registry is a GC root): remove the
 * hook to break the cycle. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "binding.h"

#define HANDLE_MT "ddplua.HookHandle"

/* One per lua_State (owned by a registry sentinel and by every live hook). */
typedef struct hook_state {
    lua_State *main;
    atomic_int refs;
    atomic_bool alive;
    pthread_mutex_t lock;
    int *dead; /* registry refs of freed hooks, not yet unref'd */
    int n_dead, cap_dead;
} hook_state;

typedef struct lb_ref {
    hook_state *st;
    int ref; /* the function, in the registry */
} lua_hook;

typedef struct hook_handle {
    ddpl_tensor *t; /* owned; NULL once removed */
    lua_hook *key;  /* identifies the hook to ddpl_tensor_remove_hooks */
} hook_handle;

static char state_key, error_key, callbacks_key;
static _Thread_local lua_State *active_L;
static _Thread_local hook_state *active_st;

static void state_release(hook_state *st)
{
    if (atomic_fetch_sub(&st->refs, 1) != 1) return;
    pthread_mutex_destroy(&st->lock);
    free(st->dead);
    free(st);
}

static hook_state *get_state(lua_State *L)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &state_key);
    hook_state **p = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return *p;
}

/* Unrefs the functions of hooks freed since the last call. */
static void drain(lua_State *L, hook_state *st)
{
    pthread_mutex_lock(&st->lock);
    int n = st->n_dead;
    int refs[64];
    if (n > 64) n = 64; /* the rest goes on the next call */
    for (int i = 0; i < n; i++) refs[i] = st->dead[--st->n_dead];
    pthread_mutex_unlock(&st->lock);
    for (int i = 0; i < n; i++) luaL_unref(L, LUA_REGISTRYINDEX, refs[i]);
}

void lb_ref_free(void *ud)
{
    lua_hook *h = ud;
    hook_state *st = h->st;
    if (atomic_load(&st->alive)) {
        pthread_mutex_lock(&st->lock);
        if (st->n_dead == st->cap_dead) {
            int cap = st->cap_dead ? 2 * st->cap_dead : 16;
            int *d = realloc(st->dead, (size_t)cap * sizeof *d);
            if (d) { /* without memory the ref just stays in the registry */
                st->dead = d;
                st->cap_dead = cap;
            }
        }
        if (st->n_dead < st->cap_dead) st->dead[st->n_dead++] = h->ref;
        pthread_mutex_unlock(&st->lock);
    }
    state_release(st);
    free(h);
}

int lb_backward_pcall(lb_ref *r, lua_CFunction trampoline, void *arg, const char *what)
{
    hook_state *st = r->st;
    if (!atomic_load(&st->alive)) return ddpl_error("%s: its Lua state was closed", what);
    lua_State *L = active_st == st ? active_L : st->main;
    if (!lua_checkstack(L, 4)) return ddpl_error("%s: Lua stack overflow", what);
    int top = lua_gettop(L);
    lua_pushcfunction(L, trampoline);
    lua_rawgeti(L, LUA_REGISTRYINDEX, r->ref);
    lua_pushlightuserdata(L, arg);
    int rc = 0;
    if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        ddpl_error("%s: %s", what, msg ? msg : "a non-string error was raised");
        lua_rawsetp(L, LUA_REGISTRYINDEX, &error_key);
        rc = -1;
    }
    lua_settop(L, top);
    return rc;
}

typedef struct {
    ddpl_tensor *grad;   /* borrowed */
    ddpl_tensor *result; /* the hook's replacement (new reference), or NULL */
} hook_call;

/* Runs inside lua_pcall (lb_backward_pcall): fn(grad) -> replacement or nil. Everything that
 * can raise happens here, under the protection of the pcall. */
static int hook_trampoline(lua_State *L)
{
    hook_call *call = lua_touserdata(L, 2);
    ddpl_tensor *g = call->grad;
    lua_settop(L, 1);
    ddpl_lua_push_tensor(L, g);
    lua_call(L, 1, 1);
    if (lua_isnil(L, -1)) return 0;
    ddpl_tensor *r = ddpl_lua_test_tensor(L, -1);
    if (!r)
        return luaL_error(L, "register_hook: the hook must return a tensor or nil, got %s",
                          luaL_typename(L, -1));
    int nd = ddpl_tensor_ndim(r);
    bool same = nd == ddpl_tensor_ndim(g) && ddpl_tensor_dtype(r) == ddpl_tensor_dtype(g);
    for (int i = 0; same && i < nd; i++) same = ddpl_tensor_size(r, i) == ddpl_tensor_size(g, i);
    if (!same)
        return luaL_error(L,
                          "register_hook: the hook returned a gradient of a different shape "
                          "or dtype (%s) than it was given (%s)",
                          ddpl_dtype_name(ddpl_tensor_dtype(r)),
                          ddpl_dtype_name(ddpl_tensor_dtype(g)));
    call->result = ddpl_tensor_retain(r);
    return 0;
}

/* The C hook the engine calls (ddpl_tensor_hook_fn). */
static ddpl_tensor *call_lua_hook(ddpl_tensor *grad, void *ud, bool *failed)
{
    lua_hook *h = ud;
    if (!atomic_load(&h->st->alive)) return NULL; /* a hook outliving its state does nothing */
    hook_call call = {grad, NULL};
    if (lb_backward_pcall(h, hook_trampoline, &call, "register_hook") < 0) *failed = true;
    return call.result;
}

lb_active lb_backward_begin(lua_State *L)
{
    hook_state *st = get_state(L);
    drain(L, st);
    lua_pushnil(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &error_key);
    lb_active prev = {active_L, active_st};
    active_L = L;
    active_st = st;
    return prev;
}

void lb_backward_end(lua_State *L, lb_active prev, int rc)
{
    active_L = prev.L;
    active_st = prev.st;
    if (!prev.L) { /* the outermost pass ended: its queued callbacks run now, fn(succeeded) */
        if (lua_rawgetp(L, LUA_REGISTRYINDEX, &callbacks_key) == LUA_TTABLE) {
            lua_pushnil(L);
            lua_rawsetp(L, LUA_REGISTRYINDEX, &callbacks_key);
            lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
            for (lua_Integer i = 1; i <= n; i++) {
                lua_rawgeti(L, -1, i);
                lua_pushboolean(L, rc >= 0);
                if (rc >= 0)
                    lua_call(L, 1, 0);
                else if (lua_pcall(L, 1, 0, 0) != LUA_OK) /* the pass's own error wins */
                    lua_pop(L, 1);
            }
        }
        lua_pop(L, 1);
    }
    if (rc >= 0) return;
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &error_key) != LUA_TNIL) {
        lua_pushnil(L);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &error_key);
        lua_error(L); /* the hook's own error value */
    }
    lb_error(L);
}

/* ddpl.autograd._queue_callback(fn): fn(succeeded) runs once the outermost backward pass
 * running now has finished, in the order queued (PyTorch's queue_callback; FSDP waits for its
 * reductions there). Only during backward. After a failed pass fn(false) still runs (to wait
 * for what it started), its errors ignored, and the pass's error is raised. */
int lb_queue_callback(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    if (!active_L)
        return luaL_error(L, "_queue_callback: callbacks can only be queued during backward");
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &callbacks_key) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &callbacks_key);
    }
    lua_pushvalue(L, 1);
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
    return 0;
}

lb_ref *lb_ref_new(lua_State *L, int idx)
{
    hook_state *st = get_state(L);
    drain(L, st);
    lua_pushvalue(L, idx);
    int ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_hook *h = malloc(sizeof *h);
    if (!h) {
        luaL_unref(L, LUA_REGISTRYINDEX, ref);
        luaL_error(L, "ddplua: out of memory");
    }
    h->st = st;
    h->ref = ref;
    atomic_fetch_add(&st->refs, 1);
    return h;
}

/* x:register_hook(fn) -> handle; fn(grad) may return a replacement gradient */
static int m_register_hook(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "register_hook");
    if (!lua_isfunction(L, 2) && luaL_getmetafield(L, 2, "__call") == LUA_TNIL)
        return lb_argerror(L, 2, "register_hook", "a function");
    lua_settop(L, 2);
    hook_handle *hh = lua_newuserdatauv(L, sizeof *hh, 0);
    hh->t = NULL;
    hh->key = NULL;
    luaL_setmetatable(L, HANDLE_MT);
    lua_hook *h = lb_ref_new(L, 2);
    if (ddpl_tensor_register_hook(t, call_lua_hook, h, lb_ref_free) < 0) {
        lb_ref_free(h);
        lb_error_in(L, "register_hook");
    }
    hh->t = ddpl_tensor_retain(t);
    hh->key = h;
    return 1;
}

static int handle_remove(lua_State *L)
{
    hook_handle *hh = luaL_checkudata(L, 1, HANDLE_MT);
    if (hh->t) {
        ddpl_tensor *t = hh->t;
        hh->t = NULL;
        ddpl_tensor_remove_hooks(t, hh->key);
        ddpl_tensor_release(t);
    }
    return 0;
}

static int handle_gc(lua_State *L)
{
    hook_handle *hh = luaL_checkudata(L, 1, HANDLE_MT);
    ddpl_tensor_release(hh->t); /* dropping the handle keeps the hook, as in PyTorch */
    hh->t = NULL;
    return 0;
}

static int state_gc(lua_State *L)
{
    hook_state **p = lua_touserdata(L, 1);
    if (*p) {
        atomic_store(&(*p)->alive, false);
        state_release(*p);
        *p = NULL;
    }
    return 0;
}

void lb_hooks_open(lua_State *L)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &state_key) == LUA_TNIL) {
        hook_state **p = lua_newuserdatauv(L, sizeof *p, 0);
        *p = NULL;
        lua_createtable(L, 0, 1);
        lua_pushcfunction(L, state_gc);
        lua_setfield(L, -2, "__gc");
        lua_setmetatable(L, -2);
        hook_state *st = calloc(1, sizeof *st);
        if (!st) luaL_error(L, "ddplua: out of memory");
        lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
        st->main = lua_tothread(L, -1);
        lua_pop(L, 1);
        atomic_init(&st->refs, 1);
        atomic_init(&st->alive, true);
        pthread_mutex_init(&st->lock, NULL);
        *p = st;
        lua_rawsetp(L, LUA_REGISTRYINDEX, &state_key);
    }
    lua_pop(L, 1);
    if (luaL_newmetatable(L, HANDLE_MT)) {
        lua_pushcfunction(L, handle_gc);
        lua_setfield(L, -2, "__gc");
        lua_createtable(L, 0, 1);
        lua_pushcfunction(L, handle_remove);
        lua_setfield(L, -2, "remove");
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
}

const luaL_Reg lb_hook_methods[] = {
    {"register_hook", m_register_hook},
    {NULL, NULL},
};
