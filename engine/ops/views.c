/* ops/views.c: operations that return a new view of the same storage, with their gradients.
 * defines: ddpl_view, ddpl_reshape, ddpl_flatten, ddpl_unsqueeze, ddpl_squeeze,
 *          ddpl_squeeze_all, ddpl_transpose, ddpl_t, ddpl_permute, ddpl_narrow, ddpl_slice,
 *          ddpl_select,
 *          ddpl_expand, ddpl_as_strided, ddpl_alias_view (op_util.h). */
#include "op_util.h"

/* ---- backward formulas ---- */
static int reshape_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    gi[0] = ddpl_reshape(grad, n->edges[0].ndim, n->edges[0].sizes);
    return gi[0] ? 0 : -1;
}

typedef struct {
    int perm[DDPL_MAX_DIMS]; /* forward permutation */
    int ndim;
} permute_ctx;

static int permute_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    permute_ctx *c = DDPL_NODE_CTX(n, permute_ctx);
    int inverse[DDPL_MAX_DIMS];
    for (int i = 0; i < c->ndim; i++) inverse[c->perm[i]] = i;
    gi[0] = ddpl_permute(grad, c->ndim, inverse);
    return gi[0] ? 0 : -1;
}

/* The output gradient whose inverse permutation is dest: dest permuted forward (a view). */
static ddpl_tensor *permute_dest_through(ddpl_node *n, ddpl_tensor *dest)
{
    permute_ctx *c = DDPL_NODE_CTX(n, permute_ctx);
    return ddpl_permute(dest, c->ndim, c->perm);
}

typedef struct {
    int dim;
    int64_t start;
    bool squeeze; /* select: the dim was removed */
} narrow_ctx;

/* create_graph: zeros before and after the gradient, joined by cat (which records) */
static int narrow_backward_recorded(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    narrow_ctx *c = DDPL_NODE_CTX(n, narrow_ctx);
    ddpl_edge *e = &n->edges[0];
    ddpl_tensor *g = c->squeeze ? ddpl_unsqueeze(grad, c->dim) : ddpl_tensor_retain(grad);
    if (!g) return -1;
    int64_t sizes[DDPL_MAX_DIMS];
    memcpy(sizes, e->sizes, sizeof sizes);
    int64_t before = c->start, after = e->sizes[c->dim] - c->start - g->sizes[c->dim];
    ddpl_tensor *parts[3] = {NULL, g, NULL};
    int rc = 0;
    sizes[c->dim] = before;
    if (before > 0 &&
        !(parts[0] = ddpl_zeros(e->ndim, sizes, (ddpl_dtype)grad->dtype, grad->device)))
        rc = -1;
    sizes[c->dim] = after;
    if (rc == 0 && after > 0 &&
        !(parts[2] = ddpl_zeros(e->ndim, sizes, (ddpl_dtype)grad->dtype, grad->device)))
        rc = -1;
    ddpl_tensor *list[3];
    int k = 0;
    for (int i = 0; i < 3; i++)
        if (parts[i]) list[k++] = parts[i];
    gi[0] = rc == 0 ? ddpl_cat(k, list, c->dim) : NULL;
    for (int i = 0; i < 3; i++) ddpl_tensor_release(parts[i]);
    return gi[0] ? 0 : -1;
}

static int narrow_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    narrow_ctx *c = DDPL_NODE_CTX(n, narrow_ctx);
    ddpl_edge *e = &n->edges[0];
    if (ddpl_is_grad_enabled() && ddpl_requires_grad(grad))
        return narrow_backward_recorded(n, grad, gi);
    int64_t len = c->squeeze ? 1 : grad->sizes[c->dim];
    /* another slice's gradient already reached the input (a split): add into that sum */
    ddpl_tensor *sum = ddpl_node_partial_grad(n, 0, grad);
    if (sum) {
        ddpl_tensor *region = ddpl_narrow(sum, c->dim, c->start, len);
        ddpl_tensor *g = c->squeeze ? ddpl_unsqueeze(grad, c->dim) : ddpl_tensor_retain(grad);
        int rc = region && g ? ddpl_add_(region, g, 1.0) : -1;
        ddpl_tensor_release(region);
        ddpl_tensor_release(g);
        return rc; /* gi[0] stays NULL: the part is in the sum already */
    }
    ddpl_tensor *z = ddpl_zeros(e->ndim, e->sizes, (ddpl_dtype)grad->dtype, grad->device);
    if (!z) return -1;
    ddpl_tensor *region = ddpl_narrow(z, c->dim, c->start, len);
    ddpl_tensor *g = c->squeeze ? ddpl_unsqueeze(grad, c->dim) : ddpl_tensor_retain(grad);
    int rc = region && g ? ddpl_copy_(region, g) : -1;
    ddpl_tensor_release(region);
    ddpl_tensor_release(g);
    if (rc < 0) {
        ddpl_tensor_release(z);
        return -1;
    }
    gi[0] = z;
    return 0;
}

static int expand_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    gi[0] = ddpl_sum_to(grad, n->edges[0].ndim, n->edges[0].sizes);
    return gi[0] ? 0 : -1;
}

ddpl_tensor *ddpl_alias_view(ddpl_tensor *x, int ndim, const int64_t *sizes, const int64_t *strides,
                             int64_t offset)
{
    ddpl_tensor *y = ddpl_tensor_alias(x, ndim, sizes, strides, offset);
    y->view_base = ddpl_tensor_retain(x->view_base ? x->view_base : x);
    y->view_writes = atomic_load(&x->storage->recorded_writes);
    return y;
}

/* Makes an alias of x with the given geometry and records how to send its gradient back. */
static ddpl_tensor *make_view(ddpl_tensor *x, int ndim, const int64_t *sizes,
                              const int64_t *strides, int64_t offset, const char *name,
                              ddpl_backward_fn fn, ddpl_node **node_out)
{
    ddpl_tensor *y = ddpl_alias_view(x, ndim, sizes, strides, offset);
    *node_out = NULL;
    if (ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new(name, fn, 1, &x);
        ddpl_set_history(y, n);
        *node_out = n;
    }
    return y;
}

/* Fills in one -1 size and checks the element count (overflow-safe: a product of the given
 * sizes past int64 cannot match x's numel). */
static int infer_sizes(const char *op, const ddpl_tensor *x, int ndim, const int64_t *in,
                       int64_t *out)
{
    int64_t numel = ddpl_tensor_numel(x), known = 1;
    bool over = false, zero = false;
    int infer = -1;
    char a[160], b[128];
    if (ndim < 0 || ndim > DDPL_MAX_DIMS)
        return ddpl_error("%s: %d dimensions requested, at most %d are supported", op, ndim,
                          DDPL_MAX_DIMS);
    for (int i = 0; i < ndim; i++) {
        if (in[i] == -1) {
            if (infer >= 0) return ddpl_error("%s: only one dimension can be -1", op);
            infer = i;
        } else if (in[i] < 0) {
            return ddpl_error("%s: invalid size %lld in shape %s", op, (long long)in[i],
                              ddpl_sizes_str(ndim, in, a, sizeof a));
        } else {
            over |= ddpl_mul_overflow(known, in[i], &known);
            zero |= in[i] == 0;
        }
        out[i] = in[i];
    }
    if (zero) known = 0, over = false; /* a 0 size makes the product 0, however large the rest */
    if (infer >= 0) {
        if (over || known == 0 || numel % known != 0)
            return ddpl_error("%s: shape %s is invalid for input of shape %s (%lld elements)", op,
                              ddpl_sizes_str(ndim, in, a, sizeof a), ddpl_shape_str(x, b, sizeof b),
                              (long long)numel);
        out[infer] = numel / known;
    } else if (over || known != numel) {
        return ddpl_error("%s: shape %s is invalid for input of shape %s (%lld elements)", op,
                          ddpl_sizes_str(ndim, in, a, sizeof a), ddpl_shape_str(x, b, sizeof b),
                          (long long)numel);
    }
    return ddpl_check_shape(op, ndim, out, NULL);
}

/* Strides for viewing x with new sizes without copying, or false when the memory layout does
 * not allow it (ATen's computeStride: chunks of dims that are contiguous among themselves). */
static bool view_strides(const ddpl_tensor *x, int ndim, const int64_t *sizes, int64_t *strides)
{
    if (ddpl_tensor_numel(x) == 0 || x->ndim == 0) {
        ddpl_contiguous_strides(ndim, sizes, strides);
        return true;
    }
    int view_d = ndim - 1;
    int64_t chunk_base_stride = x->strides[x->ndim - 1];
    int64_t tensor_numel = 1, view_numel = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        tensor_numel *= x->sizes[d];
        if (d == 0 ||
            (x->sizes[d - 1] != 1 && x->strides[d - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
                strides[view_d] = view_numel * chunk_base_stride;
                view_numel *= sizes[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (d > 0) {
                chunk_base_stride = x->strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

ddpl_tensor *ddpl_view(ddpl_tensor *x, int ndim, const int64_t *sizes)
{
    int64_t s[DDPL_MAX_DIMS], st[DDPL_MAX_DIMS];
    if (infer_sizes("view", x, ndim, sizes, s) < 0) return NULL;
    if (!view_strides(x, ndim, s, st)) {
        char a[128];
        return ddpl_error("view: the input's strides (shape %s) are not compatible with the "
                          "requested shape; use reshape, or contiguous() first",
                          ddpl_shape_str(x, a, sizeof a)),
               NULL;
    }
    ddpl_node *n;
    return make_view(x, ndim, s, st, x->offset, "ViewBackward0", reshape_backward, &n);
}

ddpl_tensor *ddpl_reshape(ddpl_tensor *x, int ndim, const int64_t *sizes)
{
    int64_t s[DDPL_MAX_DIMS], st[DDPL_MAX_DIMS];
    if (infer_sizes("reshape", x, ndim, sizes, s) < 0) return NULL;
    if (view_strides(x, ndim, s, st)) {
        ddpl_node *n;
        return make_view(x, ndim, s, st, x->offset, "ViewBackward0", reshape_backward, &n);
    }
    ddpl_tensor *c = ddpl_clone(x);
    if (!c) return NULL;
    ddpl_tensor *r = ddpl_view(c, ndim, s);
    ddpl_tensor_release(c);
    return r;
}

ddpl_tensor *ddpl_flatten(ddpl_tensor *x, int start_dim, int end_dim)
{
    if (x->ndim == 0) return ddpl_reshape(x, 1, (int64_t[]){1});
    int s = ddpl_wrap_dim("flatten", start_dim, x->ndim);
    int e = s < 0 ? -1 : ddpl_wrap_dim("flatten", end_dim, x->ndim);
    if (s < 0 || e < 0) return NULL;
    if (s > e)
        return ddpl_error("flatten: start_dim %d comes after end_dim %d", start_dim, end_dim), NULL;
    int64_t sizes[DDPL_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < s; d++) sizes[n++] = x->sizes[d];
    int64_t m = 1;
    for (int d = s; d <= e; d++) m *= x->sizes[d];
    sizes[n++] = m;
    for (int d = e + 1; d < x->ndim; d++) sizes[n++] = x->sizes[d];
    return ddpl_reshape(x, n, sizes);
}

ddpl_tensor *ddpl_unsqueeze(ddpl_tensor *x, int dim)
{
    if (x->ndim >= DDPL_MAX_DIMS)
        return ddpl_error("unsqueeze: tensor already has %d dimensions", DDPL_MAX_DIMS), NULL;
    int d = ddpl_wrap_dim("unsqueeze", dim, x->ndim + 1);
    if (d < 0) return NULL;
    int64_t sizes[DDPL_MAX_DIMS], strides[DDPL_MAX_DIMS];
    for (int i = 0, j = 0; i <= x->ndim; i++) {
        if (i == d) {
            sizes[i] = 1;
            strides[i] = d < x->ndim ? x->sizes[d] * x->strides[d] : 1;
        } else {
            sizes[i] = x->sizes[j];
            strides[i] = x->strides[j];
            j++;
        }
    }
    ddpl_node *n;
    return make_view(x, x->ndim + 1, sizes, strides, x->offset, "UnsqueezeBackward0",
                     reshape_backward, &n);
}

static ddpl_tensor *squeeze_impl(ddpl_tensor *x, int only_dim)
{
    int64_t sizes[DDPL_MAX_DIMS], strides[DDPL_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < x->ndim; d++) {
        bool drop = x->sizes[d] == 1 && (only_dim < 0 || only_dim == d);
        if (drop) continue;
        sizes[n] = x->sizes[d];
        strides[n] = x->strides[d];
        n++;
    }
    ddpl_node *node;
    return make_view(x, n, sizes, strides, x->offset, "SqueezeBackward0", reshape_backward, &node);
}

ddpl_tensor *ddpl_squeeze(ddpl_tensor *x, int dim)
{
    int d = ddpl_wrap_dim("squeeze", dim, x->ndim);
    if (d < 0) return NULL;
    if (x->ndim == 0) return squeeze_impl(x, -1);
    return squeeze_impl(x, d);
}

ddpl_tensor *ddpl_squeeze_all(ddpl_tensor *x)
{
    return squeeze_impl(x, -1);
}

ddpl_tensor *ddpl_permute(ddpl_tensor *x, int ndim, const int *dims)
{
    if (ndim != x->ndim) {
        char a[128];
        return ddpl_error("permute: %d dimensions given for a tensor of shape %s", ndim,
                          ddpl_shape_str(x, a, sizeof a)),
               NULL;
    }
    int perm[DDPL_MAX_DIMS];
    bool seen[DDPL_MAX_DIMS] = {false};
    int64_t sizes[DDPL_MAX_DIMS], strides[DDPL_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        int d = ddpl_wrap_dim("permute", dims[i], ndim);
        if (d < 0) return NULL;
        if (seen[d]) return ddpl_error("permute: dimension %d repeated", dims[i]), NULL;
        seen[d] = true;
        perm[i] = d;
        sizes[i] = x->sizes[d];
        strides[i] = x->strides[d];
    }
    ddpl_node *n;
    ddpl_tensor *y =
        make_view(x, ndim, sizes, strides, x->offset, "PermuteBackward0", permute_backward, &n);
    if (n) {
        permute_ctx *c = DDPL_NODE_CTX(n, permute_ctx);
        c->ndim = ndim;
        memcpy(c->perm, perm, sizeof perm);
        n->dest_through = permute_dest_through;
    }
    return y;
}

ddpl_tensor *ddpl_transpose(ddpl_tensor *x, int d0, int d1)
{
    int a = ddpl_wrap_dim("transpose", d0, x->ndim);
    int b = a < 0 ? -1 : ddpl_wrap_dim("transpose", d1, x->ndim);
    if (a < 0 || b < 0) return NULL;
    int perm[DDPL_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) perm[i] = i;
    perm[a] = b;
    perm[b] = a;
    return ddpl_permute(x, x->ndim, perm);
}

ddpl_tensor *ddpl_t(ddpl_tensor *x)
{
    if (x->ndim > 2) {
        char a[128];
        return ddpl_error("t: expects a tensor with <= 2 dimensions, got shape %s; use "
                          "transpose",
                          ddpl_shape_str(x, a, sizeof a)),
               NULL;
    }
    if (x->ndim < 2) {
        ddpl_node *n;
        return make_view(x, x->ndim, x->sizes, x->strides, x->offset, "ViewBackward0",
                         reshape_backward, &n);
    }
    return ddpl_transpose(x, 0, 1);
}

ddpl_tensor *ddpl_narrow(ddpl_tensor *x, int dim, int64_t start, int64_t length)
{
    if (x->ndim == 0) return ddpl_error("narrow: cannot narrow a 0-dim tensor"), NULL;
    int d = ddpl_wrap_dim("narrow", dim, x->ndim);
    if (d < 0) return NULL;
    int64_t size = x->sizes[d];
    if (start < 0) start += size;
    if (start < 0 || length < 0 || start > size || length > size - start) {
        char a[128];
        return ddpl_error("narrow: start %lld and length %lld are out of range for dimension "
                          "%d of shape %s",
                          (long long)start, (long long)length, d, ddpl_shape_str(x, a, sizeof a)),
               NULL;
    }
    int64_t sizes[DDPL_MAX_DIMS];
    memcpy(sizes, x->sizes, sizeof sizes);
    sizes[d] = length;
    ddpl_node *n;
    ddpl_tensor *y = make_view(x, x->ndim, sizes, x->strides, x->offset + start * x->strides[d],
                               "SliceBackward0", narrow_backward, &n);
    if (n) *DDPL_NODE_CTX(n, narrow_ctx) = (narrow_ctx){d, start, false};
    return y;
}

typedef struct {
    int dim;
    int64_t start, end, step;
} slice_ctx;

/* The gradient of x[start:end:step] along dim: zeros with grad written through the same slice
 * (a recorded copy into a view under create_graph, so it is differentiable again). */
static int slice_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    const slice_ctx *c = DDPL_NODE_CTX(n, slice_ctx);
    const ddpl_edge *e = &n->edges[0];
    ddpl_tensor *z = ddpl_zeros(e->ndim, e->sizes, (ddpl_dtype)grad->dtype, grad->device);
    ddpl_tensor *region = z ? ddpl_slice(z, c->dim, c->start, c->end, c->step) : NULL;
    int rc = region ? ddpl_copy_(region, grad) : -1;
    ddpl_tensor_release(region);
    if (rc < 0) {
        ddpl_tensor_release(z);
        return -1;
    }
    gi[0] = z;
    return 0;
}

/* Python's rules: negative bounds count from the end, both are clamped into [0, size]. */
static int64_t slice_bound(int64_t v, int64_t size)
{
    if (v < 0) v += size;
    return v < 0 ? 0 : v > size ? size : v;
}

ddpl_tensor *ddpl_slice(ddpl_tensor *x, int dim, int64_t start, int64_t end, int64_t step)
{
    if (x->ndim == 0) return ddpl_error("slice: cannot slice a 0-dim tensor"), NULL;
    int d = ddpl_wrap_dim("slice", dim, x->ndim);
    if (d < 0) return NULL;
    if (step < 1)
        return ddpl_error("slice: step must be positive, got %lld", (long long)step), NULL;
    int64_t size = x->sizes[d];
    start = slice_bound(start, size);
    end = slice_bound(end, size);
    if (end < start) end = start;
    if (step == 1) return ddpl_narrow(x, d, start, end - start);
    int64_t sizes[DDPL_MAX_DIMS], strides[DDPL_MAX_DIMS];
    memcpy(sizes, x->sizes, sizeof sizes);
    memcpy(strides, x->strides, sizeof strides);
    sizes[d] = end == start ? 0 : (end - start - 1) / step + 1; /* no end - start + step: wraps */
    /* with two or more elements step < size, so |stride| * step stays inside the storage */
    if (sizes[d] > 1) strides[d] = x->strides[d] * step;
    ddpl_node *n;
    ddpl_tensor *y = make_view(x, x->ndim, sizes, strides, x->offset + start * x->strides[d],
                               "SliceBackward0", slice_backward, &n);
    if (n) *DDPL_NODE_CTX(n, slice_ctx) = (slice_ctx){d, start, end, step};
    return y;
}

ddpl_tensor *ddpl_select(ddpl_tensor *x, int dim, int64_t index)
{
    if (x->ndim == 0) return ddpl_error("select: cannot index a 0-dim tensor"), NULL;
    int d = ddpl_wrap_dim("select", dim, x->ndim);
    if (d < 0) return NULL;
    int64_t size = x->sizes[d];
    if (index < -size || index >= size) {
        char a[128];
        return ddpl_error("select: index %lld is out of range for dimension %d of shape %s",
                          (long long)index, d, ddpl_shape_str(x, a, sizeof a)),
               NULL;
    }
    if (index < 0) index += size;
    int64_t sizes[DDPL_MAX_DIMS], strides[DDPL_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (i == d) continue;
        sizes[n] = x->sizes[i];
        strides[n] = x->strides[i];
        n++;
    }
    ddpl_node *node;
    ddpl_tensor *y = make_view(x, n, sizes, strides, x->offset + index * x->strides[d],
                               "SelectBackward0", narrow_backward, &node);
    if (node) *DDPL_NODE_CTX(node, narrow_ctx) = (narrow_ctx){d, index, true};
    return y;
}

ddpl_tensor *ddpl_expand(ddpl_tensor *x, int ndim, const int64_t *sizes)
{
    char a[128], b[128];
    if (ndim < x->ndim || ndim > DDPL_MAX_DIMS)
        return ddpl_error("expand: cannot expand shape %s to %s", ddpl_shape_str(x, a, sizeof a),
                          ddpl_sizes_str(ndim, sizes, b, sizeof b)),
               NULL;
    int64_t s[DDPL_MAX_DIMS], st[DDPL_MAX_DIMS];
    int lead = ndim - x->ndim;
    for (int i = 0; i < ndim; i++) {
        int xd = i - lead;
        int64_t xs = xd >= 0 ? x->sizes[xd] : 1;
        int64_t want = sizes[i] == -1 && xd >= 0 ? xs : sizes[i];
        if (want < 0 || (xs != want && xs != 1))
            return ddpl_error("expand: cannot expand shape %s to %s (dimension %d)",
                              ddpl_shape_str(x, a, sizeof a),
                              ddpl_sizes_str(ndim, sizes, b, sizeof b), i),
                   NULL;
        s[i] = want;
        st[i] = (xd < 0 || xs != want) ? 0 : x->strides[xd];
    }
    if (ddpl_check_shape("expand", ndim, s, NULL) < 0) return NULL;
    ddpl_node *n;
    return make_view(x, ndim, s, st, x->offset, "ExpandBackward0", expand_backward, &n);
}

ddpl_tensor *ddpl_as_strided(ddpl_tensor *x, int ndim, const int64_t *sizes, const int64_t *strides,
                             int64_t offset)
{
    if (ndim < 0 || ndim > DDPL_MAX_DIMS)
        return ddpl_error("as_strided: %d dimensions requested, at most %d are supported", ndim,
                          DDPL_MAX_DIMS),
               NULL;
    if (ddpl_check_view_geometry("as_strided", ndim, sizes, strides, offset,
                                 ddpl_dtype_size((ddpl_dtype)x->dtype), x->storage->nbytes) < 0)
        return NULL;
    return ddpl_alias_view(x, ndim, sizes, strides, offset);
}
