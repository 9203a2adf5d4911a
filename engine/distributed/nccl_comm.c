/* distributed/nccl_comm.c: the NCCL communicator of a process group (nccl_comm.h): creation through
 * the store, the bounded waits of a non-blocking communicator, failure state, destruction.
 * defines: nccl_comm_* (nccl_comm.h). The operations on it are distributed/nccl_pg.c's.
 *
 * One communicator per group, bound to one device: the calling thread's current CUDA device at
 * init (ddpl.cuda.set_device(LOCAL_RANK) first, as torchrun users do with PyTorch). Rank 0
 * creates the ncclUniqueId and publishes it in the store under "<prefix>nccl/id"; every rank
 * reads it and calls ncclCommInitRankConfig on that device. The communicator is non-blocking
 * (config.blocking = 0) so that init is bounded by the group's timeout instead of hanging on a
 * peer that never joins: any NCCL call on it may return ncclInProgress, and nccl_comm_settle()
 * then waits (bounded) for the communicator's state to leave ncclInProgress before anything
 * else is called or recorded on its stream. A first allreduce, waited for on the host, proves
 * the communicator works on every rank before init returns.
 *
 * Threads: the communicator's mutex guards its failure state (broken, and comm once aborted). */
#define _GNU_SOURCE /* nanosleep */
#include <time.h>

#include "cuda/cuda_dynlib.h"
#include "ddpl/cuda.h"
#include "distributed/nccl_comm.h"

ddpl_nccl *nccl_comm_retain(ddpl_nccl *c)
{
    atomic_fetch_add(&c->refcount, 1);
    return c;
}

/* Frees what is left of c at its last reference (the communicator is gone by then). */
void nccl_comm_release(ddpl_nccl *c)
{
    if (atomic_fetch_sub(&c->refcount, 1) != 1) return;
    /* restore the thread's device only when it could be read: restoring a guess (device 0)
     * would move a thread that works on another GPU */
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
    cudaSetDevice(c->device);
    if (c->one) cudaFree(c->one);
    if (c->ready) cudaEventDestroy(c->ready);
    if (c->stream) cudaStreamDestroy(c->stream);
    if (prev >= 0) cudaSetDevice(prev);
    free(c->broken);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* ------------------------------------------------------------------------ errors ---- */
/* NCCL's own detail for the last failure (may be empty). */
static const char *last_detail(const ddpl_nccl *c)
{
    const char *d = c && c->comm ? CUDA_DL(CUDA_LIB_NCCL, ncclGetLastError)(c->comm)
                                 : CUDA_DL(CUDA_LIB_NCCL, ncclGetLastError)(NULL);
    return d ? d : "";
}

/* "<fname>: NCCL <what> failed on rank R of N (cuda:D): <string> (<detail>)" */
int nccl_comm_fail(const ddpl_nccl *c, ncclResult_t r, const char *fname, const char *what)
{
    const char *d = last_detail(c);
    const char *hint = "";
    if (r == ncclInvalidUsage && c && c->size > 1)
        hint = " (did every rank call ddpl.cuda.set_device(LOCAL_RANK) before "
               "init_process_group? two ranks may not share a GPU)";
    return ddpl_error("%s: NCCL %s failed on rank %d of %d (cuda:%d): %s%s%s%s%s", fname, what,
                      c ? c->rank : -1, c ? c->size : 0, c ? c->device : -1,
                      CUDA_DL(CUDA_LIB_NCCL, ncclGetErrorString)(r), d[0] ? " (" : "", d,
                      d[0] ? ")" : "", hint);
}

int nccl_comm_cuda_fail(const ddpl_nccl *c, cudaError_t e, const char *fname, const char *what)
{
    cudaGetLastError(); /* clear a non-sticky error */
    return ddpl_error("%s: %s failed on rank %d of %d (cuda:%d): %s (%s)", fname, what,
                      c ? c->rank : -1, c ? c->size : 0, c ? c->device : -1, cudaGetErrorName(e),
                      cudaGetErrorString(e));
}

/* Records the current error as c's first failure and aborts the communicator, so kernels stuck
 * on a peer stop and later operations fail at once. Called with c->mu held. */
static void break_locked(ddpl_nccl *c)
{
    if (!c->broken) c->broken = ddpl_xstrdup(ddpl_last_error());
    if (c->comm) {
        CUDA_DL(CUDA_LIB_NCCL, ncclCommAbort)(c->comm);
        c->comm = NULL;
    }
}

void nccl_comm_break(ddpl_nccl *c)
{
    pthread_mutex_lock(&c->mu);
    break_locked(c);
    pthread_mutex_unlock(&c->mu);
}

/* 0 while c is healthy; -1 with the error for fname when it failed before or has an
 * asynchronous error now (a peer died, a network failure), which then breaks it. */
int nccl_comm_check_health(ddpl_nccl *c, const char *fname)
{
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    if (c->broken) {
        rc = ddpl_error("%s: the process group is unusable after an earlier failure (%s)", fname,
                        c->broken);
    } else if (!c->comm) {
        rc = ddpl_error("%s: the process group was destroyed", fname);
    } else {
        ncclResult_t ar = ncclSuccess;
        ncclResult_t r = CUDA_DL(CUDA_LIB_NCCL, ncclCommGetAsyncError)(c->comm, &ar);
        if (r == ncclSuccess && ar != ncclSuccess && ar != ncclInProgress) {
            const char *d = last_detail(c);
            rc = ddpl_error("%s: NCCL asynchronous error on rank %d of %d (cuda:%d): %s%s%s%s",
                            fname, c->rank, c->size, c->device,
                            CUDA_DL(CUDA_LIB_NCCL, ncclGetErrorString)(ar), d[0] ? " (" : "", d,
                            d[0] ? ")" : "");
            break_locked(c);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ------------------------------------------------------------- device and polling ---- */
/* Makes c's device current; *prev receives the one to restore (CUDA's own current device: the
 * engine's allocator may have changed it). */
int nccl_comm_enter(const ddpl_nccl *c, int *prev, const char *fname)
{
    cudaError_t e = cudaGetDevice(prev);
    if (e != cudaSuccess) return nccl_comm_cuda_fail(c, e, fname, "cudaGetDevice");
    e = cudaSetDevice(c->device);
    return e == cudaSuccess ? 0 : nccl_comm_cuda_fail(c, e, fname, "cudaSetDevice");
}

void nccl_comm_leave(int prev)
{
    cudaSetDevice(prev);
}

/* Polls until `done` holds (1), fails (-1, error set) or timeout_s passes (0). Sleeps 50 us
 * growing to 2 ms between polls: a barrier is latency-bound, a stuck peer is not. */
static int poll_until(int (*done)(void *), void *arg, double timeout_s)
{
    struct timespec t0, now, nap = {0, 50000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int d = done(arg);
        if (d != 0) return d;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double el = (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec);
        if (el > timeout_s) return 0;
        nanosleep(&nap, NULL);
        if (nap.tv_nsec < 2000000) nap.tv_nsec *= 2;
    }
}

typedef struct stream_poll {
    ddpl_nccl *c;
    cudaStream_t s;
    cudaEvent_t ev; /* poll this event instead when set */
    const char *fname;
} stream_poll;

static int stream_done(void *arg)
{
    stream_poll *p = arg;
    cudaError_t e = p->ev ? cudaEventQuery(p->ev) : cudaStreamQuery(p->s);
    if (e == cudaSuccess) return 1;
    if (e != cudaErrorNotReady) {
        nccl_comm_cuda_fail(p->c, e, p->fname, p->ev ? "cudaEventQuery" : "cudaStreamQuery");
        return -1;
    }
    return nccl_comm_check_health(p->c, p->fname) < 0 ? -1 : 0;
}

/* Polls (bounded by timeout_s) until the event ev, or the stream s when ev is NULL, completes:
 * 1 done, 0 timed out, -1 failed (the error set; an asynchronous NCCL error breaks c). */
int nccl_comm_poll_stream(ddpl_nccl *c, cudaStream_t s, cudaEvent_t ev, const char *fname,
                          double timeout_s)
{
    stream_poll p = {c, s, ev, fname};
    return poll_until(stream_done, &p, timeout_s);
}

/* 1 once the communicator's state has left ncclInProgress with success, 0 while in progress,
 * -1 (error set for what) when the call that returned ncclInProgress failed. */
typedef struct settle_poll {
    ddpl_nccl *c;
    const char *fname, *what;
} settle_poll;

static int comm_settled(void *arg)
{
    settle_poll *p = arg;
    ncclResult_t state = ncclInProgress;
    ncclResult_t r = CUDA_DL(CUDA_LIB_NCCL, ncclCommGetAsyncError)(p->c->comm, &state);
    if (r != ncclSuccess) return nccl_comm_fail(p->c, r, p->fname, "ncclCommGetAsyncError");
    if (state == ncclInProgress) return 0;
    return state == ncclSuccess ? 1 : nccl_comm_fail(p->c, state, p->fname, p->what);
}

/* Waits, bounded by the group's timeout, until the NCCL call `what` that returned ncclInProgress
 * has finished. 0, or -1 with the error set and the communicator broken (aborted): a peer that
 * never joins the init, or a call that cannot complete, leaves the ranks out of step. */
int nccl_comm_settle(ddpl_nccl *c, const char *fname, const char *what)
{
    settle_poll p = {c, fname, what};
    int d = poll_until(comm_settled, &p, c->timeout_s);
    if (d == 1) return 0;
    if (d == 0)
        ddpl_error("%s: NCCL %s did not complete within %g s on rank %d of %d (cuda:%d): a peer "
                   "did not join or is stuck (the group's timeout bounds it)",
                   fname, what, c->timeout_s, c->rank, c->size, c->device);
    nccl_comm_break(c);
    return -1;
}

/* ----------------------------------------------------------------- communicator ---- */
/* The id is rank 0's: it publishes it, the others wait for it (bounded by the timeout). */
static int exchange_id(ddpl_store *st, const char *prefix, int rank, double timeout_s,
                       ncclUniqueId *id)
{
    char key[256];
    snprintf(key, sizeof key, "%snccl/id", prefix);
    if (rank == 0) {
        ncclResult_t r = CUDA_DL(CUDA_LIB_NCCL, ncclGetUniqueId)(id);
        if (r != ncclSuccess)
            return nccl_comm_fail(NULL, r, "init_process_group", "ncclGetUniqueId");
        if (ddpl_store_set(st, key, id, sizeof *id) < 0) return -1;
        return 0;
    }
    const char *keys[1] = {key};
    if (ddpl_store_wait(st, 1, keys, timeout_s) < 0) {
        char e[512];
        snprintf(e, sizeof e, "%s", ddpl_last_error());
        return ddpl_error("init_process_group: rank %d did not get rank 0's NCCL id within %g s: "
                          "%s",
                          rank, timeout_s, e);
    }
    void *v = NULL;
    size_t n = 0;
    if (ddpl_store_get(st, key, &v, &n) < 0) return -1;
    int rc = 0;
    if (n != sizeof *id)
        rc = ddpl_error("init_process_group: rank 0's NCCL id has %zu bytes, expected %zu "
                        "(ranks built with different NCCL versions?)",
                        n, sizeof *id);
    else
        memcpy(id, v, sizeof *id);
    free(v);
    return rc;
}

ncclResult_t nccl_comm_enqueue_barrier(ddpl_nccl *c, cudaStream_t s)
{
    return CUDA_DL(CUDA_LIB_NCCL, ncclAllReduce)(c->one, c->one, 1, ncclFloat32, ncclSum, c->comm,
                                                 s);
}

/* The barrier of init (before any group exists): enqueue on the communication stream, then
 * block until it completes, bounded by the timeout (a rank that is gone aborts it). */
static int comm_barrier_sync(ddpl_nccl *c, const char *fname)
{
    int prev;
    if (nccl_comm_enter(c, &prev, fname) < 0) return -1;
    int rc = 0;
    ncclResult_t r = nccl_comm_enqueue_barrier(c, c->stream);
    if (r == ncclInProgress)
        rc = nccl_comm_settle(c, fname, "the first allreduce");
    else if (r != ncclSuccess)
        rc = nccl_comm_fail(c, r, fname, "the first allreduce");
    if (rc == 0) {
        stream_poll p = {c, c->stream, NULL, fname};
        int d = poll_until(stream_done, &p, c->timeout_s);
        if (d == 0) {
            rc = ddpl_error("%s: the first NCCL allreduce did not complete within %g s on rank "
                            "%d of %d (cuda:%d)",
                            fname, c->timeout_s, c->rank, c->size, c->device);
            nccl_comm_break(c);
        } else if (d < 0)
            rc = -1;
    }
    nccl_comm_leave(prev);
    return rc;
}

/* Creates the communicator of a group (rank, size) through the store; blocks until every rank
 * joined NCCL's bootstrap. NULL with the error set on failure. */
ddpl_nccl *nccl_comm_connect(ddpl_store *st, const char *prefix, int rank, int size,
                             double timeout_s)
{
    const char *f = "init_process_group";
    if (cuda_lib_load(CUDA_LIB_NCCL) < 0) return NULL;
    int dev = ddpl_cuda_current_device();
    if (dev < 0) return NULL;
    ncclUniqueId id;
    if (exchange_id(st, prefix, rank, timeout_s, &id) < 0) return NULL;

    ddpl_nccl *c = ddpl_xcalloc(1, sizeof *c);
    atomic_init(&c->refcount, 1);
    c->device = dev;
    c->rank = rank;
    c->size = size;
    c->timeout_s = timeout_s;
    pthread_mutex_init(&c->mu, NULL);
    int prev;
    if (nccl_comm_enter(c, &prev, f) < 0) {
        nccl_comm_release(c);
        return NULL;
    }
    cudaError_t e;
    ncclResult_t r;
    int rc = 0;
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess)
        rc = nccl_comm_cuda_fail(c, e, f, "creating the communication stream");
    else if ((e = cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming)) != cudaSuccess)
        rc = nccl_comm_cuda_fail(c, e, f, "creating an event");
    else if ((e = cudaMalloc((void **)&c->one, sizeof(float))) != cudaSuccess)
        rc = nccl_comm_cuda_fail(c, e, f, "allocating the barrier's scratch");
    /* the barrier sums this float across the ranks: a defined value, not whatever the
     * allocation held (compute-sanitizer's initcheck would flag it, and NaN bits are no sum) */
    else if ((e = cudaMemset(c->one, 0, sizeof(float))) != cudaSuccess)
        rc = nccl_comm_cuda_fail(c, e, f, "clearing the barrier's scratch");
    else {
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0; /* returns at once; nccl_comm_settle() bounds the wait for the peers */
        r = CUDA_DL(CUDA_LIB_NCCL, ncclCommInitRankConfig)(&c->comm, size, id, rank, &config);
        if (r == ncclInProgress) {
            rc = nccl_comm_settle(c, f, "ncclCommInitRank");
        } else if (r != ncclSuccess) {
            rc = nccl_comm_fail(c, r, f, "ncclCommInitRank");
            if (c->comm) CUDA_DL(CUDA_LIB_NCCL, ncclCommAbort)(c->comm);
            c->comm = NULL;
        }
    }
    nccl_comm_leave(prev);
    /* a first collective proves the communicator works on every rank before init returns */
    if (rc == 0) rc = comm_barrier_sync(c, f);
    if (rc < 0) {
        nccl_comm_free(c);
        return NULL;
    }
    return c;
}

/* Flushes the communicator's work and waits (bounded) until it is quiescent, so that the
 * destroy that follows frees it without blocking: 1 when it is, else 0 (abort it instead). */
static int finalize(ddpl_nccl *c)
{
    ncclResult_t r = CUDA_DL(CUDA_LIB_NCCL, ncclCommFinalize)(c->comm);
    if (r == ncclSuccess) return 1;
    if (r != ncclInProgress) return 0;
    settle_poll p = {c, "destroy_process_group", "ncclCommFinalize"};
    return poll_until(comm_settled, &p, c->timeout_s) == 1;
}

/* Waits (bounded by the timeout) for queued operations, then destroys the communicator (aborts
 * it when they do not finish). Work handles stay valid. NULL is fine. */
void nccl_comm_free(ddpl_nccl *c)
{
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    bool live = c->comm != NULL;
    pthread_mutex_unlock(&c->mu);
    if (live) {
        /* let queued operations finish (bounded), then destroy; abort what is stuck */
        int prev;
        if (nccl_comm_enter(c, &prev, "destroy_process_group") == 0) {
            char saved[1024];
            snprintf(saved, sizeof saved, "%s", ddpl_last_error());
            stream_poll p = {c, c->stream, NULL, "destroy_process_group"};
            int d = poll_until(stream_done, &p, c->timeout_s);
            if (d == 1 && c->comm) d = finalize(c);
            pthread_mutex_lock(&c->mu);
            if (c->comm) {
                if (d == 1) {
                    CUDA_DL(CUDA_LIB_NCCL, ncclCommDestroy)(c->comm);
                } else {
                    CUDA_DL(CUDA_LIB_NCCL, ncclCommAbort)(c->comm);
                    if (!c->broken)
                        c->broken = ddpl_xstrdup("the group was destroyed while operations were "
                                                 "still pending");
                }
                c->comm = NULL;
            }
            pthread_mutex_unlock(&c->mu);
            ddpl_error("%s", saved); /* freeing leaves the caller's error as it was */
            nccl_comm_leave(prev);
        }
    }
    nccl_comm_release(c);
}
