/* ops/copy.c: copies, conversions between dtypes and devices, and the filling in-place ops.
 * defines: ddpl_contiguous, ddpl_clone, ddpl_detach, ddpl_to, ddpl_copy_, ddpl_fill_,
 *          ddpl_zero_, ddpl_uniform_, ddpl_normal_, ddpl_bernoulli_. */
#include "core/alloc.h"
#include "op_util.h"

/* out <- src on out's device; shapes equal; any strides, dtypes and devices. */
static int copy_into(ddpl_tensor *out, ddpl_tensor *src)
{
    if (ddpl_same_device(out->device, src->device))
        return ddpl_run_kernel(DDPL_OP_COPY, out->device, &out, &src, NULL);
    /* across devices: make the source contiguous in out's dtype on its own device, move the
     * bytes, then lay them out with out's strides */
    ddpl_tensor *staged =
        ddpl_tensor_new(src->ndim, src->sizes, (ddpl_dtype)out->dtype, src->device);
    if (!staged) return -1;
    int rc = ddpl_run_kernel(DDPL_OP_COPY, src->device, &staged, &src, NULL);
    if (rc == 0) {
        if (ddpl_tensor_is_contiguous(out)) {
            rc = ddpl_device_copy(ddpl_data_ptr(out), out->device, ddpl_data_ptr(staged),
                                  staged->device, ddpl_tensor_nbytes(out));
        } else {
            ddpl_tensor *landed =
                ddpl_tensor_new(out->ndim, out->sizes, (ddpl_dtype)out->dtype, out->device);
            rc = landed
                     ? ddpl_device_copy(ddpl_data_ptr(landed), out->device, ddpl_data_ptr(staged),
                                        staged->device, ddpl_tensor_nbytes(out))
                     : -1;
            if (rc == 0) rc = ddpl_run_kernel(DDPL_OP_COPY, out->device, &out, &landed, NULL);
            ddpl_tensor_release(landed);
        }
    }
    ddpl_tensor_release(staged);
    return rc;
}

static int clone_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    DDPL_UNUSED(n);
    gi[0] = ddpl_tensor_retain(grad);
    return 0;
}

ddpl_tensor *ddpl_clone(ddpl_tensor *x)
{
    ddpl_tensor *y = ddpl_empty_like(x);
    if (!y) return NULL;
    if (copy_into(y, x) < 0) {
        ddpl_tensor_release(y);
        return NULL;
    }
    if (ddpl_grad_needed(1, &x))
        ddpl_set_history(y, ddpl_node_new("CloneBackward0", clone_backward, 1, &x));
    return y;
}

ddpl_tensor *ddpl_contiguous(ddpl_tensor *x)
{
    if (ddpl_tensor_is_contiguous(x)) return ddpl_tensor_retain(x);
    return ddpl_clone(x);
}

ddpl_tensor *ddpl_detach(ddpl_tensor *x)
{
    return ddpl_tensor_alias(x, x->ndim, x->sizes, x->strides, x->offset);
}

typedef struct {
    uint8_t dtype;
    ddpl_device device;
} to_ctx;

static int to_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    to_ctx *c = DDPL_NODE_CTX(n, to_ctx);
    gi[0] = ddpl_to(grad, (ddpl_dtype)c->dtype, c->device);
    return gi[0] ? 0 : -1;
}

ddpl_tensor *ddpl_to(ddpl_tensor *x, ddpl_dtype dt, ddpl_device dev)
{
    if (x->dtype == dt && ddpl_same_device(x->device, dev)) return ddpl_tensor_retain(x);
    if ((unsigned)dt >= DDPL_DTYPE_COUNT) return ddpl_error("to: invalid dtype %d", (int)dt), NULL;
    ddpl_tensor *y = ddpl_tensor_new(x->ndim, x->sizes, dt, dev);
    if (!y) return NULL;
    if (copy_into(y, x) < 0) {
        ddpl_tensor_release(y);
        return NULL;
    }
    if (ddpl_dtype_is_floating(dt) && ddpl_grad_needed(1, &x)) {
        ddpl_node *n = ddpl_node_new("ToCopyBackward0", to_backward, 1, &x);
        to_ctx *c = DDPL_NODE_CTX(n, to_ctx);
        c->dtype = x->dtype;
        c->device = x->device;
        ddpl_set_history(y, n);
    }
    return y;
}

int ddpl_copy_(ddpl_tensor *dst, ddpl_tensor *src)
{
    int recorded = ddpl_inplace_recorded("copy_", dst, 1, &src);
    if (recorded < 0 || ddpl_check_write("copy_", dst, DDPL_WRITE_ELEMENTWISE, 1, &src) < 0)
        return -1;
    int nd;
    int64_t sizes[DDPL_MAX_DIMS];
    if (ddpl_broadcast_shape("copy_", dst->ndim, dst->sizes, src->ndim, src->sizes, &nd, sizes) < 0)
        return -1;
    if (nd != dst->ndim || memcmp(sizes, dst->sizes, nd * sizeof *sizes) != 0) {
        char a[128], b[128];
        return ddpl_error("copy_: source of shape %s cannot be broadcast to destination shape %s",
                          ddpl_shape_str(src, a, sizeof a), ddpl_shape_str(dst, b, sizeof b));
    }
    if (recorded) { /* dst's old history gets no gradient: its values are gone */
        ddpl_tensor *c = ddpl_to(src, (ddpl_dtype)dst->dtype, dst->device);
        ddpl_tensor *r = c && !ddpl_same_shape(c, dst) ? ddpl_expand(c, dst->ndim, dst->sizes)
                                                       : ddpl_tensor_retain(c);
        ddpl_tensor_release(c);
        return ddpl_inplace_commit("copy_", "CopyBackwards", dst, r);
    }
    ddpl_tensor *s = src;
    if (!ddpl_same_shape(src, dst)) {
        s = ddpl_expand(src, dst->ndim, dst->sizes);
        if (!s) return -1;
    } else {
        ddpl_tensor_retain(s);
    }
    /* copying a tensor onto memory it overlaps (the same elements, or a layout PyTorch does not
     * decide) would read values already overwritten */
    int rc;
    if (s->storage == dst->storage) {
        ddpl_tensor *tmp = ddpl_tensor_new(s->ndim, s->sizes, (ddpl_dtype)s->dtype, s->device);
        rc = tmp ? copy_into(tmp, s) : -1;
        if (rc == 0) rc = copy_into(dst, tmp);
        ddpl_tensor_release(tmp);
    } else {
        rc = copy_into(dst, s);
    }
    ddpl_tensor_release(s);
    if (rc == 0) ddpl_storage_bump_version(dst->storage);
    return rc;
}

/* Allowed on expanded views, as in PyTorch: every element receives the same value. */
static int fill_named(const char *op, const char *node, ddpl_tensor *x, double value)
{
    int recorded = ddpl_inplace_recorded(op, x, 0, NULL);
    if (recorded < 0) return -1;
    ddpl_fill_params p = {value};
    int rc = ddpl_run_kernel(DDPL_OP_FILL, x->device, &x, NULL, &p);
    if (rc == 0) ddpl_storage_bump_version(x->storage);
    if (rc == 0 && recorded) ddpl_inplace_written(x, node);
    return rc;
}

int ddpl_fill_(ddpl_tensor *x, double value)
{
    return fill_named("fill_", "FillBackward0", x, value);
}

int ddpl_zero_(ddpl_tensor *x)
{
    return fill_named("zero_", "ZeroBackward0", x, 0.0);
}

/* Random kernels fill contiguous memory; other layouts go through a temporary. */
static int random_fill_(const char *op, const char *node, ddpl_tensor *x, ddpl_op kop, double a,
                        double b)
{
    int recorded = ddpl_inplace_recorded(op, x, 0, NULL);
    if (recorded < 0 || ddpl_check_no_internal_overlap(op, x) < 0 || ddpl_check_floating(op, x) < 0)
        return -1;
    ddpl_tensor *target = ddpl_tensor_is_contiguous(x) ? ddpl_tensor_retain(x) : ddpl_empty_like(x);
    if (!target) return -1;
    ddpl_philox_state s = ddpl_rng_reserve((uint64_t)ddpl_tensor_numel(x) * 2);
    ddpl_random_params p = {s.seed, s.offset, a, b};
    int rc = ddpl_run_kernel(kop, x->device, &target, NULL, &p);
    if (rc == 0 && target != x) rc = ddpl_run_kernel(DDPL_OP_COPY, x->device, &x, &target, NULL);
    ddpl_tensor_release(target);
    if (rc == 0) ddpl_storage_bump_version(x->storage);
    if (rc == 0 && recorded) ddpl_inplace_written(x, node);
    return rc;
}

int ddpl_uniform_(ddpl_tensor *x, double from, double to)
{
    if (!(from <= to))
        return ddpl_error("uniform_: expected from <= to, got from %g and to %g", from, to);
    return random_fill_("uniform_", "UniformBackward0", x, DDPL_OP_UNIFORM, from, to);
}

int ddpl_normal_(ddpl_tensor *x, double mean, double std)
{
    if (!(std >= 0)) return ddpl_error("normal_: expected std >= 0, got %g", std);
    return random_fill_("normal_", "NormalBackward0", x, DDPL_OP_NORMAL, mean, std);
}

/* x <- 1 with probability p, else 0 (x's dtype), from uniform draws. */
int ddpl_bernoulli_(ddpl_tensor *x, double p)
{
    if (!(p >= 0 && p <= 1)) return ddpl_error("bernoulli_: expected 0 <= p <= 1, got %g", p);
    int recorded = ddpl_inplace_recorded("bernoulli_", x, 0, NULL);
    if (recorded < 0 || ddpl_check_no_internal_overlap("bernoulli_", x) < 0) return -1;
    ddpl_tensor *u = ddpl_tensor_new(x->ndim, x->sizes, DDPL_FLOAT32, x->device);
    if (!u) return -1;
    ddpl_philox_state s = ddpl_rng_reserve((uint64_t)ddpl_tensor_numel(x) * 2);
    ddpl_random_params rp = {s.seed, s.offset, 0.0, 1.0};
    int rc = ddpl_run_kernel(DDPL_OP_UNIFORM, x->device, &u, NULL, &rp);
    ddpl_tensor *thresh = rc == 0 ? ddpl_wrapped_number(p, false) : NULL;
    ddpl_tensor *mask = thresh ? ddpl_lt(u, thresh) : NULL;
    rc = mask ? ddpl_run_kernel(DDPL_OP_COPY, x->device, &x, &mask, NULL) : -1;
    ddpl_tensor_release(mask);
    ddpl_tensor_release(thresh);
    ddpl_tensor_release(u);
    if (rc == 0) ddpl_storage_bump_version(x->storage);
    if (rc == 0 && recorded) ddpl_inplace_written(x, "BernoulliBackward0");
    return rc;
}
