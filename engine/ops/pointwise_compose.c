/* ops/pointwise_compose.c: pointwise functions PyTorch has that are short compositions of other
 * ops (so their gradients, devices and dtypes come from those): lerp, addcmul, addcdiv and clamp
 * with tensor bounds, and the comparisons isclose, allclose and equal.
 * defines: ddpl_lerp, ddpl_addcmul, ddpl_addcdiv, ddpl_clamp_tensor, ddpl_isclose,
 *          ddpl_allclose, ddpl_equal. */
#include "pointwise.h"

#define T(e)       OP_T(&k, e)
#define B(f, a, b) OP_B(&k, f, a, b)

/* all() over every dim, as a one-argument op for OP_U */
static ddpl_tensor *all_elements(ddpl_tensor *x)
{
    return ddpl_all(x, 0, NULL, false);
}

/* start + weight (end - start); weight a tensor or a wrapped number */
ddpl_tensor *ddpl_lerp(ddpl_tensor *start, ddpl_tensor *end, ddpl_tensor *weight)
{
    if (!ddpl_dtype_is_floating((ddpl_dtype)start->dtype) ||
        !ddpl_dtype_is_floating((ddpl_dtype)end->dtype))
        return ddpl_error("lerp: expected floating tensors, got %s and %s",
                          ddpl_dtype_name((ddpl_dtype)start->dtype),
                          ddpl_dtype_name((ddpl_dtype)end->dtype)),
               NULL;
    op_temps k = {0};
    return op_temps_result(&k, B(ddpl_add, start, B(ddpl_mul, weight, B(ddpl_sub, end, start))));
}

/* input + value * a * b */
ddpl_tensor *ddpl_addcmul(ddpl_tensor *input, ddpl_tensor *a, ddpl_tensor *b, double value)
{
    op_temps k = {0};
    ddpl_tensor *prod = B(ddpl_mul, a, b);
    if (value != 1) prod = B(ddpl_mul, prod, T(pw_wrapped(value)));
    return op_temps_result(&k, B(ddpl_add, input, prod));
}

/* input + value * a / b; integer a and b are refused, as PyTorch (their quotient would be
 * true division, which integer addcdiv once truncated) */
ddpl_tensor *ddpl_addcdiv(ddpl_tensor *input, ddpl_tensor *a, ddpl_tensor *b, double value)
{
    if (!ddpl_dtype_is_floating((ddpl_dtype)a->dtype) &&
        !ddpl_dtype_is_floating((ddpl_dtype)b->dtype))
        return ddpl_error("addcdiv: integer division of tensors is not supported (got %s and "
                          "%s); convert them to a floating dtype",
                          ddpl_dtype_name((ddpl_dtype)a->dtype),
                          ddpl_dtype_name((ddpl_dtype)b->dtype)),
               NULL;
    op_temps k = {0};
    ddpl_tensor *quot = B(ddpl_div, a, b);
    if (value != 1) quot = B(ddpl_mul, quot, T(pw_wrapped(value)));
    return op_temps_result(&k, B(ddpl_add, input, quot));
}

/* clamp with tensor bounds (either may be NULL): the min bound applies first, so min > max
 * gives max, and NaN in x stays NaN, as PyTorch. Two selects: x's gradient passes where
 * min <= x <= max, each bound's where it was taken (ties go to x, as PyTorch). */
ddpl_tensor *ddpl_clamp_tensor(ddpl_tensor *x, ddpl_tensor *min, ddpl_tensor *max)
{
    if (!min && !max) return ddpl_error("clamp: at least one of min and max must be given"), NULL;
    op_temps k = {0};
    ddpl_tensor *r = x;
    if (min) {
        ddpl_tensor *below = B(ddpl_lt, r, min);
        r = below ? T(ddpl_where(below, min, r)) : NULL;
    }
    if (max && r) {
        ddpl_tensor *above = B(ddpl_gt, r, max);
        r = above ? T(ddpl_where(above, max, r)) : NULL;
    }
    return op_temps_result(&k, r);
}

/* |a - b| <= atol + rtol |b|, or a == b (equal infinities); NaNs are equal only with
 * equal_nan. bool result over the broadcast of a and b. */
ddpl_tensor *ddpl_isclose(ddpl_tensor *a, ddpl_tensor *b, double rtol, double atol, bool equal_nan)
{
    if (rtol < 0 || atol < 0)
        return ddpl_error("isclose: rtol and atol must be non-negative, got rtol=%g and atol=%g",
                          rtol, atol),
               NULL;
    if ((a->dtype == DDPL_BOOL) != (b->dtype == DDPL_BOOL))
        return ddpl_error("isclose: expected both or neither input to be bool, got %s and %s",
                          ddpl_dtype_name((ddpl_dtype)a->dtype),
                          ddpl_dtype_name((ddpl_dtype)b->dtype)),
               NULL;
    if (a->dtype == DDPL_BOOL) return ddpl_eq(a, b);
    op_temps k = {0};
    ddpl_tensor *same = B(ddpl_eq, a, b);
    ddpl_tensor *diff = OP_U(&k, ddpl_abs, B(ddpl_sub, a, b));
    ddpl_tensor *tol =
        B(ddpl_add, B(ddpl_mul, OP_U(&k, ddpl_abs, b), T(pw_wrapped(rtol))), T(pw_wrapped(atol)));
    /* a finite difference within tolerance: -inf and inf are not close though inf <= inf */
    ddpl_tensor *within = B(ddpl_logical_and, OP_U(&k, ddpl_isfinite, diff), B(ddpl_le, diff, tol));
    ddpl_tensor *r = B(ddpl_logical_or, same, within);
    if (equal_nan)
        r = B(ddpl_logical_or, r,
              B(ddpl_logical_and, OP_U(&k, ddpl_isnan, a), OP_U(&k, ddpl_isnan, b)));
    return op_temps_result(&k, r);
}

/* *result <- every element of isclose(a, b, ...) holds */
int ddpl_allclose(ddpl_tensor *a, ddpl_tensor *b, double rtol, double atol, bool equal_nan,
                  bool *result)
{
    op_temps k = {0};
    ddpl_tensor *close = T(ddpl_isclose(a, b, rtol, atol, equal_nan));
    ddpl_tensor *all = OP_U(&k, all_elements, close);
    int64_t v = 0;
    int rc = all && ddpl_tensor_item_int64(all, &v) == 0 ? 0 : -1;
    op_temps_release(&k);
    *result = rc == 0 && v != 0;
    return rc;
}

/* *result <- a and b have the same shape and equal elements (torch.equal; dtypes may differ) */
int ddpl_equal(ddpl_tensor *a, ddpl_tensor *b, bool *result)
{
    *result = false;
    if (ddpl_check_same_device("equal", a, b) < 0) return -1;
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->sizes[d] != b->sizes[d]) return 0;
    op_temps k = {0};
    ddpl_tensor *all = OP_U(&k, all_elements, B(ddpl_eq, a, b));
    int64_t v = 0;
    int rc = all && ddpl_tensor_item_int64(all, &v) == 0 ? 0 : -1;
    op_temps_release(&k);
    *result = rc == 0 && v != 0;
    return rc;
}
