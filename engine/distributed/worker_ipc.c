/* distributed/worker_ipc.c: the DataLoader workers' transport (worker_ipc.h): messages over an
 * AF_UNIX socket, batches through reused shared-memory slots.
 * defines: ddpl_ipc_*, ddpl_batch_slot_*, ddpl_batch_view_*. */
#define _GNU_SOURCE
#include "worker_ipc.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "ddpl/cuda.h"

#define WHAT       "DataLoader worker transport"
#define SEG_ALIGN  64
#define SEG_HEADER 64 /* the slot's state word, on a cache line of its own */
#define SEG_MIN    (SEG_HEADER + 8)

enum { SLOT_FREE = 0, SLOT_LENT = 1 };

typedef struct seg_entry {
    uint8_t dtype, ndim, pad[6];
    uint64_t offset;
} seg_entry;

static int sys_error(const char *call)
{
    return ddpl_error(WHAT ": %s: %s", call, strerror(errno));
}

/* ---- messages ---- */

int ddpl_ipc_socketpair(int fds[2])
{
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0) return sys_error("socketpair");
    return 0;
}

int ddpl_ipc_send(int fd, const void *body, size_t n, int passfd)
{
    if (n > DDPL_IPC_MSG_MAX) return ddpl_error(WHAT ": send: message of %zu bytes", n);
    uint32_t len = (uint32_t)n;
    struct iovec iov[2] = {{&len, sizeof len}, {(void *)body, n}};
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
    if (passfd >= 0) {
        memset(&ctl, 0, sizeof ctl);
        m.msg_control = ctl.space;
        m.msg_controllen = sizeof ctl.space;
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &passfd, sizeof(int));
    }
    size_t total = sizeof len + n, done = 0;
    while (done < total) {
        ssize_t w;
        if (done == 0) {
            w = sendmsg(fd, &m, MSG_NOSIGNAL); /* the fd goes with the first byte */
        } else {
            const char *from = done < sizeof len ? (const char *)&len + done
                                                 : (const char *)body + (done - sizeof len);
            size_t left = done < sizeof len ? sizeof len - done : total - done;
            w = send(fd, from, left, MSG_NOSIGNAL);
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return sys_error("send");
        done += (size_t)w;
    }
    return 0;
}

/* Reads exactly n bytes (blocking): 0, or -1 at EOF or on an error. */
static int read_all(int fd, char *to, size_t n)
{
    while (n > 0) {
        ssize_t r = read(fd, to, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        to += r;
        n -= (size_t)r;
    }
    return 0;
}

int ddpl_ipc_recv_header(int fd, double wait_s, size_t *len_out, int *passfd)
{
    *passfd = -1;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int ms = wait_s < 0 ? -1 : wait_s > 1e6 ? 1000000000 : (int)(wait_s * 1000.0);
    int r = poll(&p, 1, ms);
    if (r < 0 && errno != EINTR) return sys_error("poll");
    if (r <= 0) return 0;
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
    if (got < 0 && errno != ECONNRESET) return sys_error("recvmsg");
    if (got <= 0) return -2;
    int segfd = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            memcpy(&segfd, CMSG_DATA(c), sizeof(int));
    if ((size_t)got < sizeof len &&
        read_all(fd, (char *)&len + got, sizeof len - (size_t)got) < 0) {
        if (segfd >= 0) close(segfd);
        return -2; /* the sender died in the middle of a message */
    }
    if (len > DDPL_IPC_MSG_MAX) {
        if (segfd >= 0) close(segfd);
        return ddpl_error(WHAT ": recv: message of %u bytes (at most %zu)", len, DDPL_IPC_MSG_MAX);
    }
    *len_out = len;
    *passfd = segfd;
    return 1;
}

int ddpl_ipc_recv_body(int fd, void *body, size_t len)
{
    return read_all(fd, body, len) < 0 ? -2 : 0;
}

/* ---- slots ---- */

static size_t align_up(size_t n)
{
    return (n + SEG_ALIGN - 1) & ~(size_t)(SEG_ALIGN - 1);
}

static atomic_uint *slot_state(char *base)
{
    return (atomic_uint *)base;
}

/* Where the first tensor's bytes go: after the header and every tensor's description. */
static size_t data_start(ddpl_tensor *const *tensors, int count)
{
    size_t at = SEG_MIN;
    for (int k = 0; k < count; k++)
        at += sizeof(seg_entry) + (size_t)ddpl_tensor_ndim(tensors[k]) * sizeof(int64_t);
    return align_up(at);
}

int ddpl_batch_slot_bytes(ddpl_tensor *const *tensors, int count, size_t *bytes)
{
    if (count < 0 || count > DDPL_BATCH_MAX_TENSORS)
        return ddpl_error(WHAT ": a batch of %d tensors (at most %d)", count,
                          DDPL_BATCH_MAX_TENSORS);
    for (int k = 0; k < count; k++)
        if (ddpl_tensor_device(tensors[k]).type != DDPL_CPU ||
            !ddpl_tensor_is_contiguous(tensors[k]))
            return ddpl_error(WHAT ": tensor %d is not a contiguous CPU tensor", k + 1);
    size_t at = data_start(tensors, count);
    for (int k = 0; k < count; k++) {
        size_t nb = ddpl_tensor_nbytes(tensors[k]);
        if (nb > SIZE_MAX / 2 - at) return ddpl_error(WHAT ": the batch is too large");
        at = align_up(at + nb);
    }
    *bytes = at;
    return 0;
}

struct ddpl_batch_slot {
    int fd;
    char *base;
    size_t len;
};

ddpl_batch_slot *ddpl_batch_slot_new(size_t n)
{
    if (n < SEG_MIN || n > SIZE_MAX / 2) {
        ddpl_error(WHAT ": a slot of %zu bytes", n);
        return NULL;
    }
    int fd = memfd_create("ddplua-batch", MFD_CLOEXEC);
    if (fd < 0) {
        sys_error("memfd_create");
        return NULL;
    }
    void *base = MAP_FAILED;
    if (ftruncate(fd, (off_t)n) < 0)
        sys_error("ftruncate (no room in shared memory?)");
    else if ((base = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
        sys_error("mmap");
    ddpl_batch_slot *s = base == MAP_FAILED ? NULL : malloc(sizeof *s);
    if (!s) {
        if (base != MAP_FAILED) {
            munmap(base, n);
            ddpl_error(WHAT ": out of memory");
        }
        close(fd);
        return NULL;
    }
    *s = (ddpl_batch_slot){.fd = fd, .base = base, .len = n};
    atomic_store(slot_state(s->base), SLOT_FREE);
    ddpl_memory_account(DDPL_CPU, (int64_t)n);
    return s;
}

int ddpl_batch_slot_write(ddpl_batch_slot *s, ddpl_tensor *const *tensors, int count)
{
    size_t need;
    if (ddpl_batch_slot_bytes(tensors, count, &need) < 0) return -1;
    if (need > s->len)
        return ddpl_error(WHAT ": slot of %zu bytes for a batch of %zu", s->len, need);
    if (!ddpl_batch_slot_is_free(s))
        return ddpl_error(WHAT ": slot_write: the slot is still in use");
    char *seg = s->base + SEG_HEADER;
    memcpy(seg, "DLSG", 4);
    uint32_t n32 = (uint32_t)count;
    memcpy(seg + 4, &n32, 4);
    char *desc = seg + 8;
    size_t data_at = data_start(tensors, count);
    for (int k = 0; k < count; k++) {
        ddpl_tensor *t = tensors[k];
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
    }
    atomic_store_explicit(slot_state(s->base), SLOT_LENT, memory_order_release);
    return 0;
}

bool ddpl_batch_slot_is_free(const ddpl_batch_slot *s)
{
    return atomic_load_explicit(slot_state(s->base), memory_order_acquire) == SLOT_FREE;
}

size_t ddpl_batch_slot_size(const ddpl_batch_slot *s)
{
    return s->len;
}

int ddpl_batch_slot_fd(const ddpl_batch_slot *s)
{
    return s->fd;
}

void ddpl_batch_slot_free(ddpl_batch_slot *s)
{
    if (!s) return;
    munmap(s->base, s->len);
    close(s->fd);
    ddpl_memory_account(DDPL_CPU, -(int64_t)s->len);
    free(s);
}

/* ---- views ---- */

/* One mapping of a slot, shared by the view and the tensors read from it. When only the view is
 * left the slot is handed back (SLOT_FREE); with the last reference the mapping goes. */
struct ddpl_batch_view {
    atomic_long refs;
    char *base;
    size_t len;
    bool pinned; /* page-locked with ddpl_cuda_host_register */
    pid_t owner; /* the process that mapped it: a forked child that inherited the mapping and
                  * frees its copies of the tensors must not hand the slot back */
};

static void view_release(void *data, void *ctx)
{
    (void)data;
    ddpl_batch_view *v = ctx;
    long was = atomic_fetch_sub(&v->refs, 1);
    bool mine = getpid() == v->owner;
    if (was == 2 && mine)
        atomic_store_explicit(slot_state(v->base), SLOT_FREE, memory_order_release);
    if (was != 1) return;
    if (v->pinned && mine) ddpl_cuda_host_unregister(v->base);
    munmap(v->base, v->len);
    ddpl_memory_account(DDPL_CPU, -(int64_t)v->len);
    free(v);
}

ddpl_batch_view *ddpl_batch_view_map(int fd, bool pin)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        sys_error("mapping a batch segment");
        return NULL;
    }
    if (st.st_size < SEG_MIN) {
        ddpl_error(WHAT ": malformed batch segment: %lld bytes", (long long)st.st_size);
        return NULL;
    }
    void *base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        sys_error("mapping a batch segment");
        return NULL;
    }
    ddpl_batch_view *v = malloc(sizeof *v);
    if (!v) {
        munmap(base, (size_t)st.st_size);
        ddpl_error(WHAT ": out of memory");
        return NULL;
    }
    atomic_init(&v->refs, 1); /* the view's */
    v->base = base;
    v->len = (size_t)st.st_size;
    v->pinned = false;
    v->owner = getpid();
    ddpl_memory_account(DDPL_CPU, (int64_t)v->len);
    if (pin) {
        int rc = ddpl_cuda_host_register(base, v->len);
        if (rc < 0) {
            char why[256];
            snprintf(why, sizeof why, "%s", ddpl_last_error());
            view_release(NULL, v);
            ddpl_error(WHAT ": %s", why);
            return NULL;
        }
        v->pinned = rc > 0;
    }
    return v;
}

/* Why entry k of the slot cannot be trusted, or NULL; fills *e, sizes and *nbytes, and moves *at
 * past the entry. */
static const char *check_entry(const ddpl_batch_view *v, size_t *at, seg_entry *e, int64_t *sizes,
                               size_t *nbytes)
{
    const char *p = v->base + SEG_HEADER;
    size_t len = v->len - SEG_HEADER;
    if (len - *at < sizeof *e) return "truncated header";
    memcpy(e, p + *at, sizeof *e);
    *at += sizeof *e;
    if (e->dtype >= DDPL_DTYPE_COUNT) return "unknown dtype";
    if (e->ndim > DDPL_MAX_DIMS) return "too many dimensions";
    if ((len - *at) / sizeof(int64_t) < e->ndim) return "truncated sizes";
    memcpy(sizes, p + *at, e->ndim * sizeof(int64_t));
    *at += e->ndim * sizeof(int64_t);
    size_t nb = ddpl_dtype_size((ddpl_dtype)e->dtype);
    for (int d = 0; d < e->ndim; d++) {
        if (sizes[d] < 0) return "negative size";
        if (sizes[d] && nb > v->len / (uint64_t)sizes[d]) return "sizes overflow";
        nb *= (size_t)sizes[d];
    }
    if (e->offset < SEG_HEADER || e->offset > v->len || v->len - e->offset < nb)
        return "bytes past the end";
    *nbytes = nb;
    return NULL;
}

int ddpl_batch_view_read(ddpl_batch_view *v, ddpl_tensor ***out, int *count_out)
{
    const char *p = v->base + SEG_HEADER;
    uint32_t count;
    memcpy(&count, p + 4, 4);
    /* one reference while the tensors are made: the slot is not handed back half-read; its
     * release hands the slot back on every way out, a refused batch's included */
    atomic_fetch_add(&v->refs, 1);
    ddpl_tensor **ts = NULL;
    if (memcmp(p, "DLSG", 4) != 0) {
        view_release(NULL, v);
        return ddpl_error(WHAT ": malformed batch segment: bad magic");
    }
    if (count > DDPL_BATCH_MAX_TENSORS || !(ts = calloc(count ? count : 1, sizeof *ts))) {
        view_release(NULL, v);
        return ddpl_error(WHAT ": malformed batch segment: %u tensors (at most %d)", count,
                          DDPL_BATCH_MAX_TENSORS);
    }
    size_t at = 8;
    for (uint32_t k = 0; k < count; k++) {
        seg_entry e;
        int64_t sizes[DDPL_MAX_DIMS];
        size_t nb = 0;
        const char *why = check_entry(v, &at, &e, sizes, &nb);
        if (!why) {
            atomic_fetch_add(&v->refs, 1);
            ts[k] = ddpl_from_blob(v->base + e.offset, e.ndim, sizes, (ddpl_dtype)e.dtype,
                                   view_release, v);
            if (!ts[k]) {
                atomic_fetch_sub(&v->refs, 1);
                why = ddpl_last_error();
            }
        }
        if (why) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s", why);
            for (uint32_t q = 0; q < k; q++) ddpl_tensor_release(ts[q]);
            free(ts);
            view_release(NULL, v);
            return ddpl_error(WHAT ": malformed batch segment: %s (tensor %u)", msg, k + 1);
        }
    }
    view_release(NULL, v); /* with no tensors, this hands the slot back */
    *out = ts;
    *count_out = (int)count;
    return 0;
}

void ddpl_batch_view_free(ddpl_batch_view *v)
{
    if (v) view_release(NULL, v);
}
