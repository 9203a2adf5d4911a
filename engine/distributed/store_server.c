/* distributed/store_server.c: the store's server: one thread polling the listening socket and every
 * client connection, a hash map of keys, and blocked get/wait requests woken by set/add.
 * defines: store_server_start, store_server_port, store_server_stop.
 *
 * One thread owns everything (the map, the connections), so nothing here takes a lock. A blocked
 * request stays at the head of its connection's input buffer and is handled again whenever a key
 * changes or its deadline passes; the server answers a timeout itself (see store_proto.h).
 *
 * Any process that can reach the port can connect, so a client is hostile until its hello (magic
 * and token) proved otherwise, and even then may misbehave:
 *   - before the hello a frame may declare at most HELLO_MAX_FRAME bytes, and the hello must come
 *     within the hello timeout (DDPLUA_STORE_HELLO_TIMEOUT seconds, default 10): otherwise the
 *     connection is dropped, so idle or oversized strangers hold neither memory nor a descriptor;
 *   - a wrong token is compared in constant time and refused only after REFUSE_DELAY_S, refusals
 *     queued one after another, so guessing runs at a few tries a second however many
 *     connections try;
 *   - memory per connection stays bounded: it is read from only while its replies are taken
 *     (pending output under OUT_CAP) and its unserved input is under IN_CAP (or the frame at the
 *     head is still incomplete), so a client that pipelines requests without reading replies
 *     meets TCP's back-pressure instead of growing our buffers;
 *   - fairness: one wake-up reads at most READ_QUANTUM bytes from a connection, so a fast sender
 *     cannot hold the thread while others wait;
 *   - when accept fails for want of descriptors (EMFILE, ENFILE) the listening socket is left out
 *     of the poll for ACCEPT_BACKOFF_S instead of waking the thread at once, over and over;
 *   - limits (read from the environment of the process that hosts the server): a value may hold
 *     at most DDPLUA_STORE_MAX_VALUE bytes (default 256 MiB), a key DDPLUA_STORE_MAX_KEY (64 KiB),
 *     and all keys and values together DDPLUA_STORE_MAX_BYTES (2 GiB). A request over a limit is
 *     answered with an error naming it; a request too large to hold is read past, never
 *     buffered. Running out of memory fails the one request that needed it (an error reply, or
 *     that connection closed when not even a reply fits): the server, and with it the job,
 *     never dies of what a client asked. */
#define _GNU_SOURCE /* accept4, pipe2 */
#include <ctype.h>
#include <netdb.h>
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/core.h"
#include "store_map.h"
#include "store_proto.h"
#include "store_server.h"

/* ---- connections ---- */

enum {
    HELLO_MAX_FRAME = 4096,   /* bytes a frame may declare before the hello: magic and token */
    IN_CAP = 4 << 20,         /* bytes of unserved input a connection may hold */
    OUT_CAP = 4 << 20,        /* bytes of unread replies after which its requests wait */
    READ_QUANTUM = 256 << 10, /* bytes read from one connection per wake-up */
};
#define REFUSE_DELAY_S   0.2  /* seconds before a wrong token's refusal is sent */
#define ACCEPT_BACKOFF_S 0.1  /* seconds without accepting after EMFILE/ENFILE */
#define HELLO_TIMEOUT_S  10.0 /* default; DDPLUA_STORE_HELLO_TIMEOUT overrides */

/* the limits' defaults, in bytes (the top of this file) */
#define MAX_VALUE_DEFAULT ((uint64_t)256 << 20) /* DDPLUA_STORE_MAX_VALUE */
#define MAX_KEY_DEFAULT   ((uint64_t)64 << 10)  /* DDPLUA_STORE_MAX_KEY */
#define MAX_BYTES_DEFAULT ((uint64_t)2 << 30)   /* DDPLUA_STORE_MAX_BYTES */

typedef struct conn {
    int fd;
    bool greeted; /* the hello with the right token came */
    bool blocked; /* the request at the head of `in` waits for keys */
    bool closing; /* close once `out` is flushed (after a refusal) */
    bool dead;
    double deadline;   /* of the blocked request, store_now() clock */
    double hello_by;   /* dropped when not greeted by then */
    double hold_until; /* nothing is sent before then (a refusal's delay) */
    uint64_t discard;  /* bytes of a refused request still to read past */
    store_buf in, out;
} conn;

struct store_server {
    int listen_fd, port;
    int wake[2]; /* the owner writes the drain time (a double, seconds) to stop the thread */
    pthread_t thread;
    char *token;
    store_map map;
    conn **conns;
    size_t nconns, cap;
    atomic_size_t clients; /* nconns, for store_server_clients from the owner's thread */
    bool changed;          /* a key was set or added since blocked requests were last tried */
    double hello_timeout;  /* seconds a new connection has to greet */
    double next_refusal;   /* refusals of wrong tokens go out one by one, REFUSE_DELAY_S apart */
    double accept_resume;  /* the listening socket is polled again from then (EMFILE back-off) */
    uint64_t max_value, max_key, max_bytes; /* the limits (see the top of this file) */
};

static void reply(conn *c, uint8_t status, uint32_t nfields, const store_field *fields)
{
    size_t start = store_msg_begin(&c->out, status, 0, nfields);
    for (uint32_t i = 0; i < nfields; i++) store_msg_add(&c->out, fields[i].data, fields[i].len);
    store_msg_end(&c->out, start);
    if (c->out.failed) c->dead = true; /* not even the reply fits: this connection goes */
}

static void reply_text(conn *c, uint8_t status, const char *text)
{
    store_field f = {(const uint8_t *)text, (uint32_t)strlen(text)};
    reply(c, status, 1, &f);
}

static bool field_is(const store_field *f, const char *s)
{
    size_t n = strlen(s);
    return f->len == n && memcmp(f->data, s, n) == 0;
}

/* The value of an add counter: decimal text, as PyTorch's TCPStore keeps it (get returns "400"). */
static bool parse_counter(const store_entry *e, int64_t *v)
{
    char buf[32];
    if (e->vlen == 0 || e->vlen >= sizeof buf) return false;
    memcpy(buf, e->val, e->vlen);
    buf[e->vlen] = '\0';
    char *end;
    errno = 0;
    long long x = strtoll(buf, &end, 10);
    if (errno || *end) return false;
    *v = x;
    return true;
}

/* Whether f holds exactly the bytes of s, in time that depends on s's length only (a timing
 * attack learns nothing about the token's bytes). */
static bool field_is_secret(const store_field *f, const char *s)
{
    size_t n = strlen(s);
    unsigned diff = f->len != n;
    for (size_t i = 0; i < n; i++) diff |= (unsigned)(uint8_t)s[i] ^ (i < f->len ? f->data[i] : 0u);
    return diff == 0;
}

static bool hello(store_server *s, conn *c, const store_msg *m)
{
    if (m->code != STORE_OP_HELLO || m->nfields != 2 || !field_is(&m->fields[0], STORE_MAGIC)) {
        c->dead = true; /* not a ddplua store client: drop it without a word */
        return true;
    }
    const char *token = s->token ? s->token : "";
    if (!field_is_secret(&m->fields[1], token)) {
        reply_text(c, STORE_ST_REFUSED,
                   m->fields[1].len == 0 ? "this client has no DDPLUA_STORE_TOKEN but the server "
                                           "requires one"
                                         : "wrong DDPLUA_STORE_TOKEN");
        double now = store_now();
        if (s->next_refusal - now > s->hello_timeout) {
            c->dead = true; /* a flood of guesses: drop it rather than queue its refusal */
            return true;
        }
        s->next_refusal = (s->next_refusal > now ? s->next_refusal : now) + REFUSE_DELAY_S;
        c->hold_until = s->next_refusal;
        c->closing = true;
        return true;
    }
    c->greeted = true;
    reply(c, STORE_ST_OK, 0, NULL);
    return true;
}

/* Blocked get/wait: false while it must go on waiting; true once answered (value or timeout). */
static bool wait_keys(conn *c, const store_msg *m, store_map *map, bool *all)
{
    *all = true;
    for (uint32_t i = 0; i < m->nfields; i++) *all = *all && store_map_find(map, &m->fields[i]);
    if (*all) return true;
    double now = store_now();
    if (!c->blocked) {
        c->blocked = true;
        c->deadline = now + m->timeout_ms / 1000.0;
    }
    if (now < c->deadline) return false;
    store_field missing[STORE_MAX_FIELDS];
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->nfields; i++)
        if (!store_map_find(map, &m->fields[i])) missing[n++] = m->fields[i];
    reply(c, STORE_ST_TIMEOUT, n, missing);
    return true;
}

/* Answers with an error naming the limit when storing key k with a value of vlen bytes would pass
 * one, and returns true; false when it may be stored. */
static bool over_limit(store_server *s, conn *c, const store_field *k, uint64_t vlen)
{
    char why[256];
    const store_entry *old = store_map_find(&s->map, k);
    uint64_t more = vlen + (old ? 0 : k->len), less = old ? old->vlen : 0;
    if (k->len > s->max_key)
        snprintf(why, sizeof why,
                 "a key of %u bytes is over the store's limit of %llu bytes per key "
                 "(DDPLUA_STORE_MAX_KEY)",
                 k->len, (unsigned long long)s->max_key);
    else if (vlen > s->max_value)
        snprintf(why, sizeof why,
                 "a value of %llu bytes is over the store's limit of %llu bytes per value "
                 "(DDPLUA_STORE_MAX_VALUE)",
                 (unsigned long long)vlen, (unsigned long long)s->max_value);
    else if (s->map.bytes + more - less > s->max_bytes && more > less)
        snprintf(why, sizeof why,
                 "the store holds %llu bytes of keys and values; %llu more would pass its limit "
                 "of %llu bytes (DDPLUA_STORE_MAX_BYTES)",
                 (unsigned long long)s->map.bytes, (unsigned long long)(more - less),
                 (unsigned long long)s->max_bytes);
    else
        return false;
    reply_text(c, STORE_ST_ERROR, why);
    return true;
}

/* Stores key = val, answering an error instead when a limit or the memory does not allow it.
 * true when stored. */
static bool store_value(store_server *s, conn *c, const store_field *k, const void *val,
                        uint32_t vlen)
{
    if (over_limit(s, c, k, vlen)) return false;
    if (store_map_set(&s->map, k, val, vlen)) {
        s->changed = true;
        return true;
    }
    char why[128];
    snprintf(why, sizeof why, "the store ran out of memory for a value of %u bytes", vlen);
    reply_text(c, STORE_ST_ERROR, why);
    return false;
}

/* Handles the request m of a greeted client: true when answered, false when it blocks. */
static bool handle(store_server *s, conn *c, const store_msg *m)
{
    /* the fields each request carries; -1: one or more (keys) */
    static const int nfields[] = {
        [STORE_OP_SET] = 2,   [STORE_OP_GET] = 1,    [STORE_OP_ADD] = 2,     [STORE_OP_CHECK] = -1,
        [STORE_OP_WAIT] = -1, [STORE_OP_DELETE] = 1, [STORE_OP_NUM_KEYS] = 0};
    if (m->code < STORE_OP_SET || m->code > STORE_OP_NUM_KEYS) {
        reply_text(c, STORE_ST_ERROR, "unknown request");
        return true;
    }
    int want = nfields[m->code];
    if (want >= 0 ? m->nfields != (uint32_t)want : m->nfields == 0) {
        reply_text(c, STORE_ST_ERROR, "malformed request");
        return true;
    }
    const store_field *key = m->nfields ? &m->fields[0] : NULL;
    bool all;
    switch (m->code) {
    case STORE_OP_SET:
        if (store_value(s, c, key, m->fields[1].data, m->fields[1].len))
            reply(c, STORE_ST_OK, 0, NULL);
        return true;
    case STORE_OP_GET:
        if (!wait_keys(c, m, &s->map, &all)) return false;
        if (all) {
            store_entry *e = store_map_find(&s->map, key);
            store_field v = {e->val, e->vlen};
            reply(c, STORE_ST_OK, 1, &v);
        }
        return true;
    case STORE_OP_ADD: {
        int64_t delta, v = 0;
        if (!store_field_i64(&m->fields[1], &delta)) {
            reply_text(c, STORE_ST_ERROR, "malformed request");
            return true;
        }
        store_entry *e = store_map_find(&s->map, key);
        if (e && !parse_counter(e, &v)) {
            reply_text(c, STORE_ST_ERROR, "its value is not an integer");
            return true;
        }
        int64_t sum;
        if (__builtin_add_overflow(v, delta, &sum)) { /* a counter never wraps silently */
            char why[128];
            snprintf(why, sizeof why, "adding %lld to %lld overflows a 64-bit integer",
                     (long long)delta, (long long)v);
            reply_text(c, STORE_ST_ERROR, why);
            return true;
        }
        v = sum;
        char text[32];
        int n = snprintf(text, sizeof text, "%lld", (long long)v);
        if (!store_value(s, c, key, text, (uint32_t)n)) return true;
        uint8_t out[8];
        store_put_i64(out, v);
        store_field f = {out, 8};
        reply(c, STORE_ST_OK, 1, &f);
        return true;
    }
    case STORE_OP_CHECK: {
        uint8_t yes = 1;
        for (uint32_t i = 0; i < m->nfields; i++)
            yes = yes && store_map_find(&s->map, &m->fields[i]);
        store_field f = {&yes, 1};
        reply(c, STORE_ST_OK, 1, &f);
        return true;
    }
    case STORE_OP_WAIT:
        if (!wait_keys(c, m, &s->map, &all)) return false;
        if (all) reply(c, STORE_ST_OK, 0, NULL);
        return true;
    case STORE_OP_NUM_KEYS: {
        uint8_t out[8];
        store_put_i64(out, (int64_t)s->map.count);
        store_field f = {out, 8};
        reply(c, STORE_ST_OK, 1, &f);
        return true;
    }
    default: { /* STORE_OP_DELETE */
        uint8_t existed = store_map_delete(&s->map, key);
        store_field f = {&existed, 1};
        reply(c, STORE_ST_OK, 1, &f);
        return true;
    }
    }
}

/* The length the frame at the head of `in` declares (its 4-byte prefix included); 0 while fewer
 * than 4 bytes are there. */
static size_t head_frame_bytes(const conn *c)
{
    if (c->in.len < 4) return 0;
    const uint8_t *p = c->in.data;
    return 4 + ((size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | (size_t)p[3]);
}

/* Handles the complete requests in c->in, in order, until one blocks or the replies pile up
 * unread (OUT_CAP: the client must take them first). */
static void serve(store_server *s, conn *c)
{
    while (!c->dead && !c->closing && c->out.len < OUT_CAP) {
        if (!c->greeted && head_frame_bytes(c) > 4 + HELLO_MAX_FRAME) {
            c->dead = true; /* a stranger announcing a large frame: never buffer it */
            return;
        }
        store_msg m;
        long n = store_msg_parse(c->in.data, c->in.len, &m);
        if (n < 0) c->dead = true; /* a corrupt stream cannot be resynchronised */
        if (n <= 0) return;
        bool done = c->greeted ? handle(s, c, &m) : hello(s, c, &m);
        store_msg_clear(&m);
        if (!done) return;
        c->blocked = false;
        store_buf_consume(&c->in, (size_t)n);
    }
}

static void flush(conn *c, double now)
{
    if (now < c->hold_until) return;
    while (c->out.len > 0 && !c->dead) {
        ssize_t w = send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL);
        if (w > 0) {
            store_buf_consume(&c->out, (size_t)w);
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else {
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) c->dead = true;
            return;
        }
    }
    if (c->closing && c->out.len == 0) c->dead = true;
}

/* Whether c's input is read this wake-up: not while its replies pile up unread, nor while it
 * holds IN_CAP bytes of complete requests (a client of ours sends one request at a time); the
 * frame at the head is always read to its end (up to STORE_MAX_FRAME: a value may be large). */
static bool wants_input(const conn *c)
{
    if (c->dead || c->closing) return false;
    if (c->discard) return true; /* reading past a refused request holds no memory */
    if (c->out.len >= OUT_CAP) return false;
    size_t head = head_frame_bytes(c);
    return c->in.len < IN_CAP || c->in.len < head;
}

/* The largest request a greeted client may send: a value, a key, and the framing around them. */
static uint64_t frame_limit(const store_server *s)
{
    uint64_t limit = s->max_value + s->max_key + 4096;
    return limit < STORE_MAX_FRAME ? limit : STORE_MAX_FRAME;
}

/* Refuses the request whose first bytes are in c->in (nothing else is there: it is the head,
 * incomplete): an error reply now, and the rest of it read past as it comes (c->discard). */
static void refuse_head(conn *c, const char *why)
{
    c->discard = head_frame_bytes(c) - c->in.len;
    store_buf_consume(&c->in, c->in.len);
    c->in.failed = false; /* what it holds is consistent: nothing */
    reply_text(c, STORE_ST_ERROR, why);
}

/* A request at the head that the server will not hold, in memory or by its limits, is refused
 * before more of it is read. */
static void check_head(const store_server *s, conn *c)
{
    size_t head = head_frame_bytes(c);
    if (!c->greeted || head <= c->in.len || head - 4 > STORE_MAX_FRAME) return;
    char why[256];
    if (head - 4 > frame_limit(s)) {
        snprintf(why, sizeof why,
                 "a request of %zu bytes is over the store's limit of %llu bytes per value "
                 "(DDPLUA_STORE_MAX_VALUE)",
                 head - 4, (unsigned long long)s->max_value);
        refuse_head(c, why);
    } else if (!store_buf_reserve(&c->in, head - c->in.len)) {
        snprintf(why, sizeof why, "the store ran out of memory for a request of %zu bytes",
                 head - 4);
        refuse_head(c, why);
    }
}

/* Reads past what is left of a refused request. */
static void skip_in(conn *c, size_t *quota)
{
    uint8_t scratch[65536];
    while (*quota > 0 && c->discard > 0 && !c->dead) {
        size_t n = c->discard < sizeof scratch ? (size_t)c->discard : sizeof scratch;
        ssize_t r = recv(c->fd, scratch, n < *quota ? n : *quota, 0);
        if (r > 0) {
            c->discard -= (uint64_t)r;
            *quota -= (size_t)r;
        } else if (r < 0 && errno == EINTR) {
            continue;
        } else {
            if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) c->dead = true;
            return;
        }
    }
}

/* Reads what the socket has, up to READ_QUANTUM bytes (the other connections' turn comes next). */
static void read_in(store_server *s, conn *c)
{
    size_t quota = READ_QUANTUM;
    skip_in(c, &quota);
    while (quota > 0 && c->discard == 0 && wants_input(c)) {
        check_head(s, c);
        if (c->discard) { /* just refused: read past it */
            skip_in(c, &quota);
            continue;
        }
        if (!store_buf_reserve(&c->in, 65536)) {
            c->dead = true; /* not even the start of a request fits: this connection goes */
            return;
        }
        size_t room = c->in.cap - c->in.len;
        ssize_t r = recv(c->fd, c->in.data + c->in.len, room < quota ? room : quota, 0);
        if (r > 0) {
            c->in.len += (size_t)r;
            quota -= (size_t)r;
        } else if (r < 0 && errno == EINTR) {
            continue;
        } else {
            if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) c->dead = true;
            return;
        }
    }
}

static void accept_all(store_server *s)
{
    for (;;) {
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            /* out of descriptors: the pending connection stays queued and the socket readable,
             * so polling it again at once would spin; wait for descriptors to be freed */
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                s->accept_resume = store_now() + ACCEPT_BACKOFF_S;
            return; /* EAGAIN: no more; other errors: the client will retry */
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (s->nconns == s->cap) {
            size_t cap = s->cap ? 2 * s->cap : 16;
            conn **grown = realloc(s->conns, cap * sizeof *grown);
            if (!grown) { /* out of memory: this client is turned away, and will retry */
                close(fd);
                return;
            }
            s->conns = grown;
            s->cap = cap;
        }
        conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            return;
        }
        c->fd = fd;
        c->hello_by = store_now() + s->hello_timeout;
        s->conns[s->nconns++] = c;
        atomic_store(&s->clients, s->nconns);
    }
}

static void drop_dead(store_server *s)
{
    size_t k = 0;
    for (size_t i = 0; i < s->nconns; i++) {
        conn *c = s->conns[i];
        if (c->dead) {
            close(c->fd);
            store_buf_free(&c->in);
            store_buf_free(&c->out);
            free(c);
        } else {
            s->conns[k++] = c;
        }
    }
    s->nconns = k;
    atomic_store(&s->clients, k);
}

/* Once the owner has let go, no key can come while every remaining client waits for one: each
 * connection has at most one request in flight, so nobody is left to set it. Waiting on is still
 * worth it for a client whose timeout ends within the drain: it then gets its own timeout error
 * and can ask which keys are missing (the rendezvous names the absent ranks that way). */
static bool all_stuck(const store_server *s, double drain_deadline)
{
    for (size_t i = 0; i < s->nconns; i++)
        if (!s->conns[i]->blocked || s->conns[i]->deadline <= drain_deadline) return false;
    return true;
}

static void *server_main(void *arg)
{
    store_server *s = arg;
    struct pollfd *pfds = NULL;
    size_t pcap = 0;
    double drain_deadline = -1; /* >= 0 once the owner asked to stop */
    for (;;) {
        double now = store_now();
        if (drain_deadline >= 0 && (all_stuck(s, drain_deadline) || now >= drain_deadline)) break;
        if (pcap < s->nconns + 2) {
            struct pollfd *grown = realloc(pfds, 2 * (s->nconns + 2) * sizeof *grown);
            if (grown) {
                pfds = grown;
                pcap = 2 * (s->nconns + 2);
            }
            /* out of memory: the connections that do not fit in the poll set go */
            for (size_t i = pcap >= 2 ? pcap - 2 : 0; i < s->nconns; i++) s->conns[i]->dead = true;
            drop_dead(s);
            if (!pfds) {
                usleep(10000); /* nothing can be polled yet: wait for memory */
                continue;
            }
        }
        pfds[0] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
        bool accepting = drain_deadline < 0 && now >= s->accept_resume;
        pfds[1] = (struct pollfd){.fd = accepting ? s->listen_fd : -1, .events = POLLIN};
        double wake_at = drain_deadline >= 0 ? drain_deadline : now + 3600;
        if (drain_deadline < 0 && !accepting && s->accept_resume < wake_at)
            wake_at = s->accept_resume;
        for (size_t i = 0; i < s->nconns; i++) {
            conn *c = s->conns[i];
            pfds[i + 2] = (struct pollfd){.fd = c->fd, .events = wants_input(c) ? POLLIN : 0};
            if (c->out.len && now >= c->hold_until) pfds[i + 2].events |= POLLOUT;
            if (c->blocked && c->deadline < wake_at) wake_at = c->deadline;
            if (!c->greeted && c->hello_by < wake_at) wake_at = c->hello_by;
            if (c->out.len && now < c->hold_until && c->hold_until < wake_at)
                wake_at = c->hold_until;
        }
        int ms = wake_at <= now ? 0 : (int)((wake_at - now) * 1000.0) + 1;
        int rc = poll(pfds, s->nconns + 2, ms);
        if (rc < 0 && errno != EINTR) break; /* cannot happen with valid descriptors */
        if (rc > 0 && (pfds[0].revents & POLLIN)) {
            double drain_s = 0;
            if (read(s->wake[0], &drain_s, sizeof drain_s) != sizeof drain_s) drain_s = 0;
            drain_deadline = store_now() + drain_s;
        }
        if (rc > 0 && (pfds[1].revents & POLLIN)) accept_all(s);
        size_t n = s->nconns; /* accept_all may have added connections not in pfds */
        for (size_t i = 0; rc > 0 && i < n && i + 2 < pcap; i++) {
            conn *c = s->conns[i];
            short ev = pfds[i + 2].revents;
            if (pfds[i + 2].fd != c->fd) continue;
            /* POLLHUP/POLLERR come whatever the events asked: the connection is gone both ways
             * (a reply cannot reach it), and left in the poll it would wake us at once, always */
            if (ev & (POLLHUP | POLLERR))
                c->dead = true;
            else if (ev & POLLIN)
                read_in(s, c);
            serve(s, c);
        }
        now = store_now();
        for (size_t i = 0; i < s->nconns; i++) {
            conn *c = s->conns[i];
            if (c->blocked && c->deadline <= now) serve(s, c);
            if (!c->greeted && !c->closing && now >= c->hello_by) c->dead = true; /* silent */
        }
        while (s->changed) { /* serving a woken client may set keys in turn */
            s->changed = false;
            for (size_t i = 0; i < s->nconns; i++)
                if (s->conns[i]->blocked) serve(s, s->conns[i]);
        }
        for (size_t i = 0; i < s->nconns; i++) {
            flush(s->conns[i], now);
            serve(s, s->conns[i]); /* requests held back while the replies piled up */
        }
        drop_dead(s);
    }
    for (size_t i = 0; i < s->nconns; i++) { /* tell the waiting why no key will come */
        conn *c = s->conns[i];
        if (c->blocked)
            reply_text(c, STORE_ST_ERROR,
                       "the server has shut down (its owner, rank 0, closed the "
                       "store or exited)");
        flush(c, store_now());
        c->dead = true;
    }
    drop_dead(s);
    free(pfds);
    return NULL;
}

/* When every address of host is a loopback one, that address (into *out), so the store listens
 * on loopback only: no other machine could reach it through host anyway, and nobody else on
 * the network gets to knock. Any other host (a name or address of this machine that other
 * machines dial, or one that is not local at all, behind NAT) keeps listening everywhere, as
 * PyTorch's TCPStore does: binding there could fail, or pick 127.0.1.1 for a Debian hostname. */
static bool loopback_of(const char *host, struct sockaddr_storage *out, socklen_t *len)
{
    if (!host || !*host) return false;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0) return false;
    bool all = res != NULL;
    for (struct addrinfo *ai = res; ai && all; ai = ai->ai_next) {
        if (ai->ai_family == AF_INET)
            all = (ntohl(((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr) >> 24) == 127;
        else if (ai->ai_family == AF_INET6)
            all = IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr);
        else
            all = false;
    }
    if (all) {
        memcpy(out, res->ai_addr, res->ai_addrlen);
        *len = res->ai_addrlen;
    }
    freeaddrinfo(res);
    return all;
}

/* A socket of addr's family bound to addr with the given port (IPv6: IPv4 mapped too); -1 with
 * *err set. SO_REUSEADDR lets a new job take a port left in TIME_WAIT. */
static int bind_to(struct sockaddr_storage *addr, socklen_t len, int port, int *err)
{
    int one = 1, zero = 0;
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (addr->ss_family == AF_INET6) {
        ((struct sockaddr_in6 *)addr)->sin6_port = htons((uint16_t)port);
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    } else {
        ((struct sockaddr_in *)addr)->sin_port = htons((uint16_t)port);
    }
    if (bind(fd, (struct sockaddr *)addr, len) == 0) return fd;
    *err = errno;
    close(fd);
    return -1;
}

/* A listening socket on host's loopback address (loopback_of), else on every interface: IPv6
 * with IPv4 mapped where the kernel has IPv6 (as PyTorch's TCPStore), else IPv4. */
static int listen_on(const char *host, int port, int *bound)
{
    int err = 0, fd;
    struct sockaddr_storage addr = {0};
    socklen_t len = 0;
    if (loopback_of(host, &addr, &len)) {
        fd = bind_to(&addr, len, port, &err);
    } else {
        struct sockaddr_in6 any6 = {.sin6_family = AF_INET6, .sin6_addr = in6addr_any};
        memcpy(&addr, &any6, sizeof any6);
        fd = bind_to(&addr, sizeof any6, port, &err);
        if (fd < 0 && err != EADDRINUSE) { /* no IPv6 here */
            struct sockaddr_in any4 = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
            memset(&addr, 0, sizeof addr);
            memcpy(&addr, &any4, sizeof any4);
            fd = bind_to(&addr, sizeof any4, port, &err);
        }
    }
    if (fd >= 0 && listen(fd, 1024) < 0) {
        err = errno;
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        char reason[128];
        snprintf(reason, sizeof reason, "%s", strerror(err));
        reason[0] = (char)tolower((unsigned char)reason[0]); /* it sits inside our message */
        ddpl_error("store: cannot listen on port %d (%s)", port, reason);
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                            : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

/* A byte count from the environment (a positive integer), else dflt. */
static uint64_t env_bytes(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    return errno || *end || n == 0 ? dflt : (uint64_t)n;
}

store_server *store_server_start(const char *host, int port, const char *token)
{
    int bound;
    int fd = listen_on(host, port, &bound);
    if (fd < 0) return NULL;
    store_server *s = ddpl_xcalloc(1, sizeof *s);
    s->listen_fd = fd;
    s->port = bound;
    s->token = token && *token ? strdup(token) : NULL;
    const char *hello_env = getenv("DDPLUA_STORE_HELLO_TIMEOUT");
    s->hello_timeout = hello_env && atof(hello_env) > 0 ? atof(hello_env) : HELLO_TIMEOUT_S;
    s->max_value = env_bytes("DDPLUA_STORE_MAX_VALUE", MAX_VALUE_DEFAULT);
    s->max_key = env_bytes("DDPLUA_STORE_MAX_KEY", MAX_KEY_DEFAULT);
    s->max_bytes = env_bytes("DDPLUA_STORE_MAX_BYTES", MAX_BYTES_DEFAULT);
    if (!store_map_init(&s->map)) {
        ddpl_error("store: out of memory starting the server");
        goto fail;
    }
    if (pipe2(s->wake, O_CLOEXEC) < 0) {
        ddpl_error("store: cannot create the server's wake-up pipe (%s)", strerror(errno));
        goto fail;
    }
    /* The thread takes no signals: Ctrl-C must reach the Lua thread (cli/main.c's handler). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->thread, NULL, server_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        ddpl_error("store: cannot start the server thread (%s)", strerror(rc));
        close(s->wake[0]);
        close(s->wake[1]);
        goto fail;
    }
    return s;
fail:
    close(fd);
    free(s->token);
    store_map_free(&s->map);
    free(s);
    return NULL;
}

int store_server_port(const store_server *s)
{
    return s->port;
}

size_t store_server_clients(const store_server *s)
{
    return atomic_load(&((store_server *)s)->clients);
}

void store_server_stop(store_server *s, double drain_s)
{
    if (!s) return;
    if (write(s->wake[1], &drain_s, sizeof drain_s) != sizeof drain_s) {
        /* a pipe with room for 8 bytes cannot refuse them; stop at once if it somehow did */
        close(s->wake[1]);
        s->wake[1] = -1;
    }
    pthread_join(s->thread, NULL);
    close(s->wake[0]);
    if (s->wake[1] >= 0) close(s->wake[1]);
    close(s->listen_fd);
    store_map_free(&s->map);
    free(s->conns);
    free(s->token);
    free(s);
}
