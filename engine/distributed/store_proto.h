/* distributed/store_proto.h: the wire format shared by the store's client (store.c) and server
 * (store_server.c), internal to engine/distributed.
 * defines: store_buf, store_msg, the op and status codes, framing, deadline I/O, store_now.
 *
 * Every message, request or reply, is one frame (integers big-endian):
 *     u32 length of the rest | u8 code | u32 timeout_ms | u32 nfields | nfields x (u32 len, bytes)
 * A request's code is an op (STORE_OP_*), a reply's a status (STORE_ST_*). The client is
 * synchronous: one request in flight per connection, answered in order. The server enforces a
 * blocking request's timeout itself and answers STORE_ST_TIMEOUT, so a late reply can never be
 * mistaken for the answer to the next request. */
#ifndef DDPL_DIST_STORE_PROTO_H
#define DDPL_DIST_STORE_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    STORE_OP_HELLO = 1, /* fields: magic "ddplua-store-1", token */
    STORE_OP_SET,       /* key, value */
    STORE_OP_GET,       /* key; waits up to timeout_ms; reply: value */
    STORE_OP_ADD,       /* key, delta (8 bytes); reply: new value (8 bytes) */
    STORE_OP_CHECK,     /* keys...; reply: one byte, 1 when all exist */
    STORE_OP_WAIT,      /* keys...; waits up to timeout_ms */
    STORE_OP_DELETE,    /* key; reply: one byte, 1 when it existed */
    STORE_OP_NUM_KEYS,  /* no fields; reply: the number of keys (8 bytes) */
};
enum {
    STORE_ST_OK = 0,
    STORE_ST_TIMEOUT, /* fields: the keys still missing */
    STORE_ST_REFUSED, /* fields: the reason */
    STORE_ST_ERROR,   /* fields: the reason (e.g. add on a value that is not an integer) */
};

#define STORE_MAGIC      "ddplua-store-1"
#define STORE_MAX_FIELDS 4096u
#define STORE_MAX_FRAME  (1u << 30) /* bytes; a larger length means a corrupt or foreign peer */

/* A growing byte buffer. When memory runs out it keeps what it held, sets `failed` and ignores
 * later appends: the caller fails that one message (a server must not die of a client's
 * request). */
typedef struct store_buf {
    uint8_t *data;
    size_t len, cap;
    bool failed;
} store_buf;

typedef struct store_field {
    const uint8_t *data; /* points into the frame it was parsed from */
    uint32_t len;
} store_field;

typedef struct store_msg {
    uint8_t code;
    uint32_t timeout_ms;
    uint32_t nfields;
    store_field *fields; /* malloc'd by store_msg_parse; free with store_msg_clear */
} store_msg;

/* Monotonic clock in seconds. */
double store_now(void);

/* Makes room for extra more bytes; false (and `failed` set) when memory runs out. */
bool store_buf_reserve(store_buf *b, size_t extra);
void store_buf_free(store_buf *b);
/* Drops the first n bytes. */
void store_buf_consume(store_buf *b, size_t n);
/* Appends a frame header; store_msg_add then adds its fields and store_msg_end sets the length.
 * Returns the frame's start offset (for store_msg_end). Out of memory: the buffer's `failed`. */
size_t store_msg_begin(store_buf *b, uint8_t code, uint32_t timeout_ms, uint32_t nfields);
void store_msg_add(store_buf *b, const void *data, size_t len);
void store_msg_end(store_buf *b, size_t start);

/* Parses the frame at the start of p[0..n): returns its size when complete, 0 when more bytes
 * are needed, -1 when malformed (too long, too many fields, fields overrunning the frame). */
long store_msg_parse(const uint8_t *p, size_t n, store_msg *m);
void store_msg_clear(store_msg *m);

/* Blocking I/O on a non-blocking socket, bounded by the absolute deadline (store_now() clock).
 * Return 0, or -1 with errno set (ETIMEDOUT past the deadline, EPIPE when the peer closed). */
int store_send_all(int fd, const void *p, size_t n, double deadline);
/* Reads until buf holds one complete frame, parses it into m; -1 with errno (EPROTO: malformed). */
int store_recv_msg(int fd, store_buf *buf, store_msg *m, size_t *frame_len, double deadline);

/* Reads a big-endian int64 field (8 bytes); false when the field has another size. */
bool store_field_i64(const store_field *f, int64_t *v);
void store_put_i64(uint8_t out[8], int64_t v);

#endif
