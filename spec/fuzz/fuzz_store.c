/* spec/fuzz/fuzz_store.c: fuzzes the store's wire protocol (engine/distributed/store_proto.c) and
 * its server (engine/distributed/store_server.c). Each input is parsed as a frame, as a client
 * parses a reply, and then sent as-is over a fresh connection to an in-process server (no token, so
 * the seeds' hello frames reach the request handlers), followed by end-of-file. Properties: the
 * parser never reports a frame or field outside the input; the server answers and then closes every
 * connection (it never hangs on one: the read below is bounded) and never crashes or trips a
 * sanitizer. The server is restarted every RESTART_EVERY inputs so that the keys the inputs set do
 * not pile up across a long run. defines: LLVMFuzzerTestOneInput. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "ddpl/tensor.h"
#include "distributed/store_proto.h"
#include "distributed/store_server.h"

#define RESTART_EVERY   2000
#define REPLY_TIMEOUT_S 10 /* a server that neither answers nor closes within this hangs */

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_store: %s\n", what);
    abort();
}

static void check_parse(const uint8_t *data, size_t size)
{
    store_msg m;
    long n = store_msg_parse(data, size, &m);
    if (n <= 0) return;
    if ((size_t)n > size) fail("a parsed frame longer than the input");
    for (uint32_t i = 0; i < m.nfields; i++) {
        const store_field *f = &m.fields[i];
        if (f->data < data || f->data + f->len > data + n) fail("a field outside its frame");
    }
    store_msg_clear(&m);
}

/* connect, which libFuzzer's timer signal (SIGALRM, each second) may interrupt: the connection
 * then completes in the background, so wait for it instead of calling connect again */
static bool connect_through_signals(int fd, const struct sockaddr_in *a)
{
    if (connect(fd, (const struct sockaddr *)a, sizeof *a) == 0) return true;
    if (errno != EINTR) return false;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int rc;
    do {
        rc = poll(&p, 1, REPLY_TIMEOUT_S * 1000);
    } while (rc < 0 && errno == EINTR);
    int err = rc == 1 ? 0 : ETIMEDOUT;
    socklen_t len = sizeof err;
    if (rc == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    errno = err;
    return err == 0;
}

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || !connect_through_signals(fd, &a)) {
        fprintf(stderr, "fuzz_store: cannot connect: %s\n", strerror(errno));
        abort();
    }
    struct timeval tv = {REPLY_TIMEOUT_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

/* Sends the input, then end-of-file, and reads until the server closes. The replies are read
 * while sending too (a server whose replies are not taken stops reading, by design). */
static void exchange(int port, const uint8_t *data, size_t size)
{
    int fd = dial(port);
    char sink[65536];
    size_t sent = 0;
    while (sent < size) {
        ssize_t w = send(fd, data + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            sent += (size_t)w;
            continue;
        }
        if (w < 0 && (errno == EPIPE || errno == ECONNRESET)) break; /* dropped: allowed */
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) fail("send failed");
        ssize_t r = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (r == 0) break;
        if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) break;
    }
    shutdown(fd, SHUT_WR);
    for (;;) {
        ssize_t r = recv(fd, sink, sizeof sink, 0);
        if (r > 0) continue;
        if (r == 0 || errno == ECONNRESET) break;
        if (errno == EINTR) continue;
        fail("the server neither answered nor closed the connection");
    }
    /* close with a reset: this side sent the first FIN, so a normal close would leave the
     * connection in TIME_WAIT, and a minute of fuzzing would use up the ephemeral ports */
    struct linger reset = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static store_server *server;
    static int inputs;
    check_parse(data, size);
    if (!server || inputs++ % RESTART_EVERY == 0) {
        if (server) store_server_stop(server, 0);
        server = store_server_start("127.0.0.1", 0, NULL);
        if (!server) fail(ddpl_last_error());
    }
    exchange(store_server_port(server), data, size);
    return 0;
}
