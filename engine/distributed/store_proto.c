/* distributed/store_proto.c: framing and deadline-bounded socket I/O for the store (see
 * store_proto.h). defines: store_now, store_buf_reserve, store_buf_free, store_buf_consume,
 * store_msg_begin, store_msg_add, store_msg_end, store_msg_parse, store_msg_clear, store_send_all,
 *          store_recv_msg, store_field_i64, store_put_i64. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "store_proto.h"

#define HEADER_BYTES 13 /* u32 length, u8 code, u32 timeout_ms, u32 nfields */

double store_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

void store_put_i64(uint8_t out[8], int64_t v)
{
    uint64_t u = (uint64_t)v;
    put_u32(out, (uint32_t)(u >> 32));
    put_u32(out + 4, (uint32_t)u);
}

bool store_field_i64(const store_field *f, int64_t *v)
{
    if (f->len != 8) return false;
    *v = (int64_t)((uint64_t)get_u32(f->data) << 32 | get_u32(f->data + 4));
    return true;
}

bool store_buf_reserve(store_buf *b, size_t extra)
{
    if (b->failed) return false;
    if (b->len + extra <= b->cap) return true;
    if (extra > SIZE_MAX / 4 - b->len) {
        b->failed = true;
        return false;
    }
    size_t need = b->len + extra, cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    /* one large reservation (a value's whole frame) is made exactly: doubling could leave up to
     * half of it unused; appends of small pieces keep doubling (exact growth would copy the
     * buffer on every one) */
    if (extra > ((size_t)1 << 20)) cap = need;
    uint8_t *p = realloc(b->data, cap);
    if (!p) { /* the buffer stays as it was; what was to be appended is lost */
        b->failed = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

void store_buf_free(store_buf *b)
{
    free(b->data);
    *b = (store_buf){0};
}

void store_buf_consume(store_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

size_t store_msg_begin(store_buf *b, uint8_t code, uint32_t timeout_ms, uint32_t nfields)
{
    size_t start = b->len;
    if (!store_buf_reserve(b, HEADER_BYTES)) return start;
    uint8_t *p = b->data + start;
    put_u32(p, 0); /* patched by store_msg_end */
    p[4] = code;
    put_u32(p + 5, timeout_ms);
    put_u32(p + 9, nfields);
    b->len += HEADER_BYTES;
    return start;
}

void store_msg_add(store_buf *b, const void *data, size_t len)
{
    if (!store_buf_reserve(b, 4 + len)) return;
    put_u32(b->data + b->len, (uint32_t)len);
    if (len) memcpy(b->data + b->len + 4, data, len);
    b->len += 4 + len;
}

void store_msg_end(store_buf *b, size_t start)
{
    if (b->failed) return;
    put_u32(b->data + start, (uint32_t)(b->len - start - 4));
}

long store_msg_parse(const uint8_t *p, size_t n, store_msg *m)
{
    if (n < 4) return 0;
    uint32_t len = get_u32(p);
    if (len > STORE_MAX_FRAME || len < HEADER_BYTES - 4) return -1;
    if (n < (size_t)len + 4) return 0;
    const uint8_t *end = p + 4 + len;
    uint32_t nfields = get_u32(p + 9);
    if (nfields > STORE_MAX_FIELDS) return -1;
    store_field *fields = calloc(nfields ? nfields : 1, sizeof *fields);
    if (!fields) return -1;
    const uint8_t *q = p + HEADER_BYTES;
    for (uint32_t i = 0; i < nfields; i++) {
        if (end - q < 4) goto bad;
        uint32_t flen = get_u32(q);
        q += 4;
        if ((size_t)(end - q) < flen) goto bad;
        fields[i] = (store_field){q, flen};
        q += flen;
    }
    if (q != end) goto bad;
    *m = (store_msg){p[4], get_u32(p + 5), nfields, fields};
    return (long)len + 4;
bad:
    free(fields);
    return -1;
}

void store_msg_clear(store_msg *m)
{
    free(m->fields);
    m->fields = NULL;
    m->nfields = 0;
}

/* Waits for fd to be ready for `events` until the deadline; -1 with ETIMEDOUT past it. */
static int wait_fd(int fd, short events, double deadline)
{
    for (;;) {
        double left = deadline - store_now();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd pfd = {.fd = fd, .events = events};
        int ms = left > 3600.0 ? 3600000 : (int)(left * 1000.0) + 1;
        int rc = poll(&pfd, 1, ms);
        if (rc > 0) return 0;
        if (rc < 0 && errno != EINTR) return -1;
    }
}

int store_send_all(int fd, const void *p, size_t n, double deadline)
{
    const uint8_t *q = p;
    while (n > 0) {
        ssize_t w = send(fd, q, n, MSG_NOSIGNAL); /* a closed peer is EPIPE, not SIGPIPE */
        if (w > 0) {
            q += w;
            n -= (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (wait_fd(fd, POLLOUT, deadline) < 0) return -1;
        } else if (w < 0 && errno != EINTR) {
            return -1;
        }
    }
    return 0;
}

int store_recv_msg(int fd, store_buf *buf, store_msg *m, size_t *frame_len, double deadline)
{
    for (;;) {
        long got = store_msg_parse(buf->data, buf->len, m);
        if (got < 0) {
            errno = EPROTO;
            return -1;
        }
        if (got > 0) {
            *frame_len = (size_t)got;
            return 0;
        }
        if (!store_buf_reserve(buf, 65536)) {
            errno = ENOMEM;
            return -1;
        }
        ssize_t r = recv(fd, buf->data + buf->len, buf->cap - buf->len, 0);
        if (r > 0) {
            buf->len += (size_t)r;
        } else if (r == 0) {
            errno = EPIPE;
            return -1;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (wait_fd(fd, POLLIN, deadline) < 0) return -1;
        } else if (errno != EINTR) {
            return -1;
        }
    }
}
