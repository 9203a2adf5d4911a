/* lua/bind_worker_ipc.c: how DataLoader workers hand batches to the main process without
 * copying them there: shared-memory segments passed over a socket.
 * defines: lb_worker_ipc_functions (package.loaded['ddplua.core.worker_ipc']): socketpair, send,
 *          recv, segment_write, segment_read, forbid_cuda.
 *
 *   socketpair() -> fd_a, fd_b           a connected AF_UNIX stream pair, blocking, close-on-exec
 *   send(fd, bytes [, segfd])            one message: a u32 length, then bytes (a string or a 1-D
 *                                        contiguous uint8 CPU tensor); segfd, when given, travels
 *                                        with it (SCM_RIGHTS): the receiver gets its own copy
 *   recv(fd [, wait_s]) -> bytes, segfd | nil, 'timeout' | nil, 'eof'
 *                                        waits at most wait_s (< 0 or absent: for ever) for the
 *                                        next message; a signal (Ctrl-C) also returns 'timeout',
 *                                        so the caller's Lua runs and sees the interrupt
 *   segment_write(tensors) -> segfd      a new anonymous shared-memory file (memfd) holding the
 *                                        contiguous CPU tensors of the list, each 64-byte aligned
 *   segment_read(segfd [, pin]) -> tensors   maps the file and returns its tensors over the
 *                                        mapping (no copy); the mapping goes away with the last of
 *                                        them; segfd is closed. pin: page-lock the mapping
 *                                        (cudaHostRegister) where CUDA is available, so copies
 *                                        to a GPU are asynchronous (DataLoader's pin_memory)
 *   forbid_cuda()                        in a forked worker: CUDA cannot start there (a forked
 *                                        child must not initialise it, and cannot use the
 *                                        parent's context); a no-op where the parent started it
 *
 * Segment layout (both ends are this build, so dtype codes and byte order are the host's):
 *   "DLSG", u32 count, then per tensor: u8 dtype, u8 ndim, 6 zero bytes, u64 offset of its
 *   bytes from the start, ndim i64 sizes; then the tensors' bytes at their offsets.
 * segment_read checks every offset, size and dtype against the file before it maps a tensor:
 * a segment comes from another process. Errors read "DataLoader worker transport: <what>". */
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

static size_t align_up(size_t n)
{
    return (n + SEG_ALIGN - 1) & ~(size_t)(SEG_ALIGN - 1);
}

static int w_segment_write(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer count = luaL_len(L, 1);
    if (count > SEG_MAX_COUNT)
        return luaL_error(L, WHAT ": a batch of %I tensors (at most %d)", count, SEG_MAX_COUNT);
    /* the layout first, checking every tensor, before anything is created */
    size_t at = 8;
    for (lua_Integer k = 1; k <= count; k++) {
        lua_geti(L, 1, k);
        ddpl_tensor *t = lb_check(L, -1, "segment_write");
        if (ddpl_tensor_device(t).type != DDPL_CPU || !ddpl_tensor_is_contiguous(t))
            return luaL_error(L, WHAT ": tensor %I is not a contiguous CPU tensor", k);
        at += sizeof(seg_entry) + (size_t)ddpl_tensor_ndim(t) * sizeof(int64_t);
        lua_pop(L, 1);
    }
    size_t header = at;
    at = align_up(at);
    for (lua_Integer k = 1; k <= count; k++) {
        lua_geti(L, 1, k);
        size_t nb = ddpl_tensor_nbytes(lb_check(L, -1, "segment_write"));
        lua_pop(L, 1);
        if (nb > SIZE_MAX / 2 - at) return luaL_error(L, WHAT ": the batch is too large");
        at = align_up(at + nb);
    }
    size_t total = at > header ? at : header;
    int fd = memfd_create("ddplua-batch", MFD_CLOEXEC);
    if (fd < 0) return sys_error(L, "memfd_create");
    if (ftruncate(fd, (off_t)total) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return sys_error(L, "ftruncate (no room in shared memory?)");
    }
    char *base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        int e = errno;
        close(fd);
        errno = e;
        return sys_error(L, "mmap");
    }
    memcpy(base, "DLSG", 4);
    uint32_t n32 = (uint32_t)count;
    memcpy(base + 4, &n32, 4);
    char *desc = base + 8;
    size_t data_at = align_up(header);
    for (lua_Integer k = 1; k <= count; k++) {
        lua_geti(L, 1, k);
        ddpl_tensor *t = lb_check(L, -1, "segment_write");
        seg_entry e = {.dtype = (uint8_t)ddpl_tensor_dtype(t),
                       .ndim = (uint8_t)ddpl_tensor_ndim(t),
                       .offset = data_at};
        memcpy(desc, &e, sizeof e);
        desc += sizeof e;
        for (int d = 0; d < e.ndim; d++) {
            int64_t s = ddpl_tensor_size(t, d);
            memcpy(desc, &s, sizeof s);
            desc += sizeof s;
        }
        size_t nb = ddpl_tensor_nbytes(t);
        if (nb) memcpy(base + data_at, ddpl_tensor_data(t), nb);
        data_at = align_up(data_at + nb);
        lua_pop(L, 1);
    }
    munmap(base, total);
    lua_pushinteger(L, fd);
    return 1;
}

/* One mapping shared by the tensors of a segment: unmapped with the last of them. */
typedef struct seg_map {
    atomic_long refs;
    void *base;
    size_t len;
    bool pinned; /* page-locked with ddpl_cuda_host_register */
} seg_map;

static void seg_map_release(void *data, void *ctx)
{
    (void)data;
    seg_map *m = ctx;
    if (atomic_fetch_sub(&m->refs, 1) != 1) return;
    if (m->pinned) ddpl_cuda_host_unregister(m->base);
    munmap(m->base, m->len);
    ddpl_memory_account(DDPL_CPU, -(int64_t)m->len);
    free(m);
}

static LB_NORETURN bad_segment(lua_State *L, seg_map *m, const char *what, lua_Integer k)
{
    seg_map_release(NULL, m); /* this call's reference: the tensors made so far keep theirs */
    luaL_error(L, WHAT ": malformed batch segment: %s (tensor %I)", what, k);
    __builtin_unreachable();
}

static int w_segment_read(lua_State *L)
{
    int fd = (int)luaL_checkinteger(L, 1);
    bool pin = lua_toboolean(L, 2);
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return sys_error(L, "fstat");
    }
    size_t len = (size_t)st.st_size;
    void *base = len >= 8 ? mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    int e = errno;
    close(fd);
    if (len < 8) return luaL_error(L, WHAT ": malformed batch segment: %I bytes", (lua_Integer)len);
    if (base == MAP_FAILED) {
        errno = e;
        return sys_error(L, "mmap");
    }
    seg_map *m = ddpl_xmalloc(sizeof *m);
    atomic_init(&m->refs, 1); /* this call's own reference, dropped at the end */
    m->base = base;
    m->len = len;
    m->pinned = false;
    ddpl_memory_account(DDPL_CPU, (int64_t)len);
    if (pin) {
        int rc = ddpl_cuda_host_register(base, len);
        if (rc < 0) {
            lua_pushstring(L, ddpl_last_error());
            seg_map_release(NULL, m);
            return luaL_error(L, WHAT ": %s", lua_tostring(L, -1));
        }
        m->pinned = rc > 0;
    }
    const char *p = base;
    uint32_t count;
    memcpy(&count, p + 4, 4);
    if (memcmp(p, "DLSG", 4) != 0) bad_segment(L, m, "bad magic", 0);
    if (count > SEG_MAX_COUNT) bad_segment(L, m, "too many tensors", count);
    lua_createtable(L, (int)count, 0);
    size_t at = 8;
    for (uint32_t k = 1; k <= count; k++) {
        seg_entry en;
        if (len - at < sizeof en) bad_segment(L, m, "truncated header", k);
        memcpy(&en, p + at, sizeof en);
        at += sizeof en;
        if (en.dtype >= DDPL_DTYPE_COUNT) bad_segment(L, m, "unknown dtype", k);
        if (en.ndim > DDPL_MAX_DIMS) bad_segment(L, m, "too many dimensions", k);
        if ((len - at) / sizeof(int64_t) < en.ndim) bad_segment(L, m, "truncated sizes", k);
        int64_t sizes[DDPL_MAX_DIMS];
        memcpy(sizes, p + at, en.ndim * sizeof(int64_t));
        at += en.ndim * sizeof(int64_t);
        size_t nb = ddpl_dtype_size((ddpl_dtype)en.dtype);
        for (int d = 0; d < en.ndim; d++) {
            if (sizes[d] < 0) bad_segment(L, m, "negative size", k);
            if (sizes[d] && nb > len / (uint64_t)sizes[d]) bad_segment(L, m, "sizes overflow", k);
            nb *= (size_t)sizes[d];
        }
        if (en.offset > len || len - en.offset < nb) bad_segment(L, m, "bytes past the end", k);
        atomic_fetch_add(&m->refs, 1);
        lb_box *box = lb_newbox(L);
        box->t = ddpl_from_blob((char *)base + en.offset, en.ndim, sizes, (ddpl_dtype)en.dtype,
                                seg_map_release, m);
        if (!box->t) {
            atomic_fetch_sub(&m->refs, 1);
            bad_segment(L, m, ddpl_last_error(), k);
        }
        lua_rawseti(L, -2, k);
    }
    seg_map_release(NULL, m); /* with no tensors, this unmaps it */
    lb_gc_account(L);
    return 1;
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
    {"segment_write", w_segment_write},
    {"segment_read", w_segment_read},
    {"forbid_cuda", w_forbid_cuda},
    {NULL, NULL},
};
