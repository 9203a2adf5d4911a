/* ops/inplace.c: autograd for in-place ops, as PyTorch does it.
 * defines: ddpl_inplace_recorded, ddpl_inplace_source, ddpl_inplace_commit,
 *          ddpl_inplace_written (op_util.h).
 *
 * An in-place op on a tensor x that requires grad (or with an operand that does) is allowed
 * while x is not a leaf: it is recorded, and x's history becomes the op's node, whose edge leads
 * to x's old history (PyTorch's rebase_history). Every write bumps the storage's version, so a
 * node that saved x's old value finds out at backward and fails with PyTorch's message
 * (autograd/graph.c). A recorded op is computed out of place from x and then written into x: one
 * formula per op serves both forms, at the price of a temporary and a copy while autograd
 * records (a write under no_grad, or of tensors that need no grad, stays a single in-place
 * kernel in the op itself).
 *
 * A write into a view rewrites the history of the tensor it views, the base, as PyTorch's
 * CopySlices does: the base's new node sends the gradient of the written region to the op's
 * node (which passes it on to the view's old values and the other operands) and the rest to the
 * base's old history; the view then takes a history that reads it from the base. Other views
 * of the base taken before the write keep a history that misses it: their edges are marked
 * stale and backward refuses them (graph.c), where PyTorch would regenerate them. A view of a
 * leaf that requires grad is refused, as PyTorch does. */
#include "op_util.h"

int ddpl_inplace_recorded(const char *op, ddpl_tensor *x, int n, ddpl_tensor *const *others)
{
    if (!ddpl_is_grad_enabled()) return 0;
    ddpl_tensor *base = x->view_base;
    bool record = ddpl_requires_grad(x) || (base && ddpl_requires_grad(base));
    for (int i = 0; i < n; i++) record = record || (others[i] && ddpl_requires_grad(others[i]));
    if (!record) return 0;
    if (ddpl_requires_grad(x) && !ddpl_grad_fn(x))
        return ddpl_error("%s: a leaf Variable that requires grad is being used in an in-place "
                          "operation; wrap it in ddpl.no_grad or use the out-of-place form",
                          op);
    if (!base) return 1;
    if (ddpl_requires_grad(base) && !ddpl_grad_fn(base))
        return ddpl_error("%s: a view of a leaf Variable that requires grad is being used in an "
                          "in-place operation; wrap it in ddpl.no_grad or clone() first",
                          op);
    if (ddpl_requires_grad(base) && !ddpl_requires_grad(x))
        return ddpl_error("%s: a view made while grad mode was off (or by detach) is being "
                          "modified in place while it is on, and the tensor it views requires "
                          "grad; take the view with grad mode on, or clone() it",
                          op);
    if (!ddpl_tensor_is_contiguous(base))
        return ddpl_error("%s: an in-place write into a view of a non-contiguous tensor is not "
                          "recorded by autograd; clone() the tensor it views first",
                          op);
    return 1;
}

ddpl_tensor *ddpl_inplace_source(ddpl_tensor *x, bool saved)
{
    /* A formula that saves its input would save x's memory, which the write overwrites: it
     * gets a recorded clone instead (the clone's node passes the gradient on to x's history). */
    return saved ? ddpl_clone(x) : ddpl_tensor_retain(x);
}

/* The history of a recorded write whose result does not depend on x or on anything that
 * requires grad (fill_, zero_, normal_): x's old history gets no gradient from here on. */
static int no_gradient(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    (void)n, (void)grad, (void)gi;
    return 0;
}

/* ---- views: CopySlices ---- */

/* Where a view lies in its (contiguous) base: as_strided geometry, offset from the base's. */
typedef struct {
    int ndim;
    int64_t offset;
    int64_t sizes[DDPL_MAX_DIMS];
    int64_t strides[DDPL_MAX_DIMS];
} view_place;

static view_place place_of(const ddpl_tensor *v)
{
    view_place p = {.ndim = v->ndim, .offset = v->offset - v->view_base->offset};
    memcpy(p.sizes, v->sizes, sizeof p.sizes);
    memcpy(p.strides, v->strides, sizeof p.strides);
    return p;
}

/* A node's view_place lives on the heap (it outgrows the node's ctx) and dies with it. */
static void free_place(ddpl_node *n)
{
    free(*DDPL_NODE_CTX(n, view_place *));
}

static void set_place(ddpl_node *n, const view_place *p)
{
    view_place *copy = ddpl_xmalloc(sizeof *copy);
    *copy = *p;
    *DDPL_NODE_CTX(n, view_place *) = copy;
    n->free_ctx = free_place;
}

/* The region of g (contiguous, the base's shape) the view covers (a new reference). */
static ddpl_tensor *region_of(ddpl_tensor *g, const view_place *p)
{
    return ddpl_as_strided(g, p->ndim, p->sizes, p->strides, g->offset + p->offset);
}

/* input 0: the base's old history, input 1: the op's result (its node gives the gradient to the
 * view's old values and the other operands). The written region's gradient goes to input 1
 * only: the base's old values there were overwritten. Not differentiable twice. */
static int copy_slices_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    const view_place *p = *DDPL_NODE_CTX(n, view_place *);
    bool prev = ddpl_grad_mode_set(false);
    ddpl_tensor *g = ddpl_contiguous(grad);
    int rc = g ? 0 : -1;
    if (rc == 0 && ddpl_node_needs_grad(n, 1)) {
        ddpl_tensor *r = region_of(g, p);
        gi[1] = r ? ddpl_clone(r) : NULL;
        ddpl_tensor_release(r);
        if (!gi[1]) rc = -1;
    }
    if (rc == 0 && ddpl_node_needs_grad(n, 0)) {
        ddpl_tensor *g0 = ddpl_clone(g);
        ddpl_tensor *r = g0 ? region_of(g0, p) : NULL;
        rc = r ? ddpl_zero_(r) : -1;
        ddpl_tensor_release(r);
        gi[0] = g0;
    }
    ddpl_tensor_release(g);
    ddpl_grad_mode_set(prev);
    return rc < 0 ? -1 : ddpl_mark_not_differentiable("CopySlices", n, grad, 2, gi, false);
}

/* The view's history after the write: its values read from the base (PyTorch's
 * AsStridedBackward0); the gradient lands in the region of a zero tensor of the base's shape.
 * Not differentiable twice. */
static int as_strided_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    const view_place *p = *DDPL_NODE_CTX(n, view_place *);
    const ddpl_edge *e = &n->edges[0];
    bool prev = ddpl_grad_mode_set(false);
    ddpl_tensor *z = ddpl_zeros(e->ndim, e->sizes, (ddpl_dtype)grad->dtype, grad->device);
    ddpl_tensor *r = z ? region_of(z, p) : NULL;
    int rc = r ? ddpl_copy_(r, grad) : -1;
    ddpl_tensor_release(r);
    ddpl_grad_mode_set(prev);
    if (rc < 0) {
        ddpl_tensor_release(z);
        return -1;
    }
    gi[0] = z;
    return ddpl_mark_not_differentiable("AsStridedBackward0", n, grad, 1, gi, false);
}

/* After a recorded write into the view v: the base takes a CopySlices node over r (the op's
 * out-of-place result, NULL for a write that depends on nothing) and v reads from the base. */
static void rebase_view(ddpl_tensor *v, ddpl_tensor *r)
{
    ddpl_tensor *base = v->view_base;
    view_place p = place_of(v);
    ddpl_tensor *ins[2] = {base, r && ddpl_requires_grad(r) ? r : NULL};
    ddpl_node *c = ddpl_node_new("CopySlices", copy_slices_backward, 2, ins);
    set_place(c, &p);
    ddpl_set_history(base, c);
    ddpl_node *a = ddpl_node_new("AsStridedBackward0", as_strided_backward, 1, &base);
    set_place(a, &p);
    ddpl_set_history(v, a);
    v->view_writes = atomic_load(&v->storage->recorded_writes); /* this view is current */
}

/* x's history after a recorded write: r's node (r NULL: a node fill_name that passes no
 * gradient, when x needs one), or CopySlices on its base for a view; views taken before now are
 * stale. */
static void rebase_history(ddpl_tensor *x, ddpl_tensor *r, const char *fill_name)
{
    atomic_fetch_add(&x->storage->recorded_writes, 1);
    if (x->view_base) {
        rebase_view(x, r);
        return;
    }
    ddpl_node *n = r ? ddpl_grad_fn(r) : NULL;
    if (n)
        ddpl_node_retain(n);
    else if (ddpl_requires_grad(x))
        n = ddpl_node_new(fill_name, no_gradient, 1, &x);
    if (n) ddpl_set_history(x, n);
}

void ddpl_inplace_written(ddpl_tensor *x, const char *fill_name)
{
    rebase_history(x, NULL, fill_name);
}

int ddpl_inplace_commit(const char *op, const char *fill_name, ddpl_tensor *x, ddpl_tensor *r)
{
    if (!r) return -1;
    char a[128], b[128];
    int rc = 0;
    if (!ddpl_same_shape(x, r))
        rc = ddpl_error("%s: internal error: result of shape %s for a tensor of shape %s", op,
                        ddpl_shape_str(r, a, sizeof a), ddpl_shape_str(x, b, sizeof b));
    if (rc == 0 && r->storage == x->storage) { /* x.copy_(x[::-1]): read all before writing */
        bool prev = ddpl_grad_mode_set(false);
        ddpl_tensor *c = ddpl_clone(r);
        ddpl_grad_mode_set(prev);
        rc = c ? ddpl_run_kernel(DDPL_OP_COPY, x->device, &x, &c, NULL) : -1;
        ddpl_tensor_release(c);
    } else if (rc == 0) {
        rc = ddpl_run_kernel(DDPL_OP_COPY, x->device, &x, &r, NULL);
    }
    if (rc == 0) {
        ddpl_storage_bump_version(x->storage);
        rebase_history(x, r, fill_name);
    }
    ddpl_tensor_release(r);
    return rc;
}
