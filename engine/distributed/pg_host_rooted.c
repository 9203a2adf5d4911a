/* distributed/pg_host_rooted.c: backend gloo's rooted collectives (reduce, gather, scatter) and
 * all-to-all (of lists and of one tensor), work items run on the group's collective lane over
 * the group's table of host collectives (pg_host.h: Gloo's native algorithms, or the
 * shared-memory rounds of shm_coll_rooted.c).
 * defines: pg_host_reduce, pg_host_gather, pg_host_scatter, pg_host_alltoall,
 *          pg_host_alltoall_single (pg_host.h). */
#include "distributed/pg_host.h"

/* slot 0: the tensor, read everywhere, written (and its stage unpacked) on dst only; scratch:
 * the output of a table that needs one off the root (reduce_scratch) */
static int run_reduce(ddpl_work *w)
{
    pg_host *h = host_of(w->pg);
    ddpl_tensor *t = w->slots[0].t;
    ddpl_dtype dt = (ddpl_dtype)t->dtype;
    int64_t n = ddpl_tensor_numel(t);
    if (h->coll->reduce(h, w->slots[0].data, w->scratch, (size_t)n, ddpl_dtype_size(dt),
                        pg_host_reduce_fn(dt, w->op), w->peer) < 0)
        return -1;
    if (w->op == DDPL_REDUCE_AVG && w->pg->rank == w->peer)
        pg_host_divide_by(w->slots[0].data, dt, n, w->pg->size);
    return 0;
}

ddpl_work *pg_host_reduce(ddpl_pg *pg, ddpl_tensor *t, int dst, ddpl_reduce_op op)
{
    ddpl_work *w = host_work_new(pg, "reduce", 1, run_reduce);
    w->op = op;
    w->peer = dst;
    pg_work_slot(w, 0, t, true, dst == pg->rank);
    if (dst != pg->rank && host_of(pg)->coll->reduce_scratch)
        w->scratch = ddpl_xmalloc(ddpl_tensor_nbytes(t) + 1);
    return host_lane_push(&host_of(pg)->lanes.coll, w);
}

/* slot 0 = the input; on dst slots 1..size = the outputs, gathered through scratch */
static int run_gather(ddpl_work *w)
{
    pg_host *h = host_of(w->pg);
    if (h->coll->gather(h, w->slots[0].data, w->scratch, w->nbytes, w->peer) < 0) return -1;
    for (int r = 1; r < w->nslots; r++)
        memcpy(w->slots[r].data, (char *)w->scratch + (size_t)(r - 1) * w->nbytes, w->nbytes);
    return 0;
}

ddpl_work *pg_host_gather(ddpl_pg *pg, ddpl_tensor *t, ddpl_tensor *const *outs, int nouts, int dst)
{
    ddpl_work *w = host_work_new(pg, "gather", 1 + nouts, run_gather);
    w->peer = dst;
    w->nbytes = ddpl_tensor_nbytes(t);
    pg_work_slot(w, 0, t, true, false);
    for (int r = 0; r < nouts; r++) pg_work_slot(w, 1 + r, outs[r], false, true);
    if (nouts) w->scratch = ddpl_xmalloc(w->nbytes * (size_t)pg->size + 1);
    return host_lane_push(&host_of(pg)->lanes.coll, w);
}

/* slot 0 = the output; on src, scratch holds the inputs one after another, packed at issue */
static int run_scatter(ddpl_work *w)
{
    pg_host *h = host_of(w->pg);
    return h->coll->scatter(h, w->scratch, w->slots[0].data, w->nbytes, w->peer);
}

/* ts[0..n) packed one after another into buf, in row-major order */
static void pack_list(ddpl_tensor *const *ts, int n, char *buf)
{
    for (int i = 0; i < n; i++) {
        pg_strided_copy(ts[i], buf, true);
        buf += ddpl_tensor_nbytes(ts[i]);
    }
}

ddpl_work *pg_host_scatter(ddpl_pg *pg, ddpl_tensor *t, ddpl_tensor *const *ins, int nins, int src)
{
    ddpl_work *w = host_work_new(pg, "scatter", 1, run_scatter);
    w->peer = src;
    w->nbytes = ddpl_tensor_nbytes(t);
    pg_work_slot(w, 0, t, false, true);
    if (nins) {
        w->scratch = ddpl_xmalloc(w->nbytes * (size_t)pg->size + 1);
        pack_list(ins, nins, w->scratch);
    }
    return host_lane_push(&host_of(pg)->lanes.coll, w);
}

/* All-to-all: scratch starts with the byte counts of this rank (in_bytes[size], then
 * out_bytes[size]); for the list form the packed inputs and the outputs' staging follow. */
typedef struct a2a_layout {
    size_t *in_bytes, *out_bytes;
    char *in, *out; /* list form: packed inputs, outputs' staging */
    size_t in_total, out_total;
} a2a_layout;

static a2a_layout a2a_of(ddpl_work *w)
{
    int size = w->pg->size;
    a2a_layout a = {.in_bytes = w->scratch, .out_bytes = (size_t *)w->scratch + size};
    for (int q = 0; q < size; q++) a.in_total += a.in_bytes[q], a.out_total += a.out_bytes[q];
    a.in = (char *)(a.out_bytes + size);
    a.out = a.in + a.in_total;
    return a;
}

/* scratch for the counts and `data` more bytes; the counts filled in */
static void a2a_alloc(ddpl_work *w, const size_t *in_bytes, const size_t *out_bytes, size_t data)
{
    size_t size = (size_t)w->pg->size;
    w->scratch = ddpl_xmalloc(2 * size * sizeof(size_t) + data + 1);
    memcpy(w->scratch, in_bytes, size * sizeof(size_t));
    memcpy((size_t *)w->scratch + size, out_bytes, size * sizeof(size_t));
}

/* Every rank's counts go to every rank (an allgather of 2 * size words), which checks that each
 * pair agrees, all in the same order, so all ranks fail alike, before any data moves, and the
 * group stays in step (harmless). *max_pair: the largest pair's bytes. */
static int a2a_agree(ddpl_work *w, const a2a_layout *a, size_t *max_pair)
{
    pg_host *h = host_of(w->pg);
    size_t size = (size_t)w->pg->size, row = 2 * size; /* in_bytes, then out_bytes */
    uint64_t *mine = ddpl_xmalloc(row * sizeof *mine);
    uint64_t *all = ddpl_xmalloc(size * row * sizeof *all);
    for (size_t q = 0; q < size; q++) mine[q] = a->in_bytes[q], mine[size + q] = a->out_bytes[q];
    int rc = h->coll->allgather(h, mine, all, row * sizeof *mine);
    *max_pair = 0;
    for (size_t p = 0; rc == 0 && p < size; p++)
        for (size_t q = 0; rc == 0 && q < size; q++) {
            uint64_t sends = all[p * row + q], expects = all[q * row + size + p];
            if (sends > *max_pair) *max_pair = (size_t)sends;
            if (sends == expects) continue;
            host_work_of(w)->harmless = true;
            rc = ddpl_error("%s: rank %zu sends %llu bytes to rank %zu, but rank %zu expects %llu "
                            "bytes from rank %zu (the output for a rank must have the size of "
                            "what that rank sends)",
                            w->name, p, (unsigned long long)sends, q, q,
                            (unsigned long long)expects, p);
        }
    free(mine);
    free(all);
    return rc;
}

/* slots 0..size-1 = the outputs; the inputs were packed at issue */
static int run_alltoall(ddpl_work *w)
{
    pg_host *h = host_of(w->pg);
    a2a_layout a = a2a_of(w);
    size_t max_pair;
    if (a2a_agree(w, &a, &max_pair) < 0 ||
        h->coll->alltoallv(h, a.in, a.in_bytes, a.out, a.out_bytes, max_pair) < 0)
        return -1;
    char *p = a.out;
    for (int q = 0; q < w->nslots; q++) {
        memcpy(w->slots[q].data, p, a.out_bytes[q]);
        p += a.out_bytes[q];
    }
    return 0;
}

ddpl_work *pg_host_alltoall(ddpl_pg *pg, ddpl_tensor *const *outs, ddpl_tensor *const *ins, int n)
{
    ddpl_work *w = host_work_new(pg, "all_to_all", n, run_alltoall);
    size_t *in_bytes = ddpl_xmalloc(2 * (size_t)n * sizeof *in_bytes), *out_bytes = in_bytes + n;
    size_t total = 0;
    for (int q = 0; q < n; q++) {
        in_bytes[q] = ddpl_tensor_nbytes(ins[q]);
        out_bytes[q] = ddpl_tensor_nbytes(outs[q]);
        total += in_bytes[q] + out_bytes[q]; /* each a live tensor's bytes: no overflow */
    }
    a2a_alloc(w, in_bytes, out_bytes, total);
    free(in_bytes);
    pack_list(ins, n, a2a_of(w).in);
    for (int q = 0; q < n; q++) pg_work_slot(w, q, outs[q], false, true);
    return host_lane_push(&host_of(pg)->lanes.coll, w);
}

/* slot 0 = out, slot 1 = in; scratch holds only the counts */
static int run_alltoall_single(ddpl_work *w)
{
    pg_host *h = host_of(w->pg);
    a2a_layout a = a2a_of(w);
    size_t max_pair;
    if (a2a_agree(w, &a, &max_pair) < 0) return -1;
    return h->coll->alltoallv(h, w->slots[1].data, a.in_bytes, w->slots[0].data, a.out_bytes,
                              max_pair);
}

ddpl_work *pg_host_alltoall_single(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *in,
                                   const int64_t *out_counts, const int64_t *in_counts)
{
    ddpl_work *w = host_work_new(pg, "all_to_all_single", 2, run_alltoall_single);
    size_t n = (size_t)pg->size, es = ddpl_dtype_size((ddpl_dtype)in->dtype);
    size_t *in_bytes = ddpl_xmalloc(2 * n * sizeof *in_bytes), *out_bytes = in_bytes + n;
    for (size_t q = 0; q < n; q++) {
        in_bytes[q] = (size_t)in_counts[q] * es; /* parts of a live tensor: no overflow */
        out_bytes[q] = (size_t)out_counts[q] * es;
    }
    a2a_alloc(w, in_bytes, out_bytes, 0);
    free(in_bytes);
    pg_work_slot(w, 0, out, false, true);
    pg_work_slot(w, 1, in, true, false);
    return host_lane_push(&host_of(pg)->lanes.coll, w);
}
