/* spec/c/test_store_hostile.c: the store's server (engine/distributed/store_server.c) facing
 * clients that misbehave, while a real client keeps being served:
 *   - a stranger whose first frame announces 1 GiB is dropped at once, before it sends more;
 *   - a stranger that never says hello is dropped after the hello timeout
 *     (DDPLUA_STORE_HELLO_TIMEOUT, 1 s here);
 *   - a wrong token is refused with the reason;
 *   - a greeted client that pipelines GETs of a 64 KB value without reading a single reply
 *     (a thousandfold amplification) leaves the server's memory bounded, and a real client is
 *     still answered meanwhile;
 *   - a server out of descriptors (a child process with a low RLIMIT_NOFILE and more clients
 *     than descriptors) waits instead of spinning on the listening socket;
 *   - a store for MASTER_ADDR 127.0.0.1 listens on loopback only (this machine's other address
 *     is refused), one for a non-loopback host on every interface.
 * defines: main. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "distributed/store.h"
#include "distributed/store_proto.h"
#include "distributed/store_server.h"

#define TOKEN "t0ken"

/* A blocking TCP connection to the server on loopback, reads bounded by recv_timeout_s. */
static int raw_connect(int port, double recv_timeout_s)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    struct timeval tv = {(time_t)recv_timeout_s, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* Whether the server closed fd: a read returns end-of-file (or a reset) before the timeout. */
static bool closed_by_server(int fd)
{
    char b[256];
    for (;;) {
        ssize_t r = recv(fd, b, sizeof b, 0);
        if (r == 0 || (r < 0 && errno == ECONNRESET)) return true;
        if (r < 0) return false; /* EAGAIN: the receive timeout passed, still open */
    }
}

static size_t rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* One request frame into b. */
static void frame(store_buf *b, uint8_t op, int nfields, const char *const *fields)
{
    size_t start = store_msg_begin(b, op, 0, (uint32_t)nfields);
    for (int i = 0; i < nfields; i++) store_msg_add(b, fields[i], strlen(fields[i]));
    store_msg_end(b, start);
}

static void check_huge_first_frame(int port)
{
    int fd = raw_connect(port, 5);
    CHECK(fd >= 0);
    if (fd < 0) return;
    uint8_t header[13] = {0x40, 0, 0, 0, STORE_OP_HELLO}; /* 1 GiB follows, it says */
    CHECK(send(fd, header, sizeof header, MSG_NOSIGNAL) == (ssize_t)sizeof header);
    CHECK(closed_by_server(fd));
    close(fd);
}

static void check_silent_stranger(int port)
{
    int fd = raw_connect(port, 8);
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK(closed_by_server(fd)); /* after the 1 s hello timeout, well within the 8 s read bound */
    close(fd);
}

static void check_wrong_token(int port)
{
    ddpl_store *st = ddpl_store_create("127.0.0.1", port, false, 5, "guess");
    CHECK(st == NULL);
    CHECK(strstr(ddpl_last_error(), "wrong DDPLUA_STORE_TOKEN") != NULL);
    ddpl_store_free(st);
}

/* A greeted client sends GET requests of a 64 KB value for up to 2 s, never reading a reply. */
static void check_flood(int port, ddpl_store *real)
{
    static char big[64 << 10];
    memset(big, 'x', sizeof big);
    CHECK(ddpl_store_set(real, "big", big, sizeof big) == 0);
    int fd = raw_connect(port, 5);
    CHECK(fd >= 0);
    if (fd < 0) return;
    store_buf hello_frame = {0}, gets = {0};
    const char *hello[] = {STORE_MAGIC, TOKEN};
    frame(&hello_frame, STORE_OP_HELLO, 2, hello);
    CHECK(send(fd, hello_frame.data, hello_frame.len, MSG_NOSIGNAL) == (ssize_t)hello_frame.len);
    const char *key[] = {"big"};
    for (int i = 0; i < 256; i++) frame(&gets, STORE_OP_GET, 1, key);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    size_t before = rss_bytes(), sent = 0, off = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) > 2.0) break;
        /* the same block of GETs over and over, resumed where a short send stopped */
        ssize_t w = send(fd, gets.data + off, gets.len - off, MSG_NOSIGNAL);
        if (w > 0) {
            sent += (size_t)w;
            off = (off + (size_t)w) % gets.len;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            usleep(1000); /* the server stopped reading: back-pressure works */
        } else {
            break;
        }
    }
    /* every GET would be answered with 64 KB: without bounds the server would hold about
     * sent / 30 * 64 KB of replies */
    size_t grown = rss_bytes() > before ? rss_bytes() - before : 0;
    fprintf(stderr, "flood: sent %zu bytes (%zu GETs), server grew %zu KB\n", sent, sent / 30,
            grown >> 10);
    CHECK(sent > 0);
    CHECK(grown < (size_t)96 << 20);
    /* a real client is served meanwhile */
    CHECK(ddpl_store_set(real, "alive", "1", 1) == 0);
    void *v = NULL;
    size_t len = 0;
    CHECK(ddpl_store_get(real, "alive", &v, &len) == 0 && len == 1);
    free(v);
    close(fd);
    store_buf_free(&hello_frame);
    store_buf_free(&gets);
}

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A child hosts a server with few descriptors; the parent connects more clients than it can
 * accept; the child's CPU time over the next second says whether its server thread spins. */
static void check_fd_limit(void)
{
    int to_child[2], to_parent[2];
    CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30);
        setenv("DDPLUA_STORE_HELLO_TIMEOUT", "30", 1); /* keep the accepted ones */
        struct rlimit lim = {24, 24};
        setrlimit(RLIMIT_NOFILE, &lim);
        store_server *srv = store_server_start("127.0.0.1", 0, TOKEN);
        int port = srv ? store_server_port(srv) : -1;
        char go;
        if (write(to_parent[1], &port, sizeof port) != sizeof port) _exit(2);
        if (read(to_child[0], &go, 1) != 1) _exit(2);
        double c0 = cpu_seconds();
        sleep(1);
        double used = cpu_seconds() - c0;
        if (write(to_parent[1], &used, sizeof used) != sizeof used) _exit(2);
        store_server_stop(srv, 0);
        _exit(0);
    }
    int port = -1;
    CHECK(read(to_parent[0], &port, sizeof port) == sizeof port && port > 0);
    int fds[40];
    int n = 0;
    for (; n < 40 && port > 0; n++) {
        fds[n] = raw_connect(port, 1); /* the kernel completes them: the backlog holds them */
        if (fds[n] < 0) break;
    }
    CHECK(n == 40);
    usleep(200000); /* the server has met EMFILE by now */
    CHECK(write(to_child[1], "g", 1) == 1);
    double used = 99;
    CHECK(read(to_parent[0], &used, sizeof used) == sizeof used);
    fprintf(stderr, "fd limit: the server's process used %.3f s of CPU in 1 s\n", used);
    CHECK(used < 0.5); /* spinning on the listening socket would take the whole second */
    for (int i = 0; i < n; i++) close(fds[i]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* This machine's first IPv4 address that is not a loopback one, or false when it has none. */
static bool other_address(struct sockaddr_in *out)
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) return false;
    bool found = false;
    for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
        struct sockaddr_in *a = (struct sockaddr_in *)i->ifa_addr;
        if ((ntohl(a->sin_addr.s_addr) >> 24) == 127) continue;
        *out = *a;
        found = true;
    }
    freeifaddrs(ifs);
    return found;
}

/* Whether a TCP connection to addr:port is accepted. */
static bool reachable(struct sockaddr_in addr, int port)
{
    addr.sin_port = htons((uint16_t)port);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0;
    if (fd >= 0) close(fd);
    return ok;
}

static void check_bind_address(void)
{
    struct sockaddr_in other;
    /* every machine that runs the suite has a network interface besides loopback (CI's too);
     * without one there is nothing to tell loopback-only from everywhere */
    CHECK(other_address(&other));
    store_server *lo = store_server_start("127.0.0.1", 0, TOKEN);
    char host[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &other.sin_addr, host, sizeof host);
    store_server *all = store_server_start(host, 0, TOKEN);
    CHECK(lo != NULL && all != NULL);
    if (lo && all) {
        struct sockaddr_in loop = {.sin_family = AF_INET,
                                   .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        CHECK(reachable(loop, store_server_port(lo)));
        CHECK(!reachable(other, store_server_port(lo))); /* loopback only */
        CHECK(reachable(other, store_server_port(all)));
        CHECK(reachable(loop, store_server_port(all)));
    }
    store_server_stop(lo, 0);
    store_server_stop(all, 0);
}

int main(void)
{
    setenv("DDPLUA_STORE_HELLO_TIMEOUT", "1", 1);
    store_server *srv = store_server_start("127.0.0.1", 0, TOKEN);
    CHECK(srv != NULL);
    if (!srv) return check_finish();
    int port = store_server_port(srv);
    ddpl_store *real = ddpl_store_create("127.0.0.1", port, false, 10, TOKEN);
    CHECK(real != NULL);
    if (real) {
        check_huge_first_frame(port);
        check_silent_stranger(port);
        check_wrong_token(port);
        check_flood(port, real);
        ddpl_store_free(real);
    }
    store_server_stop(srv, 0);
    check_fd_limit();
    check_bind_address();
    return check_finish();
}
