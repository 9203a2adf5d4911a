/* cpu/cpu_histogram.c: counting values into bins on the CPU: bincount and histc.
 * defines: cpu_bincount, cpu_histc.
 *
 * Both run on one thread: a histogram's bins are shared by every element, and the ops feed them
 * data sized for counting, not for training. The op has checked the values (bincount: in
 * [0, bins); histc: a finite range); the kernels still skip anything outside the output rather
 * than write past it. */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"
#include "kernel_abi/kernel_params.h"

/* out (1-D, zeroed here) += 1, or in[1]'s weight (out's dtype), at each in[0] value (int64). */
int cpu_bincount(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    (void)params;
    ddpl_tensor *o = out[0], *x = in[0], *w = in[1];
    int64_t bins = o->sizes[0], n = ddpl_tensor_numel(x);
    ddpl_dtype dt = (ddpl_dtype)o->dtype;
    memset(ddpl_data_ptr(o), 0, (size_t)bins * ddpl_dtype_size(dt));
    const int64_t *xv = (const int64_t *)ddpl_data_ptr(x);
    char *ob = ddpl_data_ptr(o);
    switch (dt) {
    case DDPL_INT64: {
        /* four values loaded and checked (unsigned: a negative one is huge) before their four
         * increments, which stay in order */
        int64_t *c = (int64_t *)ob, i = 0;
        uint64_t b = (uint64_t)bins;
        for (; i + 4 <= n; i += 4) {
            uint64_t v0 = (uint64_t)xv[i], v1 = (uint64_t)xv[i + 1], v2 = (uint64_t)xv[i + 2],
                     v3 = (uint64_t)xv[i + 3];
            if ((v0 < b) & (v1 < b) & (v2 < b) & (v3 < b)) {
                c[v0]++;
                c[v1]++;
                c[v2]++;
                c[v3]++;
            } else {
                break;
            }
        }
        for (; i < n; i++)
            if ((uint64_t)xv[i] < b) c[xv[i]]++;
        break;
    }
    case DDPL_FLOAT32:
        for (int64_t i = 0; i < n; i++)
            if (xv[i] >= 0 && xv[i] < bins)
                ((float *)ob)[xv[i]] += ((const float *)ddpl_data_ptr(w))[i];
        break;
    case DDPL_FLOAT64:
        for (int64_t i = 0; i < n; i++)
            if (xv[i] >= 0 && xv[i] < bins)
                ((double *)ob)[xv[i]] += ((const double *)ddpl_data_ptr(w))[i];
        break;
    default:
        return ddpl_error("bincount: output dtype %s is not supported", ddpl_dtype_name(dt));
    }
    return 0;
}

/* PyTorch's bin of one element (aten's histc, LINEAR_INTERPOLATION), in the element's type:
 * (v - min) * bins / (max - min), truncated; v == max goes in the last bin. */
#define HISTC(T)                                                                                   \
    static void histc_##T(T *o, const T *x, int64_t n, int64_t bins, T lo, T hi)                   \
    {                                                                                              \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T v = x[i];                                                                            \
            if (!(v >= lo && v <= hi)) continue; /* outside, or NaN */                             \
            int64_t b = (int64_t)((v - lo) * (T)bins / (hi - lo));                                 \
            if (b >= bins) b = bins - 1;                                                           \
            if (b >= 0) o[b] += 1;                                                                 \
        }                                                                                          \
    }
HISTC(float)
HISTC(double)
#undef HISTC

/* out (bins, in[0]'s dtype) <- how many in[0] elements fall in each of bins equal-width bins of
 * [min, max]. */
int cpu_histc(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_histc_params *p = params;
    ddpl_tensor *o = out[0], *x = in[0];
    int64_t bins = o->sizes[0], n = ddpl_tensor_numel(x);
    memset(ddpl_data_ptr(o), 0, (size_t)bins * ddpl_dtype_size((ddpl_dtype)o->dtype));
    if (x->dtype == DDPL_FLOAT32)
        histc_float((float *)ddpl_data_ptr(o), (const float *)ddpl_data_ptr(x), n, bins,
                    (float)p->min, (float)p->max);
    else if (x->dtype == DDPL_FLOAT64)
        histc_double((double *)ddpl_data_ptr(o), (const double *)ddpl_data_ptr(x), n, bins, p->min,
                     p->max);
    else
        return ddpl_error("histc: dtype %s is not supported by the CPU kernel",
                          ddpl_dtype_name((ddpl_dtype)x->dtype));
    return 0;
}
