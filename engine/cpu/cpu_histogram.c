/* cpu/cpu_histogram.c: counting values into bins on the CPU: bincount and histc.
 * defines: cpu_bincount, cpu_histc.
 *
 * A histogram's bins are shared by every element. Unweighted bincount of many values splits
 * them over threads, each counting into its own bins, then adds the parts in order (integer
 * counts: exact, the same on any thread count); weighted sums and histc stay on one thread, so
 * their float additions keep one order. The op has checked the values (bincount: in [0, bins);
 * histc: a finite range); the kernels still skip anything outside the output rather than write
 * past it. */
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "cpu_kernels.h"
#include "cpu_threads.h"
#include "kernel_abi/kernel_params.h"

/* c[v] += 1 for each of the n values at xv in [0, bins) (c zeroed by the caller): four values
 * loaded and checked (unsigned: a negative one is huge) before their four increments, which
 * stay in order. */
static void count_values(int64_t *c, const int64_t *xv, int64_t n, int64_t bins)
{
    int64_t i = 0;
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
}

/* Values per part of a split count, and the most bins a part's own counts may take (8 MiB). */
#define COUNT_GRAIN    (1 << 17)
#define COUNT_MAX_BINS (1 << 20)
#define COUNT_PARTS    16

typedef struct {
    const int64_t *xv;
    int64_t n, bins, chunk;
    int64_t *counts[COUNT_PARTS]; /* part 0: the output */
} count_split;

static void count_part(int part, int thread, void *ctx)
{
    (void)thread;
    count_split *cs = ctx;
    int64_t lo = part * cs->chunk, hi = lo + cs->chunk < cs->n ? lo + cs->chunk : cs->n;
    if (part > 0) memset(cs->counts[part], 0, (size_t)cs->bins * sizeof(int64_t));
    count_values(cs->counts[part], cs->xv + lo, hi - lo, cs->bins);
}

/* The unweighted count into c (zeroed), split over threads where there are enough values and
 * the parts' bins fit in their scratch; -1 (error set) when that scratch cannot be had. */
static int count_all(int64_t *c, const int64_t *xv, int64_t n, int64_t bins)
{
    int parts = cpu_threads_in_parallel() ? 1 : cpu_threads_get();
    if (parts > COUNT_PARTS) parts = COUNT_PARTS;
    if (n / COUNT_GRAIN < parts) parts = (int)(n / COUNT_GRAIN);
    if (parts < 2 || bins > COUNT_MAX_BINS) {
        count_values(c, xv, n, bins);
        return 0;
    }
    count_split cs = {.xv = xv, .n = n, .bins = bins, .chunk = (n + parts - 1) / parts};
    size_t bytes = (size_t)bins * sizeof(int64_t);
    cs.counts[0] = c;
    int got = 1;
    for (; got < parts; got++)
        if (!(cs.counts[got] = ddpl_host_scratch_alloc(bytes))) break;
    int rc = 0;
    if (got == parts) {
        cpu_threads_run(parts, count_part, &cs);
        for (int p = 1; p < parts; p++)
            for (int64_t b = 0; b < bins; b++) c[b] += cs.counts[p][b];
    } else {
        rc =
            ddpl_error("bincount: out of memory for %d parts of %lld bins", parts, (long long)bins);
    }
    for (int p = 1; p < got; p++) ddpl_host_scratch_free(cs.counts[p], bytes);
    return rc;
}

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
    case DDPL_INT64:
        return count_all((int64_t *)ob, xv, n, bins);
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
