/* dist/pg_ops.c: the operations of a process group: argument checks, reduction kernels, and
 * what each collective and point-to-point call runs on its lane.
 * defines: ddpl_reduce_op_name/parse, ddpl_pg_allreduce, ddpl_pg_allreduce_prescaled(_into),
 *          ddpl_pg_is_shared, ddpl_pg_broadcast, ddpl_pg_allgather,
 *          ddpl_pg_allgather_into, ddpl_pg_reduce_scatter, ddpl_pg_send, ddpl_pg_recv,
 *          ddpl_pg_barrier, ddpl_pg_shared_zeros (pg.h).
 *
 * Issuing checks everything it can locally (device, dtype, shapes, ranks) and queues a work item;
 * the run_* functions execute on the group's lane threads through the Gloo face (gloo_pg.h).
 * A group of backend nccl shares the shape and rank checks, then hands the operation to
 * nccl_pg.c (the device and dtype checks are the backend's: nccl_check_tensor). */
#include "core/alloc.h"
#include "dist/pg_impl.h"

/* ---------------------------------------------------------------- reduction kernels ---- */
/* Gloo calls these on segments of about 1 MB; out may alias a. Plain loops: -O3 vectorises them. */
#define DEFINE_REDUCE(NAME, T, EXPR)                                                               \
    static void NAME(void *out_, const void *a_, const void *b_, size_t n)                         \
    {                                                                                              \
        T *out = out_;                                                                             \
        const T *a = a_, *b = b_;                                                                  \
        for (size_t i = 0; i < n; i++) {                                                           \
            T x = a[i], y = b[i];                                                                  \
            out[i] = (EXPR);                                                                       \
        }                                                                                          \
    }
#define DEFINE_REDUCES(SUFFIX, T)                                                                  \
    DEFINE_REDUCE(sum_##SUFFIX, T, x + y)                                                          \
    DEFINE_REDUCE(prod_##SUFFIX, T, x *y)                                                          \
    DEFINE_REDUCE(max_##SUFFIX, T, x > y ? x : y)                                                  \
    DEFINE_REDUCE(min_##SUFFIX, T, x < y ? x : y)
DEFINE_REDUCES(f32, float)
DEFINE_REDUCES(f64, double)
DEFINE_REDUCES(i64, int64_t)

/* 2 ranks on a shared buffer: both values scaled, summed, and the sum stored to both places, in
 * one pass. This file is compiled with -ffp-contract=off: a fused multiply-add would round
 * a * f + b * f once instead of rounding each product as pre-dividing does. */
static void pair_sum_f32(void *restrict a_, void *restrict b_, size_t n, double factor)
{
    float *restrict a = a_, *restrict b = b_, f = (float)factor;
    for (size_t i = 0; i < n; i++) {
        float sum = a[i] * f + b[i] * f;
        a[i] = sum;
        b[i] = sum;
    }
}

static void pair_sum_f64(void *restrict a_, void *restrict b_, size_t n, double factor)
{
    double *restrict a = a_, *restrict b = b_;
    for (size_t i = 0; i < n; i++) {
        double sum = a[i] * factor + b[i] * factor;
        a[i] = sum;
        b[i] = sum;
    }
}

static void scale_f32(void *out_, const void *in_, size_t n, double factor)
{
    float *out = out_, f = (float)factor; /* float32 * 0-dim float64 computes in float32 */
    const float *in = in_;
    for (size_t i = 0; i < n; i++) out[i] = in[i] * f;
}

static void scale_f64(void *out_, const void *in_, size_t n, double factor)
{
    double *out = out_;
    const double *in = in_;
    for (size_t i = 0; i < n; i++) out[i] = in[i] * factor;
}

/* [dtype][op]; AVG reduces with SUM and divides afterwards (Gloo has no average). */
static ddpl_reduce_fn reduce_fn(ddpl_dtype dt, ddpl_reduce_op op)
{
#define ROW(S)                                                                                     \
    {                                                                                              \
        sum_##S, sum_##S, max_##S, min_##S, prod_##S                                               \
    }
    static const ddpl_reduce_fn f32[] = ROW(f32), f64[] = ROW(f64), i64[] = ROW(i64);
#undef ROW
    switch (dt) {
    case DDPL_FLOAT32:
        return f32[op];
    case DDPL_FLOAT64:
        return f64[op];
    case DDPL_INT64:
        return i64[op];
    default:
        return NULL;
    }
}

static const char *const op_names[DDPL_REDUCE_OP_COUNT] = {"sum", "avg", "max", "min", "product"};

const char *ddpl_reduce_op_name(ddpl_reduce_op op)
{
    return (unsigned)op < DDPL_REDUCE_OP_COUNT ? op_names[op] : "?";
}

int ddpl_reduce_op_parse(const char *name)
{
    for (int i = 0; i < DDPL_REDUCE_OP_COUNT; i++)
        if (strcmp(name, op_names[i]) == 0) return i;
    return -1;
}

/* ----------------------------------------------------------------- argument checks ---- */
static const char *describe_device(const ddpl_tensor *t, char *buf, size_t n)
{
    return ddpl_device_str(t->device, buf, n);
}

/* gloo: a CPU tensor; reducing ops also need float32/float64/int64. nccl: nccl_check_tensor. */
static int check_tensor(const ddpl_pg *pg, const char *fname, const char *what,
                        const ddpl_tensor *t, bool reduces)
{
    char dev[32];
    if (!t) return ddpl_error("%s: expected a tensor for %s, got nil", fname, what);
    if (pg->nccl) return nccl_check_tensor(pg->nccl, pg->rank, fname, what, t, reduces);
    if (t->device.type != DDPL_CPU)
        return ddpl_error("%s: expected a CPU tensor for %s, got a %s tensor (backend gloo)", fname,
                          what, describe_device(t, dev, sizeof dev));
    ddpl_dtype dt = (ddpl_dtype)t->dtype;
    if (reduces && dt != DDPL_FLOAT32 && dt != DDPL_FLOAT64 && dt != DDPL_INT64)
        return ddpl_error("%s: expected a CPU tensor of float32/float64/int64, got %s", fname,
                          ddpl_dtype_name(dt));
    return 0;
}

static int check_op(const char *fname, const ddpl_tensor *t, ddpl_reduce_op op)
{
    if ((unsigned)op >= DDPL_REDUCE_OP_COUNT)
        return ddpl_error("%s: unknown reduce op %d", fname, (int)op);
    if (op == DDPL_REDUCE_AVG && !ddpl_dtype_is_floating((ddpl_dtype)t->dtype))
        return ddpl_error("%s: op 'avg' needs a floating dtype, got %s", fname,
                          ddpl_dtype_name((ddpl_dtype)t->dtype));
    return 0;
}

static int check_rank(const char *fname, const char *what, const ddpl_pg *pg, int r, bool not_self)
{
    if (r < 0 || r >= pg->size)
        return ddpl_error("%s: %s rank %d is out of range for world_size %d", fname, what, r,
                          pg->size);
    if (not_self && r == pg->rank)
        return ddpl_error("%s: %s rank %d is this rank itself", fname, what, r);
    return 0;
}

static void divide_by(void *data, ddpl_dtype dt, int64_t n, int size)
{
    if (dt == DDPL_FLOAT32) {
        float *p = data, inv = 1.0f / (float)size;
        /* multiply by 1/size only when exact (power of two), to round as a division does */
        if ((size & (size - 1)) == 0)
            for (int64_t i = 0; i < n; i++) p[i] *= inv;
        else
            for (int64_t i = 0; i < n; i++) p[i] /= (float)size;
    } else if (dt == DDPL_FLOAT64) {
        double *p = data;
        for (int64_t i = 0; i < n; i++) p[i] /= (double)size;
    }
}

/* ------------------------------------------------------------------------ operations ---- */
/* In place on count elements of dt: shared memory when the group has it, else Gloo. */
static int allreduce_buffer(ddpl_pg *pg, void *data, size_t count, ddpl_dtype dt, ddpl_reduce_op op)
{
    if (pg->shm)
        return ddpl_shm_allreduce(pg->shm, data, count, ddpl_dtype_size(dt), reduce_fn(dt, op));
    return ddpl_gloo_allreduce(pg->gloo, data, count, ddpl_dtype_size(dt), reduce_fn(dt, op));
}

static int gather_bytes(ddpl_pg *pg, const void *in, void *out, size_t nbytes)
{
    if (pg->shm) return ddpl_shm_allgather(pg->shm, in, out, nbytes);
    return ddpl_gloo_allgather(pg->gloo, in, out, nbytes);
}

static void release_shared(void *data, void *buffer)
{
    (void)data;
    ddpl_memory_account(DDPL_CPU, -(int64_t)ddpl_shm_buffer_nbytes(buffer));
    ddpl_shm_buffer_free(buffer);
}

/* A contiguous part of a shared buffer, on a group that reduces through shared memory. */
static bool is_shared(const ddpl_pg *pg, const ddpl_tensor *t)
{
    return pg->shm && t->storage->deleter == release_shared && ddpl_tensor_is_contiguous(t);
}

static int run_allreduce(ddpl_work *w)
{
    ddpl_tensor *t = w->slots[0].t;
    ddpl_dtype dt = (ddpl_dtype)t->dtype;
    int64_t n = ddpl_tensor_numel(t);
    size_t es = ddpl_dtype_size(dt);
    int rc;
    if (is_shared(w->pg, t)) {
        /* slots 1.. (ddpl_pg_allreduce_prescaled_into): where this rank keeps those values */
        int nsegs = w->nslots - 1;
        const int64_t *offsets = w->scratch;
        ddpl_shm_seg *segs = nsegs ? ddpl_xcalloc((size_t)nsegs, sizeof *segs) : NULL;
        for (int i = 0; i < nsegs; i++)
            segs[i] = (ddpl_shm_seg){w->slots[1 + i].data, (size_t)offsets[i],
                                     (size_t)ddpl_tensor_numel(w->slots[1 + i].t)};
        /* only a shared buffer is prescaled here; allreduce_prescaled scales others first */
        bool f32 = dt == DDPL_FLOAT32, sum = w->op == DDPL_REDUCE_SUM || w->op == DDPL_REDUCE_AVG;
        ddpl_shm_reduce how = {
            .elsize = es,
            .fn = reduce_fn(dt, w->op),
            .scale = w->prescaled ? (f32 ? scale_f32 : scale_f64) : NULL,
            .factor = w->prescaled ? w->factor : 1.0,
            .pair = !sum                 ? NULL
                    : f32                ? pair_sum_f32
                    : dt == DDPL_FLOAT64 ? pair_sum_f64
                                         : NULL,
        };
        rc = ddpl_shm_buffer_allreduce(w->pg->shm, t->storage->deleter_ctx, (size_t)t->offset * es,
                                       (size_t)n, &how, segs, nsegs);
        free(segs);
    } else
        rc = allreduce_buffer(w->pg, w->slots[0].data, (size_t)n, dt, w->op);
    if (rc < 0) return -1;
    if (w->op == DDPL_REDUCE_AVG) divide_by(w->slots[0].data, dt, n, w->pg->size);
    return 0;
}

ddpl_work *ddpl_pg_allreduce(ddpl_pg *pg, ddpl_tensor *t, ddpl_reduce_op op)
{
    if (check_tensor(pg, "all_reduce", "the tensor", t, true) < 0 ||
        check_op("all_reduce", t, op) < 0)
        return NULL;
    if (pg->nccl) return nccl_pg_allreduce(pg, t, op);
    ddpl_work *w = pg_work_new(pg, "all_reduce", 1, run_allreduce);
    w->op = op;
    pg_work_slot(w, 0, t, true, true);
    return pg_lane_push(&pg->coll, w);
}

ddpl_work *ddpl_pg_allreduce_prescaled(ddpl_pg *pg, ddpl_tensor *t, double factor)
{
    if (check_tensor(pg, "all_reduce", "the tensor", t, true) < 0) return NULL;
    ddpl_dtype dt = (ddpl_dtype)t->dtype;
    if (dt != DDPL_FLOAT32 && dt != DDPL_FLOAT64) {
        ddpl_error("all_reduce: a prescaled sum needs float32 or float64, got %s",
                   ddpl_dtype_name(dt));
        return NULL;
    }
    if (!pg->nccl && is_shared(pg, t)) {
        ddpl_work *w = pg_work_new(pg, "all_reduce", 1, run_allreduce);
        w->op = DDPL_REDUCE_SUM;
        w->prescaled = true;
        w->factor = factor;
        pg_work_slot(w, 0, t, true, true);
        return pg_lane_push(&pg->coll, w);
    }
    ddpl_tensor *f = ddpl_scalar(factor, DDPL_FLOAT64, t->device);
    int rc = f ? ddpl_mul_(t, f) : -1;
    ddpl_tensor_release(f);
    return rc < 0 ? NULL : ddpl_pg_allreduce(pg, t, DDPL_REDUCE_SUM);
}

bool ddpl_pg_is_shared(const ddpl_pg *pg, const ddpl_tensor *t)
{
    return t && !pg->nccl && is_shared(pg, t);
}

ddpl_work *ddpl_pg_allreduce_prescaled_into(ddpl_pg *pg, ddpl_tensor *t, double factor, int n,
                                            ddpl_tensor *const *values, const int64_t *offsets)
{
    const char *fname = "all_reduce";
    if (!ddpl_pg_is_shared(pg, t)) {
        ddpl_error("%s: the tensor is not a shared buffer of this group (ddpl_pg_shared_zeros on "
                   "a group that reduces through shared memory)",
                   fname);
        return NULL;
    }
    ddpl_dtype dt = (ddpl_dtype)t->dtype;
    int64_t numel = ddpl_tensor_numel(t), end = 0;
    for (int i = 0; i < n; i++) {
        const ddpl_tensor *v = values[i];
        int64_t k = v ? ddpl_tensor_numel(v) : 0;
        if (!v || v->device.type != DDPL_CPU || v->dtype != dt || !ddpl_tensor_is_contiguous(v) ||
            offsets[i] < end || offsets[i] + k > numel || v->storage == t->storage) {
            ddpl_error("%s: value tensor %d must be a contiguous CPU %s tensor outside the shared "
                       "buffer, at an offset after the previous one's end (%lld) and within its "
                       "%lld elements (offset %lld, %lld elements)",
                       fname, i, ddpl_dtype_name(dt), (long long)end, (long long)numel,
                       (long long)offsets[i], (long long)k);
            return NULL;
        }
        end = offsets[i] + k;
    }
    ddpl_work *w = pg_work_new(pg, fname, 1 + n, run_allreduce);
    w->op = DDPL_REDUCE_SUM;
    w->prescaled = true;
    w->factor = factor;
    pg_work_slot(w, 0, t, true, true);
    for (int i = 0; i < n; i++) pg_work_slot(w, 1 + i, values[i], true, true);
    w->scratch =
        n ? memcpy(ddpl_xmalloc((size_t)n * sizeof *offsets), offsets, (size_t)n * sizeof *offsets)
          : NULL;
    return pg_lane_push(&pg->coll, w);
}

static int run_broadcast(ddpl_work *w)
{
    if (w->pg->shm)
        return ddpl_shm_broadcast(w->pg->shm, w->slots[0].data, ddpl_tensor_nbytes(w->slots[0].t),
                                  w->peer);
    return ddpl_gloo_broadcast(w->pg->gloo, w->slots[0].data, ddpl_tensor_nbytes(w->slots[0].t),
                               w->peer);
}

ddpl_work *ddpl_pg_broadcast(ddpl_pg *pg, ddpl_tensor *t, int src)
{
    if (check_tensor(pg, "broadcast", "the tensor", t, false) < 0 ||
        check_rank("broadcast", "src", pg, src, false) < 0)
        return NULL;
    if (pg->nccl) return nccl_pg_broadcast(pg, t, src);
    ddpl_work *w = pg_work_new(pg, "broadcast", 1, run_broadcast);
    w->peer = src;
    pg_work_slot(w, 0, t, true, src != pg->rank);
    return pg_lane_push(&pg->coll, w);
}

/* slot 0 = the input, slots 1..size = the outputs; scratch gathers all ranks' bytes */
static int run_allgather(ddpl_work *w)
{
    if (gather_bytes(w->pg, w->slots[0].data, w->scratch, w->nbytes) < 0) return -1;
    for (int r = 0; r < w->pg->size; r++)
        memcpy(w->slots[1 + r].data, (char *)w->scratch + (size_t)r * w->nbytes, w->nbytes);
    return 0;
}

static int check_like(const ddpl_pg *pg, const char *fname, const char *what,
                      const ddpl_tensor *out, const ddpl_tensor *t)
{
    if (check_tensor(pg, fname, what, out, false) < 0) return -1;
    if (out->dtype != t->dtype || !ddpl_same_shape(out, t)) {
        char a[96], b[96];
        return ddpl_error("%s: %s is %s %s, but the input is %s %s", fname, what,
                          ddpl_shape_str(out, a, sizeof a), ddpl_dtype_name((ddpl_dtype)out->dtype),
                          ddpl_shape_str(t, b, sizeof b), ddpl_dtype_name((ddpl_dtype)t->dtype));
    }
    return 0;
}

ddpl_work *ddpl_pg_allgather(ddpl_pg *pg, ddpl_tensor *const *outs, int nouts, ddpl_tensor *t)
{
    if (check_tensor(pg, "all_gather", "the input", t, false) < 0) return NULL;
    if (nouts != pg->size) {
        ddpl_error("all_gather: expected a list of %d output tensors (world_size), got %d",
                   pg->size, nouts);
        return NULL;
    }
    for (int r = 0; r < nouts; r++) {
        char what[32];
        snprintf(what, sizeof what, "output %d", r);
        if (check_like(pg, "all_gather", what, outs[r], t) < 0) return NULL;
    }
    if (pg->nccl) return nccl_pg_allgather(pg, outs, nouts, t);
    ddpl_work *w = pg_work_new(pg, "all_gather", 1 + nouts, run_allgather);
    pg_work_slot(w, 0, t, true, false);
    for (int r = 0; r < nouts; r++) pg_work_slot(w, 1 + r, outs[r], false, true);
    w->nbytes = ddpl_tensor_nbytes(t);
    w->scratch = ddpl_xmalloc(w->nbytes * (size_t)pg->size + 1);
    return pg_lane_push(&pg->coll, w);
}

static int run_allgather_into(ddpl_work *w)
{
    return gather_bytes(w->pg, w->slots[1].data, w->slots[0].data, w->nbytes);
}

ddpl_work *ddpl_pg_allgather_into(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *t)
{
    const char *f = "all_gather_into_tensor";
    if (check_tensor(pg, f, "the input", t, false) < 0 ||
        check_tensor(pg, f, "the output", out, false) < 0)
        return NULL;
    if (out->dtype != t->dtype ||
        ddpl_tensor_numel(out) != ddpl_tensor_numel(t) * (int64_t)pg->size) {
        char a[96], b[96];
        ddpl_error("%s: the output must hold world_size (%d) x the input's elements of its dtype, "
                   "got output %s %s and input %s %s",
                   f, pg->size, ddpl_shape_str(out, a, sizeof a),
                   ddpl_dtype_name((ddpl_dtype)out->dtype), ddpl_shape_str(t, b, sizeof b),
                   ddpl_dtype_name((ddpl_dtype)t->dtype));
        return NULL;
    }
    if (pg->nccl) return nccl_pg_allgather_into(pg, out, t);
    ddpl_work *w = pg_work_new(pg, f, 2, run_allgather_into);
    pg_work_slot(w, 0, out, false, true);
    pg_work_slot(w, 1, t, true, false);
    w->nbytes = ddpl_tensor_nbytes(t);
    return pg_lane_push(&pg->coll, w);
}

/* Reduce-scatter as allreduce of a copy of the input, keeping this rank's chunk: twice the
 * traffic of a dedicated algorithm, but exact and simple (Gloo's reduce_scatter is an old-style
 * algorithm class with its own buffer registration). */
static int run_reduce_scatter(ddpl_work *w)
{
    ddpl_tensor *out = w->slots[0].t;
    ddpl_dtype dt = (ddpl_dtype)out->dtype;
    int64_t n = ddpl_tensor_numel(out) * w->pg->size;
    if (allreduce_buffer(w->pg, w->scratch, (size_t)n, dt, w->op) < 0) return -1;
    char *mine = (char *)w->scratch + (size_t)w->pg->rank * w->nbytes;
    if (w->op == DDPL_REDUCE_AVG) divide_by(mine, dt, ddpl_tensor_numel(out), w->pg->size);
    memcpy(w->slots[0].data, mine, w->nbytes);
    return 0;
}

ddpl_work *ddpl_pg_reduce_scatter(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *in, ddpl_reduce_op op)
{
    const char *f = "reduce_scatter_tensor";
    if (check_tensor(pg, f, "the input", in, true) < 0 ||
        check_tensor(pg, f, "the output", out, true) < 0 || check_op(f, in, op) < 0)
        return NULL;
    if (out->dtype != in->dtype ||
        ddpl_tensor_numel(in) != ddpl_tensor_numel(out) * (int64_t)pg->size) {
        char a[96], b[96];
        ddpl_error("%s: the input must hold world_size (%d) x the output's elements of its dtype, "
                   "got output %s %s and input %s %s",
                   f, pg->size, ddpl_shape_str(out, a, sizeof a),
                   ddpl_dtype_name((ddpl_dtype)out->dtype), ddpl_shape_str(in, b, sizeof b),
                   ddpl_dtype_name((ddpl_dtype)in->dtype));
        return NULL;
    }
    if (pg->nccl) return nccl_pg_reduce_scatter(pg, out, in, op);
    ddpl_work *w = pg_work_new(pg, f, 1, run_reduce_scatter);
    w->op = op;
    pg_work_slot(w, 0, out, false, true);
    w->nbytes = ddpl_tensor_nbytes(out);
    size_t total = ddpl_tensor_nbytes(in);
    w->scratch = ddpl_xmalloc(total + 1);
    pg_strided_copy(in, w->scratch, true);
    return pg_lane_push(&pg->coll, w);
}

/* Point-to-point: the sender posts a header (dtype, shape, bytes) on channel 0 and the payload on
 * channel 1 at once; the receiver posts only the header receive, and its lane posts the payload
 * receive once the header said how big it is. A mismatched receiver thus gets a clear error
 * instead of Gloo's abort, and the stray payload is drained so later messages still match. */
static int p2p_wait(ddpl_work *w, ddpl_gloo_p2p **p)
{
    ddpl_gloo_p2p *h = *p;
    *p = NULL;
    return ddpl_gloo_p2p_wait(h, w->timeout_s);
}

static int run_send(ddpl_work *w)
{
    if (p2p_wait(w, &w->p2p_hdr) < 0) return -1;
    return p2p_wait(w, &w->p2p);
}

static int run_recv(ddpl_work *w)
{
    if (p2p_wait(w, &w->p2p_hdr) < 0) return -1;
    ddpl_tensor *t = w->slots[0].t;
    const pg_p2p_header *h = &w->hdr;
    bool ok = h->nbytes == (int64_t)ddpl_tensor_nbytes(t) && h->dtype == t->dtype &&
              ddpl_numel(h->ndim, h->sizes) == ddpl_tensor_numel(t);
    void *dst = w->slots[0].data;
    if (!ok) dst = w->scratch = ddpl_xmalloc((size_t)h->nbytes + 1);
    w->p2p = ddpl_gloo_recv(w->pg->gloo, dst, (size_t)h->nbytes, w->peer, 1);
    if (!w->p2p || p2p_wait(w, &w->p2p) < 0) return -1;
    if (!ok) {
        char a[96], b[96];
        w->harmless = true; /* the payload was drained: later messages still match */
        int nd = h->ndim >= 0 && h->ndim <= DDPL_MAX_DIMS ? h->ndim : 0;
        return ddpl_error(
            "recv: rank %d sent %s %s, but the tensor here is %s %s", w->peer,
            ddpl_sizes_str(nd, h->sizes, a, sizeof a),
            (unsigned)h->dtype < DDPL_DTYPE_COUNT ? ddpl_dtype_name((ddpl_dtype)h->dtype) : "?",
            ddpl_shape_str(t, b, sizeof b), ddpl_dtype_name((ddpl_dtype)t->dtype));
    }
    return 0;
}

static ddpl_work *p2p(ddpl_pg *pg, const char *f, ddpl_tensor *t, int peer, bool is_send)
{
    if (check_tensor(pg, f, "the tensor", t, false) < 0 ||
        check_rank(f, is_send ? "dst" : "src", pg, peer, true) < 0)
        return NULL;
    if (pg->nccl) return is_send ? nccl_pg_send(pg, t, peer) : nccl_pg_recv(pg, t, peer);
    ddpl_work *w = pg_work_new(pg, f, 1, is_send ? run_send : run_recv);
    w->peer = peer;
    pg_work_slot(w, 0, t, is_send, !is_send);
    if (is_send) {
        w->hdr.nbytes = (int64_t)ddpl_tensor_nbytes(t);
        w->hdr.dtype = t->dtype;
        w->hdr.ndim = t->ndim;
        memcpy(w->hdr.sizes, t->sizes, sizeof w->hdr.sizes);
        w->p2p_hdr = ddpl_gloo_send(pg->gloo, &w->hdr, sizeof w->hdr, peer, 0);
        if (w->p2p_hdr)
            w->p2p = ddpl_gloo_send(pg->gloo, w->slots[0].data, ddpl_tensor_nbytes(t), peer, 1);
    } else {
        w->p2p_hdr = ddpl_gloo_recv(pg->gloo, &w->hdr, sizeof w->hdr, peer, 0);
    }
    if (!w->p2p_hdr || (is_send && !w->p2p)) {
        char e[768];
        snprintf(e, sizeof e, "%s", ddpl_last_error());
        ddpl_work_release(w);
        ddpl_error("%s: %s (rank %d, peer %d)", f, e, pg->rank, peer);
        return NULL;
    }
    return pg_lane_push(is_send ? &pg->send : &pg->recv, w);
}

ddpl_work *ddpl_pg_send(ddpl_pg *pg, ddpl_tensor *t, int dst)
{
    return p2p(pg, "send", t, dst, true);
}

ddpl_work *ddpl_pg_recv(ddpl_pg *pg, ddpl_tensor *t, int src)
{
    return p2p(pg, "recv", t, src, false);
}

static int run_barrier(ddpl_work *w)
{
    if (w->pg->shm) return ddpl_shm_barrier(w->pg->shm);
    return ddpl_gloo_barrier(w->pg->gloo);
}

ddpl_work *ddpl_pg_barrier(ddpl_pg *pg)
{
    if (pg->nccl) return nccl_pg_barrier(pg);
    return pg_lane_push(&pg->coll, pg_work_new(pg, "barrier", 0, run_barrier));
}

static int run_shared_zeros(ddpl_work *w)
{
    return ddpl_shm_buffer_new(w->pg->shm, w->nbytes, &w->made);
}

ddpl_tensor *ddpl_pg_shared_zeros(ddpl_pg *pg, int64_t numel, ddpl_dtype dt)
{
    if (numel < 0) {
        ddpl_error("shared_zeros: negative size %lld", (long long)numel);
        return NULL;
    }
    if (!pg->shm) return ddpl_zeros(1, &numel, dt, ddpl_cpu());
    ddpl_work *w = pg_work_new(pg, "shared_zeros", 0, run_shared_zeros);
    w->nbytes = (size_t)numel * ddpl_dtype_size(dt);
    pg_lane_push(&pg->coll, w);
    int rc = ddpl_work_wait(w, -1);
    ddpl_shm_buffer *b = w->made;
    w->made = NULL;
    ddpl_work_release(w);
    if (rc < 0) return NULL;
    if (!b) return ddpl_zeros(1, &numel, dt, ddpl_cpu()); /* some rank had no room in /dev/shm */
    ddpl_memory_account(DDPL_CPU, (int64_t)ddpl_shm_buffer_nbytes(b));
    return ddpl_from_blob(ddpl_shm_buffer_data(b), 1, &numel, dt, release_shared, b);
}
