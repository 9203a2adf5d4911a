/* spec/c/test_store.c: the TCP store's C interface (engine/distributed/store.h) under threads: one
 * client shared by several threads (its mutex), clients of their own, a get woken by another
 * client's set, timeouts that name the keys, key prefixes, and a server freed while a client waits.
 * defines: main. */
#include <pthread.h>
#include <time.h>

#include "check.h"
#include "distributed/store.h"

#define THREADS 4
#define ADDS    250

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct job {
    ddpl_store *shared;
    int port;
    int failures;
} job;

static void *adder(void *arg)
{
    job *j = arg;
    ddpl_store *own = ddpl_store_create("127.0.0.1", j->port, false, 10, "t0ken");
    if (!own) j->failures++;
    for (int i = 0; i < ADDS && own; i++) {
        int64_t v;
        if (ddpl_store_add(j->shared, "count", 1, &v) < 0) j->failures++;
        if (ddpl_store_add(own, "count", 1, &v) < 0) j->failures++;
    }
    ddpl_store_free(own);
    return NULL;
}

typedef struct getter {
    ddpl_store *s;
    const char *key;
    int rc;
    char value[64];
    char error[512];
    double took;
} getter;

static void *get_key(void *arg)
{
    getter *g = arg;
    double t0 = now();
    void *v = NULL;
    size_t len = 0;
    g->rc = ddpl_store_get(g->s, g->key, &v, &len);
    g->took = now() - t0;
    if (g->rc == 0)
        snprintf(g->value, sizeof g->value, "%.*s", (int)len, (char *)v);
    else
        snprintf(g->error, sizeof g->error, "%s", ddpl_last_error());
    free(v);
    return NULL;
}

int main(void)
{
    ddpl_store *server = ddpl_store_create("127.0.0.1", 0, true, 10, "t0ken");
    CHECK(server != NULL);
    if (!server) return check_finish();
    int port = ddpl_store_port(server);
    CHECK(port > 0);

    /* 4 threads x (shared client + own client) x 250 adds */
    job jobs[THREADS];
    pthread_t th[THREADS];
    ddpl_store *shared = ddpl_store_create("127.0.0.1", port, false, 10, "t0ken");
    CHECK(shared != NULL);
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (job){shared, port, 0};
        pthread_create(&th[i], NULL, adder, &jobs[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK(jobs[i].failures == 0);
    }
    int64_t total = -1;
    CHECK(ddpl_store_add(server, "count", 0, &total) == 0);
    CHECK(total == 2 * THREADS * ADDS);

    /* a get in one thread, woken by a set from another client */
    getter g = {.s = shared, .key = "later"};
    pthread_t gt;
    pthread_create(&gt, NULL, get_key, &g);
    struct timespec pause = {0, 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
    CHECK(ddpl_store_set(server, "later", "v1", 2) == 0);
    pthread_join(gt, NULL);
    CHECK(g.rc == 0 && strcmp(g.value, "v1") == 0);
    CHECK(g.took >= 0.05 && g.took < 5);

    /* timeouts name the keys */
    ddpl_store_set_timeout(shared, 0.2);
    CHECK(ddpl_store_timeout(shared) == 0.2);
    void *v;
    size_t len;
    CHECK(ddpl_store_get(shared, "nope", &v, &len) < 0);
    CHECK(strstr(ddpl_last_error(), "timed out after 0.2 s waiting for key 'nope'") != NULL);
    const char *keys[] = {"later", "r1", "r2"};
    CHECK(ddpl_store_wait(shared, 3, keys, 0.1) < 0);
    CHECK(strstr(ddpl_last_error(), "waiting for 3 keys (missing: 'r1', 'r2')") != NULL);
    bool present = true;
    CHECK(ddpl_store_check(shared, 1, keys, &present) == 0 && present);
    CHECK(ddpl_store_check(shared, 3, keys, &present) == 0 && !present);
    bool deleted = false;
    CHECK(ddpl_store_delete(shared, "later", &deleted) == 0 && deleted);
    CHECK(ddpl_store_delete(shared, "later", &deleted) == 0 && !deleted);
    CHECK(ddpl_store_wait(shared, 0, keys, 1) < 0); /* no keys: refused, not sent */
    int64_t before = -1, after = -1;
    CHECK(ddpl_store_num_keys(shared, &before) == 0 && before >= 1); /* the add counter */
    CHECK(ddpl_store_set(shared, "n1", "x", 1) == 0 && ddpl_store_set(shared, "n1", "y", 1) == 0);
    CHECK(ddpl_store_num_keys(server, &after) == 0 && after == before + 1);
    CHECK(ddpl_store_delete(shared, "n1", &deleted) == 0 && deleted);
    CHECK(ddpl_store_num_keys(shared, &after) == 0 && after == before);

    /* key prefixes (PyTorch's PrefixStore, one per generation of an elastic job): the same
     * names under two prefixes never meet, and a client without one sees the whole keys */
    ddpl_store *gen0 = ddpl_store_create("127.0.0.1", port, false, 10, "t0ken");
    ddpl_store *gen1 = ddpl_store_create("127.0.0.1", port, false, 10, "t0ken");
    CHECK(gen0 && gen1);
    if (gen0 && gen1) {
        CHECK(ddpl_store_set_prefix(gen0, "/worker/attempt_0/") == 0);
        CHECK(ddpl_store_set_prefix(gen1, "/worker/attempt_1/") == 0);
        CHECK(ddpl_store_set(gen0, "join/0", "old", 3) == 0);
        const char *join0[] = {"join/0"};
        CHECK(ddpl_store_check(gen1, 1, join0, &present) == 0 && !present);
        CHECK(ddpl_store_set(gen1, "join/0", "new", 3) == 0);
        CHECK(ddpl_store_get(gen1, "join/0", &v, &len) == 0 && len == 3 && !memcmp(v, "new", 3));
        free(v);
        CHECK(ddpl_store_get(server, "/worker/attempt_0/join/0", &v, &len) == 0 && len == 3 &&
              !memcmp(v, "old", 3));
        free(v);
        int64_t c0 = 0, c1 = 0;
        CHECK(ddpl_store_add(gen0, "n", 5, &c0) == 0 && ddpl_store_add(gen1, "n", 1, &c1) == 0);
        CHECK(c0 == 5 && c1 == 1);
        CHECK(ddpl_store_wait(gen1, 1, (const char *[]){"missing"}, 0.1) < 0);
        CHECK(strstr(ddpl_last_error(), "'/worker/attempt_1/missing'") != NULL);
        CHECK(ddpl_store_delete(gen0, "join/0", &deleted) == 0 && deleted);
        CHECK(ddpl_store_check(gen1, 1, join0, &present) == 0 && present);
        char *long_prefix = calloc(5000, 1);
        memset(long_prefix, 'p', 4999);
        CHECK(ddpl_store_set_prefix(gen1, long_prefix) < 0);
        CHECK(strstr(ddpl_last_error(), "the key prefix is 4999 bytes") != NULL);
        free(long_prefix);
        CHECK(ddpl_store_set_prefix(gen1, NULL) == 0); /* none again */
        CHECK(ddpl_store_check(gen1, 1, join0, &present) == 0 && !present);
    }
    ddpl_store_free(gen0);
    ddpl_store_free(gen1);

    /* freeing the server while a client waits long: the waiter hears at once why */
    ddpl_store_set_timeout(shared, 30);
    getter w = {.s = shared, .key = "never"};
    pthread_create(&gt, NULL, get_key, &w);
    nanosleep(&pause, NULL);
    double t0 = now();
    ddpl_store_free(server);
    double freed = now() - t0;
    pthread_join(gt, NULL);
    CHECK(freed < 2);
    CHECK(w.rc < 0 && w.took < 3);
    CHECK(strstr(w.error, "the server has shut down") != NULL);
    CHECK(ddpl_store_set(shared, "k", "v", 1) < 0); /* and the connection says it is gone */
    CHECK(strstr(ddpl_last_error(), "127.0.0.1") != NULL);
    ddpl_store_free(shared);
    return check_finish();
}
