/* ops/scatter.c: scatter, scatter_add and scatter_reduce (issue 29), out of place and in place,
 * with PyTorch 1.13's gradients.
 * defines: ddpl_scatter, ddpl_scatter_value, ddpl_scatter_, ddpl_scatter_value_,
 *          ddpl_scatter_add, ddpl_scatter_add_, ddpl_scatter_reduce, ddpl_scatter_reduce_,
 *          ddpl_scatter_into (the kernel step index_ops.c shares).
 *
 * All run on the SCATTER kernel (out[p with dim = index[p]] = combine(., src[p])). mean is a sum
 * and a count (a second SUM scatter of ones), divided; include_self=false first overwrites the
 * scattered positions with the reduction's identity (sum/mean 0, prod 1) or, for amax/amin,
 * with one of the scattered values themselves (then the idempotent max/min over all of them
 * gives the same answer without an identity that an integer dtype could not hold).
 * Gradients, as PyTorch's derivatives.yaml: scatter masks the scattered positions of self's
 * gradient and gathers src's; scatter_add passes self's and gathers src's; scatter_reduce
 * follows scatter_reduce_backward (mean divides by the counts, amax/amin split the gradient
 * evenly between ties, prod divides the product by each factor, zeros handled exactly). Those
 * formulas are compositions of differentiable ops, so they differentiate again. The legacy
 * reduce='add'/'multiply' of scatter is not differentiable in PyTorch 1.13: its backward is an
 * error here too.
 * In place: when autograd records the write (x or src requires grad) it is computed out of
 * place and committed into x (ops/inplace.c); else ddpl_check_inplace, no internal overlap,
 * then the kernel writes x (it checks every index before its first write, so x is untouched on
 * a bad index on the CPU; on CUDA the error surfaces at the next synchronisation, as PyTorch's
 * device asserts), then the version bump. */
#include "scatter.h"

enum { REDUCE_MEAN = 100 }; /* beside ddpl_scatter_mode: a SUM and a count */

typedef struct {
    int dim;
    int mode; /* ddpl_scatter_mode or REDUCE_MEAN; -1 for the legacy add/multiply */
    bool include_self;
} scatter_ctx;

static int run_scatter(const char *op, ddpl_tensor *out, int dim, ddpl_tensor *index,
                       ddpl_tensor *src, int reduce)
{
    ddpl_scatter_params p = {dim, reduce, op};
    return ddpl_run_kernel(DDPL_OP_SCATTER, out->device, &out, OP_INPUTS(index, src), &p);
}

/* A number as a tensor of x's dtype and device, expanded (stride 0) to index's shape. */
static ddpl_tensor *number_like_index(ddpl_tensor *x, ddpl_tensor *index, double v)
{
    ddpl_tensor *s = ddpl_scalar(v, (ddpl_dtype)x->dtype, x->device);
    if (!s || index->ndim == 0) return s;
    ddpl_tensor *e = ddpl_expand(s, index->ndim, index->sizes);
    ddpl_tensor_release(s);
    return e;
}

static int64_t size_or_1(const ddpl_tensor *t, int d)
{
    return t->ndim ? t->sizes[d] : 1;
}

/* PyTorch's scatter checks: int64 index, one device, src of x's dtype, the same number of dims
 * (0-dim counts as 1-dim), index no larger than src anywhere nor than x outside dim. *d gets
 * the wrapped dim. src may be NULL (a number). */
static int check_scatter(const char *op, ddpl_tensor *x, int dim, ddpl_tensor *index,
                         ddpl_tensor *src, int *d)
{
    char a[128], b[128], c[128];
    if (index->dtype != DDPL_INT64)
        return ddpl_error("%s: expected dtype int64 for index, got %s", op,
                          ddpl_dtype_name((ddpl_dtype)index->dtype));
    if (ddpl_check_same_device(op, x, index) < 0 || (src && ddpl_check_same_device(op, x, src) < 0))
        return -1;
    if (src && src->dtype != x->dtype)
        return ddpl_error("%s: expected self.dtype to be equal to src.dtype (got %s and %s)", op,
                          ddpl_dtype_name((ddpl_dtype)x->dtype),
                          ddpl_dtype_name((ddpl_dtype)src->dtype));
    if ((*d = ddpl_wrap_dim(op, dim, x->ndim)) < 0) return -1;
    int nx = x->ndim ? x->ndim : 1, ni = index->ndim ? index->ndim : 1;
    if (ddpl_tensor_numel(index) == 0) return 0; /* PyTorch skips the shape checks then */
    if (ni != nx)
        return ddpl_error("%s: index tensor %s must have the same number of dimensions as self "
                          "tensor %s",
                          op, ddpl_shape_str(index, a, sizeof a), ddpl_shape_str(x, b, sizeof b));
    if (src && (src->ndim ? src->ndim : 1) != ni)
        return ddpl_error("%s: index tensor %s must have the same number of dimensions as src "
                          "tensor %s",
                          op, ddpl_shape_str(index, a, sizeof a), ddpl_shape_str(src, b, sizeof b));
    for (int k = 0; k < ni; k++) {
        int64_t is = size_or_1(index, k);
        if ((k != *d && is > size_or_1(x, k)) || (src && is > size_or_1(src, k)))
            return ddpl_error("%s: expected index %s to be smaller than self %s apart from "
                              "dimension %d%s%s",
                              op, ddpl_shape_str(index, a, sizeof a),
                              ddpl_shape_str(x, b, sizeof b), *d,
                              src ? " and to be smaller than src " : "",
                              src ? ddpl_shape_str(src, c, sizeof c) : "");
    }
    return 0;
}

/* The legacy reduce of scatter: NULL, "add" or "multiply". */
static int legacy_mode(const char *op, const char *reduce)
{
    if (!reduce) return DDPL_SCATTER_ASSIGN;
    if (strcmp(reduce, "add") == 0) return DDPL_SCATTER_SUM;
    if (strcmp(reduce, "multiply") == 0) return DDPL_SCATTER_PROD;
    return ddpl_error("%s: reduce argument must be either 'add' or 'multiply', got '%s'", op,
                      reduce);
}

static int reduce_mode(const char *op, const char *reduce)
{
    static const struct {
        const char *name;
        int mode;
    } modes[] = {{"sum", DDPL_SCATTER_SUM},
                 {"prod", DDPL_SCATTER_PROD},
                 {"mean", REDUCE_MEAN},
                 {"amax", DDPL_SCATTER_AMAX},
                 {"amin", DDPL_SCATTER_AMIN}};
    for (size_t i = 0; reduce && i < sizeof modes / sizeof *modes; i++)
        if (strcmp(reduce, modes[i].name) == 0) return modes[i].mode;
    return ddpl_error("%s: reduce argument must be one of 'sum', 'prod', 'mean', 'amax', 'amin', "
                      "got '%s'",
                      op, reduce ? reduce : "(none)");
}

/* out (x's shape and dtype, written in place, no autograd) combined with src scattered by
 * index along d: mode a ddpl_scatter_mode or REDUCE_MEAN; include_self false first replaces
 * the scattered positions (see the file comment). */
int ddpl_scatter_into(const char *op, ddpl_tensor *out, int d, ddpl_tensor *index, ddpl_tensor *src,
                      int mode, bool include_self)
{
    int k = mode == REDUCE_MEAN ? DDPL_SCATTER_SUM : mode;
    if (!include_self && k != DDPL_SCATTER_ASSIGN) {
        int rc;
        if (k == DDPL_SCATTER_AMAX || k == DDPL_SCATTER_AMIN) {
            rc = run_scatter(op, out, d, index, src, DDPL_SCATTER_ASSIGN);
        } else {
            ddpl_tensor *id = number_like_index(out, index, k == DDPL_SCATTER_PROD ? 1.0 : 0.0);
            rc = id ? run_scatter(op, out, d, index, id, DDPL_SCATTER_ASSIGN) : -1;
            ddpl_tensor_release(id);
        }
        if (rc < 0) return -1;
    }
    if (run_scatter(op, out, d, index, src, k) < 0) return -1;
    if (mode != REDUCE_MEAN) return 0;
    /* the count of values at each position (self's own when included), 1 where none came */
    ddpl_tensor *cnt = ddpl_full(out->ndim, out->sizes, include_self ? 1.0 : 0.0,
                                 (ddpl_dtype)out->dtype, out->device);
    ddpl_tensor *one = cnt ? number_like_index(out, index, 1.0) : NULL;
    int rc = one ? run_scatter(op, cnt, d, index, one, DDPL_SCATTER_SUM) : -1;
    op_temps t = {0};
    ddpl_tensor *zero = rc == 0 ? OP_NUM(&t, 0.0) : NULL;
    ddpl_tensor *none = OP_B(&t, ddpl_eq, cnt, zero);
    ddpl_tensor *safe = none ? OP_T(&t, ddpl_masked_fill(cnt, none, 1.0)) : NULL;
    ddpl_tensor *q = NULL;
    if (safe)
        q = OP_T(&t, ddpl_dtype_is_floating((ddpl_dtype)out->dtype)
                         ? ddpl_div(out, safe)
                         : ddpl_div_rounded(out, safe, "floor"));
    rc = q ? ddpl_copy_(out, q) : -1;
    op_temps_release(&t);
    ddpl_tensor_release(one);
    ddpl_tensor_release(cnt);
    return rc;
}

/* ---- gradients ---- */

/* g (index's shape) as the gradient of an input of the edge's shape: zeros where index did not
 * reach (src may be larger than index). Takes g. */
static ddpl_tensor *fit_to_edge(ddpl_tensor *g, const ddpl_edge *e)
{
    if (!g || (g->ndim == e->ndim && memcmp(g->sizes, e->sizes, sizeof(int64_t) * e->ndim) == 0))
        return g;
    ddpl_tensor *z = ddpl_zeros(e->ndim, e->sizes, (ddpl_dtype)g->dtype, g->device);
    ddpl_tensor *part = z ? ddpl_tensor_alias(z, g->ndim, g->sizes, z->strides, z->offset) : NULL;
    int rc = part ? ddpl_copy_(part, g) : -1;
    ddpl_tensor_release(part);
    ddpl_tensor_release(g);
    if (rc < 0) {
        ddpl_tensor_release(z);
        return NULL;
    }
    return z;
}

/* t narrowed to index's sizes (src larger than index: only that corner takes part); narrow
 * keeps the history, so a create_graph backward differentiates through it. */
static ddpl_tensor *corner(ddpl_tensor *t, const ddpl_tensor *index)
{
    ddpl_tensor *r = ddpl_tensor_retain(t);
    for (int d = 0; r && t->ndim == index->ndim && d < t->ndim; d++) {
        if (r->sizes[d] == index->sizes[d]) continue;
        ddpl_tensor *nr = ddpl_narrow(r, d, 0, index->sizes[d]);
        ddpl_tensor_release(r);
        r = nr;
    }
    return r;
}

/* grad of self for a plain scatter: grad with the scattered positions zeroed */
static ddpl_tensor *masked_self_grad(ddpl_tensor *grad, int d, ddpl_tensor *index)
{
    return ddpl_scatter_value(grad, d, index, 0.0, NULL);
}

static int scatter_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    const scatter_ctx *c = DDPL_NODE_CTX(n, scatter_ctx);
    if (c->mode < 0)
        return ddpl_error("scatter: the derivative of scatter with reduce='add' or 'multiply' "
                          "is not implemented (as in PyTorch); use scatter_add or "
                          "scatter_reduce");
    ddpl_tensor *index = ddpl_node_saved(n, 0);
    if (!index) return -1;
    if (ddpl_node_needs_grad(n, 0) && !(gi[0] = masked_self_grad(grad, c->dim, index))) return -1;
    if (n->n_inputs > 1 && ddpl_node_needs_grad(n, 1) &&
        !(gi[1] = fit_to_edge(ddpl_gather(grad, c->dim, index), &n->edges[1])))
        return -1;
    return 0;
}

static int scatter_add_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    ddpl_tensor *index = ddpl_node_saved(n, 0);
    if (!index) return -1;
    if (ddpl_node_needs_grad(n, 0)) gi[0] = ddpl_tensor_retain(grad);
    if (ddpl_node_needs_grad(n, 1) &&
        !(gi[1] = fit_to_edge(ddpl_gather(grad, DDPL_NODE_CTX(n, scatter_ctx)->dim, index),
                              &n->edges[1])))
        return -1;
    return 0;
}

/* PyTorch 1.13's scatter_reduce_backward (PyTorch's FunctionsManual), written
 * with ops; saved: 0 index, 1 self, 2 src, 3 result. */
static int reduce_grads(const scatter_ctx *c, ddpl_tensor *grad, ddpl_tensor *index,
                        ddpl_tensor *self, ddpl_tensor *src_full, ddpl_tensor *result,
                        ddpl_tensor **gself, ddpl_tensor **gsrc)
{
    op_temps k = {0};
    int d = c->dim;
    ddpl_tensor *src = OP_T(&k, corner(src_full, index));
    ddpl_tensor *gs = NULL, *gr = NULL;
    if (k.failed) goto done;
    if (c->mode == DDPL_SCATTER_SUM) {
        gs = ddpl_tensor_retain(grad);
        gr = ddpl_gather(grad, d, index);
    } else if (c->mode == REDUCE_MEAN) {
        ddpl_tensor *N = OP_T(&k, ddpl_full(grad->ndim, grad->sizes, c->include_self ? 1.0 : 0.0,
                                            (ddpl_dtype)grad->dtype, grad->device));
        ddpl_tensor *ones = N ? OP_T(&k, number_like_index(grad, index, 1.0)) : NULL;
        N = ones ? OP_T(&k, ddpl_scatter_add(N, d, index, ones)) : NULL;
        ddpl_tensor *none = OP_B(&k, ddpl_eq, N, OP_NUM(&k, 0.0));
        N = none ? OP_T(&k, ddpl_masked_fill(N, none, 1.0)) : NULL;
        if (N) {
            gs = ddpl_div(grad, N);
            ddpl_tensor *gg = OP_T(&k, ddpl_gather(grad, d, index));
            ddpl_tensor *ng = OP_T(&k, ddpl_gather(N, d, index));
            gr = OP_B(&k, ddpl_div, gg, ng);
            if (gr) ddpl_tensor_retain(gr);
        }
    } else if (c->mode == DDPL_SCATTER_AMAX || c->mode == DDPL_SCATTER_AMIN) {
        ddpl_dtype dt = (ddpl_dtype)self->dtype;
        ddpl_tensor *value = OP_T(&k, ddpl_gather(result, d, index));
        ddpl_tensor *self_is = OP_B(&k, ddpl_eq, self, result);
        ddpl_tensor *src_is = OP_B(&k, ddpl_eq, src, value);
        ddpl_tensor *self_isf = self_is ? OP_T(&k, ddpl_to_dtype(self_is, dt)) : NULL;
        ddpl_tensor *src_isf = src_is ? OP_T(&k, ddpl_to_dtype(src_is, dt)) : NULL;
        ddpl_tensor *N =
            self_isf && src_isf ? OP_T(&k, ddpl_scatter_add(self_isf, d, index, src_isf)) : NULL;
        ddpl_tensor *dist = OP_B(&k, ddpl_div, grad, N);
        ddpl_tensor *dist_g = dist ? OP_T(&k, ddpl_gather(dist, d, index)) : NULL;
        if (dist_g) {
            gs = ddpl_mul(self_is, dist);
            gr = ddpl_mul(src_is, dist_g);
        }
    } else { /* prod */
        ddpl_tensor *zero = OP_NUM(&k, 0.0);
        ddpl_tensor *self_zero = OP_B(&k, ddpl_eq, self, zero);
        ddpl_tensor *mself = self_zero ? OP_T(&k, ddpl_masked_fill(self, self_zero, 1.0)) : NULL;
        ddpl_tensor *mself_res =
            mself
                ? OP_T(&k, ddpl_scatter_reduce(mself, d, index, src_full, "prod", c->include_self))
                : NULL;
        ddpl_tensor *gm = OP_B(&k, ddpl_mul, grad, mself_res);
        ddpl_tensor *src_zero = OP_B(&k, ddpl_eq, src, zero);
        ddpl_tensor *zs =
            OP_T(&k, ddpl_zeros(self->ndim, self->sizes, (ddpl_dtype)self->dtype, self->device));
        ddpl_tensor *src_zf =
            src_zero ? OP_T(&k, ddpl_to_dtype(src_zero, (ddpl_dtype)self->dtype)) : NULL;
        ddpl_tensor *nz = zs && src_zf ? OP_T(&k, ddpl_scatter_add(zs, d, index, src_zf)) : NULL;
        ddpl_tensor *nzg = nz ? OP_T(&k, ddpl_gather(nz, d, index)) : NULL;
        ddpl_tensor *one_zero = OP_B(&k, ddpl_eq, nzg, OP_NUM(&k, 1.0));
        ddpl_tensor *single = OP_B(&k, ddpl_logical_and, src_zero, one_zero);
        ddpl_tensor *msrc = single ? OP_T(&k, ddpl_masked_fill(src, single, 1.0)) : NULL;
        ddpl_tensor *msrc_res =
            msrc ? OP_T(&k, ddpl_scatter_reduce(self, d, index, msrc, "prod", c->include_self))
                 : NULL;
        ddpl_tensor *a = OP_B(&k, ddpl_mul, grad, msrc_res);
        ddpl_tensor *ag = a ? OP_T(&k, ddpl_gather(a, d, index)) : NULL;
        ddpl_tensor *b = OP_B(&k, ddpl_mul, grad, result);
        ddpl_tensor *bg = b ? OP_T(&k, ddpl_gather(b, d, index)) : NULL;
        ddpl_tensor *src1 = src_zero ? OP_T(&k, ddpl_masked_fill(src, src_zero, 1.0)) : NULL;
        ddpl_tensor *bq = OP_B(&k, ddpl_div, bg, src1);
        if (gm && mself && single && ag && bq) {
            gs = ddpl_div(gm, mself);
            gr = ddpl_where(single, ag, bq);
        }
    }
done:
    op_temps_release(&k);
    if (gs && !c->include_self) {
        ddpl_tensor *m = masked_self_grad(gs, d, index);
        ddpl_tensor_release(gs);
        gs = m;
    }
    *gself = gs;
    *gsrc = gr;
    if (!gs || !gr) {
        ddpl_tensor_release(gs);
        ddpl_tensor_release(gr);
        *gself = *gsrc = NULL;
        return -1;
    }
    return 0;
}

static int scatter_reduce_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    const scatter_ctx *c = DDPL_NODE_CTX(n, scatter_ctx);
    ddpl_tensor *index = ddpl_node_saved(n, 0), *self = index ? ddpl_node_saved(n, 1) : NULL;
    ddpl_tensor *src = self ? ddpl_node_saved(n, 2) : NULL;
    ddpl_tensor *result = src ? ddpl_node_saved(n, 3) : NULL;
    if (!result) return -1;
    ddpl_tensor *gs, *gr;
    if (reduce_grads(c, grad, index, self, src, result, &gs, &gr) < 0) return -1;
    if (ddpl_node_needs_grad(n, 0))
        gi[0] = gs;
    else
        ddpl_tensor_release(gs);
    if (ddpl_node_needs_grad(n, 1)) {
        if (!(gi[1] = fit_to_edge(gr, &n->edges[1]))) return -1;
    } else {
        ddpl_tensor_release(gr);
    }
    return 0;
}

/* ---- the ops ---- */

/* Which gradient an op records: node name and formula; legacy marks scatter's reduce='add' /
 * 'multiply' (no gradient in PyTorch 1.13). */
typedef struct {
    const char *node;
    ddpl_backward_fn fn;
    bool legacy;
} scatter_kind;

static const scatter_kind K_SCATTER = {"ScatterBackward0", scatter_backward, false};
static const scatter_kind K_SCATTER_VALUE = {"ScatterBackward1", scatter_backward, false};
static const scatter_kind K_LEGACY = {"ScatterReduceBackward0", scatter_backward, true};
static const scatter_kind K_ADD = {"ScatterAddBackward0", scatter_add_backward, false};
static const scatter_kind K_REDUCE = {"ScatterReduceBackward0", scatter_reduce_backward, false};

/* x's clone scattered (out of place); history over (x, src_grad?) as kind says. src_grad is
 * src when src is the user's tensor, NULL when it stands for a number. */
static ddpl_tensor *scatter_out(const char *op, ddpl_tensor *x, int d, ddpl_tensor *index,
                                ddpl_tensor *src, ddpl_tensor *src_grad, int mode,
                                bool include_self, const scatter_kind *kind)
{
    bool prev = ddpl_grad_mode_set(false);
    ddpl_tensor *out = ddpl_clone(x);
    if (out && ddpl_scatter_into(op, out, d, index, src, mode, include_self) < 0) {
        ddpl_tensor_release(out);
        out = NULL;
    }
    ddpl_grad_mode_set(prev);
    if (!out) return NULL;
    ddpl_tensor *ins[2] = {x, src_grad};
    int nin = src_grad ? 2 : 1;
    if (ddpl_grad_needed(nin, ins)) {
        ddpl_node *n = ddpl_node_new(kind->node, kind->fn, nin, ins);
        scatter_ctx *c = DDPL_NODE_CTX(n, scatter_ctx);
        c->dim = d;
        c->mode = kind->legacy ? -1 : mode;
        c->include_self = include_self;
        ddpl_node_save(n, index);
        if (kind->fn == scatter_reduce_backward) {
            ddpl_node_save(n, x);
            ddpl_node_save(n, src_grad);
            ddpl_node_save_output(n, out);
        }
        ddpl_set_history(out, n);
    }
    return out;
}

/* The in-place form. When autograd records it (x or src requires grad), it is computed out of
 * place and committed into x (ops/inplace.c: version bump, x takes the result's history);
 * else the kernel writes x directly (an operand in x's storage that ddpl_check_write let
 * through, a strided view, copied first; mean through a temporary, so a failure leaves x
 * untouched) and x's version is bumped. */
static int scatter_in_place(const char *op, ddpl_tensor *x, int d, ddpl_tensor *index,
                            ddpl_tensor *src, ddpl_tensor *src_grad, int mode, bool include_self,
                            const scatter_kind *kind)
{
    int rec = ddpl_inplace_recorded(op, x, 1, &src_grad);
    if (rec < 0 || ddpl_check_write(op, x, DDPL_WRITE_SCATTERED, 2, OP_INPUTS(index, src)) < 0)
        return -1;
    if (rec) {
        ddpl_tensor *xs = ddpl_inplace_source(x, kind->fn == scatter_reduce_backward);
        ddpl_tensor *r =
            xs ? scatter_out(op, xs, d, index, src, src_grad, mode, include_self, kind) : NULL;
        ddpl_tensor_release(xs);
        return ddpl_inplace_commit(op, kind->node, x, r);
    }
    if (ddpl_check_inplace(op, x) < 0) return -1;
    bool prev = ddpl_grad_mode_set(false);
    ddpl_tensor *s = src->storage == x->storage ? ddpl_clone(src) : ddpl_tensor_retain(src);
    ddpl_tensor *ix = index->storage == x->storage ? ddpl_clone(index) : ddpl_tensor_retain(index);
    int rc = -1;
    if (s && ix) {
        if (mode == REDUCE_MEAN) {
            ddpl_tensor *tmp = ddpl_clone(x);
            rc = tmp ? ddpl_scatter_into(op, tmp, d, ix, s, mode, include_self) : -1;
            if (rc == 0) rc = ddpl_run_kernel(DDPL_OP_COPY, x->device, &x, &tmp, NULL);
            ddpl_tensor_release(tmp);
        } else {
            rc = ddpl_scatter_into(op, x, d, ix, s, mode, include_self);
        }
    }
    ddpl_tensor_release(s);
    ddpl_tensor_release(ix);
    ddpl_grad_mode_set(prev);
    if (rc == 0) ddpl_storage_bump_version(x->storage);
    return rc;
}

ddpl_tensor *ddpl_scatter(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *src,
                          const char *reduce)
{
    int d, mode = legacy_mode("scatter", reduce);
    if (mode < 0 || check_scatter("scatter", x, dim, index, src, &d) < 0) return NULL;
    return scatter_out("scatter", x, d, index, src, src, mode, true,
                       reduce ? &K_LEGACY : &K_SCATTER);
}

ddpl_tensor *ddpl_scatter_value(ddpl_tensor *x, int dim, ddpl_tensor *index, double value,
                                const char *reduce)
{
    int d, mode = legacy_mode("scatter", reduce);
    if (mode < 0 || check_scatter("scatter", x, dim, index, NULL, &d) < 0) return NULL;
    ddpl_tensor *v = number_like_index(x, index, value);
    ddpl_tensor *out = v ? scatter_out("scatter", x, d, index, v, NULL, mode, true,
                                       reduce ? &K_LEGACY : &K_SCATTER_VALUE)
                         : NULL;
    ddpl_tensor_release(v);
    return out;
}

int ddpl_scatter_(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *src, const char *reduce)
{
    int d, mode = legacy_mode("scatter_", reduce);
    if (mode < 0 || check_scatter("scatter_", x, dim, index, src, &d) < 0) return -1;
    return scatter_in_place("scatter_", x, d, index, src, src, mode, true,
                            reduce ? &K_LEGACY : &K_SCATTER);
}

int ddpl_scatter_value_(ddpl_tensor *x, int dim, ddpl_tensor *index, double value,
                        const char *reduce)
{
    int d, mode = legacy_mode("scatter_", reduce);
    if (mode < 0 || check_scatter("scatter_", x, dim, index, NULL, &d) < 0) return -1;
    ddpl_tensor *v = number_like_index(x, index, value);
    int rc = v ? scatter_in_place("scatter_", x, d, index, v, NULL, mode, true,
                                  reduce ? &K_LEGACY : &K_SCATTER_VALUE)
               : -1;
    ddpl_tensor_release(v);
    return rc;
}

ddpl_tensor *ddpl_scatter_add(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *src)
{
    int d;
    if (check_scatter("scatter_add", x, dim, index, src, &d) < 0) return NULL;
    return scatter_out("scatter_add", x, d, index, src, src, DDPL_SCATTER_SUM, true, &K_ADD);
}

int ddpl_scatter_add_(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *src)
{
    int d;
    if (check_scatter("scatter_add_", x, dim, index, src, &d) < 0) return -1;
    return scatter_in_place("scatter_add_", x, d, index, src, src, DDPL_SCATTER_SUM, true, &K_ADD);
}

ddpl_tensor *ddpl_scatter_reduce(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *src,
                                 const char *reduce, bool include_self)
{
    int d, mode = reduce_mode("scatter_reduce", reduce);
    if (mode < 0 || check_scatter("scatter_reduce", x, dim, index, src, &d) < 0) return NULL;
    return scatter_out("scatter_reduce", x, d, index, src, src, mode, include_self, &K_REDUCE);
}

int ddpl_scatter_reduce_(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *src,
                         const char *reduce, bool include_self)
{
    int d, mode = reduce_mode("scatter_reduce_", reduce);
    if (mode < 0 || check_scatter("scatter_reduce_", x, dim, index, src, &d) < 0) return -1;
    return scatter_in_place("scatter_reduce_", x, d, index, src, src, mode, include_self,
                            &K_REDUCE);
}

ddpl_tensor *ddpl_scatter_as(const char *op, ddpl_tensor *x, int d, ddpl_tensor *index,
                             ddpl_tensor *src, double value)
{
    ddpl_tensor *v = src ? ddpl_tensor_retain(src) : number_like_index(x, index, value);
    ddpl_tensor *out = v ? scatter_out(op, x, d, index, v, src, DDPL_SCATTER_ASSIGN, true,
                                       src ? &K_SCATTER : &K_SCATTER_VALUE)
                         : NULL;
    ddpl_tensor_release(v);
    return out;
}

int ddpl_scatter_as_(const char *op, ddpl_tensor *x, int d, ddpl_tensor *index, ddpl_tensor *src,
                     double value)
{
    ddpl_tensor *v = src ? ddpl_tensor_retain(src) : number_like_index(x, index, value);
    int rc = v ? scatter_in_place(op, x, d, index, v, src, DDPL_SCATTER_ASSIGN, true,
                                  src ? &K_SCATTER : &K_SCATTER_VALUE)
               : -1;
    ddpl_tensor_release(v);
    return rc;
}

ddpl_tensor *ddpl_index_int64(const char *op, ddpl_tensor *index)
{
    if (index->dtype == DDPL_INT64) return ddpl_tensor_retain(index);
    if (index->dtype == DDPL_INT32) return ddpl_as_dtype(index, DDPL_INT64);
    return ddpl_error("%s: expected an int64 or int32 index tensor, got %s", op,
                      ddpl_dtype_name((ddpl_dtype)index->dtype)),
           NULL;
}

ddpl_tensor *ddpl_index_wrap(ddpl_tensor *ix, int64_t size)
{
    op_temps k = {0};
    ddpl_tensor *neg = OP_B(&k, ddpl_lt, ix, OP_T(&k, ddpl_wrapped_number(0, true)));
    ddpl_tensor *in = OP_B(&k, ddpl_ge, ix, OP_T(&k, ddpl_wrapped_number((double)-size, true)));
    ddpl_tensor *both = OP_B(&k, ddpl_logical_and, neg, in);
    ddpl_tensor *up = OP_B(&k, ddpl_add, ix, OP_T(&k, ddpl_wrapped_number((double)size, true)));
    ddpl_tensor *r = both && up ? OP_T(&k, ddpl_where(both, up, ix)) : NULL;
    return op_temps_result(&k, r);
}
