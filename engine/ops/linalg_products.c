/* ops/linalg_products.c: products built on the GEMM ops.
 * defines: ddpl_outer, ddpl_dot, ddpl_inner, ddpl_tensordot, ddpl_kron, ddpl_cross,
 *          ddpl_baddbmm, ddpl_addbmm, ddpl_addmv, ddpl_addr.
 *
 * Each is a composition of differentiable ops (mul, matmul/mm/bmm, views, sums): gradients,
 * CUDA and create_graph come from those, and every contraction runs as one GEMM, never as a
 * loop over all index combinations. */
#include "linalg_util.h"

static ddpl_tensor *scaled(op_temps *k, ddpl_tensor *x, double s)
{
    return s == 1.0 ? x : OP_B(k, ddpl_mul, x, OP_NUM(k, s));
}

ddpl_tensor *ddpl_outer(ddpl_tensor *a, ddpl_tensor *b)
{
    if (a->ndim != 1 || b->ndim != 1)
        return ddpl_error("outer: Expected 1-D argument %s, but got %d-D",
                          a->ndim != 1 ? "self" : "vec2", a->ndim != 1 ? a->ndim : b->ndim),
               NULL;
    op_temps k = {0};
    ddpl_tensor *col = OP_T(&k, ddpl_unsqueeze(a, 1));
    return op_temps_result(&k, OP_B(&k, ddpl_mul, col, b));
}

ddpl_tensor *ddpl_dot(ddpl_tensor *a, ddpl_tensor *b)
{
    if (a->ndim != 1 || b->ndim != 1)
        return ddpl_error("dot: 1D tensors expected, but got %dD and %dD tensors", a->ndim,
                          b->ndim),
               NULL;
    if (a->sizes[0] != b->sizes[0])
        return ddpl_error("dot: inconsistent tensor size, expected tensor [%lld] and src [%lld] "
                          "to have the same number of elements, but got %lld and %lld elements "
                          "respectively",
                          (long long)a->sizes[0], (long long)b->sizes[0], (long long)a->sizes[0],
                          (long long)b->sizes[0]),
               NULL;
    if (a->dtype != b->dtype)
        return ddpl_error("dot: expected both vectors to have same dtype, but found %s and %s",
                          ddpl_dtype_name((ddpl_dtype)a->dtype),
                          ddpl_dtype_name((ddpl_dtype)b->dtype)),
               NULL;
    return ddpl_matmul(a, b);
}

/* a's dims dims_a contracted with b's dims_b: a permuted to (free, contracted) and b to
 * (contracted, free), both flattened to matrices, one mm, the free dims unflattened. */
ddpl_tensor *ddpl_tensordot(ddpl_tensor *a, ddpl_tensor *b, int n, const int *dims_a,
                            const int *dims_b)
{
    if (n < 0 || n > a->ndim || n > b->ndim)
        return ddpl_error("tensordot: expects dims in [0, %d], got %d",
                          a->ndim < b->ndim ? a->ndim : b->ndim, n),
               NULL;
    if (a->dtype != b->dtype)
        return ddpl_error("tensordot: expected both tensors to have the same dtype, but got %s "
                          "and %s",
                          ddpl_dtype_name((ddpl_dtype)a->dtype),
                          ddpl_dtype_name((ddpl_dtype)b->dtype)),
               NULL;
    bool ca[DDPL_MAX_DIMS] = {0}, cb[DDPL_MAX_DIMS] = {0};
    int pa[DDPL_MAX_DIMS], pb[DDPL_MAX_DIMS], na = 0, nb = 0;
    int64_t ksz = 1, fa = 1, fb = 1, out[DDPL_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        int da = ddpl_wrap_dim("tensordot", dims_a[i], a->ndim);
        int db = da < 0 ? -1 : ddpl_wrap_dim("tensordot", dims_b[i], b->ndim);
        if (db < 0) return NULL;
        if (ca[da] || cb[db])
            return ddpl_error("tensordot: dim %d appears multiple times in the list of dims",
                              ca[da] ? da : db),
                   NULL;
        if (a->sizes[da] != b->sizes[db])
            return ddpl_error("tensordot: contracted dimensions need to match, but first has "
                              "size %lld in dim %d and second has size %lld in dim %d",
                              (long long)a->sizes[da], da, (long long)b->sizes[db], db),
                   NULL;
        ca[da] = cb[db] = true;
    }
    int no = 0;
    for (int i = 0; i < a->ndim; i++)
        if (!ca[i]) pa[na++] = i, fa *= a->sizes[i], out[no++] = a->sizes[i];
    for (int i = 0; i < n; i++) {
        int da = ddpl_wrap_dim("tensordot", dims_a[i], a->ndim);
        int db = ddpl_wrap_dim("tensordot", dims_b[i], b->ndim);
        pa[na++] = da;
        pb[nb++] = db;
        ksz *= a->sizes[da];
    }
    for (int i = 0; i < b->ndim; i++)
        if (!cb[i]) pb[nb++] = i, fb *= b->sizes[i], out[no++] = b->sizes[i];
    op_temps k = {0};
    int64_t sa[2] = {fa, ksz}, sb[2] = {ksz, fb};
    ddpl_tensor *am = OP_T(&k, ddpl_reshape(OP_T(&k, ddpl_permute(a, a->ndim, pa)), 2, sa));
    ddpl_tensor *bm = k.failed ? NULL : OP_T(&k, ddpl_permute(b, b->ndim, pb));
    bm = k.failed ? NULL : OP_T(&k, ddpl_reshape(bm, 2, sb));
    ddpl_tensor *p = OP_B(&k, ddpl_mm, am, bm);
    ddpl_tensor *r = k.failed ? NULL : OP_T(&k, ddpl_reshape(p, no, out));
    return op_temps_result(&k, r);
}

ddpl_tensor *ddpl_inner(ddpl_tensor *a, ddpl_tensor *b)
{
    if (a->ndim == 0 || b->ndim == 0) return ddpl_mul(a, b);
    if (a->sizes[a->ndim - 1] != b->sizes[b->ndim - 1]) {
        char sa[128], sb[128];
        return ddpl_error("inner: the last dimension must match on both input tensors but got "
                          "shapes %s and %s",
                          ddpl_shape_str(a, sa, sizeof sa), ddpl_shape_str(b, sb, sizeof sb)),
               NULL;
    }
    int last = -1;
    return ddpl_tensordot(a, b, 1, &last, &last);
}

/* kron: a viewed as (a0, 1, a1, 1, ...) times b as (1, b0, 1, b1, ...), a broadcast product
 * reshaped to (a0*b0, a1*b1, ...); the shorter operand gets leading 1s. */
ddpl_tensor *ddpl_kron(ddpl_tensor *a, ddpl_tensor *b)
{
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    if (2 * nd > DDPL_MAX_DIMS)
        return ddpl_error("kron: at most %d dims are supported, got %d", DDPL_MAX_DIMS / 2, nd),
               NULL;
    int64_t ia[DDPL_MAX_DIMS], ib[DDPL_MAX_DIMS], out[DDPL_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        int64_t sa = i < nd - a->ndim ? 1 : a->sizes[i - (nd - a->ndim)];
        int64_t sb = i < nd - b->ndim ? 1 : b->sizes[i - (nd - b->ndim)];
        ia[2 * i] = sa, ia[2 * i + 1] = 1;
        ib[2 * i] = 1, ib[2 * i + 1] = sb;
        if (ddpl_mul_overflow(sa, sb, &out[i]))
            return ddpl_error("kron: the result's size overflows"), NULL;
    }
    op_temps k = {0};
    ddpl_tensor *ra = OP_T(&k, ddpl_reshape(a, 2 * nd, ia));
    ddpl_tensor *rb = k.failed ? NULL : OP_T(&k, ddpl_reshape(b, 2 * nd, ib));
    ddpl_tensor *p = OP_B(&k, ddpl_mul, ra, rb);
    ddpl_tensor *r = k.failed ? NULL : OP_T(&k, ddpl_reshape(p, nd, out));
    return op_temps_result(&k, r);
}

/* cross product along dim of the broadcast operands; has_dim false: torch.cross's default, the
 * first dim of size 3. c = (a1 b2 - a2 b1, a2 b0 - a0 b2, a0 b1 - a1 b0). */
ddpl_tensor *ddpl_cross(ddpl_tensor *a, ddpl_tensor *b, bool has_dim, int dim, bool linalg)
{
    const char *op = linalg ? "linalg.cross" : "cross";
    if (ddpl_check_same_device(op, a, b) < 0) return NULL;
    int nd;
    int64_t bs[DDPL_MAX_DIMS];
    if (ddpl_broadcast_shape(op, a->ndim, a->sizes, b->ndim, b->sizes, &nd, bs) < 0) return NULL;
    if (!has_dim) {
        dim = -1;
        for (int i = 0; i < nd && dim < 0; i++)
            if (bs[i] == 3) dim = i;
        if (dim < 0) return ddpl_error("%s: no dimension of size 3 in input", op), NULL;
    }
    int d = ddpl_wrap_dim(op, dim, nd);
    if (d < 0) return NULL;
    if (bs[d] != 3)
        return ddpl_error("%s: inputs dimension %d must have length 3. Got %lld and %lld", op, dim,
                          (long long)(d >= nd - a->ndim ? a->sizes[d - (nd - a->ndim)] : 1),
                          (long long)(d >= nd - b->ndim ? b->sizes[d - (nd - b->ndim)] : 1)),
               NULL;
    op_temps k = {0};
    ddpl_tensor *ae = OP_T(&k, ddpl_expand(a, nd, bs));
    ddpl_tensor *be = k.failed ? NULL : OP_T(&k, ddpl_expand(b, nd, bs));
    ddpl_tensor *x[3], *y[3], *c[3];
    for (int i = 0; i < 3; i++) {
        x[i] = k.failed ? NULL : OP_T(&k, ddpl_narrow(ae, d, i, 1));
        y[i] = k.failed ? NULL : OP_T(&k, ddpl_narrow(be, d, i, 1));
    }
    for (int i = 0; i < 3; i++) {
        int j = (i + 1) % 3, l = (i + 2) % 3;
        c[i] = OP_B(&k, ddpl_sub, OP_B(&k, ddpl_mul, x[j], y[l]), OP_B(&k, ddpl_mul, x[l], y[j]));
    }
    ddpl_tensor *r = k.failed ? NULL : OP_T(&k, ddpl_cat(3, c, d));
    return op_temps_result(&k, r);
}

/* beta * input (broadcast to the shape of p) + p, where p is alpha * the product; with beta 0
 * the input's values are ignored (NaN does not propagate), as PyTorch's. */
static ddpl_tensor *add_input(op_temps *k, ddpl_tensor *input, ddpl_tensor *p, double beta)
{
    if (!p) return NULL;
    ddpl_tensor *ie = OP_T(k, ddpl_expand(input, p->ndim, p->sizes));
    if (beta == 0.0) return ie ? p : NULL;
    return OP_B(k, ddpl_add, p, scaled(k, ie, beta));
}

static int check_dims(const char *op, const ddpl_tensor *t, int nd, const char *what)
{
    if (t->ndim != nd)
        return ddpl_error("%s: %s must be a %dD tensor, got %dD", op, what, nd, t->ndim);
    return 0;
}

ddpl_tensor *ddpl_baddbmm(ddpl_tensor *input, ddpl_tensor *b1, ddpl_tensor *b2, double beta,
                          double alpha)
{
    if (check_dims("baddbmm", b1, 3, "batch1") < 0 || check_dims("baddbmm", b2, 3, "batch2") < 0)
        return NULL;
    op_temps k = {0};
    ddpl_tensor *p = scaled(&k, OP_T(&k, ddpl_bmm(b1, b2)), alpha);
    return op_temps_result(&k, add_input(&k, input, p, beta));
}

ddpl_tensor *ddpl_addbmm(ddpl_tensor *input, ddpl_tensor *b1, ddpl_tensor *b2, double beta,
                         double alpha)
{
    if (check_dims("addbmm", b1, 3, "batch1") < 0 || check_dims("addbmm", b2, 3, "batch2") < 0)
        return NULL;
    op_temps k = {0};
    ddpl_tensor *s = OP_T(&k, ddpl_bmm(b1, b2));
    s = s ? OP_T(&k, ddpl_sum_dim(s, 0, false)) : NULL;
    return op_temps_result(&k, add_input(&k, input, scaled(&k, s, alpha), beta));
}

ddpl_tensor *ddpl_addmv(ddpl_tensor *input, ddpl_tensor *mat, ddpl_tensor *vec, double beta,
                        double alpha)
{
    if (check_dims("addmv", mat, 2, "mat") < 0 || check_dims("addmv", vec, 1, "vec") < 0)
        return NULL;
    op_temps k = {0};
    ddpl_tensor *p = scaled(&k, OP_T(&k, ddpl_matmul(mat, vec)), alpha);
    return op_temps_result(&k, add_input(&k, input, p, beta));
}

ddpl_tensor *ddpl_addr(ddpl_tensor *input, ddpl_tensor *v1, ddpl_tensor *v2, double beta,
                       double alpha)
{
    op_temps k = {0};
    ddpl_tensor *p = scaled(&k, OP_T(&k, ddpl_outer(v1, v2)), alpha);
    if (k.failed) return op_temps_result(&k, NULL);
    return op_temps_result(&k, add_input(&k, input, p, beta));
}
