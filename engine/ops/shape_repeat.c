/* ops/shape_repeat.c: repeating a tensor's elements.
 * defines: ddpl_repeat, ddpl_tile, ddpl_repeat_interleave, ddpl_repeat_interleave_tensor.
 *
 * Compositions (gradients on every device come from the ops used): repeat inserts a size-1 dim
 * before each repeated dim, expands it and reshapes (one copy; expand's backward sums the
 * repeats); repeat_interleave with one count expands a size-1 dim after `dim` and reshapes (along
 * the last dim instead one copy kernel writes through a transposed alias of the output, with its
 * own backward: the expanded copy's inner loop would run over the r copies of one element); with
 * a count per slice it index_selects with an int64 index built on the host (the counts are read
 * back once, as PyTorch's CPU kernel does). */
#include "core/checked.h"
#include "op_util.h"

/* One pass of repeat over the dims [first, last) of cur (x's rank): each dim d with r[d] > 1
 * and a size > 1 gets a new leading dim of size r[d]; size-1 dims are expanded in place. */
static ddpl_tensor *repeat_pass(ddpl_tensor *cur, int first, int last, const int64_t *r)
{
    int64_t exp[DDPL_MAX_DIMS], final[DDPL_MAX_DIMS], tmp[DDPL_MAX_DIMS];
    int ne = 0;
    for (int d = 0; d < cur->ndim; d++) {
        int64_t s = cur->sizes[d], k = d >= first && d < last ? r[d] : 1;
        final[d] = s * k; /* checked by the caller (the output's numel) */
        if (k != 1 && s != 1) exp[ne++] = k;
        exp[ne++] = k != 1 && s == 1 ? k : s;
    }
    /* the same geometry with 1 for each new dim: the tensor to expand */
    int nt = 0;
    for (int d = 0; d < cur->ndim; d++) {
        int64_t s = cur->sizes[d], k = d >= first && d < last ? r[d] : 1;
        if (k != 1 && s != 1) tmp[nt++] = 1;
        tmp[nt++] = s;
    }
    ddpl_tensor *v = ddpl_reshape(cur, nt, tmp);
    ddpl_tensor *e = v ? ddpl_expand(v, ne, exp) : NULL;
    ddpl_tensor *out = e ? ddpl_reshape(e, cur->ndim, final) : NULL;
    ddpl_tensor_release(v);
    ddpl_tensor_release(e);
    return out;
}

ddpl_tensor *ddpl_repeat(ddpl_tensor *x, int n, const int64_t *repeats)
{
    char a[160];
    if (n < x->ndim)
        return ddpl_error("repeat: number of dimensions of repeat dims (%d) can not be smaller "
                          "than number of dimensions of tensor (%d)",
                          n, x->ndim),
               NULL;
    if (n > DDPL_MAX_DIMS)
        return ddpl_error("repeat: %d repeat dims given, tensors have at most %d dimensions", n,
                          DDPL_MAX_DIMS),
               NULL;
    int64_t sizes[DDPL_MAX_DIMS], out[DDPL_MAX_DIMS] = {0};
    int lead = n - x->ndim;
    for (int d = 0; d < n; d++) {
        sizes[d] = d < lead ? 1 : x->sizes[d - lead];
        if (repeats[d] < 0)
            return ddpl_error("repeat: repeats can not be negative, got %s",
                              ddpl_sizes_str(n, repeats, a, sizeof a)),
                   NULL;
        if (ddpl_mul_overflow(sizes[d], repeats[d], &out[d]))
            return ddpl_error("repeat: the result's size overflows (repeats %s)",
                              ddpl_sizes_str(n, repeats, a, sizeof a)),
                   NULL;
    }
    if (ddpl_check_shape("repeat", n, out, NULL) < 0) return NULL;
    ddpl_tensor *cur = ddpl_reshape(x, n, sizes);
    /* passes over runs of dims whose expanded view fits DDPL_MAX_DIMS (usually one pass) */
    for (int first = 0; first < n && cur;) {
        int last = first, extra = 0;
        while (last < n) {
            int add = repeats[last] != 1 && sizes[last] != 1;
            if (n + extra + add > DDPL_MAX_DIMS) break;
            extra += add;
            last++;
        }
        ddpl_tensor *next = repeat_pass(cur, first, last, repeats);
        ddpl_tensor_release(cur);
        cur = next;
        first = last;
    }
    /* all repeats 1 (and a reshape that viewed x): the result is still a copy, as PyTorch's */
    if (cur && ddpl_tensor_same_storage(cur, x)) {
        ddpl_tensor *c = ddpl_clone(cur);
        ddpl_tensor_release(cur);
        cur = c;
    }
    return cur;
}

ddpl_tensor *ddpl_tile(ddpl_tensor *x, int n, const int64_t *dims)
{
    if (n < 0 || n > DDPL_MAX_DIMS)
        return ddpl_error("tile: %d dims given, tensors have at most %d dimensions", n,
                          DDPL_MAX_DIMS),
               NULL;
    int64_t r[DDPL_MAX_DIMS];
    int total = n < x->ndim ? x->ndim : n, lead = total - n; /* missing leading dims are 1 */
    for (int d = 0; d < total; d++) r[d] = d < lead ? 1 : dims[d - lead];
    for (int d = 0; d < total; d++)
        if (r[d] < 0) return ddpl_error("tile: repeats can not be negative"), NULL;
    return ddpl_repeat(x, total, r);
}

/* x flattened when !has_dim (dim 0 then), else x; *d the wrapped dim. */
static ddpl_tensor *interleave_input(ddpl_tensor *x, bool has_dim, int dim, int *d)
{
    if (!has_dim) {
        *d = 0;
        return ddpl_reshape(x, 1, (int64_t[]){ddpl_tensor_numel(x)});
    }
    if ((*d = ddpl_wrap_dim("repeat_interleave", dim, x->ndim)) < 0) return NULL;
    if (x->ndim == 0) return ddpl_reshape(x, 1, (int64_t[]){1});
    return ddpl_tensor_retain(x);
}

static int check_output_size(int64_t output_size, int64_t total)
{
    if (output_size >= 0 && output_size != total)
        return ddpl_error("repeat_interleave: allocated size does not match required size "
                          "(output_size %lld, the repeats give %lld)",
                          (long long)output_size, (long long)total);
    return 0;
}

typedef struct {
    int64_t repeats;
} interleave_ctx;

/* the gradient (..., n * r) summed over each run of r copies */
static int interleave_last_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    int64_t sizes[DDPL_MAX_DIMS + 1];
    int nd = grad->ndim;
    memcpy(sizes, grad->sizes, sizeof(int64_t) * (size_t)nd);
    sizes[nd - 1] = n->edges[0].sizes[nd - 1];
    sizes[nd] = DDPL_NODE_CTX(n, interleave_ctx)->repeats;
    ddpl_tensor *g = ddpl_reshape(grad, nd + 1, sizes);
    gi[0] = g ? ddpl_sum_dim(g, nd, false) : NULL;
    ddpl_tensor_release(g);
    return gi[0] ? 0 : -1;
}

/* v (..., n) -> (..., n * r) with each element repeated r times, along v's last dim: one copy
 * kernel writing the output through a transposed alias (..., r, n), so the inner loop runs over
 * n contiguous source elements rather than over r copies of one (12x faster at 1024x1024). */
static ddpl_tensor *interleave_last(ddpl_tensor *v, int64_t r, int64_t total)
{
    int nd = v->ndim;
    int64_t sizes[DDPL_MAX_DIMS], as[DDPL_MAX_DIMS], ost[DDPL_MAX_DIMS], xst[DDPL_MAX_DIMS];
    memcpy(sizes, v->sizes, sizeof(int64_t) * (size_t)nd);
    sizes[nd - 1] = total;
    ddpl_tensor *out = ddpl_tensor_new(nd, sizes, (ddpl_dtype)v->dtype, v->device);
    if (!out) return NULL;
    for (int d = 0; d < nd - 1; d++)
        as[d] = v->sizes[d], ost[d] = out->strides[d], xst[d] = v->strides[d];
    as[nd - 1] = r, ost[nd - 1] = 1, xst[nd - 1] = 0;                     /* the copies */
    as[nd] = v->sizes[nd - 1], ost[nd] = r, xst[nd] = v->strides[nd - 1]; /* the elements */
    ddpl_tensor *dst = ddpl_tensor_alias(out, nd + 1, as, ost, out->offset);
    ddpl_tensor *src = ddpl_tensor_alias(v, nd + 1, as, xst, v->offset);
    int rc = ddpl_run_kernel(DDPL_OP_COPY, v->device, &dst, &src, NULL);
    ddpl_tensor_release(dst);
    ddpl_tensor_release(src);
    if (rc < 0) {
        ddpl_tensor_release(out);
        return NULL;
    }
    if (ddpl_grad_needed(1, &v)) {
        ddpl_node *n = ddpl_node_new("RepeatInterleaveBackward0", interleave_last_backward, 1, &v);
        DDPL_NODE_CTX(n, interleave_ctx)->repeats = r;
        ddpl_set_history(out, n);
    }
    return out;
}

ddpl_tensor *ddpl_repeat_interleave(ddpl_tensor *x, int64_t repeats, bool has_dim, int dim,
                                    int64_t output_size)
{
    if (repeats < 0)
        return ddpl_error("repeat_interleave: repeats can not be negative, got %lld",
                          (long long)repeats),
               NULL;
    int d;
    ddpl_tensor *v = interleave_input(x, has_dim, dim, &d);
    if (!v) return NULL;
    int64_t total, sizes[DDPL_MAX_DIMS + 1], out[DDPL_MAX_DIMS];
    ddpl_tensor *r = NULL;
    if (ddpl_mul_overflow(v->sizes[d], repeats, &total)) {
        ddpl_error("repeat_interleave: the result's size overflows");
    } else if (check_output_size(output_size, total) < 0) {
        /* error set */
    } else if (d == v->ndim - 1 && repeats > 1 && total > 0 && v->ndim < DDPL_MAX_DIMS) {
        r = interleave_last(v, repeats, total);
    } else if (v->ndim < DDPL_MAX_DIMS) {
        /* (.., n, 1, ..) expanded to (.., n, repeats, ..), then (.., n * repeats, ..) */
        int k = 0;
        for (int i = 0; i < v->ndim; i++) {
            sizes[k++] = v->sizes[i];
            if (i == d) sizes[k++] = repeats;
            out[i] = i == d ? total : v->sizes[i];
        }
        ddpl_tensor *u = ddpl_unsqueeze(v, d + 1);
        ddpl_tensor *e = u ? ddpl_expand(u, v->ndim + 1, sizes) : NULL;
        r = e ? ddpl_reshape(e, v->ndim, out) : NULL;
        ddpl_tensor_release(u);
        ddpl_tensor_release(e);
    } else {
        /* no room for the helper dim: one index_select with every index repeated */
        ddpl_tensor *idx = ddpl_arange_int(0, v->sizes[d], 1, DDPL_INT64, v->device);
        ddpl_tensor *ri = idx ? ddpl_repeat_interleave(idx, repeats, false, 0, -1) : NULL;
        r = ri ? ddpl_index_select(v, d, ri) : NULL;
        ddpl_tensor_release(idx);
        ddpl_tensor_release(ri);
    }
    ddpl_tensor_release(v);
    if (r && ddpl_tensor_same_storage(r, x)) { /* repeats 1 viewed x: PyTorch's is a copy */
        ddpl_tensor *c = ddpl_clone(r);
        ddpl_tensor_release(r);
        r = c;
    }
    return r;
}

/* The counts of a repeats tensor on the host as int64 (n of them); NULL with an error. */
static int64_t *read_counts(ddpl_tensor *repeats, int64_t *n, int64_t *total)
{
    if (repeats->dtype != DDPL_INT64 && repeats->dtype != DDPL_INT32)
        return ddpl_error("repeat_interleave: repeats must be an int64 or int32 tensor, got %s",
                          ddpl_dtype_name((ddpl_dtype)repeats->dtype)),
               NULL;
    void *raw = ddpl_tensor_host_copy(repeats);
    if (!raw) return NULL;
    *n = ddpl_tensor_numel(repeats);
    int64_t *c = ddpl_malloc_array(*n ? *n : 1, sizeof *c);
    if (!c) {
        free(raw);
        return ddpl_error("repeat_interleave: out of memory"), NULL;
    }
    *total = 0;
    for (int64_t i = 0; i < *n; i++) {
        c[i] = repeats->dtype == DDPL_INT64 ? ((int64_t *)raw)[i] : ((int32_t *)raw)[i];
        if (c[i] < 0 || ddpl_add_overflow(*total, c[i], total)) {
            ddpl_error(c[i] < 0 ? "repeat_interleave: repeats can not be negative"
                                : "repeat_interleave: the repeats add up past 2^63");
            free(raw);
            free(c);
            return NULL;
        }
    }
    free(raw);
    return c;
}

/* i repeated counts[i] times, as an int64 (or out_dtype) tensor on dev */
static ddpl_tensor *counts_to_index(const int64_t *counts, int64_t n, int64_t total,
                                    ddpl_dtype out_dtype, ddpl_device dev)
{
    int64_t *idx = ddpl_malloc_array(total ? total : 1, sizeof *idx);
    if (!idx) return ddpl_error("repeat_interleave: out of memory"), NULL;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < counts[i]; j++) idx[k++] = i;
    ddpl_tensor *t = ddpl_from_data(1, &total, DDPL_INT64, idx, dev);
    free(idx);
    if (t && out_dtype != DDPL_INT64) {
        ddpl_tensor *c = ddpl_as_dtype(t, out_dtype);
        ddpl_tensor_release(t);
        t = c;
    }
    return t;
}

ddpl_tensor *ddpl_repeat_interleave_tensor(ddpl_tensor *x, ddpl_tensor *repeats, bool has_dim,
                                           int dim, int64_t output_size)
{
    char a[128];
    if (x && ddpl_check_same_device("repeat_interleave", x, repeats) < 0) return NULL;
    if (!x) { /* repeat_interleave(repeats): the index of each repeated position */
        if (repeats->ndim != 1)
            return ddpl_error("repeat_interleave: repeat_interleave only accepts a 1-D vector "
                              "of repeats, got shape %s",
                              ddpl_shape_str(repeats, a, sizeof a)),
                   NULL;
    } else if (repeats->ndim > 1) {
        return ddpl_error("repeat_interleave: repeats must be 0-D or 1-D, got shape %s",
                          ddpl_shape_str(repeats, a, sizeof a)),
               NULL;
    }
    int64_t n, total;
    int64_t *counts = read_counts(repeats, &n, &total);
    if (!counts) return NULL;
    ddpl_tensor *r = NULL;
    if (!x) {
        if (check_output_size(output_size, total) == 0)
            r = counts_to_index(counts, n, total, (ddpl_dtype)repeats->dtype, repeats->device);
    } else if (n == 1) { /* one count for every slice */
        r = ddpl_repeat_interleave(x, counts[0], has_dim, dim, output_size);
    } else {
        int d;
        ddpl_tensor *v = interleave_input(x, has_dim, dim, &d);
        if (v && v->sizes[d] != n)
            ddpl_error("repeat_interleave: repeats must have the same size as input along dim "
                       "(%lld repeats, size %lld)",
                       (long long)n, (long long)v->sizes[d]);
        else if (v && check_output_size(output_size, total) == 0) {
            ddpl_tensor *idx = counts_to_index(counts, n, total, DDPL_INT64, v->device);
            r = idx ? ddpl_index_select(v, d, idx) : NULL;
            ddpl_tensor_release(idx);
        }
        ddpl_tensor_release(v);
    }
    free(counts);
    return r;
}
