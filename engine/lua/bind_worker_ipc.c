/* lua/bind_worker_ipc.c: the DataLoader workers' transport for Lua (the C module and the why:
 * distributed/worker_ipc.h).
 * defines: lb_worker_ipc_functions (package.loaded['ddplua.core.worker_ipc']): socketpair, send,
 *          recv, segment_size, slot_new, slot_write, slot_is_free, slot_size, slot_fd,
 *          slot_close, view_map, view_read, view_close, forbid_cuda.
 *
 *   socketpair() -> fd_a, fd_b           a connected AF_UNIX stream pair, blocking, close-on-exec
 *   send(fd, bytes [, passfd])           one message: a u32 length, then bytes (a string or a 1-D
 *                                        contiguous uint8 CPU tensor); passfd, when given, travels
 *                                        with it (SCM_RIGHTS): the receiver gets its own copy
 *   recv(fd [, wait_s]) -> bytes, passfd | nil, 'timeout' | nil, 'eof'
 *                                        waits at most wait_s (< 0 or absent: for ever) for the
 *                                        next message; a signal (Ctrl-C) also returns 'timeout',
 *                                        so the caller's Lua runs and sees the interrupt
 *   In a worker: slot_new(nbytes) -> slot (a memfd the worker keeps mapped), segment_size(tensors)
 *   -> the bytes a slot needs for them, slot_write(slot, tensors) (copies them in and lends the
 *   slot to the main process), slot_is_free(slot) (the main process has dropped every tensor of
 *   the last batch in it), slot_size, slot_fd (to send once), slot_close.
 *   In the main process: view_map(fd [, pin]) -> view (maps a slot once; fd stays the caller's; pin
 *   page-locks it where CUDA is available: DataLoader's pin_memory), view_read(view) -> the
 *   batch's tensors over the mapping (no copy), view_close(view).
 *   forbid_cuda()                        in a forked worker: CUDA cannot start there (a forked
 *                                        child must not initialise it, and cannot use the
 *                                        parent's context); a no-op where the parent started it
 *
 * Errors read "DataLoader worker transport: <what>". */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "binding.h"
#include "distributed/worker_ipc.h"
#include "ops/dispatch.h"

#define SLOT_MT "ddplua.worker_slot"
#define VIEW_MT "ddplua.worker_slot_view"

static int w_socketpair(lua_State *L)
{
    int fds[2];
    if (ddpl_ipc_socketpair(fds) < 0) return lb_error(L);
    lua_pushinteger(L, fds[0]);
    lua_pushinteger(L, fds[1]);
    return 2;
}

/* The bytes of argument idx: a string or a 1-D contiguous uint8 CPU tensor. */
static const char *bytes_arg(lua_State *L, int idx, size_t *n)
{
    if (lua_type(L, idx) == LUA_TSTRING) return lua_tolstring(L, idx, n);
    ddpl_tensor *t = lb_check(L, idx, "send");
    if (ddpl_tensor_dtype(t) != DDPL_UINT8 || ddpl_tensor_ndim(t) != 1 ||
        ddpl_tensor_device(t).type != DDPL_CPU || !ddpl_tensor_is_contiguous(t))
        luaL_error(L, "DataLoader worker transport: send: expected a string or a 1-D contiguous "
                      "uint8 CPU tensor");
    *n = ddpl_tensor_nbytes(t);
    return ddpl_tensor_data(t);
}

static int w_send(lua_State *L)
{
    int fd = (int)luaL_checkinteger(L, 1);
    size_t n;
    const char *body = bytes_arg(L, 2, &n);
    if (ddpl_ipc_send(fd, body, n, (int)luaL_optinteger(L, 3, -1)) < 0) return lb_error(L);
    lua_pushboolean(L, 1);
    return 1;
}

static int push_fail(lua_State *L, const char *why)
{
    lua_pushnil(L);
    lua_pushstring(L, why);
    return 2;
}

static int w_recv(lua_State *L)
{
    int fd = (int)luaL_checkinteger(L, 1);
    size_t len;
    int passfd;
    int rc = ddpl_ipc_recv_header(fd, luaL_optnumber(L, 2, -1), &len, &passfd);
    if (rc == -1) return lb_error(L);
    if (rc == 0) return push_fail(L, "timeout"); /* or a signal: the caller's Lua sees it */
    if (rc == -2) return push_fail(L, "eof");
    luaL_Buffer b;
    char *body = luaL_buffinitsize(L, &b, len); /* read in place: no copy of the message */
    if (ddpl_ipc_recv_body(fd, body, len) < 0) {
        if (passfd >= 0) close(passfd);
        return push_fail(L, "eof"); /* the sender died in the middle of a message */
    }
    luaL_pushresultsize(&b, len);
    if (passfd >= 0)
        lua_pushinteger(L, passfd);
    else
        lua_pushnil(L);
    return 2;
}

/* The tensors of the Lua list at idx as a C array (in a userdata the GC collects; borrowed
 * tensors, which the list keeps). */
static ddpl_tensor **tensor_list(lua_State *L, int idx, int *count)
{
    lua_Integer n = luaL_len(L, idx);
    if (n < 0 || n > DDPL_BATCH_MAX_TENSORS)
        luaL_error(L, "DataLoader worker transport: a batch of %I tensors (at most %d)", n,
                   DDPL_BATCH_MAX_TENSORS);
    ddpl_tensor **ts = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *ts, 0);
    for (lua_Integer k = 1; k <= n; k++) {
        lua_geti(L, idx, k);
        ts[k - 1] = lb_check(L, -1, "segment");
        lua_pop(L, 1);
    }
    *count = (int)n;
    return ts;
}

static int w_segment_size(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    int count;
    ddpl_tensor **ts = tensor_list(L, 1, &count);
    size_t bytes;
    if (ddpl_batch_slot_bytes(ts, count, &bytes) < 0) return lb_error(L);
    lua_pushinteger(L, (lua_Integer)bytes);
    return 1;
}

static int slot_gc(lua_State *L)
{
    void **p = luaL_checkudata(L, 1, SLOT_MT);
    ddpl_batch_slot_free(*p);
    *p = NULL;
    return 0;
}

static ddpl_batch_slot *check_slot(lua_State *L, int idx)
{
    ddpl_batch_slot *s = *(void **)luaL_checkudata(L, idx, SLOT_MT);
    if (!s) luaL_error(L, "DataLoader worker transport: the slot is closed");
    return s;
}

static int w_slot_new(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    void **holder = lb_owner(L, sizeof(void *), SLOT_MT, slot_gc); /* before the slot */
    if (n < 0 || !(*holder = ddpl_batch_slot_new((size_t)n))) return lb_error(L);
    return 1;
}

static int w_slot_write(lua_State *L)
{
    ddpl_batch_slot *s = check_slot(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    int count;
    ddpl_tensor **ts = tensor_list(L, 2, &count);
    if (ddpl_batch_slot_write(s, ts, count) < 0) return lb_error(L);
    return 0;
}

static int w_slot_is_free(lua_State *L)
{
    lua_pushboolean(L, ddpl_batch_slot_is_free(check_slot(L, 1)));
    return 1;
}

static int w_slot_size(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)ddpl_batch_slot_size(check_slot(L, 1)));
    return 1;
}

static int w_slot_fd(lua_State *L)
{
    lua_pushinteger(L, ddpl_batch_slot_fd(check_slot(L, 1)));
    return 1;
}

static int view_gc(lua_State *L)
{
    void **p = luaL_checkudata(L, 1, VIEW_MT);
    ddpl_batch_view_free(*p);
    *p = NULL;
    return 0;
}

/* view_map(fd [, pin]) -> view; fd stays open (the caller's). */
static int w_view_map(lua_State *L)
{
    int fd = (int)luaL_checkinteger(L, 1);
    bool pin = lua_toboolean(L, 2);
    void **holder = lb_owner(L, sizeof(void *), VIEW_MT, view_gc); /* before the view */
    if (!(*holder = ddpl_batch_view_map(fd, pin))) return lb_error(L);
    return 1;
}

/* view_read(view) -> the tensors of the batch now in the slot, over the mapping (no copy). */
static int w_view_read(lua_State *L)
{
    ddpl_batch_view *v = *(void **)luaL_checkudata(L, 1, VIEW_MT);
    if (!v) return luaL_error(L, "DataLoader worker transport: the view is closed");
    ddpl_tensor **ts;
    int count;
    if (ddpl_batch_view_read(v, &ts, &count) < 0) return lb_error(L);
    lua_createtable(L, count, 0);
    int k = 0;
    for (; k < count && lua_checkstack(L, 4); k++) {
        lb_newbox(L)->t = ts[k];
        ts[k] = NULL;
        lua_rawseti(L, -2, k + 1);
    }
    for (int q = k; q < count; q++) ddpl_tensor_release(ts[q]); /* not reached in practice */
    free(ts);
    lb_gc_account(L);
    return 1;
}

static int w_view_close(lua_State *L)
{
    return view_gc(L);
}

static int w_slot_close(lua_State *L)
{
    return slot_gc(L);
}

static int w_forbid_cuda(lua_State *L)
{
    (void)L;
    if (!ddpl_backend_started(DDPL_CUDA)) ddpl_backend_register(DDPL_CUDA, NULL);
    return 0;
}

const luaL_Reg lb_worker_ipc_functions[] = {
    {"socketpair", w_socketpair},
    {"send", w_send},
    {"recv", w_recv},
    {"segment_size", w_segment_size},
    {"slot_new", w_slot_new},
    {"slot_write", w_slot_write},
    {"slot_is_free", w_slot_is_free},
    {"slot_size", w_slot_size},
    {"slot_fd", w_slot_fd},
    {"slot_close", w_slot_close},
    {"view_map", w_view_map},
    {"view_read", w_view_read},
    {"view_close", w_view_close},
    {"forbid_cuda", w_forbid_cuda},
    {NULL, NULL},
};
