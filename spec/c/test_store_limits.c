/* spec/c/test_store_limits.c: the store's server (engine/distributed/store_server.c) keeps its
 * limits and survives a client's requests it cannot hold:
 *   - a value over DDPLUA_STORE_MAX_VALUE, a key over DDPLUA_STORE_MAX_KEY, and a set that would
 *     pass DDPLUA_STORE_MAX_BYTES each get an error naming the limit and its variable, and the
 *     same connection goes on working (the refused value is read past, not buffered: the
 *     server's resident memory stays far below the value's size);
 *   - deleting keys gives their bytes back to the budget; an add counts against it too;
 *   - a server whose process runs out of address space (RLIMIT_AS) answers a 400 MB set with an
 *     out-of-memory error and keeps serving: the process does not abort.
 * defines: main. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "distributed/store.h"
#include "distributed/store_server.h"

#define TOKEN "t0ken"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif

static bool has(const char *what)
{
    bool yes = strstr(ddpl_last_error(), what) != NULL;
    if (!yes) fprintf(stderr, "expected \"%s\" in: %s\n", what, ddpl_last_error());
    return yes;
}

static size_t rss_bytes(void)
{
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%*s %ld", &pages) != 1) pages = 0;
        fclose(f);
    }
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

static void check_limits(void)
{
    setenv("DDPLUA_STORE_MAX_VALUE", "1048576", 1);
    setenv("DDPLUA_STORE_MAX_KEY", "100", 1);
    setenv("DDPLUA_STORE_MAX_BYTES", "2500000", 1);
    store_server *srv = store_server_start("127.0.0.1", 0, TOKEN);
    unsetenv("DDPLUA_STORE_MAX_VALUE");
    unsetenv("DDPLUA_STORE_MAX_KEY");
    unsetenv("DDPLUA_STORE_MAX_BYTES");
    CHECK(srv != NULL);
    if (!srv) return;
    ddpl_store *st = ddpl_store_create("127.0.0.1", store_server_port(srv), false, 30, TOKEN);
    CHECK(st != NULL);
    if (!st) {
        store_server_stop(srv, 0);
        return;
    }
    CHECK(ddpl_store_set(st, "small", "v", 1) == 0);

    size_t big_n = 64u << 20; /* 64 MB: the server must read past it, not hold it */
    char *big = malloc(big_n);
    memset(big, 'x', big_n);
    size_t rss_before = rss_bytes();
    CHECK(ddpl_store_set(st, "big", big, big_n) < 0);
    CHECK(has("a request of"));
    CHECK(has("over the store's limit of 1048576 bytes per value (DDPLUA_STORE_MAX_VALUE)"));
    /* the client's copy of the request is in this process too: allow it, not the server's */
    CHECK(rss_bytes() < rss_before + 2 * big_n - big_n / 2);
    void *v;
    size_t n;
    CHECK(ddpl_store_get(st, "small", &v, &n) == 0 && n == 1); /* the connection still works */
    free(v);

    /* a value just over the limit arrives whole (it fits the frame) and is refused by size */
    CHECK(ddpl_store_set(st, "over", big, (1u << 20) + 1) < 0);
    CHECK(has("a value of 1048577 bytes is over the store's limit of 1048576 bytes per value"));

    char key[201];
    memset(key, 'k', 200);
    key[200] = '\0';
    CHECK(ddpl_store_set(st, key, "v", 1) < 0);
    CHECK(has("a key of 200 bytes is over the store's limit of 100 bytes per key "
              "(DDPLUA_STORE_MAX_KEY)"));
    int64_t r;
    CHECK(ddpl_store_add(st, key, 1, &r) < 0);
    CHECK(has("DDPLUA_STORE_MAX_KEY"));

    /* the budget: two 1 MB values fit in 2.5 MB, a third does not until one is deleted */
    CHECK(ddpl_store_set(st, "a", big, 1u << 20) == 0);
    CHECK(ddpl_store_set(st, "b", big, 1u << 20) == 0);
    CHECK(ddpl_store_set(st, "c", big, 1u << 20) < 0);
    CHECK(has("more would pass its limit of 2500000 bytes (DDPLUA_STORE_MAX_BYTES)"));
    CHECK(ddpl_store_set(st, "a", big, 1000) == 0); /* replacing with less is fine */
    bool existed;
    CHECK(ddpl_store_delete(st, "b", &existed) == 0 && existed);
    CHECK(ddpl_store_set(st, "c", big, 1u << 20) == 0);
    CHECK(ddpl_store_add(st, "counter", 5, &r) == 0 && r == 5);
    free(big);
    ddpl_store_free(st);
    store_server_stop(srv, 0);
}

/* The server in a child process whose address space is capped just above what it uses; the
 * parent sends it a 400 MB value (under the value limit, raised to 1 GiB). */
static void check_out_of_memory(void)
{
#ifdef UNDER_SANITIZER
    /* ASan's and TSan's shadow memory needs more address space than any RLIMIT_AS that makes
     * malloc fail; the main build's run of this test covers it */
    printf("out-of-memory case: not run under a sanitizer\n");
    return;
#endif
    int port_pipe[2], stop_pipe[2];
    CHECK(pipe(port_pipe) == 0 && pipe(stop_pipe) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("DDPLUA_STORE_MAX_VALUE", "1073741824", 1);
        setenv("DDPLUA_STORE_MAX_BYTES", "4294967296", 1);
        store_server *srv = store_server_start("127.0.0.1", 0, TOKEN);
        if (!srv) _exit(2);
        long pages = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        if (!f || fscanf(f, "%ld", &pages) != 1) _exit(3);
        fclose(f);
        rlim_t cap = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)128 << 20);
        struct rlimit rl = {cap, cap};
        if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(4);
        int port = store_server_port(srv);
        if (write(port_pipe[1], &port, sizeof port) != sizeof port) _exit(5);
        char c;
        if (read(stop_pipe[0], &c, 1) != 1) _exit(6);
        store_server_stop(srv, 0);
        _exit(0);
    }
    int port = 0;
    CHECK(read(port_pipe[0], &port, sizeof port) == sizeof port);
    ddpl_store *st = ddpl_store_create("127.0.0.1", port, false, 60, TOKEN);
    CHECK(st != NULL);
    if (st) {
        size_t n = 400u << 20;
        char *big = calloc(1, n);
        CHECK(ddpl_store_set(st, "huge", big, n) < 0);
        CHECK(has("the store ran out of memory for a request of"));
        free(big);
        CHECK(ddpl_store_set(st, "after", "ok", 2) == 0); /* still serving */
        void *v;
        size_t len;
        CHECK(ddpl_store_get(st, "after", &v, &len) == 0 && len == 2 && memcmp(v, "ok", 2) == 0);
        free(v);
        ddpl_store_free(st);
    }
    CHECK(write(stop_pipe[1], "x", 1) == 1);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0); /* never abort() */
    if (!WIFEXITED(status) || WEXITSTATUS(status))
        fprintf(stderr, "server process: status %d\n", status);
}

int main(void)
{
    check_limits();
    check_out_of_memory();
    return check_finish();
}
