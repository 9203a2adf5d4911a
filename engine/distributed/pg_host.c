/* distributed/pg_host.c: the process-group backend for CPU tensors (backend 'gloo'): each operation
 * is a work item, staged on the host and run on the group's lanes (pg_host_lanes.c), whose bytes
 * move through a table of host collectives (pg_host_coll.c): Gloo over TCP, or shared memory
 * (shm_coll.h) when every rank is on this machine. Point-to-point messages always go through
 * Gloo.
 * defines: pg_host_backend (pg_backend.h), host_work_new, pg_host_reduce_fn, pg_host_divide_by
 *          (pg_host.h); the reduction kernels and the run_* functions of the lanes are static.
 *          The rooted collectives and all-to-all are in pg_host_rooted.c.
 *
 * The shared-memory table replaces Gloo's for collectives only, chosen once at connect and the
 * same on every rank (ddpl_shm_connect decides collectively); it alone has buffers every rank
 * maps, which the DDP reducer's buckets live in. This file is compiled with -ffp-contract=off:
 * see pair_sum_f32.
 *
 * Faults: at connect the ranks exchange their pid and host name (the Gloo wrapper names a peer
 * whose connection failed with them), and a heartbeat starts (distributed/pg_heartbeat.h), whose
 * fault, when it saw one, is the message of every operation that failed (the backend's fault
 * entry). */
#define _GNU_SOURCE /* gethostname */
#include <unistd.h>

#include "core/alloc.h"
#include "distributed/pg_heartbeat.h"
#include "distributed/pg_host.h"

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
ddpl_reduce_fn pg_host_reduce_fn(ddpl_dtype dt, ddpl_reduce_op op)
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

void pg_host_divide_by(void *data, ddpl_dtype dt, int64_t n, int size)
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

/* ------------------------------------------------------------------------- the group ---- */
static bool host_free(ddpl_pg *pg)
{
    pg_host *h = host_of(pg);
    if (!h) return true;
    /* queued operations finish first, each bounded by the timeout */
    if (!host_lanes_stop(&h->lanes, pg->timeout_s + 5.0)) return false;
    pg_heartbeat_stop(h->hb); /* it uses the transports and reads the lanes' counters */
    host_lanes_free(&h->lanes);
    pg_host_hier_free(h->hier);
    ddpl_gloo_free(h->gloo);
    ddpl_shm_free(h->shm);
    for (int q = 0; h->hosts && q < pg->size; q++) free(h->hosts[q]);
    free(h->hosts);
    free(h->pids);
    free(h);
    pg->impl = NULL;
    return true;
}

/* Every rank publishes "<pid> <host name>" under <prefix>who/<rank> and reads the others':
 * fault messages name them (rank 1 (pid 4242, host node3)). Blocks up to the store's timeout;
 * every rank has joined by now. */
static int exchange_who(ddpl_pg *pg, pg_host *h, const char *prefix)
{
    char key[256], me[320], host[256] = "";
    gethostname(host, sizeof host - 1);
    snprintf(me, sizeof me, "%d %s", (int)getpid(), host);
    snprintf(key, sizeof key, "%swho/%d", prefix, pg->rank);
    if (ddpl_store_set(pg->store, key, me, strlen(me)) < 0) return -1;
    h->pids = ddpl_xcalloc((size_t)pg->size, sizeof *h->pids);
    h->hosts = ddpl_xcalloc((size_t)pg->size, sizeof *h->hosts);
    int *global = ddpl_xcalloc((size_t)pg->size, sizeof *global);
    for (int q = 0; q < pg->size; q++) {
        void *v = NULL;
        size_t len = 0;
        snprintf(key, sizeof key, "%swho/%d", prefix, q);
        if (ddpl_store_get(pg->store, key, &v, &len) < 0) {
            free(global);
            return -1;
        }
        char *space = memchr(v, ' ', len);
        h->pids[q] = atoi(v);
        h->hosts[q] = ddpl_xmalloc(len + 1);
        snprintf(h->hosts[q], len + 1, "%s", space ? space + 1 : "");
        global[q] = ddpl_pg_global_rank(pg, q);
        free(v);
    }
    ddpl_gloo_set_peers(h->gloo, global, h->pids, (const char *const *)h->hosts);
    free(global);
    return 0;
}

static int host_connect(ddpl_pg *pg, const char *prefix, const char *bind_host)
{
    pg_host *h = ddpl_xcalloc(1, sizeof *h);
    pg->impl = h;
    char key[256];
    snprintf(key, sizeof key, "%sgloo/", prefix);
    h->gloo = ddpl_gloo_connect(pg->store, key, pg->rank, pg->size, bind_host, pg->timeout_s);
    if (!h->gloo) {
        char e[768];
        snprintf(e, sizeof e, "%s", ddpl_last_error());
        return ddpl_error("init_process_group: connecting the gloo mesh failed on rank %d: %s",
                          pg->rank, e);
    }
    snprintf(key, sizeof key, "%sshm/", prefix);
    h->shm = ddpl_shm_connect(pg->store, key, pg->rank, pg->size, pg->timeout_s);
    h->coll = h->shm ? &pg_host_shm_coll : &pg_host_gloo_coll;
    /* Once every rank passed this barrier nobody reads rendezvous keys any more, so rank 0 may
     * free the store whenever it likes. */
    if (exchange_who(pg, h, prefix) < 0 ||
        (!h->shm && pg_host_hier_connect(pg, h, prefix, bind_host) < 0) ||
        ddpl_gloo_barrier(h->gloo) < 0) {
        char e[768];
        snprintf(e, sizeof e, "%s", ddpl_last_error());
        return ddpl_error("init_process_group: %s", e);
    }
    if (host_lanes_start(pg, &h->lanes) < 0) return -1;
    h->hb = pg_heartbeat_start(pg, prefix);
    if (!h->hb && pg_heartbeat_limit(pg->heartbeat_s) > 0 && pg->size > 1) {
        char e[768];
        snprintf(e, sizeof e, "%s", ddpl_last_error());
        return ddpl_error("init_process_group: %s", e);
    }
    return 0;
}

ddpl_work *host_work_new(ddpl_pg *pg, const char *name, int nslots, int (*run)(ddpl_work *))
{
    ddpl_work *w = pg_work_new(pg, name, nslots);
    host_work *hw = host_work_of(w);
    hw->run = run;
    host_lanes *l = &host_of(pg)->lanes;
    hw->quiet = l->quiet_next;
    l->quiet_next = false;
    return w;
}

static const char *host_transport(const ddpl_pg *pg)
{
    const pg_host *h = host_of(pg);
    return h->shm ? "shm" : h->hier ? pg_host_hier_transport(h->hier) : "gloo";
}

/* A CPU tensor; reducing ops also need float32/float64/int64. */
static int host_check_tensor(const ddpl_pg *pg, const char *fname, const char *what,
                             const ddpl_tensor *t, bool reduces)
{
    DDPL_UNUSED(pg);
    char dev[32];
    if (t->device.type != DDPL_CPU)
        return ddpl_error("%s: expected a CPU tensor for %s, got a %s tensor (backend gloo)", fname,
                          what, ddpl_device_str(t->device, dev, sizeof dev));
    ddpl_dtype dt = (ddpl_dtype)t->dtype;
    if (reduces && dt != DDPL_FLOAT32 && dt != DDPL_FLOAT64 && dt != DDPL_INT64)
        return ddpl_error("%s: expected a CPU tensor of float32/float64/int64, got %s", fname,
                          ddpl_dtype_name(dt));
    return 0;
}

/* -------------------------------------------------------------------- shared buffers ---- */
static void release_shared(void *data, void *buffer)
{
    (void)data;
    ddpl_memory_account(DDPL_CPU, -(int64_t)ddpl_shm_buffer_nbytes(buffer));
    ddpl_shm_buffer_free(buffer);
}

/* A contiguous part of a shared buffer, on a group that reduces through shared memory. */
static bool host_is_shared(const ddpl_pg *pg, const ddpl_tensor *t)
{
    return host_of(pg)->coll->buffer_allreduce && t->storage->deleter == release_shared &&
           ddpl_tensor_is_contiguous(t);
}

static int run_shared_zeros(ddpl_work *w)
{
    pg_host *h = host_of(w->pg);
    return h->coll->buffer_new(h, w->nbytes, &host_work_of(w)->made);
}

static ddpl_tensor *host_shared_zeros(ddpl_pg *pg, int64_t numel, ddpl_dtype dt)
{
    if (!host_of(pg)->coll->buffer_new) return ddpl_zeros(1, &numel, dt, ddpl_cpu());
    ddpl_work *w = host_work_new(pg, "shared_zeros", 0, run_shared_zeros);
    w->nbytes = (size_t)numel * ddpl_dtype_size(dt);
    host_lane_push(&host_of(pg)->lanes.coll, w);
    int rc = ddpl_work_wait(w, -1);
    ddpl_shm_buffer *b = host_work_of(w)->made;
    host_work_of(w)->made = NULL;
    ddpl_work_release(w);
    if (rc < 0) return NULL;
    if (!b) return ddpl_zeros(1, &numel, dt, ddpl_cpu()); /* some rank had no room in /dev/shm */
    ddpl_memory_account(DDPL_CPU, (int64_t)ddpl_shm_buffer_nbytes(b));
    return ddpl_from_blob(ddpl_shm_buffer_data(b), 1, &numel, dt, release_shared, b);
}

/* ------------------------------------------------------------------------ operations ---- */
/* slot 0: the tensor, in place. On a shared buffer, slots 1.. are where this rank keeps values
 * (ddpl_pg_allreduce_prescaled_into; their offsets in scratch) and a prescaled sum scales inside
 * the reduction. */
static int run_allreduce(ddpl_work *w)
{
    pg_host *h = host_of(w->pg);
    const host_work *hw = host_work_of(w);
    ddpl_tensor *t = w->slots[0].t;
    ddpl_dtype dt = (ddpl_dtype)t->dtype;
    int64_t n = ddpl_tensor_numel(t);
    size_t es = ddpl_dtype_size(dt);
    int rc;
    if (host_is_shared(w->pg, t)) {
        int nsegs = w->nslots - 1;
        const int64_t *offsets = w->scratch;
        ddpl_shm_seg *segs = nsegs ? ddpl_xcalloc((size_t)nsegs, sizeof *segs) : NULL;
        for (int i = 0; i < nsegs; i++)
            segs[i] = (ddpl_shm_seg){w->slots[1 + i].data, (size_t)offsets[i],
                                     (size_t)ddpl_tensor_numel(w->slots[1 + i].t)};
        bool f32 = dt == DDPL_FLOAT32, sum = w->op == DDPL_REDUCE_SUM || w->op == DDPL_REDUCE_AVG;
        ddpl_shm_reduce how = {
            .elsize = es,
            .fn = pg_host_reduce_fn(dt, w->op),
            .scale = hw->prescaled ? (f32 ? scale_f32 : scale_f64) : NULL,
            .factor = hw->prescaled ? hw->factor : 1.0,
            .pair = !sum                 ? NULL
                    : f32                ? pair_sum_f32
                    : dt == DDPL_FLOAT64 ? pair_sum_f64
                                         : NULL,
        };
        rc = h->coll->buffer_allreduce(h, t->storage->deleter_ctx, (size_t)t->offset * es,
                                       (size_t)n, &how, segs, nsegs);
        free(segs);
    } else
        rc = h->coll->allreduce(h, w->slots[0].data, (size_t)n, es, pg_host_reduce_fn(dt, w->op));
    if (rc < 0) return -1;
    if (w->op == DDPL_REDUCE_AVG) pg_host_divide_by(w->slots[0].data, dt, n, w->pg->size);
    return 0;
}

static ddpl_work *host_allreduce(ddpl_pg *pg, ddpl_tensor *t, ddpl_reduce_op op)
{
    ddpl_work *w = host_work_new(pg, "all_reduce", 1, run_allreduce);
    w->op = op;
    pg_work_slot(w, 0, t, true, true);
    return host_lane_push(&host_of(pg)->lanes.coll, w);
}

static ddpl_work *host_allreduce_shared(ddpl_pg *pg, ddpl_tensor *t, double factor, int n,
                                        ddpl_tensor *const *values, const int64_t *offsets)
{
    ddpl_work *w = host_work_new(pg, "all_reduce", 1 + n, run_allreduce);
    w->op = DDPL_REDUCE_SUM;
    host_work_of(w)->prescaled = true;
    host_work_of(w)->factor = factor;
    pg_work_slot(w, 0, t, true, true);
    for (int i = 0; i < n; i++) pg_work_slot(w, 1 + i, values[i], true, true);
    w->scratch =
        n ? memcpy(ddpl_xmalloc((size_t)n * sizeof *offsets), offsets, (size_t)n * sizeof *offsets)
          : NULL;
    return host_lane_push(&host_of(pg)->lanes.coll, w);
}

static int run_broadcast(ddpl_work *w)
{
    pg_host *h = host_of(w->pg);
    return h->coll->broadcast(h, w->slots[0].data, ddpl_tensor_nbytes(w->slots[0].t), w->peer);
}

static ddpl_work *host_broadcast(ddpl_pg *pg, ddpl_tensor *t, int src)
{
    ddpl_work *w = host_work_new(pg, "broadcast", 1, run_broadcast);
    w->peer = src;
    pg_work_slot(w, 0, t, true, src != pg->rank);
    return host_lane_push(&host_of(pg)->lanes.coll, w);
}

/* slot 0 = the input, slots 1..size = the outputs; scratch gathers all ranks' bytes */
static int run_allgather(ddpl_work *w)
{
    pg_host *h = host_of(w->pg);
    if (h->coll->allgather(h, w->slots[0].data, w->scratch, w->nbytes) < 0) return -1;
    for (int r = 0; r < w->pg->size; r++)
        memcpy(w->slots[1 + r].data, (char *)w->scratch + (size_t)r * w->nbytes, w->nbytes);
    return 0;
}

static ddpl_work *host_allgather(ddpl_pg *pg, ddpl_tensor *const *outs, int nouts, ddpl_tensor *t)
{
    ddpl_work *w = host_work_new(pg, "all_gather", 1 + nouts, run_allgather);
    pg_work_slot(w, 0, t, true, false);
    for (int r = 0; r < nouts; r++) pg_work_slot(w, 1 + r, outs[r], false, true);
    w->nbytes = ddpl_tensor_nbytes(t);
    w->scratch = ddpl_xmalloc(w->nbytes * (size_t)pg->size + 1);
    return host_lane_push(&host_of(pg)->lanes.coll, w);
}

/* slot 0 = out (size x nbytes), slot 1 = the input */
static int run_allgather_into(ddpl_work *w)
{
    pg_host *h = host_of(w->pg);
    return h->coll->allgather(h, w->slots[1].data, w->slots[0].data, w->nbytes);
}

static ddpl_work *host_allgather_into(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *t)
{
    ddpl_work *w = host_work_new(pg, "all_gather_into_tensor", 2, run_allgather_into);
    pg_work_slot(w, 0, out, false, true);
    pg_work_slot(w, 1, t, true, false);
    w->nbytes = ddpl_tensor_nbytes(t);
    return host_lane_push(&host_of(pg)->lanes.coll, w);
}

/* Reduce-scatter: straight from the input where the table has one (shared memory), else as an
 * allreduce of a copy of the input (scratch), keeping this rank's chunk: twice the traffic of a
 * dedicated algorithm, but exact and simple (Gloo's reduce_scatter is an old-style algorithm
 * class with its own buffer registration). slot 0 = out, slot 1 = the input (direct only). */
static int run_reduce_scatter(ddpl_work *w)
{
    pg_host *h = host_of(w->pg);
    ddpl_tensor *out = w->slots[0].t;
    ddpl_dtype dt = (ddpl_dtype)out->dtype;
    size_t count = (size_t)ddpl_tensor_numel(out), es = ddpl_dtype_size(dt);
    char *mine = w->slots[0].data;
    if (h->coll->reduce_scatter) {
        if (h->coll->reduce_scatter(h, w->slots[1].data, mine, count, es,
                                    pg_host_reduce_fn(dt, w->op)) < 0)
            return -1;
    } else {
        size_t n = count * (size_t)w->pg->size;
        if (h->coll->allreduce(h, w->scratch, n, es, pg_host_reduce_fn(dt, w->op)) < 0) return -1;
        memcpy(mine, (char *)w->scratch + (size_t)w->pg->rank * w->nbytes, w->nbytes);
    }
    if (w->op == DDPL_REDUCE_AVG) pg_host_divide_by(mine, dt, (int64_t)count, w->pg->size);
    return 0;
}

static ddpl_work *host_reduce_scatter(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *in,
                                      ddpl_reduce_op op)
{
    bool direct = host_of(pg)->coll->reduce_scatter != NULL;
    ddpl_work *w = host_work_new(pg, "reduce_scatter_tensor", direct ? 2 : 1, run_reduce_scatter);
    w->op = op;
    pg_work_slot(w, 0, out, false, true);
    w->nbytes = ddpl_tensor_nbytes(out);
    if (direct) {
        pg_work_slot(w, 1, in, true, false);
    } else {
        w->scratch = ddpl_xmalloc(ddpl_tensor_nbytes(in) + 1);
        pg_strided_copy(in, w->scratch, true);
    }
    return host_lane_push(&host_of(pg)->lanes.coll, w);
}

static int run_barrier(ddpl_work *w)
{
    pg_host *h = host_of(w->pg);
    /* the fingerprint check just before (lane_run) already waited for every rank: a second
     * round trip would only double the barrier's latency (bench/README.md, session 37) */
    if (w->fp.seq && h->coll->agree_waits_for_all) return 0;
    return h->coll->barrier(h);
}

static ddpl_work *host_barrier(ddpl_pg *pg)
{
    return host_lane_push(&host_of(pg)->lanes.coll, host_work_new(pg, "barrier", 0, run_barrier));
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
    host_work *hw = host_work_of(w);
    if (p2p_wait(w, &hw->p2p_hdr) < 0) return -1;
    return p2p_wait(w, &hw->p2p);
}

static int run_recv(ddpl_work *w)
{
    host_work *hw = host_work_of(w);
    if (p2p_wait(w, &hw->p2p_hdr) < 0) return -1;
    ddpl_tensor *t = w->slots[0].t;
    const host_p2p_header *h = &hw->hdr;
    bool ok = h->nbytes == (int64_t)ddpl_tensor_nbytes(t) && h->dtype == t->dtype &&
              ddpl_numel(h->ndim, h->sizes) == ddpl_tensor_numel(t);
    void *dst = w->slots[0].data;
    if (!ok) dst = w->scratch = ddpl_xmalloc((size_t)h->nbytes + 1);
    hw->p2p = ddpl_gloo_recv(host_of(w->pg)->gloo, dst, (size_t)h->nbytes, w->peer, 1);
    if (!hw->p2p || p2p_wait(w, &hw->p2p) < 0) return -1;
    if (!ok) {
        char a[96], b[96];
        hw->harmless = true; /* the payload was drained: later messages still match */
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
    pg_host *h = host_of(pg);
    ddpl_work *w = host_work_new(pg, f, 1, is_send ? run_send : run_recv);
    host_work *hw = host_work_of(w);
    w->peer = peer;
    pg_work_slot(w, 0, t, is_send, !is_send);
    if (is_send) {
        hw->hdr.nbytes = (int64_t)ddpl_tensor_nbytes(t);
        hw->hdr.dtype = t->dtype;
        hw->hdr.ndim = t->ndim;
        memcpy(hw->hdr.sizes, t->sizes, sizeof hw->hdr.sizes);
        hw->p2p_hdr = ddpl_gloo_send(h->gloo, &hw->hdr, sizeof hw->hdr, peer, 0);
        if (hw->p2p_hdr)
            hw->p2p = ddpl_gloo_send(h->gloo, w->slots[0].data, ddpl_tensor_nbytes(t), peer, 1);
    } else {
        hw->p2p_hdr = ddpl_gloo_recv(h->gloo, &hw->hdr, sizeof hw->hdr, peer, 0);
    }
    if (!hw->p2p_hdr || (is_send && !hw->p2p)) {
        char e[768];
        snprintf(e, sizeof e, "%s", ddpl_last_error());
        ddpl_work_release(w);
        ddpl_error("%s: %s (rank %d, peer %d)", f, e, pg->rank, peer);
        return NULL;
    }
    return host_lane_push(is_send ? &h->lanes.send : &h->lanes.recv, w);
}

static ddpl_work *host_send(ddpl_pg *pg, ddpl_tensor *t, int dst)
{
    return p2p(pg, "send", t, dst, true);
}

static ddpl_work *host_recv(ddpl_pg *pg, ddpl_tensor *t, int src)
{
    return p2p(pg, "recv", t, src, false);
}

/* ---------------------------------------------------------------------- work hooks ---- */
/* Messages still posted when a broken group skipped the work: just free them. */
static void host_work_drop(ddpl_work *w)
{
    host_work *hw = host_work_of(w);
    if (hw->p2p_hdr) ddpl_gloo_p2p_wait(hw->p2p_hdr, 0.0);
    if (hw->p2p) ddpl_gloo_p2p_wait(hw->p2p, 0.0);
    hw->p2p_hdr = hw->p2p = NULL;
}

/* A shared buffer whose maker stopped waiting for it. */
static void host_work_release(ddpl_work *w)
{
    ddpl_shm_buffer_free(host_work_of(w)->made);
}

const struct ddpl_pg_backend pg_host_backend = {
    .name = "gloo",
    .device_type = DDPL_CPU,
    .connect = host_connect,
    .free = host_free,
    .work_size = sizeof(host_work),
    .check_tensor = host_check_tensor,
    .allreduce = host_allreduce,
    .broadcast = host_broadcast,
    .allgather = host_allgather,
    .allgather_into = host_allgather_into,
    .reduce_scatter = host_reduce_scatter,
    .send = host_send,
    .recv = host_recv,
    .barrier = host_barrier,
    .reduce = pg_host_reduce,
    .gather = pg_host_gather,
    .scatter = pg_host_scatter,
    .alltoall = pg_host_alltoall,
    .alltoall_single = pg_host_alltoall_single,
    .shared_zeros = host_shared_zeros,
    .is_shared = host_is_shared,
    .allreduce_shared = host_allreduce_shared,
    .agrees_in_band = true, /* pg_host_lanes.c, before each collective */
    .transport = host_transport,
    .wait_follows = host_lanes_wait_follows,
    .work_wait = host_lanes_work_wait,
    .work_poll = host_lanes_work_poll,
    .work_drop = host_work_drop,
    .work_release = host_work_release,
};
