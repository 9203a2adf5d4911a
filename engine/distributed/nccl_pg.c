/* distributed/nccl_pg.c: the NCCL backend of process groups (backend='nccl', CUDA tensors),
 * compiled only with the CUDA backend: the operations and the work hooks of NCCL operations, on the
 * group's communicator (distributed/nccl_comm.c: unique id through the store, non-blocking init).
 * defines: pg_nccl_backend (pg_backend.h); everything else is static. Gather, scatter and
 *          all-to-all are grouped ncclSend/ncclRecv (ncclGroupStart/End), reduce is ncclReduce.
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
 * and work handles are used from the thread that issued them (the Lua thread); the work's
 * mutex guards its completion (pg_work.c). */
#include "cuda/cuda_device.h"
#include "cuda/cuda_dynlib.h"
#include "ddpl/cuda.h"
#include "distributed/nccl_comm.h"

/* w->impl of a work item of this backend */
typedef struct nccl_work {
    /* the group's communicator (one reference, dropped by nccl_work_release), the event
     * recorded on its stream after the operation, and whether the compute stream was already
     * made to wait on it (after which the tensors may go) */
    ddpl_nccl *comm;
    cudaEvent_t done_event;
    bool ordered;
    bool host_sync; /* barrier: wait blocks the host until the event completes */
} nccl_work;

static nccl_work *nw(const ddpl_work *w)
{
    return w->impl;
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
    const ddpl_nccl *c = pg->impl;
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
    ddpl_nccl *c = pg->impl;
    const char *f = w->name;
    int prev = c->device;
    bool entered = false;
    cudaEvent_t done = NULL;
    cudaError_t e;
    if (nccl_comm_check_health(c, f) < 0) goto fail;
    if (nccl_comm_enter(c, &prev, f) < 0) goto fail;
    entered = true;
    cudaStream_t compute = (cudaStream_t)cuda_stream_for(c->device);
    if (!compute) {
        ddpl_error("%s: no compute stream for cuda:%d", f, c->device);
        goto fail;
    }
    /* inputs written by kernels queued so far on the compute stream are ready first */
    if ((e = cudaEventRecord(c->ready, compute)) != cudaSuccess ||
        (e = cudaStreamWaitEvent(c->stream, c->ready, 0)) != cudaSuccess) {
        nccl_comm_cuda_fail(c, e, f, "ordering the communication stream after the compute stream");
        goto fail;
    }
    if (!empty) {
        ncclResult_t r = fn(w, c, c->stream);
        if (r != ncclSuccess && r != ncclInProgress) {
            nccl_comm_fail(c, r, f, "enqueueing");
            nccl_comm_break(c); /* the ranks are out of step now */
            goto fail;
        }
        /* the operation is on the stream only once the call has finished */
        if (r == ncclInProgress && nccl_comm_settle(c, f, "enqueueing") < 0) goto fail;
    }
    if ((e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming)) != cudaSuccess ||
        (e = cudaEventRecord(done, c->stream)) != cudaSuccess) {
        nccl_comm_cuda_fail(c, e, f, "recording the completion event");
        if (done) cudaEventDestroy(done);
        nccl_comm_break(c);
        goto fail;
    }
    nccl_comm_leave(prev);
    nw(w)->comm = nccl_comm_retain(c);
    nw(w)->done_event = done;
    w->pg = NULL; /* the work only needs the communicator from now on */
    /* outputs change now as far as autograd's version checks go (the write is queued) */
    for (int i = 0; i < w->nslots; i++) {
        if (!w->slots[i].write_back) continue;
        ddpl_storage_bump_version(w->slots[i].t->storage);
        w->slots[i].write_back = false;
    }
    return w;
fail:
    if (entered) nccl_comm_leave(prev);
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
    ddpl_work *w = pg_work_new(pg, "all_reduce", 1);
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
    ddpl_work *w = pg_work_new(pg, "broadcast", 1);
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
    ddpl_work *w = pg_work_new(pg, "all_gather", 1 + nouts);
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
    ddpl_work *w = pg_work_new(pg, "all_gather_into_tensor", 2);
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
    ddpl_work *w = pg_work_new(pg, "reduce_scatter_tensor", 2);
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
    ddpl_work *w = pg_work_new(pg, "send", 1);
    w->peer = dst;
    w->nbytes = ddpl_tensor_nbytes(t);
    pg_work_slot(w, 0, t, true, false);
    return issue(pg, w, enq_send, w->nbytes == 0);
}

static ddpl_work *nccl_recv(ddpl_pg *pg, ddpl_tensor *t, int src)
{
    ddpl_work *w = pg_work_new(pg, "recv", 1);
    w->peer = src;
    w->nbytes = ddpl_tensor_nbytes(t);
    pg_work_slot(w, 0, t, false, true);
    return issue(pg, w, enq_recv, w->nbytes == 0);
}

static ncclResult_t enq_barrier(ddpl_work *w, ddpl_nccl *c, cudaStream_t s)
{
    DDPL_UNUSED(w);
    return nccl_comm_enqueue_barrier(c, s);
}

static ddpl_work *nccl_barrier(ddpl_pg *pg)
{
    ddpl_work *w = pg_work_new(pg, "barrier", 0);
    nw(w)->host_sync = true;
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
    ddpl_work *w = pg_work_new(pg, "reduce", 1);
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
    /* 2 * size ints are a multiple of 8 bytes, so the size_t arrays that follow are aligned
     * (the scratch is malloc's, 16-byte aligned); padding for odd sizes, as the first version
     * had, misaligned them (UBSan under the CUDA emulation, spec/dist/nccl_spec.lua on 1 rank) */
    a.send = (size_t *)(a.rslot + size);
    a.recv = a.send + size;
    a.soff = a.recv + size;
    a.roff = a.soff + size;
    return a;
}

/* w's scratch, holding an empty plan */
static p2p_plan plan_new(ddpl_work *w, int size)
{
    size_t n = (size_t)size;
    w->scratch = ddpl_xcalloc(1, 2 * n * sizeof(int) + 4 * n * sizeof(size_t));
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
    ddpl_work *w = pg_work_new(pg, "gather", 1 + nouts);
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
    ddpl_work *w = pg_work_new(pg, "scatter", 1 + nins);
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
    ddpl_work *w = pg_work_new(pg, "all_to_all", 2 * n);
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
    ddpl_work *w = pg_work_new(pg, "all_to_all_single", 2);
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

/* -------------------------------------------------------------------- work handles ---- */
/* Makes the compute stream of w's device wait for w's done event; the tensors may then go, as
 * any later use of their memory on the compute stream is ordered after the operation. */
static int order_compute(ddpl_work *w)
{
    ddpl_nccl *c = nw(w)->comm;
    if (nw(w)->ordered) return 0;
    int prev;
    if (nccl_comm_enter(c, &prev, w->name) < 0) return -1;
    cudaStream_t compute = (cudaStream_t)cuda_stream_for(c->device);
    cudaError_t e = compute ? cudaStreamWaitEvent(compute, nw(w)->done_event, 0)
                            : cudaErrorInvalidResourceHandle;
    nccl_comm_leave(prev);
    if (e != cudaSuccess) return nccl_comm_cuda_fail(c, e, w->name, "ordering the compute stream");
    nw(w)->ordered = true;
    return 0;
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
    if (pg_work_is_done(w, &err)) return err ? ddpl_error("%s", err) : 0;
    ddpl_nccl *c = nw(w)->comm;
    if (order_compute(w) < 0) return fail_work(w);
    if (!nw(w)->host_sync) {
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
    int d = nccl_comm_poll_stream(c, NULL, nw(w)->done_event, w->name, timeout_s);
    if (d == 0) {
        ddpl_error("%s: timed out after %g s on rank %d of %d (cuda:%d): a rank did not take "
                   "part (the group is aborted)",
                   w->name, timeout_s, c->rank, c->size, c->device);
        nccl_comm_break(c);
        return fail_work(w);
    }
    if (d < 0) return fail_work(w);
    pg_work_finish(w, NULL);
    return 0;
}

static void nccl_work_poll(ddpl_work *w)
{
    if (pg_work_is_done(w, NULL)) return;
    cudaError_t e = cudaEventQuery(nw(w)->done_event);
    if (e == cudaSuccess) {
        pg_work_finish(w, NULL);
    } else if (e != cudaErrorNotReady) {
        nccl_comm_cuda_fail(nw(w)->comm, e, w->name, "cudaEventQuery");
        fail_work(w);
    } else if (nccl_comm_check_health(nw(w)->comm, w->name) < 0) {
        fail_work(w);
    }
}

static void nccl_work_release(ddpl_work *w)
{
    if (!nw(w)->comm) return; /* issuing it failed: nothing was enqueued */
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", ddpl_last_error());
    /* dropped without a wait: order the compute stream anyway before the tensors go, so their
     * memory is not reused under a running operation */
    if (!pg_work_is_done(w, NULL) && w->nslots > 0) (void)order_compute(w);
    if (nw(w)->done_event) cudaEventDestroy(nw(w)->done_event); /* freed once it completes */
    nw(w)->done_event = NULL;
    nccl_comm_release(nw(w)->comm);
    nw(w)->comm = NULL;
    ddpl_error("%s", saved); /* a release leaves the caller's error as it was */
}

/* ------------------------------------------------------------------------- the group ---- */
static int nccl_available(const char *fname)
{
    if (!ddpl_cuda_is_available())
        return ddpl_error("%s: backend 'nccl' needs a CUDA device, but CUDA is not available "
                          "here (no GPU or driver was found); use backend='gloo' for CPU tensors",
                          fname);
    return 0;
}

static int nccl_connect(ddpl_pg *pg, const char *prefix, const char *bind_host)
{
    DDPL_UNUSED(bind_host); /* NCCL's bootstrap picks its own interface */
    pg->impl = nccl_comm_connect(pg->store, prefix, pg->rank, pg->size, pg->timeout_s);
    return pg->impl ? 0 : -1;
}

static bool nccl_free(ddpl_pg *pg)
{
    nccl_comm_free(pg->impl); /* what does not finish in time is aborted */
    pg->impl = NULL;
    return true;
}

const struct ddpl_pg_backend pg_nccl_backend = {
    .name = "nccl",
    .device_type = DDPL_CUDA,
    .available = nccl_available,
    .connect = nccl_connect,
    .free = nccl_free,
    .work_size = sizeof(nccl_work),
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
