/* ops/shape_misc.c: moving, splitting and broadcasting dims; grids and block matrices.
 * defines: ddpl_movedim, ddpl_unflatten, ddpl_tensor_split, ddpl_broadcast_tensors,
 *          ddpl_meshgrid, ddpl_cartesian_prod, ddpl_block_diag.
 *
 * All are views or compositions of differentiable ops: movedim is a permute, unflatten a view,
 * tensor_split narrows, broadcast_tensors and meshgrid expand (views, as PyTorch's);
 * cartesian_prod stacks the flattened meshgrid; block_diag cats each block between zero blocks,
 * row by row. */
#include "core/checked.h"
#include "op_util.h"

ddpl_tensor *ddpl_movedim(ddpl_tensor *x, int n, const int *source, const int *destination,
                          int n_destination)
{
    char a[64], b[64];
    int64_t s64[DDPL_MAX_DIMS], d64[DDPL_MAX_DIMS];
    if (n < 0 || n > DDPL_MAX_DIMS || n_destination < 0 || n_destination > DDPL_MAX_DIMS)
        return ddpl_error("movedim: at most %d dims can be moved", DDPL_MAX_DIMS), NULL;
    for (int i = 0; i < n; i++) s64[i] = source[i];
    for (int i = 0; i < n_destination; i++) d64[i] = destination[i];
    if (n != n_destination)
        return ddpl_error("movedim: Invalid source or destination dims: source (%s dims) should "
                          "contain the same number of dims as destination (%s dims)",
                          ddpl_sizes_str(n, s64, a, sizeof a),
                          ddpl_sizes_str(n_destination, d64, b, sizeof b)),
               NULL;
    int src[DDPL_MAX_DIMS], dst[DDPL_MAX_DIMS];
    bool src_seen[DDPL_MAX_DIMS] = {false}, dst_seen[DDPL_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++) {
        if ((src[i] = ddpl_wrap_dim("movedim", source[i], x->ndim)) < 0 ||
            (dst[i] = ddpl_wrap_dim("movedim", destination[i], x->ndim)) < 0)
            return NULL;
        if (src_seen[src[i]])
            return ddpl_error("movedim: repeated dim in `source` (%s)",
                              ddpl_sizes_str(n, s64, a, sizeof a)),
                   NULL;
        if (dst_seen[dst[i]])
            return ddpl_error("movedim: repeated dim in `destination` (%s)",
                              ddpl_sizes_str(n, d64, a, sizeof a)),
                   NULL;
        src_seen[src[i]] = dst_seen[dst[i]] = true;
    }
    if (x->ndim == 0) return ddpl_view(x, 0, NULL);
    /* the moved dims land at their destinations; the others fill the rest in order */
    int perm[DDPL_MAX_DIMS], next = 0;
    for (int i = 0; i < x->ndim; i++) perm[i] = -1;
    for (int i = 0; i < n; i++) perm[dst[i]] = src[i];
    for (int i = 0; i < x->ndim; i++) {
        if (perm[i] >= 0) continue;
        while (src_seen[next]) next++;
        perm[i] = next++;
    }
    return ddpl_permute(x, x->ndim, perm);
}

ddpl_tensor *ddpl_unflatten(ddpl_tensor *x, int dim, int n, const int64_t *sizes)
{
    char a[160];
    if (x->ndim == 0)
        return ddpl_error("unflatten: dimension specified as %d but tensor has no dimensions", dim),
               NULL;
    int d = ddpl_wrap_dim("unflatten", dim, x->ndim);
    if (d < 0) return NULL;
    if (n <= 0) return ddpl_error("unflatten: sizes must be non-empty"), NULL;
    if (x->ndim - 1 + n > DDPL_MAX_DIMS)
        return ddpl_error("unflatten: the result would have %d dimensions, at most %d are "
                          "supported",
                          x->ndim - 1 + n, DDPL_MAX_DIMS),
               NULL;
    int64_t known = 1, size = x->sizes[d];
    int infer = -1;
    bool over = false;
    for (int i = 0; i < n; i++) {
        if (sizes[i] == -1) {
            if (infer >= 0) return ddpl_error("unflatten: only one dimension can be -1"), NULL;
            infer = i;
        } else if (sizes[i] < 0) {
            return ddpl_error("unflatten: invalid size %lld in %s", (long long)sizes[i],
                              ddpl_sizes_str(n, sizes, a, sizeof a)),
                   NULL;
        } else {
            over |= ddpl_mul_overflow(known, sizes[i], &known);
        }
    }
    bool fits = !over && (infer >= 0 ? known != 0 && size % known == 0 : known == size);
    if (!fits)
        return ddpl_error("unflatten: Provided sizes %s don't multiply up to the size of dim %d "
                          "(%lld) in the input tensor",
                          ddpl_sizes_str(n, sizes, a, sizeof a), d, (long long)size),
               NULL;
    int64_t shape[DDPL_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < d; i++) shape[k++] = x->sizes[i];
    for (int i = 0; i < n; i++) shape[k++] = i == infer ? size / known : sizes[i];
    for (int i = d + 1; i < x->ndim; i++) shape[k++] = x->sizes[i];
    return ddpl_view(x, k, shape);
}

/* at::slice's bounds: negative values count from the end, then clamp to [0, size], end >= start */
static int64_t slice_bound(int64_t v, int64_t size)
{
    if (v < 0) v += size;
    return v < 0 ? 0 : v > size ? size : v;
}

int ddpl_tensor_split(ddpl_tensor *x, int64_t sections, int n_indices, const int64_t *indices,
                      int dim, ddpl_tensor **outs)
{
    if (x->ndim == 0)
        return ddpl_error("tensor_split: expected at least a 1-dimensional tensor, but got a "
                          "tensor with 0 dims");
    int d = ddpl_wrap_dim("tensor_split", dim, x->ndim);
    if (d < 0) return -1;
    int64_t size = x->sizes[d];
    int n_out = indices ? n_indices + 1 : (int)sections;
    if (!indices && (sections <= 0 || sections > INT32_MAX))
        return ddpl_error("tensor_split: number of sections must be larger than 0 (and fit an "
                          "int), got %lld",
                          (long long)sections);
    for (int i = 0; i < n_out; i++) outs[i] = NULL;
    int64_t start = 0;
    for (int i = 0; i < n_out; i++) {
        int64_t s, e;
        if (indices) { /* slices [indices[i-1], indices[i]) with at::slice's clamping */
            s = slice_bound(i ? indices[i - 1] : 0, size);
            e = slice_bound(i < n_indices ? indices[i] : size, size);
            if (e < s) e = s;
        } else { /* the first size % sections parts get one more element */
            int64_t len = size / sections + (i < size % sections);
            s = start;
            e = start + len;
            start = e;
        }
        if (!(outs[i] = ddpl_narrow(x, d, s, e - s))) {
            for (int j = 0; j < i; j++) ddpl_tensor_release(outs[j]), outs[j] = NULL;
            return -1;
        }
    }
    return 0;
}

/* The broadcast shape of n shapes (op names the error). */
static int broadcast_all(const char *op, int n, ddpl_tensor *const *xs, int *ndim, int64_t *sizes)
{
    *ndim = 0;
    for (int i = 0; i < n; i++) {
        int64_t so_far[DDPL_MAX_DIMS]; /* ddpl_broadcast_shape's input and output must differ */
        memcpy(so_far, sizes, sizeof so_far);
        if (ddpl_broadcast_shape(op, *ndim, so_far, xs[i]->ndim, xs[i]->sizes, ndim, sizes) < 0)
            return -1;
    }
    return 0;
}

static void release_all(int n, ddpl_tensor **outs)
{
    for (int i = 0; i < n; i++) ddpl_tensor_release(outs[i]), outs[i] = NULL;
}

int ddpl_broadcast_tensors(int n, ddpl_tensor *const *xs, ddpl_tensor **outs)
{
    int nd;
    int64_t sizes[DDPL_MAX_DIMS];
    for (int i = 0; i < n; i++) outs[i] = NULL;
    if (broadcast_all("broadcast_tensors", n, xs, &nd, sizes) < 0) return -1;
    for (int i = 0; i < n; i++)
        if (!(outs[i] = ddpl_expand(xs[i], nd, sizes))) return release_all(i, outs), -1;
    return 0;
}

/* Checks meshgrid's inputs: 0-D or 1-D, one dtype, one device. */
static int check_grid_inputs(const char *op, int n, ddpl_tensor *const *xs, int max_dim)
{
    char a[128];
    if (n <= 0) return ddpl_error("%s: expects a non-empty list of tensors", op);
    if (n > DDPL_MAX_DIMS)
        return ddpl_error("%s: %d tensors make a %d-D grid, at most %d dimensions are supported",
                          op, n, n, DDPL_MAX_DIMS);
    for (int i = 0; i < n; i++) {
        if (xs[i]->ndim > max_dim)
            return ddpl_error("%s: expected %s tensors, got shape %s at position %d", op,
                              max_dim == 1 ? "0-D or 1-D" : "1-D",
                              ddpl_shape_str(xs[i], a, sizeof a), i + 1);
        if (xs[i]->dtype != xs[0]->dtype)
            return ddpl_error("%s: expects all tensors to have the same dtype, got %s and %s", op,
                              ddpl_dtype_name((ddpl_dtype)xs[0]->dtype),
                              ddpl_dtype_name((ddpl_dtype)xs[i]->dtype));
        if (ddpl_check_same_device(op, xs[0], xs[i]) < 0) return -1;
    }
    return 0;
}

/* meshgrid with op naming the errors */
static int meshgrid(const char *op, int n, ddpl_tensor *const *xs, bool xy, ddpl_tensor **outs)
{
    for (int i = 0; i < n; i++) outs[i] = NULL;
    if (check_grid_inputs(op, n, xs, 1) < 0) return -1;
    /* 'xy': the first two dims of the grid are swapped (x varies along columns) */
    int64_t grid[DDPL_MAX_DIMS];
    int pos[DDPL_MAX_DIMS];
    for (int i = 0; i < n; i++) pos[i] = i;
    if (xy && n >= 2) pos[0] = 1, pos[1] = 0;
    for (int i = 0; i < n; i++) grid[pos[i]] = ddpl_tensor_numel(xs[i]);
    for (int i = 0; i < n; i++) {
        int64_t shape[DDPL_MAX_DIMS];
        for (int k = 0; k < n; k++) shape[k] = k == pos[i] ? grid[k] : 1;
        ddpl_tensor *v = ddpl_reshape(xs[i], n, shape);
        outs[i] = v ? ddpl_expand(v, n, grid) : NULL;
        ddpl_tensor_release(v);
        if (!outs[i]) return release_all(i, outs), -1;
    }
    return 0;
}

int ddpl_meshgrid(int n, ddpl_tensor *const *xs, bool xy, ddpl_tensor **outs)
{
    return meshgrid("meshgrid", n, xs, xy, outs);
}

ddpl_tensor *ddpl_cartesian_prod(int n, ddpl_tensor *const *xs)
{
    if (check_grid_inputs("cartesian_prod", n, xs, 1) < 0) return NULL;
    for (int i = 0; i < n; i++)
        if (xs[i]->ndim != 1) {
            char a[128];
            return ddpl_error("cartesian_prod: expected 1-D tensors, got shape %s at position %d",
                              ddpl_shape_str(xs[i], a, sizeof a), i + 1),
                   NULL;
        }
    if (n == 1) return ddpl_tensor_retain(xs[0]); /* PyTorch returns the input itself */
    ddpl_tensor *grid[DDPL_MAX_DIMS], *flat[DDPL_MAX_DIMS] = {NULL};
    if (meshgrid("cartesian_prod", n, xs, false, grid) < 0) return NULL;
    ddpl_tensor *r = NULL;
    int made = 0;
    for (; made < n; made++)
        if (!(flat[made] = ddpl_reshape(grid[made], 1, (int64_t[]){-1}))) break;
    if (made == n) r = ddpl_stack(n, flat, 1);
    release_all(n, grid);
    release_all(made, flat);
    return r;
}

/* One block row of block_diag: zeros (rows, left), t, zeros (rows, right), joined by cat. */
static ddpl_tensor *block_row(ddpl_tensor *t, int64_t left, int64_t right, ddpl_dtype dt)
{
    ddpl_tensor *parts[3] = {NULL, NULL, NULL}, *list[3];
    int k = 0;
    int64_t rows = t->sizes[0];
    bool ok = true;
    if (left > 0)
        ok = (list[k++] = parts[0] = ddpl_zeros(2, (int64_t[]){rows, left}, dt, t->device));
    list[k++] = t;
    if (ok && right > 0)
        ok = (list[k++] = parts[2] = ddpl_zeros(2, (int64_t[]){rows, right}, dt, t->device));
    ddpl_tensor *r = ok ? ddpl_cat(k, list, 1) : NULL;
    ddpl_tensor_release(parts[0]);
    ddpl_tensor_release(parts[2]);
    return r;
}

ddpl_tensor *ddpl_block_diag(int n, ddpl_tensor *const *xs)
{
    if (n == 0) /* PyTorch: a 1x0 float tensor */
        return ddpl_empty(2, (int64_t[]){1, 0}, ddpl_default_float_dtype(), ddpl_cpu());
    int64_t cols = 0;
    for (int i = 0; i < n; i++) {
        if (xs[i]->ndim > 2)
            return ddpl_error("block_diag: input tensors must have 2 or fewer dimensions. Input "
                              "%d has %d dimensions",
                              i, xs[i]->ndim),
                   NULL;
        if (ddpl_check_same_device("block_diag", xs[0], xs[i]) < 0) return NULL;
        int64_t c = xs[i]->ndim == 0 ? 1 : xs[i]->sizes[xs[i]->ndim - 1];
        if (ddpl_add_overflow(cols, c, &cols))
            return ddpl_error("block_diag: the result's size overflows"), NULL;
    }
    ddpl_dtype dt = ddpl_result_type(n, xs);
    ddpl_tensor **rows = ddpl_xcalloc((size_t)n, sizeof *rows);
    ddpl_tensor *r = NULL;
    int64_t left = 0;
    int made = 0;
    for (; made < n; made++) {
        ddpl_tensor *x = xs[made];
        int64_t shape[2] = {x->ndim == 2 ? x->sizes[0] : 1, x->ndim ? x->sizes[x->ndim - 1] : 1};
        ddpl_tensor *v = ddpl_reshape(x, 2, shape);
        ddpl_tensor *c = v ? ddpl_to_dtype(v, dt) : NULL;
        rows[made] = c ? block_row(c, left, cols - left - shape[1], dt) : NULL;
        ddpl_tensor_release(v);
        ddpl_tensor_release(c);
        if (!rows[made]) break;
        left += shape[1];
    }
    if (made == n) r = ddpl_cat(n, rows, 0);
    release_all(made, rows);
    free(rows);
    return r;
}
