/* ops/shape_diag.c: triangles and diagonals of matrices (the last two dims, or dim1/dim2).
 * defines: ddpl_tril, ddpl_triu, ddpl_tril_, ddpl_triu_, ddpl_tril_indices, ddpl_triu_indices,
 *          ddpl_diagonal, ddpl_diag_embed, ddpl_diag, ddpl_trace.
 *
 * diagonal is a view (an alias with stride stride1 + stride2, as PyTorch's), so writes through
 * it reach the base; its gradient is the incoming one placed on the diagonal of zeros. The rest
 * are compositions: tril/triu and the diagonal placement are one where() against a mask built
 * from two aranges (col - row compared with the offset), so every dtype and device works and
 * the gradients (and second derivatives) are where's. trace is diagonal().sum(). */
#include "core/checked.h"
#include "op_util.h"

enum mask_kind { MASK_TRIL, MASK_TRIU, MASK_DIAG };

/* (rows, cols) bool mask of col - row <= k (tril), >= k (triu) or == k (a diagonal): one
 * broadcast comparison of the columns (cols) with row + k (rows, 1). */
static ddpl_tensor *offset_mask(int64_t rows, int64_t cols, int64_t k, enum mask_kind kind,
                                ddpl_device dev)
{
    /* offsets past the matrix give the same mask as the nearest ones at its edge (and keep
     * row + k far from overflow) */
    if (k > cols + 1) k = cols + 1;
    if (k < -rows - 1) k = -rows - 1;
    ddpl_tensor *c = ddpl_arange_int(0, cols, 1, DDPL_INT64, dev);
    ddpl_tensor *rk = ddpl_arange_int(k, rows + k, 1, DDPL_INT64, dev);
    ddpl_tensor *col = rk ? ddpl_unsqueeze(rk, 1) : NULL;
    ddpl_tensor *m = NULL;
    if (c && col)
        m = kind == MASK_TRIL   ? ddpl_le(c, col)
            : kind == MASK_TRIU ? ddpl_ge(c, col)
                                : ddpl_eq(c, col);
    ddpl_tensor_release(c);
    ddpl_tensor_release(rk);
    ddpl_tensor_release(col);
    return m;
}

/* where(mask, x, 0) with a 0-dim zero of x's dtype (so the dtype stays x's) */
static ddpl_tensor *keep_where(ddpl_tensor *mask, ddpl_tensor *x)
{
    ddpl_tensor *zero = ddpl_zeros(0, NULL, (ddpl_dtype)x->dtype, x->device);
    ddpl_tensor *r = zero ? ddpl_where(mask, x, zero) : NULL;
    ddpl_tensor_release(zero);
    return r;
}

static ddpl_tensor *triangle(const char *op, ddpl_tensor *x, int64_t k, enum mask_kind kind)
{
    if (x->ndim < 2)
        return ddpl_error("%s: input tensor must have at least 2 dimensions, got %d", op, x->ndim),
               NULL;
    ddpl_tensor *m = offset_mask(x->sizes[x->ndim - 2], x->sizes[x->ndim - 1], k, kind, x->device);
    ddpl_tensor *r = m ? keep_where(m, x) : NULL;
    ddpl_tensor_release(m);
    return r;
}

ddpl_tensor *ddpl_tril(ddpl_tensor *x, int64_t diagonal)
{
    return triangle("tril", x, diagonal, MASK_TRIL);
}

ddpl_tensor *ddpl_triu(ddpl_tensor *x, int64_t diagonal)
{
    return triangle("triu", x, diagonal, MASK_TRIU);
}

/* x <- tril/triu(x), with PyTorch's in-place rules (ops/inplace.c): recorded when autograd
 * needs it (where() saves only the mask, so x itself is the source), else computed out of place
 * without history and copied in; either way the storage version is bumped. */
static int triangle_(const char *op, ddpl_tensor *x, int64_t k, enum mask_kind kind)
{
    int recorded = ddpl_inplace_recorded(op, x, 0, NULL);
    if (recorded < 0 || ddpl_check_no_internal_overlap(op, x) < 0) return -1;
    if (recorded) {
        ddpl_tensor *src = ddpl_inplace_source(x, false);
        ddpl_tensor *r = src ? triangle(op, src, k, kind) : NULL;
        ddpl_tensor_release(src);
        return ddpl_inplace_commit(op, NULL, x, r);
    }
    bool prev = ddpl_set_grad_enabled(false);
    ddpl_tensor *r = triangle(op, x, k, kind);
    ddpl_set_grad_enabled(prev);
    if (!r) return -1;
    int rc = ddpl_run_kernel(DDPL_OP_COPY, x->device, &x, &r, NULL);
    ddpl_tensor_release(r);
    if (rc == 0) ddpl_storage_bump_version(x->storage);
    return rc;
}

int ddpl_tril_(ddpl_tensor *x, int64_t diagonal)
{
    return triangle_("tril_", x, diagonal, MASK_TRIL);
}

int ddpl_triu_(ddpl_tensor *x, int64_t diagonal)
{
    return triangle_("triu_", x, diagonal, MASK_TRIU);
}

/* Sum over r in [a, b) of (r + c) (c may be negative), in 128 bits. */
static __int128 arith_sum(int64_t a, int64_t b, int64_t c)
{
    if (b <= a) return 0;
    return (__int128)(b - a) * ((__int128)a + c + (__int128)b - 1 + c) / 2;
}

static int64_t clamp64(__int128 v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : (int64_t)v;
}

/* The (row, col) coordinates of the lower (upper) triangle, row by row: a (2, N) tensor. */
static ddpl_tensor *tri_indices(const char *op, int64_t row, int64_t col, int64_t offset,
                                bool upper, ddpl_dtype dt, ddpl_device dev)
{
    if (row < 0)
        return ddpl_error("%s: row must be non-negative, got %lld", op, (long long)row), NULL;
    if (col < 0)
        return ddpl_error("%s: col must be non-negative, got %lld", op, (long long)col), NULL;
    if (dt != DDPL_INT64 && dt != DDPL_INT32)
        return ddpl_error("%s: not implemented for dtype %s (int64 or int32)", op,
                          ddpl_dtype_name(dt)),
               NULL;
    /* rows [r0, r1) hold entries; row r holds the columns [lo(r), hi(r)) */
    __int128 total;
    int64_t r0, r1;
    if (!upper) { /* columns [0, min(r + offset + 1, col)) */
        r0 = clamp64(-(__int128)offset, 0, row);
        r1 = row;
        int64_t rc = clamp64((__int128)col - offset - 1, r0, r1); /* from here: full rows */
        total = arith_sum(r0, rc, 0) + (__int128)(rc - r0) * ((__int128)offset + 1) +
                (__int128)(r1 - rc) * col;
    } else { /* columns [max(r + offset, 0), col) */
        r0 = 0;
        r1 = clamp64((__int128)col - offset, 0, row);
        int64_t rz = clamp64(-(__int128)offset, r0, r1); /* before it: full rows */
        total = (__int128)rz * col + (__int128)(r1 - rz) * ((__int128)col - offset) -
                arith_sum(rz, r1, 0);
    }
    int64_t sizes[2] = {2, total > DDPL_MAX_NUMEL ? DDPL_MAX_NUMEL : (int64_t)total};
    if (total > DDPL_MAX_NUMEL / 2 || ddpl_check_shape(op, 2, sizes, NULL) < 0)
        return ddpl_error("%s: %lld x %lld with offset %lld has too many entries", op,
                          (long long)row, (long long)col, (long long)offset),
               NULL;
    int64_t n = sizes[1];
    int64_t *buf = ddpl_malloc_array(n > 0 ? 2 * n : 1, sizeof *buf);
    if (!buf) return ddpl_error("%s: out of memory for %lld indices", op, (long long)n), NULL;
    int64_t k = 0;
    for (int64_t r = r0; r < r1 && k < n; r++) {
        __int128 lo = upper ? (__int128)r + offset : 0, hi = upper ? col : (__int128)r + offset + 1;
        int64_t l = clamp64(lo, 0, col), h = clamp64(hi, 0, col);
        for (int64_t c = l; c < h; c++, k++) buf[k] = r, buf[n + k] = c;
    }
    ddpl_tensor *t = ddpl_from_data(2, sizes, DDPL_INT64, buf, dev);
    free(buf);
    if (t && dt != DDPL_INT64) {
        ddpl_tensor *c = ddpl_as_dtype(t, dt);
        ddpl_tensor_release(t);
        t = c;
    }
    return t;
}

ddpl_tensor *ddpl_tril_indices(int64_t row, int64_t col, int64_t offset, ddpl_dtype dt,
                               ddpl_device dev)
{
    return tri_indices("tril_indices", row, col, offset, false, dt, dev);
}

ddpl_tensor *ddpl_triu_indices(int64_t row, int64_t col, int64_t offset, ddpl_dtype dt,
                               ddpl_device dev)
{
    return tri_indices("triu_indices", row, col, offset, true, dt, dev);
}

/* (..., rows, cols): zeros but for x (..., n) on the diagonal col - row == k, element i at
 * (i, i + k) for k >= 0 and at (i - k, i) for k < 0; n is at most that diagonal's length. */
static ddpl_tensor *place_on_diagonal(ddpl_tensor *x, int64_t k, int64_t rows, int64_t cols)
{
    int nd = x->ndim;
    int64_t len = k >= 0 ? rows : cols, n = x->sizes[nd - 1];
    ddpl_tensor *xp;
    if (n < len) { /* x padded with zeros to the length of the row (column) index */
        int64_t zs[DDPL_MAX_DIMS];
        memcpy(zs, x->sizes, sizeof zs);
        zs[nd - 1] = len - n;
        ddpl_tensor *z = ddpl_zeros(nd, zs, (ddpl_dtype)x->dtype, x->device);
        xp = z ? ddpl_cat(2, (ddpl_tensor *[]){x, z}, nd - 1) : NULL;
        ddpl_tensor_release(z);
    } else {
        xp = ddpl_tensor_retain(x);
    }
    ddpl_tensor *u = xp ? ddpl_unsqueeze(xp, k >= 0 ? nd : nd - 1) : NULL;
    ddpl_tensor *m = u ? offset_mask(rows, cols, k, MASK_DIAG, x->device) : NULL;
    ddpl_tensor *r = m ? keep_where(m, u) : NULL;
    ddpl_tensor_release(xp);
    ddpl_tensor_release(u);
    ddpl_tensor_release(m);
    return r;
}

/* The last two dims of t moved to d1 and d2 (a view). */
static ddpl_tensor *last_two_to(ddpl_tensor *t, int d1, int d2)
{
    return ddpl_movedim(t, 2, (int[]){-2, -1}, (int[]){d1, d2}, 2);
}

/* Length of the diagonal at offset k of a rows x cols matrix. */
static int64_t diag_len(int64_t rows, int64_t cols, int64_t k)
{
    if (k >= 0) return k >= cols ? 0 : (rows < cols - k ? rows : cols - k);
    return k <= -rows ? 0 : (rows + k < cols ? rows + k : cols);
}

typedef struct {
    int64_t offset;
    int d1, d2;
} diag_ctx;

static int diagonal_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    diag_ctx *c = DDPL_NODE_CTX(n, diag_ctx);
    ddpl_edge *e = &n->edges[0];
    ddpl_tensor *p = place_on_diagonal(grad, c->offset, e->sizes[c->d1], e->sizes[c->d2]);
    gi[0] = p ? last_two_to(p, c->d1, c->d2) : NULL;
    ddpl_tensor_release(p);
    return gi[0] ? 0 : -1;
}

ddpl_tensor *ddpl_diagonal(ddpl_tensor *x, int64_t offset, int dim1, int dim2)
{
    if (x->ndim < 2)
        return ddpl_error("diagonal: expected a tensor with at least 2 dimensions, got %d",
                          x->ndim),
               NULL;
    int d1 = ddpl_wrap_dim("diagonal", dim1, x->ndim);
    int d2 = d1 < 0 ? -1 : ddpl_wrap_dim("diagonal", dim2, x->ndim);
    if (d1 < 0 || d2 < 0) return NULL;
    if (d1 == d2)
        return ddpl_error("diagonal: diagonal dimensions cannot be identical %d, %d", dim1, dim2),
               NULL;
    int64_t len = diag_len(x->sizes[d1], x->sizes[d2], offset);
    int64_t start = x->offset;
    if (len > 0) start += offset >= 0 ? offset * x->strides[d2] : -offset * x->strides[d1];
    int64_t sizes[DDPL_MAX_DIMS], strides[DDPL_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < x->ndim; d++)
        if (d != d1 && d != d2) sizes[k] = x->sizes[d], strides[k++] = x->strides[d];
    sizes[k] = len;
    strides[k++] = x->strides[d1] + x->strides[d2];
    ddpl_tensor *y = ddpl_alias_view(x, k, sizes, strides, start);
    if (!y) return NULL;
    if (ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new("DiagonalBackward0", diagonal_backward, 1, &x);
        *DDPL_NODE_CTX(n, diag_ctx) = (diag_ctx){offset, d1, d2};
        ddpl_set_history(y, n);
    }
    return y;
}

ddpl_tensor *ddpl_diag_embed(ddpl_tensor *x, int64_t offset, int dim1, int dim2)
{
    int nd = x->ndim + 1;
    if (nd > DDPL_MAX_DIMS)
        return ddpl_error("diag_embed: the result would have %d dimensions, at most %d are "
                          "supported",
                          nd, DDPL_MAX_DIMS),
               NULL;
    int d1 = ddpl_wrap_dim("diag_embed", dim1, nd);
    int d2 = d1 < 0 ? -1 : ddpl_wrap_dim("diag_embed", dim2, nd);
    if (d1 < 0 || d2 < 0) return NULL;
    if (d1 == d2)
        return ddpl_error("diag_embed: diagonal dimensions cannot be identical %d, %d", dim1, dim2),
               NULL;
    if (x->ndim == 0)
        return ddpl_error("diag_embed: expected a tensor with at least 1 dimension"), NULL;
    int64_t n = x->sizes[x->ndim - 1], m;
    if (offset == INT64_MIN || ddpl_add_overflow(n, offset < 0 ? -offset : offset, &m) ||
        ddpl_check_shape("diag_embed", 2, (int64_t[]){m, m}, NULL) < 0)
        return ddpl_error("diag_embed: offset %lld makes the matrices too large",
                          (long long)offset),
               NULL;
    ddpl_tensor *p = place_on_diagonal(x, offset, m, m);
    ddpl_tensor *r = p ? last_two_to(p, d1, d2) : NULL;
    ddpl_tensor_release(p);
    return r;
}

ddpl_tensor *ddpl_diag(ddpl_tensor *x, int64_t diagonal)
{
    if (x->ndim == 1) return ddpl_diag_embed(x, diagonal, 0, 1);
    if (x->ndim != 2)
        return ddpl_error("diag: matrix or a vector expected, got a %d-D tensor", x->ndim), NULL;
    ddpl_tensor *d = ddpl_diagonal(x, diagonal, 0, 1);
    ddpl_tensor *r = d ? ddpl_clone(d) : NULL; /* a copy, as PyTorch's diag */
    ddpl_tensor_release(d);
    return r;
}

ddpl_tensor *ddpl_trace(ddpl_tensor *x)
{
    /* PyTorch 1.13 has no bool, float16 or bfloat16 trace */
    if (x->ndim != 2)
        return ddpl_error("trace: expected a matrix, but got tensor with dim %d", x->ndim), NULL;
    if (x->dtype == DDPL_BOOL || x->dtype == DDPL_FLOAT16 || x->dtype == DDPL_BFLOAT16)
        return ddpl_error("trace: not implemented for dtype %s",
                          ddpl_dtype_name((ddpl_dtype)x->dtype)),
               NULL;
    ddpl_tensor *d = ddpl_diagonal(x, 0, 0, 1);
    ddpl_tensor *r = d ? ddpl_sum(d) : NULL;
    ddpl_tensor_release(d);
    return r;
}
