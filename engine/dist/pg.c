/* dist/pg.c: process groups: the backends of this build, creation (rendezvous through the
 * store, then the backend's connect), the lanes (worker threads) that run host operations in
 * issue order, and work handles (a backend with work hooks completes its own: NCCL's).
 * defines: ddpl_pg_backend_check, ddpl_pg_create/free and the group queries, ddpl_work_*,
 *          pg_work_new, pg_work_slot, pg_work_finish, pg_lane_push, pg_lanes_start,
 *          pg_strided_copy (pg_impl.h). The operations are in pg_ops.c.
 *
 * A group has three lanes, each a FIFO queue with its own thread: the collective lane runs
 * collectives one by one (so every rank runs them in issue order); the send and receive lanes
 * complete point-to-point messages that were posted to Gloo when they were issued. A work item
 * holds references to its tensors until it completes. The engine's error message is
 * thread-local, so a lane records the failing call's message in the work item, where the
 * caller's wait finds it. */
#define _GNU_SOURCE /* pthread_condattr_setclock, getaddrinfo */
#include <errno.h>
#include <netdb.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dist/pg_impl.h"

/* ------------------------------------------------------------------ staging copies ---- */
/* Walks the elements of t in row-major order, copying each between the tensor's memory and a
 * contiguous buffer (to_buf: tensor -> buf). */
void pg_strided_copy(const ddpl_tensor *t, char *buf, bool to_buf)
{
    size_t es = ddpl_dtype_size((ddpl_dtype)t->dtype);
    int64_t n = ddpl_numel(t->ndim, t->sizes);
    int64_t idx[DDPL_MAX_DIMS] = {0};
    char *base = (char *)t->storage->data;
    for (int64_t i = 0; i < n; i++) {
        int64_t off = t->offset;
        for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
        if (to_buf)
            memcpy(buf + (size_t)i * es, base + (size_t)off * es, es);
        else
            memcpy(base + (size_t)off * es, buf + (size_t)i * es, es);
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->sizes[d]) break;
            idx[d] = 0;
        }
    }
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(ddpl_xmalloc(n), s, n);
}

ddpl_work *pg_work_new(ddpl_pg *pg, const char *name, int nslots, int (*run)(ddpl_work *))
{
    ddpl_work *w = ddpl_xcalloc(1, sizeof *w);
    atomic_init(&w->refcount, 1);
    w->name = name;
    w->run = run;
    w->pg = pg;
    w->backend = pg->backend;
    w->timeout_s = pg->timeout_s;
    w->nslots = nslots;
    w->slots = nslots ? ddpl_xcalloc((size_t)nslots, sizeof *w->slots) : NULL;
    w->quiet = pg->quiet_next;
    pg->quiet_next = false;
    w->fp = pg->next_fp; /* a collective's, set by pg_expect just before; else seq 0 */
    memset(&pg->next_fp, 0, sizeof pg->next_fp);
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    return w;
}

ddpl_work *ddpl_work_retain(ddpl_work *w)
{
    if (w) atomic_fetch_add(&w->refcount, 1);
    return w;
}

/* Drops the tensors and buffers (at completion, so a finished handle pins no memory). */
static void work_drop_args(ddpl_work *w)
{
    if (w->backend->work_drop) w->backend->work_drop(w);
    for (int i = 0; i < w->nslots; i++) {
        ddpl_tensor_release(w->slots[i].t);
        free(w->slots[i].stage);
    }
    free(w->slots);
    w->slots = NULL;
    w->nslots = 0;
    free(w->scratch);
    w->scratch = NULL;
}

void ddpl_work_release(ddpl_work *w)
{
    if (!w || atomic_fetch_sub(&w->refcount, 1) != 1) return;
    if (w->backend->work_release) w->backend->work_release(w); /* before the tensors go */
    work_drop_args(w);
    free(w->error);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

void pg_work_slot(ddpl_work *w, int i, ddpl_tensor *t, bool reads, bool writes)
{
    pg_slot *s = &w->slots[i];
    /* A plain view of t's storage rather than t itself: the lane thread may drop the last
     * reference, and a view has no autograd node or Lua hooks to free off the main thread. */
    s->t = ddpl_tensor_alias(t, t->ndim, t->sizes, t->strides, t->offset);
    s->write_back = writes;
    if (ddpl_tensor_is_contiguous(t)) {
        s->data = ddpl_data_ptr(t);
    } else {
        size_t n = ddpl_tensor_nbytes(t);
        s->stage = ddpl_xmalloc(n ? n : 1);
        if (reads) pg_strided_copy(t, s->stage, true);
        s->data = s->stage;
    }
}

void pg_work_finish(ddpl_work *w, const char *error)
{
    if (!error) {
        for (int i = 0; i < w->nslots; i++) {
            pg_slot *s = &w->slots[i];
            if (!s->write_back) continue;
            if (s->stage) pg_strided_copy(s->t, s->stage, false);
            ddpl_storage_bump_version(s->t->storage);
        }
    }
    work_drop_args(w);
    pthread_mutex_lock(&w->mu);
    w->error = error ? xstrdup(error) : NULL;
    w->done = true;
    w->pg = NULL;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void lane_run(ddpl_pg *pg, ddpl_work *w);

/* The waiter runs w itself when w is next in its lane and nothing of the lane is running: it
 * would only sleep until the lane's thread had done the same, and handing the work over and back
 * costs two thread switches (tens of microseconds: a DDP step of a small model pays them on its
 * last bucket). The lane's thread may wake meanwhile; it finds the lane busy and sleeps again. */
static void run_if_next(ddpl_work *w)
{
    pthread_mutex_lock(&w->mu);
    pg_lane *ln = w->done ? NULL : w->lane;
    ddpl_pg *pg = w->pg;
    pthread_mutex_unlock(&w->mu);
    if (!ln) return;
    pthread_mutex_lock(&ln->mu);
    bool mine = ln->head == w && !ln->busy;
    if (mine) {
        ln->head = w->next;
        if (!ln->head) ln->tail = NULL;
        ln->busy = true;
    }
    pthread_mutex_unlock(&ln->mu);
    if (!mine) return;
    lane_run(pg, w);
    pthread_mutex_lock(&ln->mu);
    ln->busy = false;
    if (ln->head) pthread_cond_signal(&ln->cv);
    pthread_mutex_unlock(&ln->mu);
    ddpl_work_release(w); /* the lane's reference */
}

/* A work queued quietly (ddpl_pg_wait_follows) that its caller polls, or waits for without
 * running it, must still reach the lane's thread. */
static void wake_lane_if_quiet(ddpl_work *w)
{
    pthread_mutex_lock(&w->mu);
    pg_lane *ln = w->quiet && !w->done ? w->lane : NULL;
    pthread_mutex_unlock(&w->mu);
    if (!ln) return;
    pthread_mutex_lock(&ln->mu);
    pthread_cond_signal(&ln->cv);
    pthread_mutex_unlock(&ln->mu);
}

int ddpl_work_wait(ddpl_work *w, double timeout_s)
{
    if (w->backend->work_wait) return w->backend->work_wait(w, timeout_s);
    /* running it here may take as long as the operation's own timeout: not for shorter waits */
    if (timeout_s < 0 || timeout_s >= w->timeout_s) run_if_next(w);
    wake_lane_if_quiet(w);
    if (timeout_s < 0) timeout_s = w->timeout_s + 10.0; /* the operation times out first */
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    double whole = (double)(int64_t)timeout_s;
    deadline.tv_sec += (time_t)whole;
    deadline.tv_nsec += (long)((timeout_s - whole) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    while (!w->done && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&w->cv, &w->mu, &deadline);
    bool done = w->done;
    pthread_mutex_unlock(&w->mu);
    if (!done)
        return ddpl_error("%s: wait timed out after %g s (the operation is still running)", w->name,
                          timeout_s);
    if (w->error) return ddpl_error("%s", w->error);
    return 0;
}

bool ddpl_work_is_completed(ddpl_work *w)
{
    if (w->backend->work_poll) w->backend->work_poll(w);
    wake_lane_if_quiet(w);
    pthread_mutex_lock(&w->mu);
    bool d = w->done;
    pthread_mutex_unlock(&w->mu);
    return d;
}

void ddpl_pg_wait_follows(ddpl_pg *pg)
{
    pg->quiet_next = true;
}

const char *ddpl_work_error(ddpl_work *w)
{
    if (w->backend->work_poll) w->backend->work_poll(w);
    pthread_mutex_lock(&w->mu);
    const char *e = w->done ? w->error : NULL;
    pthread_mutex_unlock(&w->mu);
    return e;
}

const char *ddpl_work_name(const ddpl_work *w)
{
    return w->name;
}

/* ---------------------------------------------------------------------------- lanes ---- */
static void *lane_main(void *arg);

typedef struct lane_arg {
    ddpl_pg *pg;
    pg_lane *ln;
} lane_arg;

static int lane_start(ddpl_pg *pg, pg_lane *ln)
{
    pthread_mutex_init(&ln->mu, NULL);
    pthread_cond_init(&ln->cv, NULL);
    lane_arg *a = ddpl_xmalloc(sizeof *a);
    *a = (lane_arg){pg, ln};
    if (pthread_create(&ln->thread, NULL, lane_main, a) != 0) {
        free(a);
        return ddpl_error("init_process_group: cannot start a worker thread");
    }
    ln->started = true;
    return 0;
}

int pg_lanes_start(ddpl_pg *pg)
{
    if (lane_start(pg, &pg->coll) < 0 || lane_start(pg, &pg->send) < 0 ||
        lane_start(pg, &pg->recv) < 0)
        return -1;
    return 0;
}

ddpl_work *pg_lane_push(pg_lane *ln, ddpl_work *w)
{
    ddpl_work_retain(w);
    w->lane = ln;
    pthread_mutex_lock(&ln->mu);
    w->next = NULL;
    if (ln->tail)
        ln->tail->next = w;
    else
        ln->head = w;
    ln->tail = w;
    if (!w->quiet) pthread_cond_signal(&ln->cv);
    pthread_mutex_unlock(&ln->mu);
    return w;
}

/* Runs w (taken off its lane by the caller) and completes it. */
static void lane_run(ddpl_pg *pg, ddpl_work *w)
{
    char msg[1024];
    const char *error = NULL;
    pthread_mutex_lock(&pg->broken_mu);
    bool broken = pg->broken != NULL;
    if (broken)
        snprintf(msg, sizeof msg, "%s: the process group is unusable after an earlier failure (%s)",
                 w->name, pg->broken);
    pthread_mutex_unlock(&pg->broken_mu);
    /* the fingerprint is compared before the operation touches data (pg_backend.h: agree) */
    /* a send's or receive's peer is a group rank; the collective lane waits for every peer */
    bool p2p = w->lane != &pg->coll && w->peer >= 0 && w->peer < pg->size;
    atomic_int *running = p2p ? &pg->p2p_running[w->peer] : &pg->coll_running;
    atomic_fetch_add(running, 1);
    if (broken) {
        error = msg;
    } else if ((w->fp.seq && pg->backend->agree && pg->backend->agree(w) < 0) || w->run(w) < 0) {
        char failed[768], fault[768];
        snprintf(failed, sizeof failed, "%s", ddpl_last_error());
        /* a fault the backend knows (a silent peer) explains the failure better than what the
         * transport saw of it (a closed connection) */
        const char *e =
            pg->backend->fault && pg->backend->fault(pg, fault, sizeof fault) ? fault : failed;
        /* messages of the backend do not name the API call: prefix it */
        size_t n = strlen(w->name);
        if (strncmp(e, w->name, n) == 0 && e[n] == ':')
            snprintf(msg, sizeof msg, "%s", e);
        else
            snprintf(msg, sizeof msg, "%s: %s (rank %d of %d)", w->name, e, pg->rank, pg->size);
        error = msg;
        pthread_mutex_lock(&pg->broken_mu);
        if (!pg->broken && !w->harmless) pg->broken = xstrdup(msg);
        pthread_mutex_unlock(&pg->broken_mu);
    }
    atomic_fetch_sub(running, 1);
    pg_work_finish(w, error);
}

/* Runs queued work until stopped and drained. */
static void *lane_main(void *arg)
{
    lane_arg a = *(lane_arg *)arg;
    free(arg);
    for (;;) {
        pthread_mutex_lock(&a.ln->mu);
        while ((!a.ln->head || a.ln->busy) && !(a.ln->stop && !a.ln->head))
            pthread_cond_wait(&a.ln->cv, &a.ln->mu);
        ddpl_work *w = a.ln->head;
        if (w) {
            a.ln->head = w->next;
            if (!a.ln->head) a.ln->tail = NULL;
            a.ln->busy = true;
        }
        pthread_mutex_unlock(&a.ln->mu);
        if (!w) break;
        lane_run(a.pg, w);
        pthread_mutex_lock(&a.ln->mu);
        a.ln->busy = false;
        pthread_mutex_unlock(&a.ln->mu);
        ddpl_work_release(w);
    }
    return NULL;
}

/* Lets the lane finish its queue, then joins it; false when it is still busy after wait_s (an
 * operation stuck on a peer that is gone), in which case the thread is left running. */
static bool lane_stop(pg_lane *ln, double wait_s)
{
    if (!ln->started) return true;
    pthread_mutex_lock(&ln->mu);
    ln->stop = true;
    pthread_cond_signal(&ln->cv);
    pthread_mutex_unlock(&ln->mu);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline); /* pthread_timedjoin_np takes CLOCK_REALTIME */
    deadline.tv_sec += (time_t)wait_s + 1;
    if (pthread_timedjoin_np(ln->thread, NULL, &deadline) != 0) return false;
    pthread_mutex_destroy(&ln->mu);
    pthread_cond_destroy(&ln->cv);
    ln->started = false;
    return true;
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

/* The backends of this build, by name; a backend that is not built is not compiled in. */
static const struct ddpl_pg_backend *const backends[] = {
    &pg_host_backend,
#if DDPL_HAVE_NCCL
    &pg_nccl_backend,
#endif
};

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
    for (size_t i = 0; i < sizeof backends / sizeof *backends; i++) {
        if (strcmp(backends[i]->name, name) != 0) continue;
        if (backends[i]->available && backends[i]->available(fname) < 0) return NULL;
        return backends[i];
    }
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
    pg->p2p_running = ddpl_xcalloc((size_t)pg->size, sizeof *pg->p2p_running);
    pg->timeout_s = timeout;
    pg->heartbeat_s = cfg->heartbeat_s;
    pg->agent_store = cfg->agent_store;
    pg->owns_store = true;
    snprintf(pg->bind, sizeof pg->bind, "%s", bind);
    pthread_mutex_init(&pg->broken_mu, NULL);
    pg->store = ddpl_store_create(cfg->master_addr, cfg->master_port,
                                  cfg->rank == 0 && !cfg->agent_store, timeout, cfg->token);
    if (!pg->store) {
        char e[768];
        snprintf(e, sizeof e, "%s", ddpl_last_error());
        ddpl_error("init_process_group: %s (rank %d could not reach the store that %s hosts at "
                   "%s:%d)",
                   e, cfg->rank, cfg->agent_store ? "the launcher" : "rank 0", cfg->master_addr,
                   cfg->master_port);
        goto fail;
    }
    if (ddpl_store_set_prefix(pg->store, cfg->key_prefix) < 0) goto fail;
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
    pg->p2p_running = ddpl_xcalloc((size_t)n, sizeof *pg->p2p_running);
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
     * timeout. Should a lane still be stuck after that, the group is leaked rather than freed
     * under a running thread, so that freeing never hangs past the timeout nor crashes. */
    double wait_s = pg->timeout_s + 5.0;
    bool stopped = lane_stop(&pg->coll, wait_s);
    stopped = lane_stop(&pg->send, stopped ? wait_s : 0.0) && stopped;
    stopped = lane_stop(&pg->recv, stopped ? wait_s : 0.0) && stopped;
    if (!stopped) return;
    if (pg->backend) pg->backend->free(pg);
    if (pg->store && pg->owns_store) ddpl_store_free(pg->store);
    free(pg->global_ranks);
    free(pg->p2p_running);
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
