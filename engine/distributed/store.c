/* distributed/store.c: the store's client, one per process (store.h): connecting with retries, the
 * hello with the token, and one request/reply round trip per call under a mutex.
 * defines: ddpl_store_create, ddpl_store_set_prefix, ddpl_store_port,
 *          ddpl_store_others_connected, ddpl_store_timeout,
 *          ddpl_store_set_timeout, ddpl_store_set, ddpl_store_get, ddpl_store_add,
 *          ddpl_store_check, ddpl_store_wait, ddpl_store_delete, ddpl_store_num_keys,
 *          ddpl_store_clone, ddpl_store_free, ddpl_store_all_equal.
 *
 * The mutex is held for a whole round trip, so a thread blocked in get/wait delays the others
 * until its keys come or its timeout passes (as PyTorch's client). A connection that failed in
 * the middle of a round trip cannot be trusted to be in step with the server any more: it is
 * marked broken and every later call reports why. */
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "store.h"
#include "store_proto.h"
#include "store_server.h"

/* A blocking request's reply may come this long after its timeout (the server answers the
 * timeout itself; this only covers a server that stopped answering). Seconds. */
#define REPLY_SLACK_S 10.0
/* How long rank 0's ddpl_store_free lets the other clients finish (their last requests racing
 * rank 0's exit) before the server stops. Short, because a rank 0 that fails must exit promptly
 * for the launcher to stop the job; every rank's own timeout covers the rest. Seconds. */
#define DRAIN_MAX_S 3.0
/* Longest key prefix (ddpl_store_set_prefix), bytes: a prefix names a generation or a group. */
#define MAX_PREFIX 4096

struct ddpl_store {
    pthread_mutex_t mu;
    int fd;
    char *host;
    int port;
    char *token; /* as given to create, for ddpl_store_clone; NULL for none */
    _Atomic double timeout_s;
    store_server *server; /* rank 0 only */
    char *prefix;         /* put in front of every key (ddpl_store_set_prefix), NULL for none */
    size_t prefix_len;
    store_buf in;     /* bytes received and not yet consumed */
    char broken[200]; /* why the connection cannot be used, "" while it can */
};

/* strerror with a lower-case first letter, to sit inside our messages */
static const char *why(int err, char *buf, size_t n)
{
    snprintf(buf, n, "%s", err == ETIMEDOUT ? "no answer" : strerror(err));
    buf[0] = (char)tolower((unsigned char)buf[0]);
    return buf;
}

static void sleep_s(double s)
{
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

/* Connecting to our own ephemeral port can succeed with TCP's simultaneous open when nothing
 * listens there: the socket is then talking to itself. */
static bool self_connected(int fd)
{
    struct sockaddr_storage a, b;
    socklen_t la = sizeof a, lb = sizeof b;
    if (getsockname(fd, (struct sockaddr *)&a, &la) < 0) return false;
    if (getpeername(fd, (struct sockaddr *)&b, &lb) < 0) return false;
    return la == lb && memcmp(&a, &b, la) == 0;
}

/* One non-blocking connect to ai, bounded by the deadline; the socket or -1 with errno. */
static int connect_one(const struct addrinfo *ai, double deadline)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) return -1;
    int err = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        err = errno;
        if (err == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            double left = deadline - store_now();
            int rc = poll(&p, 1, left > 0 ? (int)(left * 1000.0) + 1 : 0);
            socklen_t len = sizeof err;
            if (rc <= 0)
                err = rc == 0 ? ETIMEDOUT : errno;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                err = errno;
        }
    }
    if (!err && self_connected(fd)) err = ECONNREFUSED;
    if (err) {
        close(fd);
        errno = err;
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Connects to host:port, retrying with exponential backoff (10 ms doubling to 1 s) until the
 * deadline: the server may start after its clients. */
static int connect_retry(const char *host, int port, double timeout_s)
{
    double start = store_now(), deadline = start + timeout_s, backoff = 0.01;
    char portstr[16], reason[160] = "no attempt";
    bool have_reason = false;
    snprintf(portstr, sizeof portstr, "%d", port);
    for (;;) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
        int rc = getaddrinfo(host, portstr, &hints, &res);
        if (rc != 0) {
            snprintf(reason, sizeof reason, "cannot resolve '%s': %s", host, gai_strerror(rc));
        } else {
            for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                int fd = connect_one(ai, deadline);
                if (fd >= 0) {
                    freeaddrinfo(res);
                    return fd;
                }
                /* a refusal says more than the timeout of a last attempt cut short */
                if (errno != ETIMEDOUT || !have_reason) why(errno, reason, sizeof reason);
                have_reason = true;
            }
            freeaddrinfo(res);
        }
        double left = deadline - store_now();
        if (left <= 0) break;
        sleep_s(backoff < left ? backoff : left);
        backoff = backoff * 2 > 1.0 ? 1.0 : backoff * 2;
    }
    return ddpl_error("store: cannot reach %s:%d after %g s (%s)", host, port, timeout_s, reason);
}

/* Sends the request in req and reads one reply into *rep (fields point into s->in; the caller
 * consumes *len bytes of s->in when done). Called with the mutex held. */
static int roundtrip(ddpl_store *s, store_buf *req, double reply_s, store_msg *rep, size_t *len,
                     const char *what)
{
    if (s->broken[0])
        return ddpl_error("store: the connection to %s:%d is unusable (%s); cannot %s", s->host,
                          s->port, s->broken, what);
    if (req->failed)
        return ddpl_error("store: out of memory for the request to %s (%zu bytes so far)", what,
                          req->len);
    double deadline = store_now() + reply_s;
    int rc = store_send_all(s->fd, req->data, req->len, deadline);
    if (rc == 0) rc = store_recv_msg(s->fd, &s->in, rep, len, deadline);
    if (rc == 0) return 0;
    char reason[128];
    if (errno == EPIPE || errno == ECONNRESET)
        snprintf(reason, sizeof reason, "the server closed the connection (has rank 0 exited?)");
    else if (errno == EPROTO)
        snprintf(reason, sizeof reason, "the server sent a malformed reply");
    else if (errno == ETIMEDOUT)
        snprintf(reason, sizeof reason, "no reply within %g s", reply_s);
    else
        why(errno, reason, sizeof reason);
    snprintf(s->broken, sizeof s->broken, "%s during %s", reason, what);
    return ddpl_error("store: lost the connection to %s:%d: %s", s->host, s->port, s->broken);
}

static void done(ddpl_store *s, store_msg *rep, size_t len)
{
    store_msg_clear(rep);
    store_buf_consume(&s->in, len);
}

static uint32_t to_ms(double seconds)
{
    if (seconds <= 0) return 0;
    double ms = seconds * 1000.0;
    return ms > 4.0e9 ? 4000000000u : (uint32_t)ms; /* about 46 days */
}

/* "'a', 'b'" from fields or C strings into buf, cut with "..." when long */
static void list_keys(char *buf, size_t n, uint32_t count, const store_field *f,
                      const char *const *keys)
{
    size_t used = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < count && used < n; i++) {
        int len = f ? (int)f[i].len : (int)strlen(keys[i]);
        const char *k = f ? (const char *)f[i].data : keys[i];
        int w = snprintf(buf + used, n - used, "%s'%.*s'", i ? ", " : "", len, k);
        if (w < 0 || (size_t)w >= n - used) {
            if (n > 4) strcpy(buf + n - 4, "...");
            return;
        }
        used += (size_t)w;
    }
}

/* The error for a reply that is not OK: timeouts name the keys still missing. */
static int reply_error(ddpl_store *s, const store_msg *rep, const char *what, const char *key,
                       double timeout_s, uint32_t nkeys)
{
    char text[600];
    if (rep->code == STORE_ST_TIMEOUT) {
        list_keys(text, sizeof text, rep->nfields, rep->fields, NULL);
        if (nkeys <= 1)
            return ddpl_error("store: timed out after %g s waiting for key %s", timeout_s, text);
        return ddpl_error("store: timed out after %g s waiting for %u keys (missing: %s)",
                          timeout_s, nkeys, text);
    }
    int len = rep->nfields ? (int)rep->fields[0].len : 0;
    const char *msg = rep->nfields ? (const char *)rep->fields[0].data : "";
    return ddpl_error("store: %s '%s' failed: %.*s", what, key, len, msg);
}

/* A request whose fields are all keys (C strings, each with the store's prefix put in front),
 * plus an optional binary last field. */
static void build(const ddpl_store *s, store_buf *b, uint8_t op, double timeout_s, int nkeys,
                  const char *const *keys, const void *extra, size_t extra_len, bool has_extra)
{
    size_t start = store_msg_begin(b, op, to_ms(timeout_s), (uint32_t)nkeys + (has_extra ? 1 : 0));
    for (int i = 0; i < nkeys; i++) {
        size_t klen = strlen(keys[i]);
        if (!s->prefix_len) {
            store_msg_add(b, keys[i], klen);
            continue;
        }
        char *k = ddpl_xmalloc(s->prefix_len + klen);
        memcpy(k, s->prefix, s->prefix_len);
        memcpy(k + s->prefix_len, keys[i], klen);
        store_msg_add(b, k, s->prefix_len + klen);
        free(k);
    }
    if (has_extra) store_msg_add(b, extra, extra_len);
    store_msg_end(b, start);
}

static int check_keys(const char *op, int nkeys, const char *const *keys)
{
    if (nkeys < 1 || (unsigned)nkeys > STORE_MAX_FIELDS - 1)
        return ddpl_error("store: %s takes 1 to %u keys, got %d", op, STORE_MAX_FIELDS - 1, nkeys);
    for (int i = 0; i < nkeys; i++)
        if (!keys[i]) return ddpl_error("store: %s: key %d is NULL", op, i + 1);
    return 0;
}

static int hello(ddpl_store *s, const char *token, double timeout_s)
{
    store_buf req = {0};
    size_t start = store_msg_begin(&req, STORE_OP_HELLO, 0, 2);
    store_msg_add(&req, STORE_MAGIC, strlen(STORE_MAGIC));
    store_msg_add(&req, token ? token : "", token ? strlen(token) : 0);
    store_msg_end(&req, start);
    store_msg rep;
    size_t len;
    int rc = roundtrip(s, &req, timeout_s, &rep, &len, "the hello");
    store_buf_free(&req);
    if (rc < 0) {
        return ddpl_error("store: %s:%d did not answer the hello (%s; is it a ddplua store?)",
                          s->host, s->port, s->broken);
    }
    if (rep.code != STORE_ST_OK) {
        int n = rep.nfields ? (int)rep.fields[0].len : 0;
        const char *msg = rep.nfields ? (const char *)rep.fields[0].data : "";
        rc = ddpl_error("store: the server at %s:%d refused this client: %.*s", s->host, s->port, n,
                        msg);
    }
    done(s, &rep, len);
    return rc;
}

ddpl_store *ddpl_store_create(const char *host, int port, bool is_server, double timeout_s,
                              const char *token)
{
    if (!host || !*host) return ddpl_error("store: the host is empty"), NULL;
    if (port < 0 || port > 65535 || (port == 0 && !is_server))
        return ddpl_error("store: port %d is not valid%s", port,
                          port == 0 ? " for a client (0 picks a port on the server only)" : ""),
               NULL;
    if (!(timeout_s > 0))
        return ddpl_error("store: the timeout must be positive, got %g s", timeout_s), NULL;
    ddpl_store *s = ddpl_xcalloc(1, sizeof *s);
    s->fd = -1;
    s->host = strdup(host);
    s->port = port;
    s->token = token && *token ? strdup(token) : NULL;
    atomic_store(&s->timeout_s, timeout_s);
    pthread_mutex_init(&s->mu, NULL);
    if (is_server) {
        s->server = store_server_start(host, port, token);
        if (!s->server) goto fail;
        s->port = store_server_port(s->server);
    }
    s->fd = connect_retry(host, s->port, timeout_s);
    if (s->fd < 0 || hello(s, token, timeout_s) < 0) goto fail;
    return s;
fail:;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ddpl_last_error());
    ddpl_store_free(s);
    ddpl_error("%s", msg);
    return NULL;
}

int ddpl_store_set_prefix(ddpl_store *s, const char *prefix)
{
    size_t n = prefix ? strlen(prefix) : 0;
    if (n > MAX_PREFIX)
        return ddpl_error("store: the key prefix is %zu bytes, more than the %d allowed", n,
                          MAX_PREFIX);
    free(s->prefix);
    s->prefix = n ? strdup(prefix) : NULL;
    s->prefix_len = n;
    return 0;
}

int ddpl_store_port(const ddpl_store *s)
{
    return s->port;
}

int ddpl_store_others_connected(const ddpl_store *s)
{
    if (!s->server) return -1;
    size_t n = store_server_clients(s->server);
    return n > 0 ? (int)n - 1 : 0;
}

double ddpl_store_timeout(const ddpl_store *s)
{
    return atomic_load(&((ddpl_store *)s)->timeout_s);
}

void ddpl_store_set_timeout(ddpl_store *s, double timeout_s)
{
    if (timeout_s > 0) atomic_store(&s->timeout_s, timeout_s);
}

int ddpl_store_set(ddpl_store *s, const char *key, const void *value, size_t len)
{
    if (check_keys("set", 1, &key) < 0) return -1;
    if (len > STORE_MAX_FRAME / 2)
        return ddpl_error("store: the value for key '%s' is %zu bytes, more than the %u allowed",
                          key, len, STORE_MAX_FRAME / 2);
    store_buf req = {0};
    build(s, &req, STORE_OP_SET, 0, 1, &key, value, len, true);
    pthread_mutex_lock(&s->mu);
    store_msg rep;
    size_t n;
    int rc = roundtrip(s, &req, ddpl_store_timeout(s), &rep, &n, "set");
    if (rc == 0) {
        if (rep.code != STORE_ST_OK) rc = reply_error(s, &rep, "set", key, 0, 1);
        done(s, &rep, n);
    }
    pthread_mutex_unlock(&s->mu);
    store_buf_free(&req);
    return rc;
}

int ddpl_store_get(ddpl_store *s, const char *key, void **value, size_t *len)
{
    if (check_keys("get", 1, &key) < 0) return -1;
    double t = ddpl_store_timeout(s);
    store_buf req = {0};
    build(s, &req, STORE_OP_GET, t, 1, &key, NULL, 0, false);
    pthread_mutex_lock(&s->mu);
    store_msg rep;
    size_t n;
    int rc = roundtrip(s, &req, t + REPLY_SLACK_S, &rep, &n, "get");
    if (rc == 0) {
        if (rep.code != STORE_ST_OK || rep.nfields != 1) {
            rc = reply_error(s, &rep, "get", key, t, 1);
        } else {
            *len = rep.fields[0].len;
            *value = ddpl_xmalloc(*len + 1); /* NUL-terminated for callers that want a string */
            memcpy(*value, rep.fields[0].data, *len);
            ((char *)*value)[*len] = '\0';
        }
        done(s, &rep, n);
    }
    pthread_mutex_unlock(&s->mu);
    store_buf_free(&req);
    return rc;
}

int ddpl_store_add(ddpl_store *s, const char *key, int64_t delta, int64_t *result)
{
    if (check_keys("add", 1, &key) < 0) return -1;
    uint8_t d[8];
    store_put_i64(d, delta);
    store_buf req = {0};
    build(s, &req, STORE_OP_ADD, 0, 1, &key, d, 8, true);
    pthread_mutex_lock(&s->mu);
    store_msg rep;
    size_t n;
    int rc = roundtrip(s, &req, ddpl_store_timeout(s), &rep, &n, "add");
    if (rc == 0) {
        int64_t v;
        if (rep.code != STORE_ST_OK || rep.nfields != 1 || !store_field_i64(&rep.fields[0], &v))
            rc = reply_error(s, &rep, "add on key", key, 0, 1);
        else if (result)
            *result = v;
        done(s, &rep, n);
    }
    pthread_mutex_unlock(&s->mu);
    store_buf_free(&req);
    return rc;
}

int ddpl_store_check(ddpl_store *s, int nkeys, const char *const *keys, bool *present)
{
    if (check_keys("check", nkeys, keys) < 0) return -1;
    store_buf req = {0};
    build(s, &req, STORE_OP_CHECK, 0, nkeys, keys, NULL, 0, false);
    pthread_mutex_lock(&s->mu);
    store_msg rep;
    size_t n;
    int rc = roundtrip(s, &req, ddpl_store_timeout(s), &rep, &n, "check");
    if (rc == 0) {
        if (rep.code != STORE_ST_OK || rep.nfields != 1 || rep.fields[0].len != 1)
            rc = reply_error(s, &rep, "check of key", keys[0], 0, 1);
        else
            *present = rep.fields[0].data[0] != 0;
        done(s, &rep, n);
    }
    pthread_mutex_unlock(&s->mu);
    store_buf_free(&req);
    return rc;
}

int ddpl_store_wait(ddpl_store *s, int nkeys, const char *const *keys, double timeout_s)
{
    if (check_keys("wait", nkeys, keys) < 0) return -1;
    double t = timeout_s < 0 ? ddpl_store_timeout(s) : timeout_s;
    store_buf req = {0};
    build(s, &req, STORE_OP_WAIT, t, nkeys, keys, NULL, 0, false);
    pthread_mutex_lock(&s->mu);
    store_msg rep;
    size_t n;
    int rc = roundtrip(s, &req, t + REPLY_SLACK_S, &rep, &n, "wait");
    if (rc == 0) {
        if (rep.code != STORE_ST_OK)
            rc = reply_error(s, &rep, "wait for key", keys[0], t, (uint32_t)nkeys);
        done(s, &rep, n);
    }
    pthread_mutex_unlock(&s->mu);
    store_buf_free(&req);
    return rc;
}

int ddpl_store_delete(ddpl_store *s, const char *key, bool *deleted)
{
    if (check_keys("delete", 1, &key) < 0) return -1;
    store_buf req = {0};
    build(s, &req, STORE_OP_DELETE, 0, 1, &key, NULL, 0, false);
    pthread_mutex_lock(&s->mu);
    store_msg rep;
    size_t n;
    int rc = roundtrip(s, &req, ddpl_store_timeout(s), &rep, &n, "delete");
    if (rc == 0) {
        if (rep.code != STORE_ST_OK || rep.nfields != 1 || rep.fields[0].len != 1)
            rc = reply_error(s, &rep, "delete of key", key, 0, 1);
        else if (deleted)
            *deleted = rep.fields[0].data[0] != 0;
        done(s, &rep, n);
    }
    pthread_mutex_unlock(&s->mu);
    store_buf_free(&req);
    return rc;
}

int ddpl_store_num_keys(ddpl_store *s, int64_t *count)
{
    store_buf req = {0};
    build(s, &req, STORE_OP_NUM_KEYS, 0, 0, NULL, NULL, 0, false);
    pthread_mutex_lock(&s->mu);
    store_msg rep;
    size_t n;
    int rc = roundtrip(s, &req, ddpl_store_timeout(s), &rep, &n, "num_keys");
    if (rc == 0) {
        int64_t v;
        if (rep.code != STORE_ST_OK || rep.nfields != 1 || !store_field_i64(&rep.fields[0], &v) ||
            v < 0)
            rc = reply_error(s, &rep, "count of the keys", "num_keys", 0, 0);
        else
            *count = v;
        done(s, &rep, n);
    }
    pthread_mutex_unlock(&s->mu);
    store_buf_free(&req);
    return rc;
}

void ddpl_store_free(ddpl_store *s)
{
    if (!s) return;
    if (s->fd >= 0) close(s->fd); /* first, so the server does not wait for this client */
    double t = ddpl_store_timeout(s);
    store_server_stop(s->server, t < DRAIN_MAX_S ? t : DRAIN_MAX_S);
    store_buf_free(&s->in);
    pthread_mutex_destroy(&s->mu);
    free(s->host);
    free(s->token);
    free(s->prefix);
    free(s);
}

ddpl_store *ddpl_store_clone(const ddpl_store *s, double timeout_s)
{
    ddpl_store *c = ddpl_store_create(s->host, s->port, false, timeout_s, s->token);
    if (c && ddpl_store_set_prefix(c, s->prefix) < 0) {
        ddpl_store_free(c);
        return NULL;
    }
    return c;
}

int ddpl_store_all_equal(ddpl_store *s, const char *prefix, const char *name, int rank, int size,
                         const char *value, bool *equal)
{
    char key[256];
    snprintf(key, sizeof key, "%s%s/%d", prefix, name, rank);
    if (ddpl_store_set(s, key, value, strlen(value)) < 0) return -1;
    *equal = true;
    for (int r = 0; r < size; r++) {
        snprintf(key, sizeof key, "%s%s/%d", prefix, name, r);
        void *v = NULL;
        size_t len = 0;
        if (ddpl_store_get(s, key, &v, &len) < 0) return -1;
        if (len != strlen(value) || memcmp(v, value, len) != 0) *equal = false;
        free(v);
    }
    return 0;
}
