/* dist/nccl_pg.c: the NCCL backend of process groups (backend='nccl', CUDA tensors), compiled
 * only with the CUDA backend: the communicator (unique id through the store, non-blocking init),
 * its stream and events, the operations, and the work hooks of NCCL operations.
 * defines: pg_nccl_backend (pg_backend.h); everything else is static. Gather, scatter and
 *          all-to-all are grouped ncclSend/ncclRecv (ncclGroupStart/End), reduce is ncclReduce.
 *
 * One communicator per group, bound to one device: the calling thread's current CUDA device at
 * init (ddpl.cuda.set_device(LOCAL_RANK) first, as torchrun users do with PyTorch). Rank 0
 * creates the ncclUniqueId and publishes it in the store under "<prefix>nccl/id"; every rank
 * reads it and calls ncclCommInitRankConfig on that device. The communicator is non-blocking
 * (config.blocking = 0) so that init is bounded by the group's timeout instead of hanging on a
 * peer that never joins: any NCCL call on it may return ncclInProgress, and settle() then waits
 * (bounded) for the communicator's state to leave ncclInProgress before anything else is called
 * or recorded on its stream.
 *
 * Operations never block the host. Each one: records an event on the device's compute stream
 * (cuda_stream_for, cuda_device.h), makes the communicator's own stream wait on it (inputs
 * written by earlier kernels are ready), enqueues the NCCL call(s) on the communication stream,
 * and records a "done" event there. The work handle's wait() makes the compute stream wait on
 * that event (later kernels see the result; the host goes on); is_completed() queries it. The
 * work keeps its tensors until the compute stream is ordered after the operation (wait, or
 * release), so memory the caching allocator hands out again on the compute stream is never
 * still in use by NCCL. barrier() is a one-element allreduce whose wait does block the host
 * (bounded by the group's timeout).
 *
 * Tensors: contiguous CUDA tensors on the group's device (anything else is refused by name);
 * reductions take float32/float64/float16/bfloat16/int64/int32/uint8, data movement every dtype.
 * send/recv move raw bytes: the receiver's tensor must have the sender's byte size (as in
 * PyTorch's NCCL backend, a mismatch is not detected), and a send blocks the communication stream
 * until its peer posts the matching recv, so pair them in the same order on both ranks.
 *
 * This C file includes nccl.h, which includes cuda_runtime.h (plain C declarations); it calls
 * the CUDA runtime for streams and events only, never launching kernels. Threads: operations
 * and work handles are used from the thread that issued them (the Lua thread); the
 * communicator's mutex guards its failure state and the work's mutex its completion, as pg.c
 * does for host work. */
#define _GNU_SOURCE /* nanosleep */
#include <cuda_runtime.h>
#include <nccl.h>
#include <time.h>

#include "cuda/cuda_device.h"
#include "cuda/cuda_dynlib.h"
#include "ddpl/cuda.h"
#include "dist/pg_impl.h"

/* pg->comm of a group of this backend; w->comm of its works (one reference each) */
typedef struct ddpl_nccl {
    atomic_long refcount; /* the group's and each pending work's */
    ncclComm_t comm;      /* NULL once destroyed or aborted */
    cudaStream_t stream;  /* the communication stream (non-blocking) */
    cudaEvent_t ready;    /* recorded on the compute stream before each operation */
    float *one;           /* barrier: one float on the device */
    int device, rank, size;
    double timeout_s;
    pthread_mutex_t mu;
    char *broken; /* first failure at run time; later operations fail with it */
} ddpl_nccl;

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(ddpl_xmalloc(n), s, n);
}

static ddpl_nccl *comm_retain(ddpl_nccl *c)
{
    atomic_fetch_add(&c->refcount, 1);
    return c;
}

/* Frees what is left of c at its last reference (the communicator is gone by then). */
static void comm_release(ddpl_nccl *c)
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
static int nccl_fail(const ddpl_nccl *c, ncclResult_t r, const char *fname, const char *what)
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

static int cuda_fail(const ddpl_nccl *c, cudaError_t e, const char *fname, const char *what)
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
    if (!c->broken) c->broken = xstrdup(ddpl_last_error());
    if (c->comm) {
        CUDA_DL(CUDA_LIB_NCCL, ncclCommAbort)(c->comm);
        c->comm = NULL;
    }
}

static void break_comm(ddpl_nccl *c)
{
    pthread_mutex_lock(&c->mu);
    break_locked(c);
    pthread_mutex_unlock(&c->mu);
}

/* 0 while c is healthy; -1 with the error for fname when it failed before or has an
 * asynchronous error now (a peer died, a network failure), which then breaks it. */
static int check_health(ddpl_nccl *c, const char *fname)
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

/* -------------------------------------------------------------------- availability ---- */
static int nccl_available(const char *fname)
{
    if (!ddpl_cuda_is_available())
        return ddpl_error("%s: backend 'nccl' needs a CUDA device, but CUDA is not available "
                          "here (no GPU or driver was found); use backend='gloo' for CPU tensors",
                          fname);
    return 0;
}

/* Makes c's device current; *prev receives the one to restore (CUDA's own current device: the
 * engine's allocator may have changed it). */
static int enter(const ddpl_nccl *c, int *prev, const char *fname)
{
    cudaError_t e = cudaGetDevice(prev);
    if (e != cudaSuccess) return cuda_fail(c, e, fname, "cudaGetDevice");
    e = cudaSetDevice(c->device);
    return e == cudaSuccess ? 0 : cuda_fail(c, e, fname, "cudaSetDevice");
}

static void leave(int prev)
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
        cuda_fail(p->c, e, p->fname, p->ev ? "cudaEventQuery" : "cudaStreamQuery");
        return -1;
    }
    return check_health(p->c, p->fname) < 0 ? -1 : 0;
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
    if (r != ncclSuccess) return nccl_fail(p->c, r, p->fname, "ncclCommGetAsyncError");
    if (state == ncclInProgress) return 0;
    return state == ncclSuccess ? 1 : nccl_fail(p->c, state, p->fname, p->what);
}

/* Waits, bounded by the group's timeout, until the NCCL call `what` that returned ncclInProgress
 * has finished. 0, or -1 with the error set and the communicator broken (aborted): a peer that
 * never joins the init, or a call that cannot complete, leaves the ranks out of step. */
static int settle(ddpl_nccl *c, const char *fname, const char *what)
{
    settle_poll p = {c, fname, what};
    int d = poll_until(comm_settled, &p, c->timeout_s);
    if (d == 1) return 0;
    if (d == 0)
        ddpl_error("%s: NCCL %s did not complete within %g s on rank %d of %d (cuda:%d): a peer "
                   "did not join or is stuck (the group's timeout bounds it)",
                   fname, what, c->timeout_s, c->rank, c->size, c->device);
    break_comm(c);
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
        if (r != ncclSuccess) return nccl_fail(NULL, r, "init_process_group", "ncclGetUniqueId");
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

static int comm_barrier_sync(ddpl_nccl *c, const char *fname);
static void comm_free(ddpl_nccl *c);

/* Creates the communicator of a group (rank, size) through the store; blocks until every rank
 * joined NCCL's bootstrap. NULL with the error set on failure. */
static ddpl_nccl *comm_connect(ddpl_store *st, const char *prefix, int rank, int size,
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
    if (enter(c, &prev, f) < 0) {
        comm_release(c);
        return NULL;
    }
    cudaError_t e;
    ncclResult_t r;
    int rc = 0;
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess)
        rc = cuda_fail(c, e, f, "creating the communication stream");
    else if ((e = cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming)) != cudaSuccess)
        rc = cuda_fail(c, e, f, "creating an event");
    else if ((e = cudaMalloc((void **)&c->one, sizeof(float))) != cudaSuccess)
        rc = cuda_fail(c, e, f, "allocating the barrier's scratch");
    else {
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0; /* returns at once; settle() bounds the wait for the peers */
        r = CUDA_DL(CUDA_LIB_NCCL, ncclCommInitRankConfig)(&c->comm, size, id, rank, &config);
        if (r == ncclInProgress) {
            rc = settle(c, f, "ncclCommInitRank");
        } else if (r != ncclSuccess) {
            rc = nccl_fail(c, r, f, "ncclCommInitRank");
            if (c->comm) CUDA_DL(CUDA_LIB_NCCL, ncclCommAbort)(c->comm);
            c->comm = NULL;
        }
    }
    leave(prev);
    /* a first collective proves the communicator works on every rank before init returns */
    if (rc == 0) rc = comm_barrier_sync(c, f);
    if (rc < 0) {
        comm_free(c);
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
static void comm_free(ddpl_nccl *c)
{
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    bool live = c->comm != NULL;
    pthread_mutex_unlock(&c->mu);
    if (live) {
        /* let queued operations finish (bounded), then destroy; abort what is stuck */
        int prev;
        if (enter(c, &prev, "destroy_process_group") == 0) {
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
                        c->broken = xstrdup("the group was destroyed while operations were "
                                            "still pending");
                }
                c->comm = NULL;
            }
            pthread_mutex_unlock(&c->mu);
            ddpl_error("%s", saved); /* freeing leaves the caller's error as it was */
            leave(prev);
        }
    }
    comm_release(c);
}

/* --------------------------------------------------------------------- arguments ---- */
static bool nccl_dtype(ddpl_dtype dt, ncclDataType_t *out)
{
    switch (dt) {
    case DDPL_FLOAT32:
        *out = ncclFloat32;
        return true;
    case DDPL_FLOAT64:
        *out = ncclFloat64;
        return true;
    case DDPL_FLOAT16:
        *out = ncclFloat16;
        return true;
    case DDPL_BFLOAT16:
        *out = ncclBfloat16;
        return true;
    case DDPL_INT64:
        *out = ncclInt64;
        return true;
    case DDPL_INT32:
        *out = ncclInt32;
        return true;
    case DDPL_UINT8:
        *out = ncclUint8;
        return true;
    case DDPL_INT8:
        *out = ncclInt8;
        return true;
    default:
        return false; /* bool: moved as bytes, never reduced */
    }
}

static ncclRedOp_t nccl_op(ddpl_reduce_op op)
{
    switch (op) {
    case DDPL_REDUCE_AVG:
        return ncclAvg; /* floating dtypes only (pg_ops.c checks) */
    case DDPL_REDUCE_MAX:
        return ncclMax;
    case DDPL_REDUCE_MIN:
        return ncclMin;
    case DDPL_REDUCE_PRODUCT:
        return ncclProd;
    default:
        return ncclSum;
    }
}

/* t is a contiguous CUDA tensor on the group's device, of a dtype NCCL reduces when `reduces`. */
static int nccl_check_tensor(const ddpl_pg *pg, const char *fname, const char *what,
                             const ddpl_tensor *t, bool reduces)
{
    const ddpl_nccl *c = pg->comm;
    int rank = pg->rank;
    char dev[32], shape[96];
    if (t->device.type != DDPL_CUDA || t->device.index != c->device)
        return ddpl_error("%s: expected a CUDA tensor on cuda:%d for %s (the device of this "
                          "rank's nccl group; rank %d), got a %s tensor (backend nccl; move it "
                          "with :to('cuda:%d'), or use a gloo group for CPU tensors)",
                          fname, c->device, what, rank, ddpl_device_str(t->device, dev, sizeof dev),
                          c->device);
    if (!ddpl_tensor_is_contiguous(t))
        return ddpl_error("%s: backend nccl needs a contiguous tensor for %s, got a "
                          "non-contiguous %s %s (call :contiguous() first)",
                          fname, what, ddpl_shape_str(t, shape, sizeof shape),
                          ddpl_dtype_name((ddpl_dtype)t->dtype));
    ncclDataType_t nd;
    if (reduces && !nccl_dtype((ddpl_dtype)t->dtype, &nd))
        return ddpl_error("%s: backend nccl reduces float32/float64/float16/bfloat16/int64/"
                          "int32/int8/uint8 tensors, got %s for %s",
                          fname, ddpl_dtype_name((ddpl_dtype)t->dtype), what);
    return 0;
}

/* ------------------------------------------------------------------- operations ---- */
/* Enqueues the NCCL call(s) of w on stream s; returns NCCL's status. */
typedef ncclResult_t (*enqueue_fn)(ddpl_work *w, ddpl_nccl *c, cudaStream_t s);

/* Issues w on pg's communicator: the communication stream waits for the compute stream, fn
 * enqueues the operation (skipped when it moves no bytes: every rank sees the same sizes), a
 * "done" event is recorded. Returns w, or NULL with the error set (w released). */
static ddpl_work *issue(ddpl_pg *pg, ddpl_work *w, enqueue_fn fn, bool empty)
{
    ddpl_nccl *c = pg->comm;
    const char *f = w->name;
    int prev = c->device;
    bool entered = false;
    cudaEvent_t done = NULL;
    cudaError_t e;
    if (check_health(c, f) < 0) goto fail;
    if (enter(c, &prev, f) < 0) goto fail;
    entered = true;
    cudaStream_t compute = (cudaStream_t)cuda_stream_for(c->device);
    if (!compute) {
        ddpl_error("%s: no compute stream for cuda:%d", f, c->device);
        goto fail;
    }
    /* inputs written by kernels queued so far on the compute stream are ready first */
    if ((e = cudaEventRecord(c->ready, compute)) != cudaSuccess ||
        (e = cudaStreamWaitEvent(c->stream, c->ready, 0)) != cudaSuccess) {
        cuda_fail(c, e, f, "ordering the communication stream after the compute stream");
        goto fail;
    }
    if (!empty) {
        ncclResult_t r = fn(w, c, c->stream);
        if (r != ncclSuccess && r != ncclInProgress) {
            nccl_fail(c, r, f, "enqueueing");
            break_comm(c); /* the ranks are out of step now */
            goto fail;
        }
        /* the operation is on the stream only once the call has finished */
        if (r == ncclInProgress && settle(c, f, "enqueueing") < 0) goto fail;
    }
    if ((e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming)) != cudaSuccess ||
        (e = cudaEventRecord(done, c->stream)) != cudaSuccess) {
        cuda_fail(c, e, f, "recording the completion event");
        if (done) cudaEventDestroy(done);
        break_comm(c);
        goto fail;
    }
    leave(prev);
    w->comm = comm_retain(c);
    w->done_event = done;
    w->pg = NULL; /* the work only needs the communicator from now on */
    /* outputs change now as far as autograd's version checks go (the write is queued) */
    for (int i = 0; i < w->nslots; i++) {
        if (!w->slots[i].write_back) continue;
        ddpl_storage_bump_version(w->slots[i].t->storage);
        w->slots[i].write_back = false;
    }
    return w;
fail:
    if (entered) leave(prev);
    {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ddpl_last_error());
        ddpl_work_release(w);
        ddpl_error("%s", msg);
    }
    return NULL;
}

static void *slot_data(ddpl_work *w, int i)
{
    return w->slots[i].data;
}

static int64_t slot_numel(ddpl_work *w, int i)
{
    return ddpl_tensor_numel(w->slots[i].t);
}

static ncclDataType_t slot_dtype(ddpl_work *w, int i)
{
    ncclDataType_t d = ncclUint8;
    nccl_dtype((ddpl_dtype)w->slots[i].t->dtype, &d);
    return d;
}

static ncclResult_t enq_allreduce(ddpl_work *w, ddpl_nccl *c, cudaStream_t s)
{
    return CUDA_DL(CUDA_LIB_NCCL, ncclAllReduce)(slot_data(w, 0), slot_data(w, 0),
                                                 (size_t)slot_numel(w, 0), slot_dtype(w, 0),
                                                 nccl_op(w->op), c->comm, s);
}

static ddpl_work *nccl_allreduce(ddpl_pg *pg, ddpl_tensor *t, ddpl_reduce_op op)
{
    ddpl_work *w = pg_work_new(pg, "all_reduce", 1, NULL);
    w->op = op;
    pg_work_slot(w, 0, t, true, true);
    return issue(pg, w, enq_allreduce, ddpl_tensor_numel(t) == 0);
}

/* data movement goes as bytes: every dtype, bool included */
static ncclResult_t enq_broadcast(ddpl_work *w, ddpl_nccl *c, cudaStream_t s)
{
    return CUDA_DL(CUDA_LIB_NCCL, ncclBroadcast)(slot_data(w, 0), slot_data(w, 0), w->nbytes,
                                                 ncclUint8, w->peer, c->comm, s);
}

static ddpl_work *nccl_broadcast(ddpl_pg *pg, ddpl_tensor *t, int src)
{
    ddpl_work *w = pg_work_new(pg, "broadcast", 1, NULL);
    w->peer = src;
    w->nbytes = ddpl_tensor_nbytes(t);
    pg_work_slot(w, 0, t, true, src != pg->rank);
    return issue(pg, w, enq_broadcast, w->nbytes == 0);
}

/* slot 0 = the input, slots 1..size = the outputs: one broadcast per root, grouped, so each
 * rank's input lands straight in outs[r] (no staging buffer to copy out of afterwards) */
static ncclResult_t enq_allgather(ddpl_work *w, ddpl_nccl *c, cudaStream_t s)
{
    ncclResult_t r = CUDA_DL(CUDA_LIB_NCCL, ncclGroupStart)();
    if (r != ncclSuccess) return r;
    for (int q = 0; q < c->size; q++) {
        r = CUDA_DL(CUDA_LIB_NCCL, ncclBroadcast)(slot_data(w, 0), slot_data(w, 1 + q), w->nbytes,
                                                  ncclUint8, q, c->comm, s);
        if (r != ncclSuccess) break;
    }
    ncclResult_t r2 = CUDA_DL(CUDA_LIB_NCCL, ncclGroupEnd)();
    return r != ncclSuccess ? r : r2;
}

static ddpl_work *nccl_allgather(ddpl_pg *pg, ddpl_tensor *const *outs, int nouts, ddpl_tensor *t)
{
    ddpl_work *w = pg_work_new(pg, "all_gather", 1 + nouts, NULL);
    pg_work_slot(w, 0, t, true, false);
    for (int r = 0; r < nouts; r++) pg_work_slot(w, 1 + r, outs[r], false, true);
    w->nbytes = ddpl_tensor_nbytes(t);
    return issue(pg, w, enq_allgather, w->nbytes == 0);
}

/* slot 0 = out (size * nbytes), slot 1 = the input */
static ncclResult_t enq_allgather_into(ddpl_work *w, ddpl_nccl *c, cudaStream_t s)
{
    return CUDA_DL(CUDA_LIB_NCCL, ncclAllGather)(slot_data(w, 1), slot_data(w, 0), w->nbytes,
                                                 ncclUint8, c->comm, s);
}

static ddpl_work *nccl_allgather_into(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *t)
{
    ddpl_work *w = pg_work_new(pg, "all_gather_into_tensor", 2, NULL);
    pg_work_slot(w, 0, out, false, true);
    pg_work_slot(w, 1, t, true, false);
    w->nbytes = ddpl_tensor_nbytes(t);
    return issue(pg, w, enq_allgather_into, w->nbytes == 0);
}

/* slot 0 = out (recvcount elements), slot 1 = in (size * recvcount) */
static ncclResult_t enq_reduce_scatter(ddpl_work *w, ddpl_nccl *c, cudaStream_t s)
{
    return CUDA_DL(CUDA_LIB_NCCL, ncclReduceScatter)(slot_data(w, 1), slot_data(w, 0),
                                                     (size_t)slot_numel(w, 0), slot_dtype(w, 0),
                                                     nccl_op(w->op), c->comm, s);
}

static ddpl_work *nccl_reduce_scatter(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *in,
                                      ddpl_reduce_op op)
{
    ddpl_work *w = pg_work_new(pg, "reduce_scatter_tensor", 2, NULL);
    w->op = op;
    pg_work_slot(w, 0, out, false, true);
    pg_work_slot(w, 1, in, true, false);
    return issue(pg, w, enq_reduce_scatter, ddpl_tensor_numel(out) == 0);
}

static ncclResult_t enq_send(ddpl_work *w, ddpl_nccl *c, cudaStream_t s)
{
    return CUDA_DL(CUDA_LIB_NCCL, ncclSend)(slot_data(w, 0), w->nbytes, ncclUint8, w->peer, c->comm,
                                            s);
}

static ncclResult_t enq_recv(ddpl_work *w, ddpl_nccl *c, cudaStream_t s)
{
    return CUDA_DL(CUDA_LIB_NCCL, ncclRecv)(slot_data(w, 0), w->nbytes, ncclUint8, w->peer, c->comm,
                                            s);
}

static ddpl_work *nccl_send(ddpl_pg *pg, ddpl_tensor *t, int dst)
{
    ddpl_work *w = pg_work_new(pg, "send", 1, NULL);
    w->peer = dst;
    w->nbytes = ddpl_tensor_nbytes(t);
    pg_work_slot(w, 0, t, true, false);
    return issue(pg, w, enq_send, w->nbytes == 0);
}

static ddpl_work *nccl_recv(ddpl_pg *pg, ddpl_tensor *t, int src)
{
    ddpl_work *w = pg_work_new(pg, "recv", 1, NULL);
    w->peer = src;
    w->nbytes = ddpl_tensor_nbytes(t);
    pg_work_slot(w, 0, t, false, true);
    return issue(pg, w, enq_recv, w->nbytes == 0);
}

/* a one-element allreduce of the communicator's scratch float (its value does not matter) */
static ncclResult_t enq_barrier(ddpl_work *w, ddpl_nccl *c, cudaStream_t s)
{
    DDPL_UNUSED(w);
    return CUDA_DL(CUDA_LIB_NCCL, ncclAllReduce)(c->one, c->one, 1, ncclFloat32, ncclSum, c->comm,
                                                 s);
}

static ddpl_work *nccl_barrier(ddpl_pg *pg)
{
    ddpl_work *w = pg_work_new(pg, "barrier", 0, NULL);
    w->host_sync = true;
    return issue(pg, w, enq_barrier, false);
}

/* ------------------------------------------------- rooted collectives, all-to-all ---- */
/* In place on slot 0; NCCL ignores the receive buffer off the root, so t is left unchanged
 * there (pg.h). */
static ncclResult_t enq_reduce(ddpl_work *w, ddpl_nccl *c, cudaStream_t s)
{
    return CUDA_DL(CUDA_LIB_NCCL, ncclReduce)(slot_data(w, 0), slot_data(w, 0),
                                              (size_t)slot_numel(w, 0), slot_dtype(w, 0),
                                              nccl_op(w->op), w->peer, c->comm, s);
}

static ddpl_work *nccl_reduce(ddpl_pg *pg, ddpl_tensor *t, int dst, ddpl_reduce_op op)
{
    ddpl_work *w = pg_work_new(pg, "reduce", 1, NULL);
    w->op = op;
    w->peer = dst;
    pg_work_slot(w, 0, t, true, dst == pg->rank);
    return issue(pg, w, enq_reduce, ddpl_tensor_numel(t) == 0);
}

/* The point-to-point messages of one operation (the work's scratch; size entries each):
 * send[q] bytes of slot sslot[q] from byte soff[q] go to rank q, and recv[q] bytes from rank q
 * land in slot rslot[q] at byte roff[q] (a slot of -1, or 0 bytes: no message). */
typedef struct p2p_plan {
    int *sslot, *rslot;
    size_t *send, *recv, *soff, *roff;
} p2p_plan;

static p2p_plan plan_of(ddpl_work *w, int size)
{
    p2p_plan a;
    a.sslot = w->scratch;
    a.rslot = a.sslot + size;
    a.send = (size_t *)(a.rslot + size + (size % 2)); /* 8-byte aligned */
    a.recv = a.send + size;
    a.soff = a.recv + size;
    a.roff = a.soff + size;
    return a;
}

/* w's scratch, holding an empty plan */
static p2p_plan plan_new(ddpl_work *w, int size)
{
    size_t n = (size_t)size;
    w->scratch = ddpl_xcalloc(1, (2 * n + 1) * sizeof(int) + 4 * n * sizeof(size_t));
    p2p_plan a = plan_of(w, size);
    for (int q = 0; q < size; q++) a.sslot[q] = a.rslot[q] = -1;
    return a;
}

/* The plan as one NCCL group (messages to this rank itself are allowed within a group). */
static ncclResult_t enq_plan(ddpl_work *w, ddpl_nccl *c, cudaStream_t s)
{
    p2p_plan p = plan_of(w, c->size);
    ncclResult_t r = CUDA_DL(CUDA_LIB_NCCL, ncclGroupStart)();
    if (r != ncclSuccess) return r;
    for (int q = 0; q < c->size && r == ncclSuccess; q++) {
        if (p.sslot[q] >= 0 && p.send[q])
            r = CUDA_DL(CUDA_LIB_NCCL, ncclSend)((char *)slot_data(w, p.sslot[q]) + p.soff[q],
                                                 p.send[q], ncclUint8, q, c->comm, s);
        if (r == ncclSuccess && p.rslot[q] >= 0 && p.recv[q])
            r = CUDA_DL(CUDA_LIB_NCCL, ncclRecv)((char *)slot_data(w, p.rslot[q]) + p.roff[q],
                                                 p.recv[q], ncclUint8, q, c->comm, s);
    }
    ncclResult_t r2 = CUDA_DL(CUDA_LIB_NCCL, ncclGroupEnd)();
    return r != ncclSuccess ? r : r2;
}

/* slot 0 = the input, sent to dst; on dst slots 1..size receive from each rank */
static ddpl_work *nccl_gather(ddpl_pg *pg, ddpl_tensor *t, ddpl_tensor *const *outs, int nouts,
                              int dst)
{
    ddpl_work *w = pg_work_new(pg, "gather", 1 + nouts, NULL);
    pg_work_slot(w, 0, t, true, false);
    for (int r = 0; r < nouts; r++) pg_work_slot(w, 1 + r, outs[r], false, true);
    size_t nbytes = ddpl_tensor_nbytes(t);
    p2p_plan a = plan_new(w, pg->size);
    a.sslot[dst] = 0;
    a.send[dst] = nbytes;
    for (int q = 0; q < nouts; q++) a.rslot[q] = 1 + q, a.recv[q] = nbytes;
    return issue(pg, w, enq_plan, nbytes == 0);
}

/* slot 0 = the output, received from src; on src slots 1..size are sent to each rank */
static ddpl_work *nccl_scatter(ddpl_pg *pg, ddpl_tensor *t, ddpl_tensor *const *ins, int nins,
                               int src)
{
    ddpl_work *w = pg_work_new(pg, "scatter", 1 + nins, NULL);
    pg_work_slot(w, 0, t, false, true);
    for (int r = 0; r < nins; r++) pg_work_slot(w, 1 + r, ins[r], true, false);
    size_t nbytes = ddpl_tensor_nbytes(t);
    p2p_plan a = plan_new(w, pg->size);
    a.rslot[src] = 0;
    a.recv[src] = nbytes;
    for (int q = 0; q < nins; q++) a.sslot[q] = 1 + q, a.send[q] = nbytes;
    return issue(pg, w, enq_plan, nbytes == 0);
}

/* slots 0..n-1 = the outputs (from each rank), n..2n-1 = the inputs (to each rank). NCCL does
 * not exchange the sizes first (as PyTorch's NCCL backend): a pair whose sizes differ is not
 * detected. */
static ddpl_work *nccl_alltoall(ddpl_pg *pg, ddpl_tensor *const *outs, ddpl_tensor *const *ins,
                                int n)
{
    ddpl_work *w = pg_work_new(pg, "all_to_all", 2 * n, NULL);
    p2p_plan a = plan_new(w, n);
    for (int q = 0; q < n; q++) {
        pg_work_slot(w, q, outs[q], false, true);
        pg_work_slot(w, n + q, ins[q], true, false);
        a.rslot[q] = q;
        a.recv[q] = ddpl_tensor_nbytes(outs[q]);
        a.sslot[q] = n + q;
        a.send[q] = ddpl_tensor_nbytes(ins[q]);
    }
    return issue(pg, w, enq_plan, false);
}

/* slot 0 = out, slot 1 = in; the slices at their byte offsets (sizes not exchanged either) */
static ddpl_work *nccl_alltoall_single(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *in,
                                       const int64_t *out_counts, const int64_t *in_counts)
{
    ddpl_work *w = pg_work_new(pg, "all_to_all_single", 2, NULL);
    pg_work_slot(w, 0, out, false, true);
    pg_work_slot(w, 1, in, true, false);
    size_t es = ddpl_dtype_size((ddpl_dtype)in->dtype), soff = 0, roff = 0;
    p2p_plan a = plan_new(w, pg->size);
    for (int q = 0; q < pg->size; q++) {
        a.rslot[q] = 0;
        a.sslot[q] = 1;
        a.recv[q] = (size_t)out_counts[q] * es;
        a.send[q] = (size_t)in_counts[q] * es;
        a.roff[q] = roff;
        a.soff[q] = soff;
        roff += a.recv[q];
        soff += a.send[q];
    }
    return issue(pg, w, enq_plan, false);
}

/* The barrier of init (before any group exists): enqueue on the communication stream, then
 * block until it completes, bounded by the timeout (a rank that is gone aborts it). */
static int comm_barrier_sync(ddpl_nccl *c, const char *fname)
{
    int prev;
    if (enter(c, &prev, fname) < 0) return -1;
    int rc = 0;
    ncclResult_t r = enq_barrier(NULL, c, c->stream);
    if (r == ncclInProgress)
        rc = settle(c, fname, "the first allreduce");
    else if (r != ncclSuccess)
        rc = nccl_fail(c, r, fname, "the first allreduce");
    if (rc == 0) {
        stream_poll p = {c, c->stream, NULL, fname};
        int d = poll_until(stream_done, &p, c->timeout_s);
        if (d == 0) {
            rc = ddpl_error("%s: the first NCCL allreduce did not complete within %g s on rank "
                            "%d of %d (cuda:%d)",
                            fname, c->timeout_s, c->rank, c->size, c->device);
            break_comm(c);
        } else if (d < 0)
            rc = -1;
    }
    leave(prev);
    return rc;
}

/* -------------------------------------------------------------------- work handles ---- */
/* Makes the compute stream of w's device wait for w's done event; the tensors may then go, as
 * any later use of their memory on the compute stream is ordered after the operation. */
static int order_compute(ddpl_work *w)
{
    ddpl_nccl *c = w->comm;
    if (w->ordered) return 0;
    int prev;
    if (enter(c, &prev, w->name) < 0) return -1;
    cudaStream_t compute = (cudaStream_t)cuda_stream_for(c->device);
    cudaError_t e = compute ? cudaStreamWaitEvent(compute, (cudaEvent_t)w->done_event, 0)
                            : cudaErrorInvalidResourceHandle;
    leave(prev);
    if (e != cudaSuccess) return cuda_fail(c, e, w->name, "ordering the compute stream");
    w->ordered = true;
    return 0;
}

static bool work_done(ddpl_work *w, const char **error)
{
    pthread_mutex_lock(&w->mu);
    bool d = w->done;
    if (error) *error = w->error;
    pthread_mutex_unlock(&w->mu);
    return d;
}

/* Completes w with the current error message. */
static int fail_work(ddpl_work *w)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ddpl_last_error());
    pg_work_finish(w, msg);
    return ddpl_error("%s", msg);
}

static void nccl_work_poll(ddpl_work *w);

static int nccl_work_wait(ddpl_work *w, double timeout_s)
{
    const char *err = NULL;
    nccl_work_poll(w); /* completed already (the host saw it), or failed: nothing to order */
    if (work_done(w, &err)) return err ? ddpl_error("%s", err) : 0;
    ddpl_nccl *c = w->comm;
    if (order_compute(w) < 0) return fail_work(w);
    if (!w->host_sync) {
        /* the host goes on; tensors are safe to drop (see order_compute) */
        for (int i = 0; i < w->nslots; i++) {
            ddpl_tensor_release(w->slots[i].t);
            w->slots[i].t = NULL;
        }
        w->nslots = 0;
        nccl_work_poll(w);
        return 0;
    }
    if (timeout_s < 0) timeout_s = w->timeout_s;
    stream_poll p = {c, NULL, (cudaEvent_t)w->done_event, w->name};
    int d = poll_until(stream_done, &p, timeout_s);
    if (d == 0) {
        ddpl_error("%s: timed out after %g s on rank %d of %d (cuda:%d): a rank did not take "
                   "part (the group is aborted)",
                   w->name, timeout_s, c->rank, c->size, c->device);
        break_comm(c);
        return fail_work(w);
    }
    if (d < 0) return fail_work(w);
    pg_work_finish(w, NULL);
    return 0;
}

static void nccl_work_poll(ddpl_work *w)
{
    if (work_done(w, NULL)) return;
    cudaError_t e = cudaEventQuery((cudaEvent_t)w->done_event);
    if (e == cudaSuccess) {
        pg_work_finish(w, NULL);
    } else if (e != cudaErrorNotReady) {
        cuda_fail(w->comm, e, w->name, "cudaEventQuery");
        fail_work(w);
    } else if (check_health(w->comm, w->name) < 0) {
        fail_work(w);
    }
}

static void nccl_work_release(ddpl_work *w)
{
    if (!w->comm) return; /* issuing it failed: nothing was enqueued */
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", ddpl_last_error());
    /* dropped without a wait: order the compute stream anyway before the tensors go, so their
     * memory is not reused under a running operation */
    if (!work_done(w, NULL) && w->nslots > 0) (void)order_compute(w);
    if (w->done_event) cudaEventDestroy((cudaEvent_t)w->done_event); /* freed once it completes */
    w->done_event = NULL;
    comm_release(w->comm);
    w->comm = NULL;
    ddpl_error("%s", saved); /* a release leaves the caller's error as it was */
}

/* ------------------------------------------------------------------------- the group ---- */
static int nccl_connect(ddpl_pg *pg, const char *prefix, const char *bind_host)
{
    DDPL_UNUSED(bind_host); /* NCCL's bootstrap picks its own interface */
    pg->comm = comm_connect(pg->store, prefix, pg->rank, pg->size, pg->timeout_s);
    return pg->comm ? 0 : -1;
}

static void nccl_free(ddpl_pg *pg)
{
    comm_free(pg->comm);
    pg->comm = NULL;
}

const struct ddpl_pg_backend pg_nccl_backend = {
    .name = "nccl",
    .device_type = DDPL_CUDA,
    .available = nccl_available,
    .connect = nccl_connect,
    .free = nccl_free,
    .check_tensor = nccl_check_tensor,
    .allreduce = nccl_allreduce,
    .broadcast = nccl_broadcast,
    .allgather = nccl_allgather,
    .allgather_into = nccl_allgather_into,
    .reduce_scatter = nccl_reduce_scatter,
    .send = nccl_send,
    .recv = nccl_recv,
    .barrier = nccl_barrier,
    .reduce = nccl_reduce,
    .gather = nccl_gather,
    .scatter = nccl_scatter,
    .alltoall = nccl_alltoall,
    .alltoall_single = nccl_alltoall_single,
    .work_wait = nccl_work_wait,
    .work_poll = nccl_work_poll,
    .work_release = nccl_work_release,
};
