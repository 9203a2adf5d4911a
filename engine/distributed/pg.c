/* distributed/pg.c: process groups: the backends of this build, creation (rendezvous through the
 * store, then the backend's connect), the group's failure state and its queries. Work handles
 * are in pg_work.c, the operations in pg_ops.c; how a backend runs them is its own (pg_host.c:
 * lanes of worker threads; nccl_pg.c: a device stream).
 * defines: ddpl_pg_backend_check, ddpl_pg_create/new_group/free and the group queries (pg.h),
 *          pg_broken, pg_break (pg_impl.h), pg_backend_add (pg_backend.h). */
#define _GNU_SOURCE /* getaddrinfo */
#include <netdb.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "distributed/pg_impl.h"

/* ------------------------------------------------------------------- failure state ---- */
bool pg_broken(ddpl_pg *pg, const char *name, char *msg, size_t n)
{
    pthread_mutex_lock(&pg->broken_mu);
    bool broken = pg->broken != NULL;
    if (broken)
        snprintf(msg, n, "%s: the process group is unusable after an earlier failure (%s)", name,
                 pg->broken);
    pthread_mutex_unlock(&pg->broken_mu);
    return broken;
}

void pg_break(ddpl_pg *pg, const char *msg)
{
    pthread_mutex_lock(&pg->broken_mu);
    if (!pg->broken) {
        size_t n = strlen(msg) + 1;
        pg->broken = memcpy(ddpl_xmalloc(n), msg, n);
    }
    pthread_mutex_unlock(&pg->broken_mu);
}

/* -------------------------------------------------------------------------- groups ---- */
/* The local address of the interface that routes to host (a connected UDP socket sends
 * nothing; getsockname then tells which source address the kernel picked). Gloo listens there,
 * so ranks on other machines can reach it, and loopback jobs stay on loopback. */
static int local_address_towards(const char *host, int port, char *out, size_t n)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM}, *res = NULL;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    int rc = getaddrinfo(host, portstr, &hints, &res);
    if (rc != 0)
        return ddpl_error("init_process_group: cannot resolve MASTER_ADDR '%s': %s", host,
                          gai_strerror(rc));
    int result = -1;
    for (struct addrinfo *ai = res; ai && result < 0; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype, 0);
        if (fd < 0) continue;
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            getsockname(fd, (struct sockaddr *)&ss, &len) == 0 &&
            getnameinfo((struct sockaddr *)&ss, len, out, (socklen_t)n, NULL, 0, NI_NUMERICHOST) ==
                0)
            result = 0;
        close(fd);
    }
    freeaddrinfo(res);
    if (result < 0)
        return ddpl_error("init_process_group: no local interface routes to MASTER_ADDR '%s'",
                          host);
    return 0;
}

/* Every member announces itself under prefix/join/<global rank> with the member list it was given
 * and waits for the others; on a timeout the error (for fname) lists the (global) ranks whose
 * keys never appeared. Members of a subgroup given other lists (new_group called with other
 * ranks on some rank) are an error naming both lists, not a hang: each member reads every
 * member's list (one store round trip per member, at creation only); the world's list is the
 * same everywhere by construction and is not compared. */
static int join_all(ddpl_pg *pg, const char *prefix, const char *fname)
{
    ddpl_store *st = pg->store;
    int size = pg->size;
    double timeout_s = pg->timeout_s;
    size_t list_n = pg->group_id ? (size_t)size * 12 + 32 : 2;
    char *list = ddpl_xmalloc(list_n), key[256];
    if (pg->group_id)
        pg_ranks_str(pg, list, list_n, size);
    else
        strcpy(list, "1");
    snprintf(key, sizeof key, "%sjoin/%d", prefix, pg->my_global);
    char **keys = ddpl_xcalloc((size_t)size, sizeof *keys);
    for (int r = 0; r < size; r++) {
        keys[r] = ddpl_xmalloc(256);
        snprintf(keys[r], 256, "%sjoin/%d", prefix, ddpl_pg_global_rank(pg, r));
    }
    int rc = ddpl_store_set(st, key, list, strlen(list));
    if (rc == 0 && ddpl_store_wait(st, size, (const char *const *)keys, timeout_s) < 0) {
        rc = -1;
        char missing[512] = "";
        size_t used = 0;
        int nmissing = 0;
        for (int r = 0; r < size; r++) {
            bool present = true;
            if (ddpl_store_check(st, 1, (const char *const *)&keys[r], &present) < 0) continue;
            if (present) continue;
            nmissing++;
            if (used < sizeof missing - 16)
                used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d",
                                         nmissing > 1 ? ", " : "", ddpl_pg_global_rank(pg, r));
        }
        if (pg->group_id == 0)
            ddpl_error("%s: timed out after %g s waiting for %s %s to join "
                       "(rank %d of world_size %d)",
                       fname, timeout_s, nmissing == 1 ? "rank" : "ranks", nmissing ? missing : "?",
                       pg->rank, size);
        else
            ddpl_error("%s: timed out after %g s waiting for %s %s to create process group %d "
                       "(every rank of the world must call new_group, in the same order; rank "
                       "%d)",
                       fname, timeout_s, nmissing == 1 ? "rank" : "ranks", nmissing ? missing : "?",
                       pg->group_id, pg->my_global);
    }
    for (int r = 0; r < size && rc == 0 && pg->group_id != 0; r++) {
        void *v = NULL;
        size_t len = 0;
        rc = ddpl_store_get(st, keys[r], &v, &len);
        if (rc == 0 && (len != strlen(list) || memcmp(v, list, len) != 0))
            rc = ddpl_error("%s: the ranks disagree on process group %d: rank %d was given "
                            "ranks [%.200s], rank %d ranks [%.*s] (every rank of the world must "
                            "call new_group with the same ranks, in the same order)",
                            fname, pg->group_id, pg->my_global, list, ddpl_pg_global_rank(pg, r),
                            (int)(len < 200 ? len : 200), (const char *)v);
        free(v);
    }
    for (int r = 0; r < size; r++) free(keys[r]);
    free(keys);
    free(list);
    return rc;
}

/* INFO: one line per group made: its id, global ranks, backend and transport. */
static void log_group(const ddpl_pg *pg)
{
    if (ddpl_pg_debug_level() < DDPL_PG_DEBUG_INFO) return;
    char ranks[512];
    pg_ranks_str(pg, ranks, sizeof ranks, 64);
    const char *transport = pg->rank < 0             ? "none (not a member)"
                            : pg->backend->transport ? pg->backend->transport(pg)
                                                     : pg->backend->name;
    fprintf(stderr,
            "ddplua: rank %d: process group %d: ranks [%s], backend %s, transport %s, "
            "timeout %g s\n",
            pg->my_global, pg->group_id, ranks, pg->backend->name, transport, pg->timeout_s);
}

/* ------------------------------------------------------------ the world's store ---- */
/* destroy_process_group() then init_process_group() in the same processes (issue 30): had rank 0
 * closed the store server it hosts at destroy, a faster rank's next init could reach the old
 * server before it closed, write its keys there and wait for ever; and the keys of the previous
 * group (its Gloo addresses) would answer the next one's rendezvous. So rank 0 keeps its server
 * for the life of the process, reused by the next init at the same address, port and token and
 * freed when an init asks for another; and every world group after a process's first puts its
 * keys under "i<N>/" (N: the world groups this process has made), which every rank counts alike
 * as every rank makes the same sequence of init and destroy calls (as in PyTorch). A few
 * kilobytes of a finished group's keys stay in the server. Init and destroy run on one thread. */
static ddpl_store *kept_store; /* rank 0's, between a destroy and the next init */
static char *kept_id;          /* its "address:port:token" */
static int worlds_made;

/* A forked child has the kept store's memory but not its server thread: it must never free it
 * (a DataLoader worker, or a test's forked ranks). */
static void forget_kept_store(void)
{
    kept_store = NULL;
    kept_id = NULL;
}

/* At exit the kept server lets the clients still connected finish first, as freeing it at
 * destroy did (ddpl_store_free drains them): a rank that destroys its group and exits while the
 * others still read keys (one outside a subgroup being made) must not cut them off. */
static void drain_kept_store(void)
{
    ddpl_store_free(kept_store);
    free(kept_id);
    forget_kept_store();
}

static void watch_forks_and_exit(void)
{
    pthread_atfork(NULL, NULL, forget_kept_store);
    atexit(drain_kept_store);
}

/* The store of a new world group for cfg, and (rank 0 hosting it) its id for world_store_put;
 * NULL with the error set. */
static ddpl_store *world_store_get(const ddpl_pg_config *cfg, double timeout, char **id)
{
    bool hosts = cfg->rank == 0 && !cfg->agent_store;
    *id = NULL;
    if (hosts) {
        size_t n = strlen(cfg->master_addr) + (cfg->token ? strlen(cfg->token) : 0) + 32;
        *id = ddpl_xmalloc(n);
        snprintf(*id, n, "%s:%d:%s", cfg->master_addr, cfg->master_port,
                 cfg->token ? cfg->token : "");
    }
    if (kept_store && hosts && strcmp(kept_id, *id) == 0) {
        ddpl_store *st = kept_store;
        kept_store = NULL;
        ddpl_store_set_timeout(st, timeout);
        return st;
    }
    ddpl_store_free(kept_store); /* another address: its port is free again */
    kept_store = NULL;
    return ddpl_store_create(cfg->master_addr, cfg->master_port, hosts, timeout, cfg->token);
}

/* Freeing its store used to let the other ranks finish with it (the server drains its clients):
 * a rank that leaves while the others still read keys must not cut them off. Kept, it cannot
 * drain (the next round's clients may be connected already), so the leaving is said in keys of
 * this round instead: every other rank sets bye/<rank> as it lets go, and rank 0 waits for them
 * (at most BYE_WAIT_S: a rank that died never says it) before keeping the server. */
#define BYE_WAIT_S 3.0

/* The world group's store at ddpl_pg_free: rank 0's is kept for the next init once the others
 * let go of it, a client's freed after saying so. */
static void world_store_put(ddpl_pg *pg)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    double wait_s = pg->timeout_s < BYE_WAIT_S ? pg->timeout_s : BYE_WAIT_S;
    char key[32];
    ddpl_store_set_timeout(pg->store, wait_s);
    if (pg->store_id && pg->size > 1) {
        /* until every other rank said bye, or none is connected any more (they exited) */
        char **keys = ddpl_xcalloc((size_t)pg->size - 1, sizeof *keys);
        for (int r = 1; r < pg->size; r++) {
            snprintf(key, sizeof key, "bye/%d", r);
            keys[r - 1] = strdup(key);
        }
        struct timespec pause = {0, 5 * 1000 * 1000}, t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;;) {
            bool all = false;
            if (ddpl_store_check(pg->store, pg->size - 1, (const char *const *)keys, &all) < 0 ||
                all || ddpl_store_others_connected(pg->store) == 0)
                break;
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) > wait_s)
                break;
            nanosleep(&pause, NULL);
        }
        for (int r = 1; r < pg->size; r++) free(keys[r - 1]);
        free(keys);
    } else if (!pg->store_id && pg->rank > 0) {
        snprintf(key, sizeof key, "bye/%d", pg->rank);
        (void)ddpl_store_set(pg->store, key, "1", 1); /* rank 0 may be gone: then nobody waits */
    }
    if (pg->store_id && !kept_store) {
        pthread_once(&once, watch_forks_and_exit);
        kept_store = pg->store;
        free(kept_id);
        kept_id = pg->store_id;
        pg->store_id = NULL;
    } else {
        ddpl_store_free(pg->store);
    }
    pg->store = NULL;
}

/* The key prefix of this process's next world group: the launcher's (an elastic attempt's),
 * then "i<N>/" from the second group on. */
static int world_prefix(ddpl_store *st, const char *key_prefix)
{
    size_t n = key_prefix ? strlen(key_prefix) : 0;
    char *prefix = ddpl_xmalloc(n + 16);
    snprintf(prefix, n + 16, "%s", key_prefix ? key_prefix : "");
    if (++worlds_made > 1) snprintf(prefix + n, 16, "i%d/", worlds_made);
    int rc = ddpl_store_set_prefix(st, prefix[0] ? prefix : NULL);
    free(prefix);
    return rc;
}

/* The backends of this build, by name; a backend that is not built is not compiled in. Adding
 * one is its file(s) and a line here. */
static const struct ddpl_pg_backend *const backends[] = {
    &pg_host_backend,
#if DDPL_HAVE_NCCL
    &pg_nccl_backend,
#endif
};

enum { MAX_ADDED = 4 };
static const struct ddpl_pg_backend *added[MAX_ADDED]; /* pg_backend_add's, in order */
static int n_added;

/* The backend named `name`, built in or added; NULL when there is none. */
static const struct ddpl_pg_backend *backend_named(const char *name)
{
    for (size_t i = 0; i < sizeof backends / sizeof *backends; i++)
        if (strcmp(backends[i]->name, name) == 0) return backends[i];
    for (int i = 0; i < n_added; i++)
        if (strcmp(added[i]->name, name) == 0) return added[i];
    return NULL;
}

int pg_backend_add(const struct ddpl_pg_backend *b)
{
    if (!b || !b->name || !b->connect || !b->free || !b->check_tensor)
        return ddpl_error("pg_backend_add: a backend needs a name, connect, free and "
                          "check_tensor");
    if (backend_named(b->name))
        return ddpl_error("pg_backend_add: a backend named '%s' exists already", b->name);
    if (n_added == MAX_ADDED)
        return ddpl_error("pg_backend_add: at most %d backends can be added", MAX_ADDED);
    added[n_added++] = b;
    return 0;
}

/* Why this build lacks the backend `name` that another build has; NULL when it does not. */
static const char *not_built(const char *name)
{
#if !DDPL_HAVE_NCCL
    if (strcmp(name, "nccl") == 0)
        return DDPL_HAVE_CUDA ? "this build of ddplua has no NCCL (configure found no nccl.h; set "
                                "NCCL_ROOT to an NCCL installation, or install the nvidia-nccl "
                                "Python package, and reconfigure)"
                              : "this build of ddplua has no NCCL (it was built without CUDA; "
                                "rebuild with the CUDA toolkit, cmake -DDDPL_CUDA=ON)";
#endif
    DDPL_UNUSED(name);
    return NULL;
}

/* The table named `name`, or NULL with the error init_process_group gives. */
static const struct ddpl_pg_backend *find_backend(const char *name)
{
    const char *fname = "init_process_group";
    const struct ddpl_pg_backend *b = backend_named(name);
    if (b) return b->available && b->available(fname) < 0 ? NULL : b;
    const char *why = not_built(name);
    if (why) {
        ddpl_error("%s: backend '%s' is not available: %s; use backend='gloo' for CPU tensors",
                   fname, name, why);
        return NULL;
    }
    ddpl_error("%s: unknown backend '%s' (expected 'gloo' or 'nccl')", fname, name);
    return NULL;
}

int ddpl_pg_backend_check(const char *backend)
{
    return find_backend(backend) ? 0 : -1;
}

ddpl_pg *ddpl_pg_create(const ddpl_pg_config *cfg)
{
    const struct ddpl_pg_backend *backend = find_backend(cfg->backend ? cfg->backend : "gloo");
    if (!backend) return NULL;
    if (cfg->world_size < 1 || cfg->rank < 0 || cfg->rank >= cfg->world_size) {
        ddpl_error("init_process_group: rank %d is out of range for world_size %d", cfg->rank,
                   cfg->world_size);
        return NULL;
    }
    if (!cfg->master_addr || !cfg->master_addr[0] || cfg->master_port <= 0 ||
        cfg->master_port > 65535) {
        ddpl_error("init_process_group: need MASTER_ADDR and MASTER_PORT (1..65535), got "
                   "'%s':%d",
                   cfg->master_addr ? cfg->master_addr : "", cfg->master_port);
        return NULL;
    }
    double timeout = cfg->timeout_s > 0 ? cfg->timeout_s : 1800.0;
    char bind[256];
    if (local_address_towards(cfg->master_addr, cfg->master_port, bind, sizeof bind) < 0)
        return NULL;

    ddpl_pg *pg = ddpl_xcalloc(1, sizeof *pg);
    pg->rank = cfg->rank;
    pg->my_global = cfg->rank;
    pg->size = cfg->world_size;
    pg->timeout_s = timeout;
    pg->heartbeat_s = cfg->heartbeat_s;
    pg->agent_store = cfg->agent_store;
    pg->owns_store = true;
    snprintf(pg->bind, sizeof pg->bind, "%s", bind);
    pthread_mutex_init(&pg->broken_mu, NULL);
    pg->store = world_store_get(cfg, timeout, &pg->store_id);
    if (!pg->store) {
        char e[768];
        snprintf(e, sizeof e, "%s", ddpl_last_error());
        ddpl_error("init_process_group: %s (rank %d could not reach the store that %s hosts at "
                   "%s:%d)",
                   e, cfg->rank, cfg->agent_store ? "the launcher" : "rank 0", cfg->master_addr,
                   cfg->master_port);
        goto fail;
    }
    if (world_prefix(pg->store, cfg->key_prefix) < 0) goto fail;
    const char *prefix = "pg0/";
    if (join_all(pg, prefix, "init_process_group") < 0) goto fail;
    /* every rank is known to be there (join_all names the missing ones on a timeout) before a
     * backend's own rendezvous starts; that one is bounded by the timeout too (NCCL's
     * non-blocking init, nccl_pg.c), for a rank that dies in between or a bootstrap network
     * that does not connect */
    pg->backend = backend;
    if (backend->connect(pg, prefix, bind) < 0) goto fail;
    log_group(pg);
    return pg;
fail:
    ddpl_pg_free(pg);
    return NULL;
}

ddpl_pg *ddpl_pg_new_group(ddpl_pg *world, int n, const int *ranks, double timeout_s)
{
    const char *f = "new_group";
    if (world->group_id != 0) {
        ddpl_error("%s: groups are made from the default group, not from group %d", f,
                   world->group_id);
        return NULL;
    }
    if (n < 1 || n > world->size) {
        ddpl_error("%s: expected 1 to %d ranks (world_size), got %d", f, world->size, n);
        return NULL;
    }
    int me = -1;
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= world->size) {
            ddpl_error("%s: rank %d is out of range for world_size %d", f, ranks[i], world->size);
            return NULL;
        }
        for (int j = 0; j < i; j++)
            if (ranks[j] == ranks[i]) {
                ddpl_error("%s: rank %d is listed twice", f, ranks[i]);
                return NULL;
            }
        if (ranks[i] == world->rank) me = i;
    }
    ddpl_pg *pg = ddpl_xcalloc(1, sizeof *pg);
    /* every rank of the world counts every group, members or not: ids agree across ranks */
    pg->group_id = ++world->n_groups;
    pg->rank = me;
    pg->my_global = world->rank;
    pg->size = n;
    pg->global_ranks =
        memcpy(ddpl_xmalloc((size_t)n * sizeof *ranks), ranks, (size_t)n * sizeof *ranks);
    pg->timeout_s = timeout_s > 0 ? timeout_s : world->timeout_s;
    pg->heartbeat_s = world->heartbeat_s;
    pg->agent_store = world->agent_store;
    pg->store = world->store;
    pg->backend = world->backend;
    pthread_mutex_init(&pg->broken_mu, NULL);
    if (me >= 0) {
        /* its own keys, gloo mesh and shared-memory segment under its own prefix */
        char prefix[32];
        snprintf(prefix, sizeof prefix, "pg%d/", pg->group_id);
        if (join_all(pg, prefix, f) < 0 || pg->backend->connect(pg, prefix, world->bind) < 0) {
            char e[1024];
            snprintf(e, sizeof e, "%s", ddpl_last_error());
            ddpl_pg_free(pg);
            ddpl_error("%s%s", strncmp(e, "new_group:", 10) == 0 ? "" : "new_group: ", e);
            return NULL;
        }
    }
    log_group(pg);
    return pg;
}

void ddpl_pg_free(ddpl_pg *pg)
{
    if (!pg) return;
    /* Queued operations finish first (as PyTorch's destructor does), each bounded by the
     * timeout. Should the backend still be stuck after that, the group is leaked rather than
     * freed under a running thread, so that freeing never hangs past the timeout nor crashes. */
    if (pg->backend && !pg->backend->free(pg)) return;
    if (pg->store && pg->owns_store) world_store_put(pg);
    free(pg->store_id);
    free(pg->global_ranks);
    free(pg->broken);
    pthread_mutex_destroy(&pg->broken_mu);
    free(pg);
}

int ddpl_pg_rank(const ddpl_pg *pg)
{
    return pg->rank;
}
int ddpl_pg_size(const ddpl_pg *pg)
{
    return pg->size;
}
const char *ddpl_pg_backend(const ddpl_pg *pg)
{
    return pg->backend->name;
}
ddpl_device_type ddpl_pg_device_type(const ddpl_pg *pg)
{
    return pg->backend->device_type;
}
double ddpl_pg_timeout(const ddpl_pg *pg)
{
    return pg->timeout_s;
}
int ddpl_pg_group_id(const ddpl_pg *pg)
{
    return pg->group_id;
}
int ddpl_pg_global_rank(const ddpl_pg *pg, int group_rank)
{
    if (group_rank < 0 || group_rank >= pg->size) return -1;
    return pg->global_ranks ? pg->global_ranks[group_rank] : group_rank;
}
int ddpl_pg_group_rank(const ddpl_pg *pg, int global_rank)
{
    if (!pg->global_ranks) return global_rank >= 0 && global_rank < pg->size ? global_rank : -1;
    for (int r = 0; r < pg->size; r++)
        if (pg->global_ranks[r] == global_rank) return r;
    return -1;
}
