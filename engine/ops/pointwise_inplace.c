/* ops/pointwise_inplace.c: the in-place arithmetic ops (optimizer updates, gradient
 * accumulation).
 * defines: ddpl_add_, ddpl_mul_, ddpl_div_, ddpl_div_rounded_, ddpl_clamp_, ddpl_relu_,
 *          ddpl_sigmoid_, ddpl_tanh_, ddpl_silu_, ddpl_mul_out.
 *
 * Rules, as PyTorch: only the right operand broadcasts (to x's shape); the result dtype must be
 * castable to x's dtype (no float result into an integer tensor); x may have any strides but
 * not several elements on one memory location; an operand that overlaps x in memory is refused
 * as PyTorch refuses it (ops/mem_overlap.c), and one whose overlap PyTorch does not decide (a
 * strided view) is copied first; the storage version is bumped so autograd notices; on any
 * error x is left untouched. Autograd records them as ops/inplace.c describes: computed by the
 * out-of-place op, then written into x, which takes its history. */
#include "pointwise.h"

/* An error (-1) unless the write into x is well defined and y broadcasts to x's shape; else
 * whether autograd records the op (1) or not (0): ddpl_inplace_recorded. */
static int check_target(const char *op, ddpl_tensor *x, ddpl_tensor *y, ddpl_dtype result)
{
    char a[128], b[128];
    int recorded = ddpl_inplace_recorded(op, x, 1, &y);
    /* memory first, as PyTorch's TensorIterator: x:add_(x[0]:view(1, 3)) names the overlap */
    if (recorded < 0 || ddpl_check_write(op, x, DDPL_WRITE_ELEMENTWISE, 1, &y) < 0) return -1;
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
    if (!pw_can_cast(result, (ddpl_dtype)x->dtype))
        return ddpl_error("%s: result type %s can't be cast to the desired output type %s", op,
                          ddpl_dtype_name(result), ddpl_dtype_name((ddpl_dtype)x->dtype));
    return recorded;
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

/* The out-of-place form of an in-place op, which autograd records: (x or its clone, y). */
typedef struct {
    ddpl_tensor *(*fn)(ddpl_tensor *x, ddpl_tensor *y, const void *params);
    bool saves_x; /* the formula keeps x's value (ddpl_inplace_source) */
} recorded_form;

static int inplace_binary(const char *op, ddpl_op kop, ddpl_tensor *x, ddpl_tensor *y,
                          ddpl_dtype compute, const void *params, recorded_form form)
{
    int recorded = check_target(op, x, y, compute);
    if (recorded < 0) return -1;
    if (recorded) {
        ddpl_tensor *src = ddpl_inplace_source(x, form.saves_x);
        ddpl_tensor *r = src ? form.fn(src, y, params) : NULL;
        ddpl_tensor_release(src);
        return ddpl_inplace_commit(op, NULL, x, r);
    }
    kernel_input ky;
    if (kin_prepare(&ky, y, compute, x->device, x->ndim, x->sizes) < 0) return -1;
    ddpl_tensor *copy = NULL;
    if (ky.hdr.storage == x->storage && !same_elements(x, &ky.hdr)) {
        /* y overlaps x in a layout PyTorch lets through undecided (not dense): the kernel would
         * read values it already overwrote */
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

static ddpl_tensor *add_form(ddpl_tensor *x, ddpl_tensor *y, const void *params)
{
    return ddpl_add_scaled(x, y, ((const ddpl_alpha_params *)params)->alpha);
}

static ddpl_tensor *mul_form(ddpl_tensor *x, ddpl_tensor *y, const void *params)
{
    (void)params;
    return ddpl_mul(x, y);
}

static ddpl_tensor *div_form(ddpl_tensor *x, ddpl_tensor *y, const void *params)
{
    (void)params;
    return ddpl_div(x, y);
}

int ddpl_add_(ddpl_tensor *x, ddpl_tensor *y, double alpha)
{
    ddpl_dtype dt = ddpl_result_type(2, OP_INPUTS(x, y));
    if (ddpl_dtype_is_integral(dt) && !pw_scalar_is_integral(alpha))
        return ddpl_error("add_: for integral input tensors, argument alpha must not be a "
                          "floating point number (got %g)",
                          alpha);
    ddpl_alpha_params p = {alpha};
    return inplace_binary("add_", DDPL_OP_ADD, x, y, dt, &p, (recorded_form){add_form, false});
}

int ddpl_mul_(ddpl_tensor *x, ddpl_tensor *y)
{
    /* x's value is needed only for y's gradient */
    recorded_form form = {mul_form, ddpl_requires_grad(y)};
    return inplace_binary("mul_", DDPL_OP_MUL, x, y, ddpl_result_type(2, OP_INPUTS(x, y)), NULL,
                          form);
}

int ddpl_div_(ddpl_tensor *x, ddpl_tensor *y)
{
    ddpl_dtype dt = ddpl_result_type(2, OP_INPUTS(x, y));
    if (!ddpl_dtype_is_floating(dt)) dt = ddpl_default_float_dtype(); /* true division */
    return inplace_binary("div_", DDPL_OP_DIV, x, y, dt, NULL,
                          (recorded_form){div_form, ddpl_requires_grad(y)});
}

/* x <- div(x, y, rounding_mode) for "floor" or "trunc" (NULL: true division, div_): integer x
 * stays integer, as PyTorch's div_(y, rounding_mode=...). Computed out of place and written in
 * (the rounded divisions have their own checks, an integer division by zero among them, which
 * run before x is touched); recorded by autograd as the others are, with div's zero gradient. */
int ddpl_div_rounded_(ddpl_tensor *x, ddpl_tensor *y, const char *rounding_mode)
{
    if (!rounding_mode) return ddpl_div_(x, y);
    if (strcmp(rounding_mode, "floor") != 0 && strcmp(rounding_mode, "trunc") != 0)
        return ddpl_error("div_: expected rounding_mode to be nil, 'floor' or 'trunc', got '%s'",
                          rounding_mode);
    int recorded = check_target("div_", x, y, ddpl_result_type(2, OP_INPUTS(x, y)));
    if (recorded < 0) return -1;
    if (recorded) {
        /* the rounded division saves its operands (div_rounded), though its gradient is zero */
        ddpl_tensor *src = ddpl_inplace_source(x, true);
        ddpl_tensor *r = src ? ddpl_div_rounded(src, y, rounding_mode) : NULL;
        ddpl_tensor_release(src);
        return ddpl_inplace_commit("div_", NULL, x, r);
    }
    bool prev = ddpl_grad_mode_set(false);
    ddpl_tensor *r = ddpl_div_rounded(x, y, rounding_mode);
    ddpl_grad_mode_set(prev);
    int rc = r ? ddpl_run_kernel(DDPL_OP_COPY, x->device, &x, &r, NULL) : -1;
    ddpl_tensor_release(r);
    if (rc == 0) ddpl_storage_bump_version(x->storage);
    return rc;
}

int ddpl_clamp_(ddpl_tensor *x, bool has_min, double min, bool has_max, double max)
{
    ddpl_clamp_params p = {has_min, has_max, min, max};
    ddpl_dtype dt = (ddpl_dtype)x->dtype;
    if (pw_clamp_dtype("clamp_", x, &p, &dt) < 0) return -1;
    int recorded = check_target("clamp_", x, NULL, dt);
    if (recorded < 0) return -1;
    if (recorded) { /* clamp's gradient mask comes from its input */
        ddpl_tensor *src = ddpl_inplace_source(x, true);
        ddpl_tensor *r = src ? ddpl_clamp(src, has_min, min, has_max, max) : NULL;
        ddpl_tensor_release(src);
        return ddpl_inplace_commit("clamp_", NULL, x, r);
    }
    return write_into(DDPL_OP_CLAMP, x, dt, 0, NULL, &p);
}

/* relu_ sigmoid_ tanh_ silu_: one kernel over x, or the recorded form. */
static int activation_(const char *op, ddpl_op kop, ddpl_tensor *x,
                       ddpl_tensor *(*fn)(ddpl_tensor *), bool saves_x)
{
    if (ddpl_check_floating(op, x) < 0) return -1;
    int recorded = check_target(op, x, NULL, (ddpl_dtype)x->dtype);
    if (recorded < 0) return -1;
    if (recorded) {
        ddpl_tensor *src = ddpl_inplace_source(x, saves_x);
        ddpl_tensor *r = src ? fn(src) : NULL;
        ddpl_tensor_release(src);
        return ddpl_inplace_commit(op, NULL, x, r);
    }
    return write_into(kop, x, (ddpl_dtype)x->dtype, 0, NULL, NULL);
}

/* relu, sigmoid and tanh save their output (r, not x); silu saves its input */
int ddpl_relu_(ddpl_tensor *x)
{
    return activation_("relu_", DDPL_OP_RELU, x, ddpl_relu, false);
}

int ddpl_sigmoid_(ddpl_tensor *x)
{
    return activation_("sigmoid_", DDPL_OP_SIGMOID, x, ddpl_sigmoid, false);
}

int ddpl_tanh_(ddpl_tensor *x)
{
    return activation_("tanh_", DDPL_OP_TANH, x, ddpl_tanh, false);
}

int ddpl_silu_(ddpl_tensor *x)
{
    return activation_("silu_", DDPL_OP_SILU, x, ddpl_silu, true);
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
