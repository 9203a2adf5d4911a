/* ops/unique.c: the distinct elements (or slices along a dim) of a tensor, with the inverse map
 * and the counts.
 * defines: ddpl_unique.
 *
 * The elements are sorted with the sort kernel (stable, on x's device), then the groups of equal
 * neighbours are found on the host (integers of a narrow range on the CPU skip the sort: a
 * histogram gives the same groups, unique_counting): the output's length depends on the data,
 * so PyTorch reads it back too. Equality is PyTorch's ==: -0.0 and 0.0 are one value; NaN equals
 * nothing, so every NaN is an element of its own, at the end (PyTorch's CUDA behaviour; 1.13's CPU
 * kernel orders NaNs arbitrarily). The output is always sorted ascending: with sorted=false PyTorch
 * leaves the order unspecified, so a sorted result is one it allows. With a dim, slices compare
 * lexicographically (their elements in row-major order) and are sorted on the host. Nothing is
 * differentiable. */
#include "core/alloc.h"
#include "op_util.h"

/* Host view of n elements of dtype dt: element i compared as int64 (integral) or double. */
typedef struct {
    const char *data;
    ddpl_dtype dt;
    size_t esz;
    bool integral;
} host_elems;

/* PyTorch's == on two elements: integers are equal when their bytes are; floats compare as
 * values (-0.0 == 0.0, NaN equals nothing). */
static bool elem_eq(const host_elems *h, int64_t a, int64_t b)
{
    const char *pa = h->data + a * (int64_t)h->esz, *pb = h->data + b * (int64_t)h->esz;
    switch (h->dt) {
    case DDPL_FLOAT32: {
        float x, y;
        memcpy(&x, pa, 4);
        memcpy(&y, pb, 4);
        return x == y;
    }
    case DDPL_FLOAT64: {
        double x, y;
        memcpy(&x, pa, 8);
        memcpy(&y, pb, 8);
        return x == y;
    }
    case DDPL_FLOAT16:
    case DDPL_BFLOAT16:
        return ddpl_load_f64(pa, h->dt) == ddpl_load_f64(pb, h->dt);
    case DDPL_INT64: {
        int64_t x, y;
        memcpy(&x, pa, 8);
        memcpy(&y, pb, 8);
        return x == y;
    }
    default:
        return memcmp(pa, pb, h->esz) == 0;
    }
}

/* -1, 0, 1 ordering elements a and b (NaN above everything, NaNs equal: only for sorting). */
static int elem_cmp(const host_elems *h, int64_t a, int64_t b)
{
    const char *pa = h->data + a * (int64_t)h->esz, *pb = h->data + b * (int64_t)h->esz;
    if (h->integral) {
        int64_t x = ddpl_load_i64(pa, h->dt), y = ddpl_load_i64(pb, h->dt);
        return (x > y) - (x < y);
    }
    double x = ddpl_load_f64(pa, h->dt), y = ddpl_load_f64(pb, h->dt);
    if (x != x || y != y) return (x != x) - (y != y);
    return (x > y) - (x < y);
}

/* ---- slices along a dim: rows of m elements, compared lexicographically ---- */
typedef struct {
    host_elems h;
    int64_t m;
} rows;

static int row_cmp(const rows *r, int64_t a, int64_t b)
{
    for (int64_t j = 0; j < r->m; j++) {
        int c = elem_cmp(&r->h, a * r->m + j, b * r->m + j);
        if (c) return c;
    }
    return 0;
}

static bool row_eq(const rows *r, int64_t a, int64_t b)
{
    for (int64_t j = 0; j < r->m; j++)
        if (!elem_eq(&r->h, a * r->m + j, b * r->m + j)) return false;
    return true;
}

/* Stable merge sort of the row numbers ix[0..n) (tmp: scratch of n). */
static void sort_rows(const rows *r, int64_t *ix, int64_t *tmp, int64_t n)
{
    if (n < 2) return;
    int64_t h = n / 2;
    sort_rows(r, ix, tmp, h);
    sort_rows(r, ix + h, tmp, n - h);
    int64_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = row_cmp(r, ix[j], ix[i]) < 0 ? ix[j++] : ix[i++];
    while (i < h) tmp[k++] = ix[i++];
    while (j < n) tmp[k++] = ix[j++];
    memcpy(ix, tmp, (size_t)n * sizeof *ix);
}

/* A new int64 tensor on dev holding vals[0..n) (shape ndim/sizes). */
static ddpl_tensor *i64_tensor(const int64_t *vals, int ndim, const int64_t *sizes, ddpl_device dev)
{
    ddpl_tensor *t = ddpl_tensor_new(ndim, sizes, DDPL_INT64, dev);
    int64_t n = ddpl_numel(ndim, sizes);
    if (t && n &&
        ddpl_device_copy(ddpl_data_ptr(t), dev, vals, ddpl_cpu(), (size_t)n * sizeof *vals) < 0) {
        ddpl_tensor_release(t);
        return NULL;
    }
    return t;
}

/* Groups the n items of order[] (sorted row or element numbers) into runs of equal ones:
 * first[g] the first item of group g, counts[g] its size, inverse[order[j]] = group of j.
 * Returns the number of groups. */
static int64_t group_runs(const int64_t *order, int64_t n,
                          bool (*eq)(const void *, int64_t, int64_t), const void *ctx,
                          int64_t *first, int64_t *counts, int64_t *inverse)
{
    int64_t g = -1;
    for (int64_t j = 0; j < n; j++) {
        if (j == 0 || !eq(ctx, order[j - 1], order[j])) {
            first[++g] = order[j];
            counts[g] = 0;
        }
        counts[g]++;
        inverse[order[j]] = g;
    }
    return g + 1;
}

static bool eq_rows(const void *ctx, int64_t a, int64_t b)
{
    return row_eq(ctx, a, b);
}

/* A CPU int64 tensor of shape (ndim, sizes) for the host to fill, or NULL when not wanted
 * (*failed set when wanted and not made). */
static ddpl_tensor *host_i64(bool wanted, int ndim, const int64_t *sizes, bool *failed)
{
    if (!wanted) return NULL;
    ddpl_tensor *t = ddpl_tensor_new(ndim, sizes, DDPL_INT64, ddpl_cpu());
    if (!t) *failed = true;
    return t;
}

/* *t moved to dev (unchanged on the CPU); false when the copy failed. */
static bool to_device(ddpl_tensor **t, ddpl_device dev)
{
    if (!*t) return true;
    ddpl_tensor *d = ddpl_to(*t, DDPL_INT64, dev);
    ddpl_tensor_release(*t);
    *t = d;
    return d != NULL;
}

/* ---- integers of a narrow range on the CPU: a histogram instead of a sort ---- */

/* The elements of a contiguous integral tensor as int64 (one typed loop per dtype). */
#define INT_CASES(X)                                                                               \
    X(DDPL_INT64, int64_t)                                                                         \
    X(DDPL_INT32, int32_t)                                                                         \
    X(DDPL_INT16, int16_t) X(DDPL_INT8, int8_t) X(DDPL_UINT8, uint8_t) X(DDPL_BOOL, uint8_t)

/* min and max of the n elements at p; false for a dtype without a case here */
static bool int_range(const char *p, ddpl_dtype dt, int64_t n, int64_t *mn, int64_t *mx)
{
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    switch (dt) {
#define RANGE_CASE(DT, T)                                                                          \
    case DT:                                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                          \
            int64_t v = ((const T *)p)[i];                                                         \
            lo = v < lo ? v : lo;                                                                  \
            hi = v > hi ? v : hi;                                                                  \
        }                                                                                          \
        break;
        INT_CASES(RANGE_CASE)
#undef RANGE_CASE
    default:
        return false;
    }
    *mn = lo;
    *mx = hi;
    return true;
}

/* hist[v - mn] += 1 for each element (add 1), or inverse[i] = hist[v - mn] (add 0: hist holds
 * each value's group by then) */
static void int_bins(const char *p, ddpl_dtype dt, int64_t n, int64_t mn, int64_t *hist,
                     int64_t *inverse)
{
    switch (dt) {
#define BINS_CASE(DT, T)                                                                           \
    case DT:                                                                                       \
        if (inverse)                                                                               \
            for (int64_t i = 0; i < n; i++) inverse[i] = hist[((const T *)p)[i] - mn];             \
        else                                                                                       \
            for (int64_t i = 0; i < n; i++) hist[((const T *)p)[i] - mn]++;                        \
        break;
        INT_CASES(BINS_CASE)
#undef BINS_CASE
    default:
        break;
    }
}

/* Integral x on the CPU whose values span at most about 2n: a histogram over [min, max] gives
 * the distinct values in ascending order, their counts and, through each value's group number,
 * the inverse, in O(n + range) with no sort; the results are the sorting path's exactly (the
 * values are integers). 1M int64 in [0, 100000): ~3 ms against ~25 by sorting (PyTorch 1.13
 * sorts too: 17-22 ms). Returns 1 when done, 0 when x does not qualify, -1 on error. */
static int unique_counting(ddpl_tensor *x, ddpl_tensor **out, ddpl_tensor **inverse,
                           ddpl_tensor **counts)
{
    ddpl_dtype dt = (ddpl_dtype)x->dtype;
    int64_t n = ddpl_tensor_numel(x), mn, mx;
    if (x->device.type != DDPL_CPU || !ddpl_dtype_is_integral(dt) || n == 0) return 0;
    ddpl_tensor *c = ddpl_contiguous(x);
    if (!c) return -1;
    const char *p = ddpl_data_ptr(c);
    /* the range as unsigned: max - min of int64 may not fit a signed int64 */
    if (!int_range(p, dt, n, &mn, &mx) || (uint64_t)mx - (uint64_t)mn >= (uint64_t)(2 * n + 1024)) {
        ddpl_tensor_release(c);
        return 0;
    }
    int64_t range = mx - mn + 1, ng = 0;
    int64_t *hist = calloc((size_t)range, sizeof *hist);
    if (!hist) {
        ddpl_tensor_release(c);
        return 0; /* the sort needs no such buffer */
    }
    int_bins(p, dt, n, mn, hist, NULL);
    for (int64_t b = 0; b < range; b++) ng += hist[b] != 0;
    *out = ddpl_tensor_new(1, &ng, dt, ddpl_cpu());
    if (counts) *counts = ddpl_tensor_new(1, &ng, DDPL_INT64, ddpl_cpu());
    if (inverse) *inverse = ddpl_tensor_new(x->ndim, x->sizes, DDPL_INT64, ddpl_cpu());
    int rc = -1;
    if (*out && (!counts || *counts) && (!inverse || *inverse)) {
        char *o = ddpl_data_ptr(*out);
        int64_t *cn = counts ? (int64_t *)ddpl_data_ptr(*counts) : NULL, g = 0;
        for (int64_t b = 0; b < range; b++) {
            if (!hist[b]) continue;
            int64_t v = mn + b;
            switch (dt) {
#define STORE_CASE(DT, T)                                                                          \
    case DT:                                                                                       \
        ((T *)o)[g] = (T)v;                                                                        \
        break;
                INT_CASES(STORE_CASE)
#undef STORE_CASE
            default:
                break;
            }
            if (cn) cn[g] = hist[b];
            hist[b] = g++; /* from here on, the value's group */
        }
        if (inverse) int_bins(p, dt, n, mn, hist, (int64_t *)ddpl_data_ptr(*inverse));
        rc = 1;
    }
    free(hist);
    ddpl_tensor_release(c);
    return rc; /* on -1 ddpl_unique releases what was made */
}

/* The flattened case: sort on x's device, then two passes over the sorted values on the host
 * (count the groups, then fill exactly sized results), so only what was asked for is made. */
static int unique_flat(ddpl_tensor *x, ddpl_tensor **out, ddpl_tensor **inverse,
                       ddpl_tensor **counts)
{
    int64_t n = ddpl_tensor_numel(x);
    ddpl_tensor *flat = ddpl_reshape(x, 1, &n), *sv = NULL, *si = NULL;
    if (!flat || ddpl_sort(flat, 0, false, &sv, &si) < 0) {
        ddpl_tensor_release(flat);
        return -1;
    }
    ddpl_tensor_release(flat);
    /* sv and si are fresh contiguous tensors: on the CPU they are read in place */
    bool on_host = x->device.type == DDPL_CPU;
    char *vals = on_host ? ddpl_data_ptr(sv) : ddpl_tensor_host_copy(sv);
    int64_t *order = !vals || !inverse ? NULL
                     : on_host         ? (int64_t *)ddpl_data_ptr(si)
                                       : ddpl_tensor_host_copy(si);
    int rc = -1;
    if (vals && (order || !inverse)) {
        host_elems h = {vals, (ddpl_dtype)x->dtype, ddpl_dtype_size((ddpl_dtype)x->dtype),
                        ddpl_dtype_is_integral((ddpl_dtype)x->dtype)};
        int64_t ng = n > 0;
        for (int64_t j = 1; j < n; j++) ng += !elem_eq(&h, j - 1, j);
        bool failed = false;
        ddpl_tensor *fi = host_i64(true, 1, &ng, &failed); /* first sorted position of a group */
        ddpl_tensor *ct = host_i64(counts != NULL, 1, &ng, &failed);
        ddpl_tensor *iv = host_i64(inverse != NULL, x->ndim, x->sizes, &failed);
        if (!failed) {
            int64_t *f = (int64_t *)ddpl_data_ptr(fi), g = -1;
            int64_t *c = ct ? (int64_t *)ddpl_data_ptr(ct) : NULL;
            int64_t *v = iv ? (int64_t *)ddpl_data_ptr(iv) : NULL;
            for (int64_t j = 0; j < n; j++) {
                if (j == 0 || !elem_eq(&h, j - 1, j)) {
                    f[++g] = j;
                    if (c) c[g] = 0;
                }
                if (c) c[g]++;
                if (v) v[order[j]] = g; /* x's element order[j] went to group g */
            }
            /* the unique values: the first sorted element of each group, picked on the device */
            if (to_device(&fi, x->device) && (*out = ddpl_index_select(sv, 0, fi)) &&
                to_device(&iv, x->device) && to_device(&ct, x->device)) {
                if (inverse) *inverse = iv;
                if (counts) *counts = ct;
                iv = ct = NULL;
                rc = 0;
            }
        }
        ddpl_tensor_release(fi);
        ddpl_tensor_release(ct);
        ddpl_tensor_release(iv);
    }
    if (!on_host) {
        free(order);
        free(vals);
    }
    ddpl_tensor_release(sv);
    ddpl_tensor_release(si);
    return rc;
}

/* Slices along dim d: rows of the moved-to-front tensor, sorted on the host. */
static int unique_dim(ddpl_tensor *x, int d, ddpl_tensor **out, ddpl_tensor **inverse,
                      ddpl_tensor **counts)
{
    int64_t n = x->sizes[d], m = n ? ddpl_tensor_numel(x) / n : 0;
    for (int k = 0; k < x->ndim; k++)
        if (k != d && x->sizes[k] == 0)
            return ddpl_error("unique: dimension %d has size 0 and is not the selected dim %d, so "
                              "unique cannot be applied",
                              k, d);
    ddpl_tensor *front = ddpl_transpose(x, 0, d); /* row r = the slice at index r of dim d */
    char *vals = front ? ddpl_tensor_host_copy(front) : NULL;
    ddpl_tensor_release(front);
    int64_t *buf = vals ? ddpl_malloc_array(n ? n : 1, 5 * sizeof(int64_t)) : NULL;
    int rc = -1;
    if (buf) {
        /* transpose(0, d) keeps the other dims in order, so a row is the slice in row-major
         * order, as PyTorch compares them */
        rows r = {{vals, (ddpl_dtype)x->dtype, ddpl_dtype_size((ddpl_dtype)x->dtype),
                   ddpl_dtype_is_integral((ddpl_dtype)x->dtype)},
                  m};
        int64_t *ix = buf, *tmp = buf + n, *first = buf + 2 * n, *cnt = buf + 3 * n,
                *inv = buf + 4 * n;
        for (int64_t i = 0; i < n; i++) ix[i] = i;
        sort_rows(&r, ix, tmp, n);
        int64_t ng = group_runs(ix, n, eq_rows, &r, first, cnt, inv);
        ddpl_tensor *fi = i64_tensor(first, 1, &ng, x->device);
        *out = fi ? ddpl_index_select(x, d, fi) : NULL;
        ddpl_tensor_release(fi);
        rc = *out ? 0 : -1;
        if (rc == 0 && inverse) {
            *inverse = i64_tensor(inv, 1, &n, x->device);
            rc = *inverse ? 0 : -1;
        }
        if (rc == 0 && counts) {
            *counts = i64_tensor(cnt, 1, &ng, x->device);
            rc = *counts ? 0 : -1;
        }
    }
    free(buf);
    free(vals);
    return rc;
}

int ddpl_unique(ddpl_tensor *x, bool has_dim, int dim, ddpl_tensor **out, ddpl_tensor **inverse,
                ddpl_tensor **counts)
{
    *out = NULL;
    if (inverse) *inverse = NULL;
    if (counts) *counts = NULL;
    int d = 0;
    if (has_dim) {
        if (x->ndim == 0)
            return ddpl_error("unique: dim %d given for a 0-dim tensor (it has no dimensions)",
                              dim);
        d = ddpl_wrap_dim("unique", dim, x->ndim);
        if (d < 0) return -1;
    }
    bool prev = ddpl_set_grad_enabled(false); /* not differentiable, as in PyTorch */
    int rc;
    if (has_dim)
        rc = unique_dim(x, d, out, inverse, counts);
    else if ((rc = unique_counting(x, out, inverse, counts)) == 0)
        rc = unique_flat(x, out, inverse, counts);
    else if (rc > 0)
        rc = 0;
    ddpl_set_grad_enabled(prev);
    if (rc < 0) {
        ddpl_tensor_release(*out);
        *out = NULL;
        if (inverse) {
            ddpl_tensor_release(*inverse);
            *inverse = NULL;
        }
        if (counts) {
            ddpl_tensor_release(*counts);
            *counts = NULL;
        }
    }
    return rc;
}
