/* ops/histogram.c: counting values into bins: bincount and histc (not differentiable, as in
 * PyTorch).
 * defines: ddpl_bincount, ddpl_histc.
 *
 * Both need a value of the data before they can size or place their bins (bincount its largest
 * value, histc without a range its smallest and largest), so they read one reduction back to the
 * host, as PyTorch does. Result dtypes are PyTorch 1.13's: bincount counts in int64, sums float32
 * weights in float32 and any other weights in float64, and an empty input gives int64 zeros of
 * minlength even with weights; histc keeps the input's floating dtype. */
#include <math.h>

#include "op_util.h"

/* The smallest and largest element of x (not recorded: only read), in one pass where the
 * backend fuses aminmax (bincount's 1M values: two passes cost a fifth of its time). */
static int min_max(ddpl_tensor *x, bool integral, int64_t *imin, int64_t *imax, double *dmin,
                   double *dmax)
{
    bool prev = ddpl_set_grad_enabled(false);
    ddpl_tensor *lo = NULL, *hi = NULL;
    if (ddpl_aminmax(x, true, 0, false, &lo, &hi) < 0) lo = hi = NULL;
    ddpl_set_grad_enabled(prev);
    int rc = -1;
    if (hi)
        rc = integral
                 ? (ddpl_tensor_item_int64(lo, imin) < 0 ? -1 : ddpl_tensor_item_int64(hi, imax))
                 : (ddpl_tensor_item(lo, dmin) < 0 ? -1 : ddpl_tensor_item(hi, dmax));
    ddpl_tensor_release(lo);
    ddpl_tensor_release(hi);
    return rc;
}

ddpl_tensor *ddpl_bincount(ddpl_tensor *x, ddpl_tensor *weights, int64_t minlength)
{
    char sa[128], sb[128];
    ddpl_dtype xdt = (ddpl_dtype)x->dtype;
    if (x->ndim != 1 || !ddpl_dtype_is_integral(xdt) || xdt == DDPL_BOOL)
        return ddpl_error("bincount: expected a 1-D tensor of integers, got shape %s and dtype %s",
                          ddpl_shape_str(x, sa, sizeof sa), ddpl_dtype_name(xdt)),
               NULL;
    if (minlength < 0)
        return ddpl_error("bincount: minlength must be >= 0, got %lld", (long long)minlength), NULL;
    if (weights && (weights->ndim != 1 || weights->sizes[0] != x->sizes[0]))
        return ddpl_error("bincount: weights %s must be 1-D with as many elements as the input %s",
                          ddpl_shape_str(weights, sa, sizeof sa), ddpl_shape_str(x, sb, sizeof sb)),
               NULL;
    if (weights && ddpl_check_same_device("bincount", x, weights) < 0) return NULL;
    if (weights && (ddpl_dtype)weights->dtype == DDPL_BOOL)
        return ddpl_error("bincount: weights of dtype bool are not supported"), NULL;
    int64_t n = x->sizes[0];
    if (n == 0) return ddpl_zeros(1, &minlength, DDPL_INT64, x->device);
    int64_t lo, hi;
    double unused;
    if (min_max(x, true, &lo, &hi, &unused, &unused) < 0) return NULL;
    if (lo < 0)
        return ddpl_error("bincount: the input must be non-negative, got the value %lld",
                          (long long)lo),
               NULL;
    if (hi == INT64_MAX) /* hi + 1 bins would overflow; no allocation holds them anyway */
        return ddpl_error("bincount: the largest value %lld needs too many bins", (long long)hi),
               NULL;
    int64_t bins = hi + 1 > minlength ? hi + 1 : minlength;
    ddpl_dtype odt = !weights                                     ? DDPL_INT64
                     : (ddpl_dtype)weights->dtype == DDPL_FLOAT32 ? DDPL_FLOAT32
                                                                  : DDPL_FLOAT64;
    /* the element count and byte size are checked by the allocator (huge minlength: an error) */
    ddpl_tensor *out = ddpl_tensor_new(1, &bins, odt, x->device);
    if (!out) return NULL;
    bool prev = ddpl_set_grad_enabled(false);
    ddpl_tensor *xi = ddpl_as_dtype(x, DDPL_INT64), *xc = xi ? ddpl_contiguous(xi) : NULL;
    ddpl_tensor *wd = weights && xc ? ddpl_as_dtype(weights, odt) : NULL;
    ddpl_tensor *wc = wd ? ddpl_contiguous(wd) : NULL;
    ddpl_set_grad_enabled(prev);
    ddpl_tensor *ins[2] = {xc, wc};
    if (!xc || (weights && !wc) || ddpl_run_kernel(DDPL_OP_BINCOUNT, x->device, &out, ins, NULL)) {
        ddpl_tensor_release(out);
        out = NULL;
    }
    ddpl_tensor_release(xi);
    ddpl_tensor_release(xc);
    ddpl_tensor_release(wd);
    ddpl_tensor_release(wc);
    return out;
}

ddpl_tensor *ddpl_histc(ddpl_tensor *x, int64_t bins, double min, double max)
{
    ddpl_dtype dt = (ddpl_dtype)x->dtype;
    if (dt != DDPL_FLOAT32 && dt != DDPL_FLOAT64)
        return ddpl_error("histc: not implemented for dtype %s (float32 and float64 are)",
                          ddpl_dtype_name(dt)),
               NULL;
    if (bins <= 0) return ddpl_error("histc: bins must be > 0, got %lld", (long long)bins), NULL;
    if (min > max)
        return ddpl_error("histc: max (%g) must be larger than or equal to min (%g)", max, min),
               NULL;
    int64_t n = ddpl_tensor_numel(x);
    if (min == max && n > 0) { /* PyTorch's default range: the data's */
        int64_t unused;
        if (min_max(x, false, &unused, &unused, &min, &max) < 0) return NULL;
    }
    if (min == max) {
        min -= 1;
        max += 1;
    }
    /* the kernels compute in x's dtype, as PyTorch: the range is rounded to it first */
    if (dt == DDPL_FLOAT32) {
        min = (float)min;
        max = (float)max;
    }
    if (!isfinite(min) || !isfinite(max))
        return ddpl_error("histc: range of [%g, %g] is not finite", min, max), NULL;
    ddpl_tensor *out = ddpl_tensor_new(1, &bins, dt, x->device);
    bool prev = ddpl_set_grad_enabled(false); /* not differentiable: record nothing */
    ddpl_tensor *xc = out ? ddpl_contiguous(x) : NULL;
    ddpl_set_grad_enabled(prev);
    ddpl_histc_params p = {min, max};
    if (!xc || ddpl_run_kernel(DDPL_OP_HISTC, x->device, &out, &xc, &p) < 0) {
        ddpl_tensor_release(out);
        out = NULL;
    }
    ddpl_tensor_release(xc);
    return out;
}
