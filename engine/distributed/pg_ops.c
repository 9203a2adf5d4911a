/* distributed/pg_ops.c: the operations of a process group: what every backend shares (reduce op
 * names, the checks of ranks, shapes and list lengths), then the call into the group's backend.
 * defines: ddpl_reduce_op_parse, ddpl_pg_allreduce, ddpl_pg_allreduce_prescaled(_into),
 *          ddpl_pg_is_shared, ddpl_pg_broadcast, ddpl_pg_allgather,
 *          ddpl_pg_allgather_into, ddpl_pg_reduce_scatter, ddpl_pg_send, ddpl_pg_recv,
 *          ddpl_pg_barrier, ddpl_pg_shared_zeros, ddpl_pg_reduce, ddpl_pg_gather,
 *          ddpl_pg_scatter, ddpl_pg_alltoall, ddpl_pg_alltoall_single (pg.h).
 *
 * Issuing checks everything it can locally (membership; the backend checks each tensor's device,
 * layout and dtype: its check_tensor), translates src/dst from global to group ranks, makes the
 * call's fingerprint (pg_expect: the one call each collective makes for the mismatch checks of
 * distributed/pg_agree.c) and calls the backend's entry (pg_backend.h), which queues or enqueues
 * the operation. An entry the backend lacks is reported by name, never called. */
#include "distributed/pg_impl.h"

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

/* out is a tensor of t's shape and dtype; t_what names t in the message ("input") */
static int check_like(const ddpl_pg *pg, const char *fname, const char *what,
                      const ddpl_tensor *out, const ddpl_tensor *t, const char *t_what)
{
    if (check_tensor(pg, fname, what, out, false) < 0) return -1;
    if (out->dtype != t->dtype || !ddpl_same_shape(out, t)) {
        char a[96], b[96];
        return ddpl_error("%s: %s is %s %s, but the %s is %s %s", fname, what,
                          ddpl_shape_str(out, a, sizeof a), ddpl_dtype_name((ddpl_dtype)out->dtype),
                          t_what, ddpl_shape_str(t, b, sizeof b),
                          ddpl_dtype_name((ddpl_dtype)t->dtype));
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
        if (check_like(pg, f, what, outs[r], t, "input") < 0) return NULL;
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

/* ------------------------------------------------------- rooted collectives, all-to-all ---- */
ddpl_work *ddpl_pg_reduce(ddpl_pg *pg, ddpl_tensor *t, int dst, ddpl_reduce_op op)
{
    const char *f = "reduce";
    int root;
    if (check_tensor(pg, f, "the tensor", t, true) < 0 || check_op(f, t, op) < 0 ||
        check_rank(f, "dst", pg, dst, false, &root) < 0 || EXPECT(pg, f, t, (int)op, dst) < 0)
        return NULL;
    return CALL_BACKEND(pg, f, reduce, pg, t, root, op);
}

/* The list of a gather (or scatter): size tensors like t on the root (`root_what` names the
 * root: "dst", "src"; t_what names t: "input", "output"), none elsewhere, as PyTorch checks. An
 * empty list counts as none. */
static int check_root_list(const ddpl_pg *pg, const char *f, const char *list_name,
                           const char *root_what, int root, ddpl_tensor *const *list, int n,
                           const ddpl_tensor *t, const char *t_what)
{
    /* root is a group rank; messages name global ranks, as the caller gave them */
    int me = ddpl_pg_global_rank(pg, pg->rank), root_global = ddpl_pg_global_rank(pg, root);
    if (pg->rank != root) {
        if (list && n > 0)
            return ddpl_error("%s: %s must be nil on rank %d, which is not the %s (rank %d)", f,
                              list_name, me, root_what, root_global);
        return 0;
    }
    if (!list || n != pg->size)
        return ddpl_error("%s: the %s (rank %d) needs a %s of %d tensors (the group's size), got "
                          "%s%d",
                          f, root_what, root_global, list_name, pg->size, list ? "" : "nil, ",
                          list ? n : 0);
    for (int r = 0; r < n; r++) {
        char what[48];
        snprintf(what, sizeof what, "%s[%d]", list_name, r);
        if (check_like(pg, f, what, list[r], t, t_what) < 0) return -1;
    }
    return 0;
}

/* What gather and scatter check alike: t ("the <t_what>"), the root (root_global, a global rank;
 * *root gets its group rank), the list, which only the root keeps (*list and *n are cleared on
 * the other ranks), then the call's fingerprint. */
static int check_rooted(ddpl_pg *pg, const char *f, const char *t_what, const char *list_name,
                        const char *root_what, ddpl_tensor *t, ddpl_tensor *const **list, int *n,
                        int root_global, int *root)
{
    char what[32];
    snprintf(what, sizeof what, "the %s", t_what);
    if (check_tensor(pg, f, what, t, false) < 0 ||
        check_rank(f, root_what, pg, root_global, false, root) < 0 ||
        check_root_list(pg, f, list_name, root_what, *root, *list, *n, t, t_what) < 0 ||
        EXPECT(pg, f, t, -1, root_global) < 0)
        return -1;
    if (pg->rank != *root) *list = NULL, *n = 0;
    return 0;
}

ddpl_work *ddpl_pg_gather(ddpl_pg *pg, ddpl_tensor *t, ddpl_tensor *const *outs, int nouts, int dst)
{
    int root;
    if (check_rooted(pg, "gather", "input", "gather_list", "dst", t, &outs, &nouts, dst, &root) < 0)
        return NULL;
    return CALL_BACKEND(pg, "gather", gather, pg, t, outs, nouts, root);
}

ddpl_work *ddpl_pg_scatter(ddpl_pg *pg, ddpl_tensor *t, ddpl_tensor *const *ins, int nins, int src)
{
    int root;
    if (check_rooted(pg, "scatter", "output", "scatter_list", "src", t, &ins, &nins, src, &root) <
        0)
        return NULL;
    return CALL_BACKEND(pg, "scatter", scatter, pg, t, ins, nins, root);
}

/* A list of size tensors of one dtype (`dt`, or the first one's when dt < 0). */
static int check_one_dtype_list(const ddpl_pg *pg, const char *f, const char *list_name,
                                ddpl_tensor *const *list, int n, int dt)
{
    if (!list || n != pg->size)
        return ddpl_error("%s: expected an %s of %d tensors (world_size), got %d", f, list_name,
                          pg->size, list ? n : 0);
    for (int r = 0; r < n; r++) {
        char what[48];
        snprintf(what, sizeof what, "%s[%d]", list_name, r);
        if (check_tensor(pg, f, what, list[r], false) < 0) return -1;
        if (dt < 0) dt = list[r]->dtype;
        if (list[r]->dtype != dt)
            return ddpl_error("%s: %s is %s, but the tensors must all be %s (the dtype of "
                              "input_tensor_list[0])",
                              f, what, ddpl_dtype_name((ddpl_dtype)list[r]->dtype),
                              ddpl_dtype_name((ddpl_dtype)dt));
    }
    return 0;
}

ddpl_work *ddpl_pg_alltoall(ddpl_pg *pg, ddpl_tensor *const *outs, int nouts,
                            ddpl_tensor *const *ins, int nins)
{
    const char *f = "all_to_all";
    if (check_one_dtype_list(pg, f, "input_tensor_list", ins, nins, -1) < 0 ||
        check_one_dtype_list(pg, f, "output_tensor_list", outs, nouts, ins[0]->dtype) < 0 ||
        pg_expect(pg, f, ins[0]->dtype, -1, -1, -1) < 0) /* pair sizes: checked by the op */
        return NULL;
    return CALL_BACKEND(pg, f, alltoall, pg, outs, ins, nins);
}

/* counts[q] = elements of slice q of t along dim 0, cut by splits (n of them; NULL/0: equal
 * slices). `which` names the tensor ("input", "output"). */
static int split_counts(const ddpl_pg *pg, const char *f, const char *which, const ddpl_tensor *t,
                        const int64_t *splits, int n, int64_t *counts)
{
    if (t->ndim < 1)
        return ddpl_error("%s: the %s must have at least one dimension to split along, got a "
                          "0-dim tensor",
                          f, which);
    int64_t rows = t->sizes[0], row_numel = 1;
    for (int d = 1; d < t->ndim; d++)
        if (__builtin_mul_overflow(row_numel, t->sizes[d], &row_numel)) /* only when dim 0 is 0 */
            return ddpl_error("%s: the %s's rows are too large", f, which);
    if (!splits || n == 0) {
        if (rows % pg->size != 0)
            return ddpl_error("%s: the %s's dim 0 (%lld) is not divisible by world_size %d (pass "
                              "%s_split_sizes to split it unevenly)",
                              f, which, (long long)rows, pg->size, which);
        for (int q = 0; q < pg->size; q++) counts[q] = rows / pg->size * row_numel;
        return 0;
    }
    if (n != pg->size)
        return ddpl_error("%s: %s_split_sizes has %d entries, expected %d (world_size)", f, which,
                          n, pg->size);
    int64_t left = rows;
    for (int q = 0; q < n; q++) {
        if (splits[q] < 0 || splits[q] > left)
            return ddpl_error("%s: %s_split_sizes[%d] = %lld is %s", f, which, q,
                              (long long)splits[q],
                              splits[q] < 0 ? "negative" : "more than the rows left of dim 0");
        left -= splits[q];
        counts[q] = splits[q] * row_numel; /* <= numel (or 0 rows) */
    }
    if (left != 0)
        return ddpl_error("%s: %s_split_sizes add up to %lld, but the %s's dim 0 is %lld", f, which,
                          (long long)(rows - left), which, (long long)rows);
    return 0;
}

ddpl_work *ddpl_pg_alltoall_single(ddpl_pg *pg, ddpl_tensor *out, ddpl_tensor *in,
                                   const int64_t *out_splits, int n_out, const int64_t *in_splits,
                                   int n_in)
{
    const char *f = "all_to_all_single";
    if (check_tensor(pg, f, "the input", in, false) < 0 ||
        check_tensor(pg, f, "the output", out, false) < 0)
        return NULL;
    if (out->dtype != in->dtype) {
        ddpl_error("%s: the output is %s, but the input is %s (they must have one dtype)", f,
                   ddpl_dtype_name((ddpl_dtype)out->dtype), ddpl_dtype_name((ddpl_dtype)in->dtype));
        return NULL;
    }
    int64_t *counts = ddpl_xmalloc(2 * (size_t)pg->size * sizeof *counts);
    ddpl_work *w = NULL;
    if (split_counts(pg, f, "output", out, out_splits, n_out, counts) == 0 &&
        split_counts(pg, f, "input", in, in_splits, n_in, counts + pg->size) == 0 &&
        pg_expect(pg, f, in->dtype, -1, -1, -1) == 0) /* pair sizes: checked by the op */
        w = CALL_BACKEND(pg, f, alltoall_single, pg, out, in, counts, counts + pg->size);
    free(counts);
    return w;
}
