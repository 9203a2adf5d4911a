/* ops/shape_flip.c: reversing and rotating tensors (copies, as PyTorch's).
 * defines: ddpl_flip, ddpl_fliplr, ddpl_flipud, ddpl_roll, ddpl_rot90.
 *
 * flip is one copy kernel reading x through negated strides (every dim at once, no index
 * tensor: an index_select per dim gathered element by element along the last dim, 5x slower
 * than PyTorch's flip); its backward is the same flip. The rest are compositions of
 * differentiable ops: roll is one cat of two narrow views per rolled dimension (without a
 * graph, an inner dim of a contiguous tensor is the flat tensor's roll and a copy of each row's
 * tail); rot90 is a flip and a transpose (a view), as ATen does. */
#include "op_util.h"

/* dims (n of them) wrapped for x and checked for repeats; seen[d] marks the dims given. */
static int wrap_dims(const char *op, const ddpl_tensor *x, int n, const int *dims, bool *seen)
{
    for (int d = 0; d < DDPL_MAX_DIMS; d++) seen[d] = false;
    for (int i = 0; i < n; i++) {
        int d = ddpl_wrap_dim(op, dims[i], x->ndim);
        if (d < 0) return -1;
        if (seen[d])
            return ddpl_error("%s: dim %d appears multiple times in the list of dims", op, d);
        seen[d] = true;
    }
    return 0;
}

typedef struct {
    bool seen[DDPL_MAX_DIMS];
} flip_ctx;

static ddpl_tensor *flip_marked(ddpl_tensor *x, const bool *seen);

/* the gradient flipped back along the same dims */
static int flip_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    gi[0] = flip_marked(grad, DDPL_NODE_CTX(n, flip_ctx)->seen);
    return gi[0] ? 0 : -1;
}

/* x reversed along the marked dims: one copy kernel from a transient alias of x with those
 * strides negated (starting at the last element along each), the layout the copy kernels read
 * with signed offsets on every device; the alias never leaves this function. */
static ddpl_tensor *flip_marked(ddpl_tensor *x, const bool *seen)
{
    int64_t strides[DDPL_MAX_DIMS], offset = x->offset;
    for (int d = 0; d < x->ndim; d++) {
        strides[d] = x->strides[d];
        if (seen[d] && x->sizes[d] > 1) {
            offset += (x->sizes[d] - 1) * x->strides[d];
            strides[d] = -x->strides[d];
        }
    }
    ddpl_tensor *out = ddpl_tensor_new(x->ndim, x->sizes, (ddpl_dtype)x->dtype, x->device);
    if (!out) return NULL;
    ddpl_tensor *rev = ddpl_tensor_alias(x, x->ndim, x->sizes, strides, offset);
    int rc = ddpl_tensor_numel(x) ? ddpl_run_kernel(DDPL_OP_COPY, x->device, &out, &rev, NULL) : 0;
    ddpl_tensor_release(rev);
    if (rc < 0) {
        ddpl_tensor_release(out);
        return NULL;
    }
    if (ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new("FlipBackward0", flip_backward, 1, &x);
        memcpy(DDPL_NODE_CTX(n, flip_ctx)->seen, seen, sizeof(bool) * DDPL_MAX_DIMS);
        ddpl_set_history(out, n);
    }
    return out;
}

ddpl_tensor *ddpl_flip(ddpl_tensor *x, int n, const int *dims)
{
    bool seen[DDPL_MAX_DIMS];
    if (n < 0 || n > DDPL_MAX_DIMS)
        return ddpl_error("flip: %d dims given, a tensor has at most %d", n, DDPL_MAX_DIMS), NULL;
    if (wrap_dims("flip", x, n, dims, seen) < 0) return NULL;
    return flip_marked(x, seen);
}

ddpl_tensor *ddpl_fliplr(ddpl_tensor *x)
{
    if (x->ndim < 2) return ddpl_error("fliplr: input must be >= 2-d, got %d-d", x->ndim), NULL;
    return ddpl_flip(x, 1, (int[]){1});
}

ddpl_tensor *ddpl_flipud(ddpl_tensor *x)
{
    if (x->ndim < 1) return ddpl_error("flipud: input must be >= 1-d, got 0-d"), NULL;
    return ddpl_flip(x, 1, (int[]){0});
}

static ddpl_tensor *roll_one(ddpl_tensor *x, int d, int64_t shift);

/* A contiguous x seen as (a, b) rows, b = the elements from dim d on, rolled by k = s * inner
 * within each row: the flat tensor rolled by k (one cat of two long copies) is right except in
 * the first k columns of each row, which hold the previous row's tail; one narrow copy puts the
 * row's own tail there. A cat per row cut every row into two short copies (4096 x 1024 float32
 * along dim 1: 8192 of them) and ran at 0.66-0.9x PyTorch's speed. Results only, no graph: the
 * in-place fix-up is not recorded. Returns 1 with *out set, 0 when the case does not apply, -1
 * on error. */
static int roll_rows_flat(ddpl_tensor *x, int d, int64_t s, ddpl_tensor **out)
{
    int64_t inner = 1, numel = ddpl_tensor_numel(x);
    for (int k = d + 1; k < x->ndim; k++) inner *= x->sizes[k];
    int64_t b = x->sizes[d] * inner, a = b ? numel / b : 0, k = s * inner;
    if (d == 0 || a < 2 || 2 * k > b || !ddpl_tensor_is_contiguous(x) || ddpl_grad_needed(1, &x))
        return 0;
    ddpl_tensor *flat = ddpl_view(x, 1, &numel);
    ddpl_tensor *r = flat ? roll_one(flat, 0, k) : NULL;
    ddpl_tensor *rows = r ? ddpl_view(r, 2, (int64_t[]){a, b}) : NULL;
    ddpl_tensor *xrows = rows ? ddpl_view(x, 2, (int64_t[]){a, b}) : NULL;
    ddpl_tensor *dst = xrows ? ddpl_narrow(rows, 1, 0, k) : NULL;
    ddpl_tensor *src = dst ? ddpl_narrow(xrows, 1, b - k, k) : NULL;
    *out = src && ddpl_copy_(dst, src) == 0 ? ddpl_view(r, x->ndim, x->sizes) : NULL;
    ddpl_tensor_release(flat);
    ddpl_tensor_release(r);
    ddpl_tensor_release(rows);
    ddpl_tensor_release(xrows);
    ddpl_tensor_release(dst);
    ddpl_tensor_release(src);
    return *out ? 1 : -1;
}

/* x rolled by shift along dim d (wrapped): the last s elements move to the front. */
static ddpl_tensor *roll_one(ddpl_tensor *x, int d, int64_t shift)
{
    int64_t n = x->sizes[d];
    int64_t s = n ? ((shift % n) + n) % n : 0;
    if (s == 0) return ddpl_tensor_retain(x);
    ddpl_tensor *fast = NULL;
    int rc = roll_rows_flat(x, d, s, &fast);
    if (rc != 0) return fast; /* NULL on error */
    ddpl_tensor *parts[2] = {ddpl_narrow(x, d, n - s, s), ddpl_narrow(x, d, 0, n - s)};
    ddpl_tensor *r = parts[0] && parts[1] ? ddpl_cat(2, parts, d) : NULL;
    ddpl_tensor_release(parts[0]);
    ddpl_tensor_release(parts[1]);
    return r;
}

ddpl_tensor *ddpl_roll(ddpl_tensor *x, int n_shifts, const int64_t *shifts, int n_dims,
                       const int *dims)
{
    if (n_shifts <= 0 || (n_dims != 0 && n_dims != n_shifts) || (n_dims == 0 && n_shifts != 1))
        return ddpl_error("roll: shifts and dimensions must align. shifts: %d, dims: %d", n_shifts,
                          n_dims),
               NULL;
    if (n_dims == 0) { /* no dims: roll the flattened tensor, then restore the shape */
        ddpl_tensor *flat = ddpl_reshape(x, 1, (int64_t[]){ddpl_tensor_numel(x)});
        ddpl_tensor *r = flat ? roll_one(flat, 0, shifts[0]) : NULL;
        ddpl_tensor *out = NULL;
        if (r && r == flat)
            out = ddpl_clone(x);
        else if (r)
            out = ddpl_view(r, x->ndim, x->sizes);
        ddpl_tensor_release(flat);
        ddpl_tensor_release(r);
        return out;
    }
    int wrapped[DDPL_MAX_DIMS];
    if (n_dims > DDPL_MAX_DIMS)
        return ddpl_error("roll: %d dims given, a tensor has at most %d", n_dims, DDPL_MAX_DIMS),
               NULL;
    for (int i = 0; i < n_dims; i++)
        if ((wrapped[i] = ddpl_wrap_dim("roll", dims[i], x->ndim)) < 0) return NULL;
    if (x->ndim == 0) return ddpl_clone(x);
    ddpl_tensor *cur = ddpl_tensor_retain(x);
    for (int i = 0; i < n_dims && cur; i++) {
        ddpl_tensor *next = roll_one(cur, wrapped[i], shifts[i]);
        ddpl_tensor_release(cur);
        cur = next;
    }
    if (cur == x) { /* every shift was a whole turn: still a copy */
        ddpl_tensor_release(cur);
        return ddpl_clone(x);
    }
    return cur;
}

ddpl_tensor *ddpl_rot90(ddpl_tensor *x, int64_t k, int dim0, int dim1)
{
    if (x->ndim < 2)
        return ddpl_error("rot90: expected total dims >= 2, but got total dims = %d", x->ndim),
               NULL;
    int a = ddpl_wrap_dim("rot90", dim0, x->ndim);
    int b = a < 0 ? -1 : ddpl_wrap_dim("rot90", dim1, x->ndim);
    if (a < 0 || b < 0) return NULL;
    if (a == b)
        return ddpl_error("rot90: expected rotation dims to be different, but got dim0 = %d and "
                          "dim1 = %d",
                          a, b),
               NULL;
    switch (((k % 4) + 4) % 4) {
    case 1: { /* counter-clockwise from dim0 towards dim1: flip dim1, swap */
        ddpl_tensor *f = ddpl_flip(x, 1, &b);
        ddpl_tensor *r = f ? ddpl_transpose(f, a, b) : NULL;
        ddpl_tensor_release(f);
        return r;
    }
    case 2:
        return ddpl_flip(x, 2, (int[]){a, b});
    case 3: {
        ddpl_tensor *f = ddpl_flip(x, 1, &a);
        ddpl_tensor *r = f ? ddpl_transpose(f, a, b) : NULL;
        ddpl_tensor_release(f);
        return r;
    }
    default:
        return ddpl_clone(x);
    }
}
