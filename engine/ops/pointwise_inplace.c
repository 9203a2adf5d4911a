/* ops/pointwise_inplace.c: the in-place arithmetic ops (optimizer updates, gradient
 * accumulation).
 * defines: ddpl_add_, ddpl_mul_, ddpl_div_, ddpl_clamp_, ddpl_mul_out.
 *
 * Rules, as PyTorch: only the right operand broadcasts (to x's shape); the result dtype must be
 * castable to x's dtype (no float result into an integer tensor); x may have any strides but
 * not several elements on one memory location; an operand sharing memory with x is copied
 * first unless it is exactly x; the storage version is bumped so autograd notices; on any
 * error x is left untouched. */
#include "pointwise.h"

/* An error unless the write into x is well defined and y broadcasts to x's shape. */
static int check_target(const char *op, ddpl_tensor *x, ddpl_tensor *y, ddpl_dtype result)
{
    char a[128], b[128];
    if (ddpl_check_inplace(op, x) < 0) return -1;
    if (y) {
        ddpl_device dev;
        if (pw_pick_device(op, 2, OP_INPUTS(x, y), &dev) < 0) return -1;
        if (!ddpl_same_device(dev, x->device))
            return ddpl_error("%s: the tensor written to is a cpu scalar but the other operand "
                              "is on %s",
                              op, ddpl_device_str(dev, a, sizeof a));
        int nd;
        int64_t sizes[DDPL_MAX_DIMS];
        if (ddpl_broadcast_shape(op, x->ndim, x->sizes, y->ndim, y->sizes, &nd, sizes) < 0)
            return -1;
        if (nd != x->ndim || memcmp(sizes, x->sizes, (size_t)nd * sizeof *sizes) != 0)
            return ddpl_error("%s: output with shape %s doesn't match the broadcast shape %s", op,
                              ddpl_shape_str(x, a, sizeof a),
                              ddpl_sizes_str(nd, sizes, b, sizeof b));
    }
    if (ddpl_check_no_internal_overlap(op, x) < 0) return -1;
    if (!pw_can_cast(result, (ddpl_dtype)x->dtype))
        return ddpl_error("%s: result type %s can't be cast to the desired output type %s", op,
                          ddpl_dtype_name(result), ddpl_dtype_name((ddpl_dtype)x->dtype));
    return 0;
}

/* Whether the kernel view of y reads exactly the elements of x at the same positions: then
 * reading and writing element by element is safe. */
static bool same_elements(const ddpl_tensor *x, const ddpl_tensor *yv)
{
    if (yv->offset != x->offset || yv->dtype != x->dtype) return false;
    for (int d = 0; d < x->ndim; d++)
        if (x->sizes[d] != 1 && yv->strides[d] != x->strides[d]) return false;
    return true;
}

/* out <- kop(ins...) computed in dtype `compute` (ins are prepared kernel inputs of out's
 * shape); bumps out's version. */
static int run_into(ddpl_op kop, ddpl_tensor *out, ddpl_dtype compute, ddpl_tensor **ins,
                    const void *params)
{
    int rc;
    if (compute == out->dtype) {
        rc = ddpl_run_kernel(kop, out->device, &out, ins, params);
    } else {
        /* compute in the wider dtype, then convert into out */
        ddpl_tensor *tmp = ddpl_tensor_new(out->ndim, out->sizes, compute, out->device);
        rc = tmp ? ddpl_run_kernel(kop, out->device, &tmp, ins, params) : -1;
        if (rc == 0) rc = ddpl_run_kernel(DDPL_OP_COPY, out->device, &out, &tmp, NULL);
        ddpl_tensor_release(tmp);
    }
    if (rc == 0) ddpl_storage_bump_version(out->storage);
    return rc;
}

/* x <- kop(x, inputs...) computed in dtype `compute`; the inputs other than x are given as
 * prepared kernel inputs (nin of them, after x). */
static int write_into(ddpl_op kop, ddpl_tensor *x, ddpl_dtype compute, int nin,
                      kernel_input *others, const void *params)
{
    ddpl_tensor *ins[3];
    kernel_input kx;
    if (kin_prepare(&kx, x, compute, x->device, x->ndim, x->sizes) < 0) return -1;
    ins[0] = &kx.hdr;
    for (int i = 0; i < nin; i++) ins[i + 1] = &others[i].hdr;
    int rc = run_into(kop, x, compute, ins, params);
    kin_release(&kx);
    return rc;
}

static int inplace_binary(const char *op, ddpl_op kop, ddpl_tensor *x, ddpl_tensor *y,
                          ddpl_dtype compute, const void *params)
{
    if (check_target(op, x, y, compute) < 0) return -1;
    kernel_input ky;
    if (kin_prepare(&ky, y, compute, x->device, x->ndim, x->sizes) < 0) return -1;
    ddpl_tensor *copy = NULL;
    if (ky.hdr.storage == x->storage && !same_elements(x, &ky.hdr)) {
        /* y overlaps x in some other arrangement: the kernel would read values it already
         * overwrote */
        kin_release(&ky);
        bool prev = ddpl_grad_mode_set(false);
        copy = ddpl_clone(y);
        ddpl_grad_mode_set(prev);
        if (!copy || kin_prepare(&ky, copy, compute, x->device, x->ndim, x->sizes) < 0) {
            ddpl_tensor_release(copy);
            return -1;
        }
    }
    int rc = write_into(kop, x, compute, 1, &ky, params);
    kin_release(&ky);
    ddpl_tensor_release(copy);
    return rc;
}

int ddpl_add_(ddpl_tensor *x, ddpl_tensor *y, double alpha)
{
    ddpl_dtype dt = ddpl_result_type(2, OP_INPUTS(x, y));
    if (ddpl_dtype_is_integral(dt) && !pw_scalar_is_integral(alpha))
        return ddpl_error("add_: for integral input tensors, argument alpha must not be a "
                          "floating point number (got %g)",
                          alpha);
    ddpl_alpha_params p = {alpha};
    return inplace_binary("add_", DDPL_OP_ADD, x, y, dt, &p);
}

int ddpl_mul_(ddpl_tensor *x, ddpl_tensor *y)
{
    return inplace_binary("mul_", DDPL_OP_MUL, x, y, ddpl_result_type(2, OP_INPUTS(x, y)), NULL);
}

int ddpl_div_(ddpl_tensor *x, ddpl_tensor *y)
{
    ddpl_dtype dt = ddpl_result_type(2, OP_INPUTS(x, y));
    if (!ddpl_dtype_is_floating(dt)) dt = ddpl_default_float_dtype(); /* true division */
    return inplace_binary("div_", DDPL_OP_DIV, x, y, dt, NULL);
}

int ddpl_clamp_(ddpl_tensor *x, bool has_min, double min, bool has_max, double max)
{
    ddpl_clamp_params p = {has_min, has_max, min, max};
    ddpl_dtype dt = (ddpl_dtype)x->dtype;
    if (pw_clamp_dtype("clamp_", x, &p, &dt) < 0 || check_target("clamp_", x, NULL, dt) < 0)
        return -1;
    return write_into(DDPL_OP_CLAMP, x, dt, 0, NULL, &p);
}

/* One pass where mul then copy_ would take two: the DDP reducer divides each gradient by the
 * world size while copying it into its bucket, as PyTorch's reducer does with at::mul_out. */
int ddpl_mul_out(ddpl_tensor *out, ddpl_tensor *x, ddpl_tensor *y)
{
    const char *op = "mul_out";
    ddpl_dtype dt = ddpl_result_type(2, OP_INPUTS(x, y));
    if (check_target(op, out, x, dt) < 0 || check_target(op, out, y, dt) < 0) return -1;
    if (ddpl_is_grad_enabled() && (ddpl_requires_grad(x) || ddpl_requires_grad(y)))
        return ddpl_error("%s: the operands require grad, and writing into an existing tensor "
                          "does not record autograd history; use mul, or wrap in ddpl.no_grad",
                          op);
    kernel_input k[2];
    if (kin_prepare(&k[0], x, dt, out->device, out->ndim, out->sizes) < 0) return -1;
    if (kin_prepare(&k[1], y, dt, out->device, out->ndim, out->sizes) < 0) {
        kin_release(&k[0]);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < 2; i++)
        if (k[i].hdr.storage == out->storage && !same_elements(out, &k[i].hdr))
            rc = ddpl_error("%s: operand %d overlaps the output in a different arrangement", op,
                            i + 1);
    ddpl_tensor *ins[2] = {&k[0].hdr, &k[1].hdr};
    if (rc == 0) rc = run_into(DDPL_OP_MUL, out, dt, ins, NULL);
    kin_release(&k[0]);
    kin_release(&k[1]);
    return rc;
}
