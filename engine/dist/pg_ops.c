/* dist/pg_ops.c: the operations of a process group: what every backend shares (reduce op
 * names, the checks of ranks, shapes and list lengths), then the call into the group's backend.
 * defines: ddpl_reduce_op_parse, ddpl_pg_allreduce, ddpl_pg_allreduce_prescaled(_into),
 *          ddpl_pg_is_shared, ddpl_pg_broadcast, ddpl_pg_allgather,
 *          ddpl_pg_allgather_into, ddpl_pg_reduce_scatter, ddpl_pg_send, ddpl_pg_recv,
 *          ddpl_pg_barrier, ddpl_pg_shared_zeros (pg.h).
 *
 * Issuing checks everything it can locally (membership; the backend checks each tensor's device,
 * layout and dtype: its check_tensor), translates src/dst from global to group ranks, makes the
 * call's fingerprint (pg_expect: the one call each collective makes for the mismatch checks of
 * dist/pg_agree.c) and calls the backend's entry (pg_backend.h), which queues or enqueues the
 * operation. An entry the backend lacks is reported by name, never called. */
#include "dist/pg_impl.h"

static const char *const op_names[DDPL_REDUCE_OP_COUNT] = {"sum", "avg", "max", "min", "product"};

int ddpl_reduce_op_parse(const char *name)
{
    for (int i = 0; i < DDPL_REDUCE_OP_COUNT; i++)
        if (strcmp(name, op_names[i]) == 0) return i;
    return -1;
}

const char *ddpl_reduce_op_name(ddpl_reduce_op op)
{
    return (unsigned)op < DDPL_REDUCE_OP_COUNT ? op_names[op] : "?";
}

/* ----------------------------------------------------------------- the backend call ---- */
static ddpl_work *unsupported(const ddpl_pg *pg, const char *fname)
{
    ddpl_error("%s: not supported by backend %s", fname, pg->backend->name);
    return NULL;
}

/* The work the backend returned; the fingerprint pg_expect made is in it by now (pg_work_new),
 * or the issue failed: either way it must not stick to the next work item. */
static ddpl_work *issued(ddpl_pg *pg, ddpl_work *w)
{
    memset(&pg->next_fp, 0, sizeof pg->next_fp);
    return w;
}

/* The backend's entry `entry` called with the arguments, or NULL with the error that the
 * backend has no such operation. */
#define CALL_BACKEND(pg, fname, entry, ...)                                                        \
    issued(pg, (pg)->backend->entry ? (pg)->backend->entry(__VA_ARGS__) : unsupported(pg, fname))

/* the fingerprint of a call on tensor t: its dtype and elements */
#define EXPECT(pg, fname, t, op, root)                                                             \
    pg_expect(pg, fname, (t)->dtype, ddpl_tensor_numel(t), op, root)

/* ----------------------------------------------------------------- argument checks ---- */
static int check_tensor(const ddpl_pg *pg, const char *fname, const char *what,
                        const ddpl_tensor *t, bool reduces)
{
    if (pg_member(pg, fname) < 0) return -1;
    if (!t) return ddpl_error("%s: expected a tensor for %s, got nil", fname, what);
    return pg->backend->check_tensor(pg, fname, what, t, reduces);
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

/* The group rank of the global rank r (src/dst are global, as in torch.distributed) in *out. */
static int check_rank(const char *fname, const char *what, const ddpl_pg *pg, int r, bool not_self,
                      int *out)
{
    *out = ddpl_pg_group_rank(pg, r);
    if (*out < 0 && !pg->global_ranks)
        return ddpl_error("%s: %s rank %d is out of range for world_size %d", fname, what, r,
                          pg->size);
    if (*out < 0) {
        char ranks[256];
        pg_ranks_str(pg, ranks, sizeof ranks, 16);
        return ddpl_error("%s: %s rank %d (a global rank) is not in process group %d (ranks %s)",
                          fname, what, r, pg->group_id, ranks);
    }
    if (not_self && *out == pg->rank)
        return ddpl_error("%s: %s rank %d is this rank itself", fname, what, r);
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

/* ------------------------------------------------------------------------ operations ---- */
ddpl_work *ddpl_pg_allreduce(ddpl_pg *pg, ddpl_tensor *t, ddpl_reduce_op op)
{
    const char *f = "all_reduce";
    if (check_tensor(pg, f, "the tensor", t, true) < 0 || check_op(f, t, op) < 0 ||
        EXPECT(pg, f, t, (int)op, -1) < 0)
        return NULL;
    return CALL_BACKEND(pg, f, allreduce, pg, t, op);
}

bool ddpl_pg_is_shared(const ddpl_pg *pg, const ddpl_tensor *t)
{
    return t && pg->backend->is_shared && pg->backend->is_shared(pg, t);
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
    /* a shared buffer scales inside the reduction; anything else is scaled first */
    if (ddpl_pg_is_shared(pg, t)) {
        if (EXPECT(pg, "all_reduce", t, DDPL_REDUCE_SUM, -1) < 0) return NULL;
        return issued(pg, pg->backend->allreduce_shared(pg, t, factor, 0, NULL, NULL));
    }
    ddpl_tensor *f = ddpl_scalar(factor, DDPL_FLOAT64, t->device);
    int rc = f ? ddpl_mul_(t, f) : -1;
    ddpl_tensor_release(f);
    return rc < 0 ? NULL : ddpl_pg_allreduce(pg, t, DDPL_REDUCE_SUM);
}

ddpl_work *ddpl_pg_allreduce_prescaled_into(ddpl_pg *pg, ddpl_tensor *t, double factor, int n,
                                            ddpl_tensor *const *values, const int64_t *offsets)
{
    const char *fname = "all_reduce";
    if (pg_member(pg, fname) < 0) return NULL;
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
    if (EXPECT(pg, fname, t, DDPL_REDUCE_SUM, -1) < 0) return NULL;
    return issued(pg, pg->backend->allreduce_shared(pg, t, factor, n, values, offsets));
}

ddpl_work *ddpl_pg_broadcast(ddpl_pg *pg, ddpl_tensor *t, int src)
{
    const char *f = "broadcast";
    int root;
    if (check_tensor(pg, f, "the tensor", t, false) < 0 ||
        check_rank(f, "src", pg, src, false, &root) < 0 || EXPECT(pg, f, t, -1, src) < 0)
        return NULL;
    return CALL_BACKEND(pg, f, broadcast, pg, t, root);
}

ddpl_work *ddpl_pg_allgather(ddpl_pg *pg, ddpl_tensor *const *outs, int nouts, ddpl_tensor *t)
{
    const char *f = "all_gather";
    if (check_tensor(pg, f, "the input", t, false) < 0) return NULL;
    if (nouts != pg->size) {
        ddpl_error("%s: expected a list of %d output tensors (world_size), got %d", f, pg->size,
                   nouts);
        return NULL;
    }
    for (int r = 0; r < nouts; r++) {
        char what[32];
        snprintf(what, sizeof what, "output %d", r);
        if (check_like(pg, f, what, outs[r], t) < 0) return NULL;
    }
    if (EXPECT(pg, f, t, -1, -1) < 0) return NULL;
    return CALL_BACKEND(pg, f, allgather, pg, outs, nouts, t);
}

/* One side of a gather or scatter holds world_size times the other's elements, in one dtype:
 * the output for all_gather (output_larger), the input for reduce_scatter. */
static int check_world_sized(const ddpl_pg *pg, const char *f, const ddpl_tensor *out,
                             const ddpl_tensor *in, bool output_larger)
{
    const ddpl_tensor *large = output_larger ? out : in, *small = output_larger ? in : out;
    if (out->dtype == in->dtype &&
        ddpl_tensor_numel(large) == ddpl_tensor_numel(small) * (int64_t)pg->size)
        return 0;
    char a[96], b[96];
    return ddpl_error("%s: the %s must hold world_size (%d) x the %s's elements of its dtype, "
                      "got output %s %s and input %s %s",
                      f, output_larger ? "output" : "input", pg->size,
                      output_larger ? "input" : "output", ddpl_shape_str(out, a, sizeof a),
                      ddpl_dtype_name((ddpl_dtype)out->dtype), ddpl_shape_str(in, b, sizeof b),
                      ddpl_dtype_name((ddpl_dtype)in->dtype));
}

ddpl_work *ddpl_pg_allgather_into(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *t)
{
    const char *f = "all_gather_into_tensor";
    if (check_tensor(pg, f, "the input", t, false) < 0 ||
        check_tensor(pg, f, "the output", out, false) < 0)
        return NULL;
    if (check_world_sized(pg, f, out, t, true) < 0 || EXPECT(pg, f, t, -1, -1) < 0) return NULL;
    return CALL_BACKEND(pg, f, allgather_into, pg, out, t);
}

ddpl_work *ddpl_pg_reduce_scatter(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *in, ddpl_reduce_op op)
{
    const char *f = "reduce_scatter_tensor";
    if (check_tensor(pg, f, "the input", in, true) < 0 ||
        check_tensor(pg, f, "the output", out, true) < 0 || check_op(f, in, op) < 0)
        return NULL;
    if (check_world_sized(pg, f, out, in, false) < 0 || EXPECT(pg, f, in, (int)op, -1) < 0)
        return NULL;
    return CALL_BACKEND(pg, f, reduce_scatter, pg, out, in, op);
}

ddpl_work *ddpl_pg_send(ddpl_pg *pg, ddpl_tensor *t, int dst)
{
    const char *f = "send";
    int peer;
    if (check_tensor(pg, f, "the tensor", t, false) < 0 ||
        check_rank(f, "dst", pg, dst, true, &peer) < 0)
        return NULL;
    return CALL_BACKEND(pg, f, send, pg, t, peer);
}

ddpl_work *ddpl_pg_recv(ddpl_pg *pg, ddpl_tensor *t, int src)
{
    const char *f = "recv";
    int peer;
    if (check_tensor(pg, f, "the tensor", t, false) < 0 ||
        check_rank(f, "src", pg, src, true, &peer) < 0)
        return NULL;
    return CALL_BACKEND(pg, f, recv, pg, t, peer);
}

ddpl_work *ddpl_pg_barrier(ddpl_pg *pg)
{
    if (pg_expect(pg, "barrier", -1, 0, -1, -1) < 0) return NULL;
    return CALL_BACKEND(pg, "barrier", barrier, pg);
}

ddpl_tensor *ddpl_pg_shared_zeros(ddpl_pg *pg, int64_t numel, ddpl_dtype dt)
{
    if (pg_member(pg, "shared_zeros") < 0) return NULL;
    if (numel < 0) {
        ddpl_error("shared_zeros: negative size %lld", (long long)numel);
        return NULL;
    }
    /* a backend without shared buffers: an ordinary tensor (see pg.h) */
    if (!pg->backend->shared_zeros) return ddpl_zeros(1, &numel, dt, ddpl_cpu());
    if (pg_expect(pg, "shared_zeros", (int)dt, numel, -1, -1) < 0) return NULL;
    ddpl_tensor *t = pg->backend->shared_zeros(pg, numel, dt);
    issued(pg, NULL);
    return t;
}
