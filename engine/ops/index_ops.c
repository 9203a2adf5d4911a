/* ops/index_ops.c: index_add, index_copy and index_fill along one dim (issue 29), out of place
 * and in place, with PyTorch 1.13's gradients.
 * defines: ddpl_index_add, ddpl_index_add_, ddpl_index_copy, ddpl_index_copy_, ddpl_index_fill,
 *          ddpl_index_fill_.
 *
 * index_add runs the INDEX_ADD kernel (rows added in place, duplicates accumulate; each thread
 * owns whole slabs on the CPU) into a clone; its gradient passes self's and picks source's rows
 * with index_select (times alpha). index_copy and index_fill are compositions on the SCATTER
 * kernel (ops/scatter.c): the 1-D index viewed with size 1 in every other dim and expanded
 * (stride 0, no copy) to source's shape, or to x's shape with index's length along dim, is
 * exactly scatter's index; so their gradients are scatter's (self's gradient zeroed at the
 * written rows, source's gathered back), and the kernel's range check names the op. A 0-dim x
 * is handled as a 1-D view of one element. */
#include "scatter.h"

#include <math.h>

typedef struct {
    int dim;
    double alpha;
} index_add_ctx;

/* Common checks: index 1-D (or 0-dim) int64/int32 (*ix: a new int64 reference), x and source
 * of one dtype and device and of equal sizes except along dim, where source has index's
 * length. source may be NULL (index_fill). */
static int check_index_op(const char *op, ddpl_tensor *x, int dim, ddpl_tensor *index,
                          ddpl_tensor *source, int *d, ddpl_tensor **ix)
{
    char a[128], b[128];
    *ix = NULL;
    if ((*d = ddpl_wrap_dim(op, dim, x->ndim)) < 0) return -1;
    if (ddpl_check_same_device(op, x, index) < 0 ||
        (source && ddpl_check_same_device(op, x, source) < 0))
        return -1;
    if (index->ndim > 1)
        return ddpl_error("%s: index should have dimension 1 or 0 (got %d)", op, index->ndim);
    int64_t n = ddpl_tensor_numel(index);
    if (source) {
        if (source->dtype != x->dtype)
            return ddpl_error("%s: self (%s) and source (%s) must have the same scalar type", op,
                              ddpl_dtype_name((ddpl_dtype)x->dtype),
                              ddpl_dtype_name((ddpl_dtype)source->dtype));
        int nx = x->ndim ? x->ndim : 1, ns = source->ndim ? source->ndim : 1;
        if (nx != ns)
            return ddpl_error("%s: source %s and self %s must have the same number of "
                              "dimensions",
                              op, ddpl_shape_str(source, a, sizeof a),
                              ddpl_shape_str(x, b, sizeof b));
        for (int k = 0; k < nx; k++) {
            int64_t xs = x->ndim ? x->sizes[k] : 1, ss = source->ndim ? source->sizes[k] : 1;
            if (k == *d && ss != n)
                return ddpl_error("%s: number of indices (%lld) should be equal to "
                                  "source.size(%d) (%lld)",
                                  op, (long long)n, *d, (long long)ss);
            if (k != *d && ss != xs)
                return ddpl_error("%s: self %s and source %s must have the same size at "
                                  "dimension %d",
                                  op, ddpl_shape_str(x, a, sizeof a),
                                  ddpl_shape_str(source, b, sizeof b), k);
        }
    }
    return (*ix = ddpl_index_int64(op, index)) ? 0 : -1;
}

/* t as a 1-D view of one element when it is 0-dim (a new reference either way). */
static ddpl_tensor *at_least_1d(ddpl_tensor *t)
{
    return t->ndim ? ddpl_tensor_retain(t) : ddpl_unsqueeze(t, 0);
}

/* The 1-D index ix viewed as size 1 in every dim but d and expanded to sizes (nd dims). */
static ddpl_tensor *expand_index(ddpl_tensor *ix, int d, int nd, const int64_t *sizes)
{
    int64_t v[DDPL_MAX_DIMS];
    for (int k = 0; k < nd; k++) v[k] = k == d ? ddpl_tensor_numel(ix) : 1;
    ddpl_tensor *r = ddpl_reshape(ix, nd, v);
    ddpl_tensor *e = r ? ddpl_expand(r, nd, sizes) : NULL;
    ddpl_tensor_release(r);
    return e;
}

/* ---- index_add ---- */
static int index_add_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    const index_add_ctx *c = DDPL_NODE_CTX(n, index_add_ctx);
    ddpl_tensor *index = ddpl_node_saved(n, 0);
    if (!index) return -1;
    if (ddpl_node_needs_grad(n, 0)) gi[0] = ddpl_tensor_retain(grad);
    if (ddpl_node_needs_grad(n, 1)) {
        op_temps k = {0};
        ddpl_tensor *g1 = OP_U(&k, at_least_1d, grad);
        ddpl_tensor *rows = g1 ? OP_T(&k, ddpl_index_select(g1, c->dim, index)) : NULL;
        if (rows && c->alpha != 1.0) rows = OP_B(&k, ddpl_mul, rows, OP_NUM(&k, c->alpha));
        ddpl_tensor *r = rows && n->edges[1].ndim == 0 ? OP_T(&k, ddpl_squeeze_all(rows)) : rows;
        gi[1] = op_temps_result(&k, r);
        if (!gi[1]) return -1;
    }
    return 0;
}

/* out (written in place: a clone, or x itself) += alpha * source rows at ix along d */
static int index_add_into(ddpl_tensor *out, int d, ddpl_tensor *ix, ddpl_tensor *source,
                          double alpha)
{
    op_temps k = {0};
    ddpl_tensor *o1 = OP_U(&k, at_least_1d, out);
    ddpl_tensor *s1 = OP_U(&k, at_least_1d, source);
    if (s1 && alpha != 1.0)
        s1 = OP_B(
            &k, ddpl_mul, s1,
            OP_T(&k, ddpl_wrapped_number(alpha, ddpl_dtype_is_integral((ddpl_dtype)out->dtype))));
    if (s1 && s1->dtype != out->dtype) s1 = OP_T(&k, ddpl_as_dtype(s1, (ddpl_dtype)out->dtype));
    ddpl_dim_params p = {d};
    int rc =
        k.failed ? -1 : ddpl_run_kernel(DDPL_OP_INDEX_ADD, out->device, &o1, OP_INPUTS(ix, s1), &p);
    op_temps_release(&k);
    return rc;
}

static int check_alpha(const char *op, ddpl_tensor *x, double alpha)
{
    /* fabs(alpha) < 2^63 first: converting NaN, inf or a larger double to int64 is undefined */
    if ((ddpl_dtype_is_integral((ddpl_dtype)x->dtype) || x->dtype == DDPL_BOOL) &&
        (!(fabs(alpha) < 0x1p63) || alpha != (double)(int64_t)alpha))
        return ddpl_error("%s: for integral input tensors, argument alpha must not be a floating "
                          "point number (got %g)",
                          op, alpha);
    return 0;
}

ddpl_tensor *ddpl_index_add(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *source,
                            double alpha)
{
    int d;
    ddpl_tensor *ix;
    if (check_index_op("index_add", x, dim, index, source, &d, &ix) < 0) return NULL;
    if (check_alpha("index_add", x, alpha) < 0) {
        ddpl_tensor_release(ix);
        return NULL;
    }
    bool prev = ddpl_grad_mode_set(false);
    ddpl_tensor *out = ddpl_clone(x);
    if (out && index_add_into(out, d, ix, source, alpha) < 0) {
        ddpl_tensor_release(out);
        out = NULL;
    }
    ddpl_grad_mode_set(prev);
    ddpl_tensor *ins[2] = {x, source};
    if (out && ddpl_grad_needed(2, ins)) {
        ddpl_node *n = ddpl_node_new("IndexAddBackward0", index_add_backward, 2, ins);
        *DDPL_NODE_CTX(n, index_add_ctx) = (index_add_ctx){d, alpha};
        ddpl_node_save(n, ix);
        ddpl_set_history(out, n);
    }
    ddpl_tensor_release(ix);
    return out;
}

int ddpl_index_add_(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *source, double alpha)
{
    const char *op = "index_add_";
    int d;
    ddpl_tensor *ix;
    int rec = ddpl_inplace_recorded(op, x, 1, &source);
    if (rec < 0 || ddpl_check_write(op, x, DDPL_WRITE_SCATTERED, 2, OP_INPUTS(index, source)) < 0 ||
        check_index_op(op, x, dim, index, source, &d, &ix) < 0)
        return -1;
    int rc = check_alpha(op, x, alpha);
    if (rc == 0 && rec) { /* autograd records: out of place, committed into x */
        ddpl_tensor *xs = ddpl_inplace_source(x, false);
        ddpl_tensor *r = xs ? ddpl_index_add(xs, dim, index, source, alpha) : NULL;
        ddpl_tensor_release(xs);
        rc = ddpl_inplace_commit(op, "IndexAddBackward0", x, r);
    } else if (rc == 0 && (rc = ddpl_check_inplace(op, x)) == 0) {
        bool prev = ddpl_grad_mode_set(false);
        /* a source or index in x's storage that got past ddpl_check_write (a strided view
         * PyTorch does not decide about, or disjoint) is copied first: the kernel would read
         * rows it already wrote */
        ddpl_tensor *s =
            source->storage == x->storage ? ddpl_clone(source) : ddpl_tensor_retain(source);
        ddpl_tensor *i2 = ix->storage == x->storage ? ddpl_clone(ix) : ddpl_tensor_retain(ix);
        rc = s && i2 ? index_add_into(x, d, i2, s, alpha) : -1;
        ddpl_tensor_release(s);
        ddpl_tensor_release(i2);
        ddpl_grad_mode_set(prev);
        if (rc == 0) ddpl_storage_bump_version(x->storage);
    }
    ddpl_tensor_release(ix);
    return rc;
}

/* ---- index_copy / index_fill: compositions on scatter ---- */

/* The scatter operands of index_copy (source given) or index_fill: x and source as at least
 * 1-D, the expanded index. */
typedef struct {
    ddpl_tensor *x1, *s1, *ie;
    int d;
} index_scatter;

static int index_scatter_prepare(const char *op, ddpl_tensor *x, int dim, ddpl_tensor *index,
                                 ddpl_tensor *source, index_scatter *p)
{
    ddpl_tensor *ix;
    *p = (index_scatter){0};
    if (check_index_op(op, x, dim, index, source, &p->d, &ix) < 0) return -1;
    if (!source) { /* index_fill takes negative indices (index_copy does not) */
        ddpl_tensor *w = ddpl_index_wrap(ix, x->ndim ? x->sizes[p->d] : 1);
        ddpl_tensor_release(ix);
        if (!(ix = w)) return -1;
    }
    p->x1 = at_least_1d(x);
    p->s1 = source && p->x1 ? at_least_1d(source) : NULL;
    if (p->x1 && (!source || p->s1)) {
        int64_t sizes[DDPL_MAX_DIMS];
        memcpy(sizes, p->x1->sizes, sizeof sizes);
        sizes[p->d] = ddpl_tensor_numel(ix);
        p->ie = expand_index(ix, p->d, p->x1->ndim, sizes);
    }
    ddpl_tensor_release(ix);
    return p->ie ? 0 : -1;
}

static void index_scatter_release(index_scatter *p)
{
    ddpl_tensor_release(p->x1);
    ddpl_tensor_release(p->s1);
    ddpl_tensor_release(p->ie);
}

/* out of place: the 1-D result viewed back as 0-dim when x was */
static ddpl_tensor *index_scatter_out(const char *op, ddpl_tensor *x, int dim, ddpl_tensor *index,
                                      ddpl_tensor *source, double value)
{
    index_scatter p;
    ddpl_tensor *out = NULL;
    if (index_scatter_prepare(op, x, dim, index, source, &p) == 0) {
        out = ddpl_scatter_as(op, p.x1, p.d, p.ie, p.s1, value);
        if (out && x->ndim == 0) {
            ddpl_tensor *s = ddpl_squeeze_all(out);
            ddpl_tensor_release(out);
            out = s;
        }
    }
    index_scatter_release(&p);
    return out;
}

static int index_scatter_in_place(const char *op, ddpl_tensor *x, int dim, ddpl_tensor *index,
                                  ddpl_tensor *source, double value)
{
    index_scatter p;
    int rc = index_scatter_prepare(op, x, dim, index, source, &p);
    if (rc == 0) rc = ddpl_scatter_as_(op, p.x1, p.d, p.ie, p.s1, value);
    index_scatter_release(&p);
    return rc;
}

ddpl_tensor *ddpl_index_copy(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *source)
{
    return index_scatter_out("index_copy", x, dim, index, source, 0);
}

int ddpl_index_copy_(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *source)
{
    return index_scatter_in_place("index_copy_", x, dim, index, source, 0);
}

ddpl_tensor *ddpl_index_fill(ddpl_tensor *x, int dim, ddpl_tensor *index, double value)
{
    return index_scatter_out("index_fill", x, dim, index, NULL, value);
}

int ddpl_index_fill_(ddpl_tensor *x, int dim, ddpl_tensor *index, double value)
{
    return index_scatter_in_place("index_fill_", x, dim, index, NULL, value);
}
