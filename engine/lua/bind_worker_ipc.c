/* lua/bind_worker_ipc.c: how DataLoader workers hand batches to the main process without
 * copying them there: shared-memory slots, reused batch after batch, announced over a socket.
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
 * Why slots are reused: first-touching fresh pages is the dominant cost of a new segment per
 * batch (11 ms for 400 kB on the 2-core VM this was written on, against 0.03 ms to copy into
 * pages already mapped). A slot starts with a state word (SLOT_FREE / SLOT_LENT): the worker
 * lends it with a batch; the main process hands it back when the tensors read from it are
 * freed (their storage's deleter), and the worker writes the next batch only into a free slot.
 *
 * Segment layout after the 64-byte state line (both ends are this build, so dtype codes and
 * byte order are the host's): "DLSG", u32 count, then per tensor: u8 dtype, u8 ndim, 6 zero
 * bytes, u64 offset of its bytes from the start of the slot, ndim i64 sizes; then the tensors'
 * bytes, 64-byte aligned. view_read checks every offset, size and dtype against the mapping
 * before it makes a tensor: a slot is written by another process. Errors read "DataLoader worker
 * transport: <what>". */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "binding.h"
#include "core/alloc.h"
#include "ddpl/cuda.h"
#include "core/core.h"
#include "ops/dispatch.h"

#define WHAT          "DataLoader worker transport"
#define SEG_ALIGN     64
#define SEG_HEADER    64 /* the slot's state word, on a cache line of its own */
#define SLOT_MT       "ddplua.worker_slot"
#define VIEW_MT       "ddplua.worker_slot_view"
#define SEG_MAX_COUNT 65536             /* tensors in one batch */
#define MSG_MAX       ((size_t)1 << 30) /* bytes of one control message */

static LB_NORETURN sys_error(lua_State *L, const char *call)
{
    luaL_error(L, WHAT ": %s: %s", call, strerror(errno));
    __builtin_unreachable();
}

static int w_socketpair(lua_State *L)
{
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
        return sys_error(L, "socketpair");
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
        luaL_error(L, WHAT ": send: expected a string or a 1-D contiguous uint8 CPU tensor");
    *n = ddpl_tensor_nbytes(t);
    return ddpl_tensor_data(t);
}

static int w_send(lua_State *L)
{
    int fd = (int)luaL_checkinteger(L, 1);
    size_t n;
    const char *body = bytes_arg(L, 2, &n);
    int segfd = (int)luaL_optinteger(L, 3, -1);
    if (n > MSG_MAX) return luaL_error(L, WHAT ": send: message of %I bytes", (lua_Integer)n);
    uint32_t len = (uint32_t)n;
    struct iovec iov[2] = {{&len, sizeof len}, {(void *)body, n}};
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
    if (segfd >= 0) {
        memset(&ctl, 0, sizeof ctl);
        m.msg_control = ctl.space;
        m.msg_controllen = sizeof ctl.space;
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &segfd, sizeof(int));
    }
    size_t total = sizeof len + n, done = 0;
    while (done < total) {
        ssize_t w;
        if (done == 0) {
            w = sendmsg(fd, &m, MSG_NOSIGNAL); /* the fd goes with the first byte */
        } else {
            const char *from =
                done < sizeof len ? (const char *)&len + done : body + (done - sizeof len);
            size_t left = done < sizeof len ? sizeof len - done : total - done;
            w = send(fd, from, left, MSG_NOSIGNAL);
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return sys_error(L, "send");
        done += (size_t)w;
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* Reads exactly n bytes (blocking): 0, or -1 at EOF or on an error (errno set; 0 at EOF). */
static int read_all(int fd, char *to, size_t n)
{
    while (n > 0) {
        ssize_t r = read(fd, to, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = 0;
            return -1;
        }
        to += r;
        n -= (size_t)r;
    }
    return 0;
}

static int w_recv(lua_State *L)
{
    int fd = (int)luaL_checkinteger(L, 1);
    double wait_s = luaL_optnumber(L, 2, -1);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int ms = wait_s < 0 ? -1 : wait_s > 1e6 ? 1000000000 : (int)(wait_s * 1000.0);
    int r = poll(&p, 1, ms);
    if (r < 0 && errno != EINTR) return sys_error(L, "poll");
    if (r <= 0) { /* the time passed, or a signal came: the caller's Lua looks at both */
        lua_pushnil(L);
        lua_pushliteral(L, "timeout");
        return 2;
    }
    uint32_t len;
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct iovec iov = {&len, sizeof len};
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = ctl.space,
                       .msg_controllen = sizeof ctl.space};
    ssize_t got;
    do got = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
    while (got < 0 && errno == EINTR);
    if (got < 0 && errno != ECONNRESET) return sys_error(L, "recvmsg");
    if (got <= 0) {
        lua_pushnil(L);
        lua_pushliteral(L, "eof");
        return 2;
    }
    int segfd = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            memcpy(&segfd, CMSG_DATA(c), sizeof(int));
    if ((size_t)got < sizeof len && read_all(fd, (char *)&len + got, sizeof len - (size_t)got) < 0)
        goto cut;
    if (len > MSG_MAX) {
        if (segfd >= 0) close(segfd);
        return luaL_error(L, WHAT ": recv: message of %I bytes", (lua_Integer)len);
    }
    luaL_Buffer b;
    char *body = luaL_buffinitsize(L, &b, len);
    if (read_all(fd, body, len) < 0) goto cut;
    luaL_pushresultsize(&b, len);
    if (segfd >= 0)
        lua_pushinteger(L, segfd);
    else
        lua_pushnil(L);
    return 2;
cut: /* the sender died in the middle of a message */
    if (segfd >= 0) close(segfd);
    lua_pushnil(L);
    lua_pushliteral(L, "eof");
    return 2;
}

/* ---- segments ---- */

typedef struct seg_entry {
    uint8_t dtype, ndim, pad[6];
    uint64_t offset;
} seg_entry;

enum { SLOT_FREE = 0, SLOT_LENT = 1 };

static size_t align_up(size_t n)
{
    return (n + SEG_ALIGN - 1) & ~(size_t)(SEG_ALIGN - 1);
}

/* Bytes a segment needs for the tensors of the list at idx, checking each (contiguous, CPU). */
static size_t layout_size(lua_State *L, int idx)
{
    lua_Integer count = luaL_len(L, idx);
    if (count > SEG_MAX_COUNT)
        luaL_error(L, WHAT ": a batch of %I tensors (at most %d)", count, SEG_MAX_COUNT);
    size_t at = SEG_HEADER + 8;
    for (lua_Integer k = 1; k <= count; k++) {
        lua_geti(L, idx, k);
        ddpl_tensor *t = lb_check(L, -1, "segment");
        if (ddpl_tensor_device(t).type != DDPL_CPU || !ddpl_tensor_is_contiguous(t))
            luaL_error(L, WHAT ": tensor %I is not a contiguous CPU tensor", k);
        at += sizeof(seg_entry) + (size_t)ddpl_tensor_ndim(t) * sizeof(int64_t);
        lua_pop(L, 1);
    }
    at = align_up(at);
    for (lua_Integer k = 1; k <= count; k++) {
        lua_geti(L, idx, k);
        size_t nb = ddpl_tensor_nbytes(lb_check(L, -1, "segment"));
        lua_pop(L, 1);
        if (nb > SIZE_MAX / 2 - at) luaL_error(L, WHAT ": the batch is too large");
        at = align_up(at + nb);
    }
    return at;
}

static int w_segment_size(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_pushinteger(L, (lua_Integer)layout_size(L, 1));
    return 1;
}

/* A zeroed userdata of size bytes with metatable mt (made on first use) whose __gc is gc, so it is
 * released even when an error follows its creation. */
static void *new_udata(lua_State *L, size_t size, const char *mt, lua_CFunction gc)
{
    void *p = lua_newuserdatauv(L, size, 0);
    memset(p, 0, size);
    if (luaL_newmetatable(L, mt)) {
        lua_pushcfunction(L, gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    return p;
}

/* The worker's side of a slot: a memfd it keeps mapped and writes batch after batch into. */
typedef struct ws_slot {
    int fd;
    char *base;
    size_t len;
} ws_slot;

static atomic_uint *slot_state(char *base)
{
    return (atomic_uint *)base;
}

static int slot_gc(lua_State *L)
{
    ws_slot *s = luaL_checkudata(L, 1, SLOT_MT);
    if (s->base) {
        munmap(s->base, s->len);
        close(s->fd);
        ddpl_memory_account(DDPL_CPU, -(int64_t)s->len);
        s->base = NULL;
    }
    return 0;
}

static ws_slot *check_slot(lua_State *L, int idx)
{
    ws_slot *s = luaL_checkudata(L, idx, SLOT_MT);
    if (!s->base) luaL_error(L, WHAT ": the slot is closed");
    return s;
}

static int w_slot_new(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    if (n < (lua_Integer)SEG_HEADER + 8 || (uint64_t)n > SIZE_MAX / 2)
        return luaL_error(L, WHAT ": slot_new: bad size %I", n);
    ws_slot *s = new_udata(L, sizeof *s, SLOT_MT, slot_gc);
    s->base = NULL;
    int fd = memfd_create("ddplua-batch", MFD_CLOEXEC);
    if (fd < 0) return sys_error(L, "memfd_create");
    if (ftruncate(fd, (off_t)n) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return sys_error(L, "ftruncate (no room in shared memory?)");
    }
    void *base = mmap(NULL, (size_t)n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        int e = errno;
        close(fd);
        errno = e;
        return sys_error(L, "mmap");
    }
    s->fd = fd;
    s->base = base;
    s->len = (size_t)n;
    atomic_store(slot_state(s->base), SLOT_FREE);
    ddpl_memory_account(DDPL_CPU, n);
    return 1;
}

/* slot_write(slot, tensors): the tensors into the slot, which is lent to the main process until
 * it has dropped every tensor over it. */
static int w_slot_write(lua_State *L)
{
    ws_slot *s = check_slot(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    size_t need = layout_size(L, 2);
    if (need > s->len)
        return luaL_error(L, WHAT ": slot of %I bytes for a batch of %I", (lua_Integer)s->len,
                          (lua_Integer)need);
    if (atomic_load_explicit(slot_state(s->base), memory_order_acquire) != SLOT_FREE)
        return luaL_error(L, WHAT ": slot_write: the slot is still in use");
    lua_Integer count = luaL_len(L, 2);
    char *seg = s->base + SEG_HEADER;
    memcpy(seg, "DLSG", 4);
    uint32_t n32 = (uint32_t)count;
    memcpy(seg + 4, &n32, 4);
    char *desc = seg + 8;
    size_t data_at = SEG_HEADER + 8;
    for (lua_Integer k = 1; k <= count; k++) {
        lua_geti(L, 2, k);
        data_at += sizeof(seg_entry) + (size_t)ddpl_tensor_ndim(lb_check(L, -1, "segment")) * 8;
        lua_pop(L, 1);
    }
    data_at = align_up(data_at);
    for (lua_Integer k = 1; k <= count; k++) {
        lua_geti(L, 2, k);
        ddpl_tensor *t = lb_check(L, -1, "segment");
        seg_entry e = {.dtype = (uint8_t)ddpl_tensor_dtype(t),
                       .ndim = (uint8_t)ddpl_tensor_ndim(t),
                       .offset = data_at};
        memcpy(desc, &e, sizeof e);
        desc += sizeof e;
        for (int d = 0; d < e.ndim; d++) {
            int64_t sz = ddpl_tensor_size(t, d);
            memcpy(desc, &sz, sizeof sz);
            desc += sizeof sz;
        }
        size_t nb = ddpl_tensor_nbytes(t);
        if (nb) memcpy(s->base + data_at, ddpl_tensor_data(t), nb);
        data_at = align_up(data_at + nb);
        lua_pop(L, 1);
    }
    atomic_store_explicit(slot_state(s->base), SLOT_LENT, memory_order_release);
    return 0;
}

static int w_slot_is_free(lua_State *L)
{
    ws_slot *s = check_slot(L, 1);
    lua_pushboolean(L,
                    atomic_load_explicit(slot_state(s->base), memory_order_acquire) == SLOT_FREE);
    return 1;
}

static int w_slot_size(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)check_slot(L, 1)->len);
    return 1;
}

static int w_slot_fd(lua_State *L)
{
    lua_pushinteger(L, check_slot(L, 1)->fd);
    return 1;
}

/* The main process's side: one mapping of a slot, shared by the view and the tensors read from
 * it. When only the view is left the slot is handed back (SLOT_FREE); with the last reference
 * the mapping goes. */
typedef struct seg_map {
    atomic_long refs;
    char *base;
    size_t len;
    bool pinned; /* page-locked with ddpl_cuda_host_register */
    pid_t owner; /* the process that mapped it: a forked child that inherited the mapping and
                  * frees its copies of the tensors must not hand the slot back */
} seg_map;

static void seg_map_release(void *data, void *ctx)
{
    (void)data;
    seg_map *m = ctx;
    long was = atomic_fetch_sub(&m->refs, 1);
    bool mine = getpid() == m->owner;
    if (was == 2 && mine)
        atomic_store_explicit(slot_state(m->base), SLOT_FREE, memory_order_release);
    if (was != 1) return;
    if (m->pinned && mine) ddpl_cuda_host_unregister(m->base);
    munmap(m->base, m->len);
    ddpl_memory_account(DDPL_CPU, -(int64_t)m->len);
    free(m);
}

typedef struct rv_view {
    seg_map *m; /* NULL once closed */
} rv_view;

static int view_gc(lua_State *L)
{
    rv_view *v = luaL_checkudata(L, 1, VIEW_MT);
    if (v->m) {
        seg_map_release(NULL, v->m);
        v->m = NULL;
    }
    return 0;
}

/* view_map(fd [, pin]) -> view; fd stays open (the caller's). */
static int w_view_map(lua_State *L)
{
    int fd = (int)luaL_checkinteger(L, 1);
    bool pin = lua_toboolean(L, 2);
    rv_view *v = new_udata(L, sizeof *v, VIEW_MT, view_gc);
    v->m = NULL;
    struct stat st;
    void *base = MAP_FAILED;
    int e = 0;
    if (fstat(fd, &st) < 0)
        e = errno;
    else if ((size_t)st.st_size >= SEG_HEADER + 8)
        base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (!e && base == MAP_FAILED && (size_t)st.st_size >= SEG_HEADER + 8) e = errno;
    if (e) {
        errno = e;
        return sys_error(L, "mapping a batch segment");
    }
    if (base == MAP_FAILED)
        return luaL_error(L, WHAT ": malformed batch segment: %I bytes", (lua_Integer)st.st_size);
    seg_map *m = ddpl_xmalloc(sizeof *m);
    atomic_init(&m->refs, 1); /* the view's */
    m->base = base;
    m->len = (size_t)st.st_size;
    m->pinned = false;
    m->owner = getpid();
    v->m = m;
    ddpl_memory_account(DDPL_CPU, (int64_t)m->len);
    if (pin) {
        int rc = ddpl_cuda_host_register(base, m->len);
        if (rc < 0) return luaL_error(L, WHAT ": %s", ddpl_last_error());
        m->pinned = rc > 0;
    }
    return 1;
}

static LB_NORETURN bad_segment(lua_State *L, const char *what, lua_Integer k)
{
    luaL_error(L, WHAT ": malformed batch segment: %s (tensor %I)", what, k);
    __builtin_unreachable();
}

/* view_read(view) -> the tensors of the batch now in the slot, over the mapping (no copy). */
static int w_view_read(lua_State *L)
{
    rv_view *v = luaL_checkudata(L, 1, VIEW_MT);
    if (!v->m) return luaL_error(L, WHAT ": the view is closed");
    seg_map *m = v->m;
    const char *p = m->base + SEG_HEADER;
    size_t len = m->len - SEG_HEADER;
    uint32_t count;
    memcpy(&count, p + 4, 4);
    if (memcmp(p, "DLSG", 4) != 0) bad_segment(L, "bad magic", 0);
    if (count > SEG_MAX_COUNT) bad_segment(L, "too many tensors", count);
    lua_createtable(L, (int)count, 0);
    size_t at = 8;
    /* one reference while the tensors are made: the slot is not handed back half-read */
    atomic_fetch_add(&m->refs, 1);
    for (uint32_t k = 1; k <= count; k++) {
        seg_entry en;
        const char *why = NULL;
        int64_t sizes[DDPL_MAX_DIMS];
        size_t nb = 0;
        if (len - at < sizeof en) {
            why = "truncated header";
        } else {
            memcpy(&en, p + at, sizeof en);
            at += sizeof en;
            if (en.dtype >= DDPL_DTYPE_COUNT)
                why = "unknown dtype";
            else if (en.ndim > DDPL_MAX_DIMS)
                why = "too many dimensions";
            else if ((len - at) / sizeof(int64_t) < en.ndim)
                why = "truncated sizes";
        }
        if (!why) {
            memcpy(sizes, p + at, en.ndim * sizeof(int64_t));
            at += en.ndim * sizeof(int64_t);
            nb = ddpl_dtype_size((ddpl_dtype)en.dtype);
            for (int d = 0; d < en.ndim && !why; d++) {
                if (sizes[d] < 0)
                    why = "negative size";
                else if (sizes[d] && nb > m->len / (uint64_t)sizes[d])
                    why = "sizes overflow";
                else
                    nb *= (size_t)sizes[d];
            }
        }
        if (!why && (en.offset < SEG_HEADER || en.offset > m->len || m->len - en.offset < nb))
            why = "bytes past the end";
        if (why) {
            seg_map_release(NULL, m);
            bad_segment(L, why, k);
        }
        atomic_fetch_add(&m->refs, 1);
        lb_box *box = lb_newbox(L);
        box->t = ddpl_from_blob(m->base + en.offset, en.ndim, sizes, (ddpl_dtype)en.dtype,
                                seg_map_release, m);
        if (!box->t) {
            atomic_fetch_sub(&m->refs, 1);
            seg_map_release(NULL, m);
            bad_segment(L, ddpl_last_error(), k);
        }
        lua_rawseti(L, -2, k);
    }
    seg_map_release(NULL, m); /* with no tensors, this hands the slot back */
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
