/* ops/creation.c: tensors made from nothing: empty, zeros, ones, full, from data, ranges,
 * identity and random tensors.
 * defines: ddpl_empty, ddpl_zeros, ddpl_ones, ddpl_full, ddpl_from_data, ddpl_scalar,
 *          ddpl_wrapped_number, ddpl_arange, ddpl_arange_int, ddpl_eye, ddpl_linspace,
 *          ddpl_logspace, ddpl_rand, ddpl_randn, ddpl_randint, ddpl_randperm. */
#include <math.h>

#include "core/alloc.h"
#include "core/philox.h"
#include "op_util.h"

ddpl_tensor *ddpl_empty(int ndim, const int64_t *sizes, ddpl_dtype dt, ddpl_device dev)
{
    return ddpl_tensor_new(ndim, sizes, dt, dev);
}

ddpl_tensor *ddpl_full(int ndim, const int64_t *sizes, double value, ddpl_dtype dt, ddpl_device dev)
{
    ddpl_tensor *t = ddpl_tensor_new(ndim, sizes, dt, dev);
    if (!t) return NULL;
    ddpl_fill_params p = {value};
    if (ddpl_run_kernel(DDPL_OP_FILL, dev, &t, NULL, &p) < 0) {
        ddpl_tensor_release(t);
        return NULL;
    }
    return t;
}

ddpl_tensor *ddpl_zeros(int ndim, const int64_t *sizes, ddpl_dtype dt, ddpl_device dev)
{
    return ddpl_full(ndim, sizes, 0.0, dt, dev);
}

ddpl_tensor *ddpl_ones(int ndim, const int64_t *sizes, ddpl_dtype dt, ddpl_device dev)
{
    return ddpl_full(ndim, sizes, 1.0, dt, dev);
}

ddpl_tensor *ddpl_from_data(int ndim, const int64_t *sizes, ddpl_dtype dt, const void *data,
                            ddpl_device dev)
{
    ddpl_tensor *t = ddpl_tensor_new(ndim, sizes, dt, dev);
    if (!t) return NULL;
    if (ddpl_device_copy(t->storage->data, dev, data, ddpl_cpu(), t->storage->nbytes) < 0) {
        ddpl_tensor_release(t);
        return NULL;
    }
    return t;
}

ddpl_tensor *ddpl_scalar(double value, ddpl_dtype dt, ddpl_device dev)
{
    return ddpl_full(0, NULL, value, dt, dev);
}

/* Built directly: this runs for every number in a Lua expression such as x * 2. */
ddpl_tensor *ddpl_wrapped_number(double value, bool integral)
{
    ddpl_dtype dt = integral ? DDPL_INT64 : DDPL_FLOAT64;
    ddpl_tensor *t = ddpl_tensor_new(0, NULL, dt, ddpl_cpu());
    if (!t) return NULL;
    if (integral)
        *(int64_t *)t->storage->data = ddpl_f64_to_i64(value); /* maxinteger is 2^63 as a double */
    else
        *(double *)t->storage->data = value;
    t->wrapped_number = true;
    return t;
}

ddpl_tensor *ddpl_arange(double start, double stop, double step, ddpl_dtype dt, ddpl_device dev)
{
    if (step == 0 || !isfinite(start) || !isfinite(stop) || !isfinite(step))
        return ddpl_error("arange: step must be non-zero and the bounds finite (start %g, stop "
                          "%g, step %g)",
                          start, stop, step),
               NULL;
    if ((step > 0 && start > stop) || (step < 0 && start < stop))
        return ddpl_error("arange: upper bound and step have inconsistent signs (start %g, "
                          "stop %g, step %g)",
                          start, stop, step),
               NULL;
    /* the count in double, checked before it becomes an integer (a cast of a double past int64
     * is undefined) */
    double count = ceil((stop - start) / step);
    if (!(count <= (double)DDPL_MAX_NUMEL))
        return ddpl_error("arange: the range [%g, %g) with step %g has %g elements, more than the "
                          "limit of 2^62",
                          start, stop, step, count),
               NULL;
    int64_t n = count > 0 ? (int64_t)count : 0;
    ddpl_tensor *t = ddpl_tensor_new(1, &n, dt, dev);
    if (!t) return NULL;
    ddpl_arange_params p = {start, step};
    if (ddpl_run_kernel(DDPL_OP_ARANGE, dev, &t, NULL, &p) < 0) {
        ddpl_tensor_release(t);
        return NULL;
    }
    return t;
}

ddpl_tensor *ddpl_arange_int(int64_t start, int64_t stop, int64_t step, ddpl_dtype dt,
                             ddpl_device dev)
{
    if (ddpl_dtype_is_floating(dt))
        return ddpl_arange((double)start, (double)stop, (double)step, dt, dev);
    if (step == 0 || (step > 0 && start > stop) || (step < 0 && start < stop))
        return ddpl_error("arange: step must be non-zero and agree with the bounds' order (start "
                          "%lld, stop %lld, step %lld)",
                          (long long)start, (long long)stop, (long long)step),
               NULL;
    /* exact: ceil((stop - start) / step) in 128 bits, where neither the difference nor the
     * rounding can overflow */
    __int128 diff = (__int128)stop - start, st = step;
    __int128 count = diff / st + (diff % st != 0);
    if (count > DDPL_MAX_NUMEL)
        return ddpl_error("arange: the range [%lld, %lld) with step %lld has more elements than "
                          "the limit of 2^62",
                          (long long)start, (long long)stop, (long long)step),
               NULL;
    int64_t n = (int64_t)count;
    ddpl_tensor *t = ddpl_tensor_new(1, &n, dt, ddpl_cpu());
    if (!t) return NULL;
    size_t esz = ddpl_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) /* start + i*step lies in [start, stop): it fits */
        ddpl_store_i64((char *)t->storage->data + i * (int64_t)esz, dt,
                       (int64_t)(start + (__int128)i * step));
    if (dev.type == DDPL_CPU) return t;
    ddpl_tensor *moved = ddpl_to(t, dt, dev);
    ddpl_tensor_release(t);
    return moved;
}

ddpl_tensor *ddpl_eye(int64_t n, int64_t m, ddpl_dtype dt, ddpl_device dev)
{
    if (n < 0 || m < 0)
        return ddpl_error("eye: sizes must be non-negative, got %lld and %lld", (long long)n,
                          (long long)m),
               NULL;
    int64_t sizes[2] = {n, m};
    ddpl_tensor *t = ddpl_zeros(2, sizes, dt, dev);
    if (!t) return NULL;
    int64_t k = n < m ? n : m, stride = m + 1;
    ddpl_tensor *diag = ddpl_tensor_alias(t, 1, &k, &stride, 0);
    ddpl_fill_params p = {1.0};
    int rc = ddpl_run_kernel(DDPL_OP_FILL, dev, &diag, NULL, &p);
    ddpl_tensor_release(diag);
    if (rc < 0) {
        ddpl_tensor_release(t);
        return NULL;
    }
    return t;
}

/* steps values from start to end, as PyTorch: the first half counts up from start and the
 * second down from end (start + i step, end - (steps - 1 - i) step), so both ends are exact.
 * Integer dtypes truncate the ends, compute in float64 and truncate the values, as PyTorch's. */
ddpl_tensor *ddpl_linspace(double start, double end, int64_t steps, ddpl_dtype dt, ddpl_device dev)
{
    if (steps < 0 || steps > DDPL_MAX_NUMEL)
        return ddpl_error("linspace: number of steps must be non-negative (and at most 2^62), got "
                          "%lld",
                          (long long)steps),
               NULL;
    ddpl_dtype work = ddpl_dtype_is_floating(dt) ? dt : DDPL_FLOAT64;
    if (work != dt) { /* PyTorch converts the ends to the integer dtype first */
        start = trunc(start);
        end = trunc(end);
    }
    ddpl_tensor *t = ddpl_tensor_new(1, &steps, work, dev);
    if (!t) return NULL;
    double step = steps > 1 ? (end - start) / (double)(steps - 1) : 0;
    int64_t half = steps / 2, one = 1;
    int64_t lens[2] = {steps == 1 ? 1 : half, steps == 1 ? 0 : steps - half};
    ddpl_arange_params p[2] = {{start, step}, {end - step * (double)(steps - 1 - half), step}};
    int rc = 0;
    for (int k = 0; k < 2 && rc == 0; k++) {
        if (lens[k] == 0) continue;
        ddpl_tensor *part = ddpl_tensor_alias(t, 1, &lens[k], &one, k == 0 ? 0 : half);
        rc = part ? ddpl_run_kernel(DDPL_OP_ARANGE, dev, &part, NULL, &p[k]) : -1;
        ddpl_tensor_release(part);
    }
    if (rc < 0 || work == dt) {
        if (rc < 0) ddpl_tensor_release(t);
        return rc < 0 ? NULL : t;
    }
    ddpl_tensor *converted = ddpl_to(t, dt, dev);
    ddpl_tensor_release(t);
    return converted;
}

/* base ^ linspace(start, end, steps), computed in float64 for integer dtypes */
ddpl_tensor *ddpl_logspace(double start, double end, int64_t steps, double base, ddpl_dtype dt,
                           ddpl_device dev)
{
    ddpl_dtype work = ddpl_dtype_is_floating(dt) ? dt : DDPL_FLOAT64;
    ddpl_tensor *exponent = ddpl_linspace(start, end, steps, work, dev);
    ddpl_tensor *b = exponent ? ddpl_wrapped_number(base, false) : NULL;
    ddpl_tensor *r = b ? ddpl_pow(b, exponent) : NULL;
    ddpl_tensor_release(exponent);
    ddpl_tensor_release(b);
    if (!r || work == dt) return r;
    ddpl_tensor *converted = ddpl_to(r, dt, dev);
    ddpl_tensor_release(r);
    return converted;
}

/* Fills a contiguous tensor from the process generator. */
static int fill_random(ddpl_tensor *t, bool normal, double a, double b)
{
    int64_t n = ddpl_tensor_numel(t);
    ddpl_philox_state s = ddpl_rng_reserve((uint64_t)n * 2); /* two values per element at most */
    ddpl_random_params p = {s.seed, s.offset, a, b};
    return ddpl_run_kernel(normal ? DDPL_OP_NORMAL : DDPL_OP_UNIFORM, t->device, &t, NULL, &p);
}

static ddpl_tensor *random_tensor(const char *op, int ndim, const int64_t *sizes, ddpl_dtype dt,
                                  ddpl_device dev, bool normal)
{
    if (!ddpl_dtype_is_floating(dt))
        return ddpl_error("%s: expected a floating-point dtype, got %s", op, ddpl_dtype_name(dt)),
               NULL;
    ddpl_tensor *t = ddpl_tensor_new(ndim, sizes, dt, dev);
    if (!t) return NULL;
    if (fill_random(t, normal, normal ? 0.0 : 0.0, 1.0) < 0) {
        ddpl_tensor_release(t);
        return NULL;
    }
    return t;
}

ddpl_tensor *ddpl_rand(int ndim, const int64_t *sizes, ddpl_dtype dt, ddpl_device dev)
{
    return random_tensor("rand", ndim, sizes, dt, dev, false);
}

ddpl_tensor *ddpl_randn(int ndim, const int64_t *sizes, ddpl_dtype dt, ddpl_device dev)
{
    return random_tensor("randn", ndim, sizes, dt, dev, true);
}

ddpl_tensor *ddpl_randint(int64_t low, int64_t high, int ndim, const int64_t *sizes, ddpl_dtype dt,
                          ddpl_device dev)
{
    if (high <= low)
        return ddpl_error("randint: expected low < high, got low %lld and high %lld",
                          (long long)low, (long long)high),
               NULL;
    int64_t lo, hi;
    if (ddpl_dtype_int_range(dt, &lo, &hi) && (low < lo || high - 1 > hi))
        return ddpl_error("randint: the range [%lld, %lld) does not fit dtype %s ([%lld, %lld])",
                          (long long)low, (long long)high, ddpl_dtype_name(dt), (long long)lo,
                          (long long)hi),
               NULL;
    /* draw uniform doubles on the host, then floor into [low, high) */
    ddpl_tensor *u = ddpl_tensor_new(ndim, sizes, DDPL_FLOAT64, ddpl_cpu());
    if (!u) return NULL;
    if (fill_random(u, false, 0.0, 1.0) < 0) {
        ddpl_tensor_release(u);
        return NULL;
    }
    ddpl_tensor *r = ddpl_tensor_new(ndim, sizes, dt, ddpl_cpu());
    if (!r) {
        ddpl_tensor_release(u);
        return NULL;
    }
    int64_t n = ddpl_tensor_numel(u);
    const double *ud = (const double *)u->storage->data;
    size_t esz = ddpl_dtype_size(dt);
    /* high - low may exceed int64 (randint(-2^62, 2^62)): the span is unsigned, and the offset
     * is computed in double and clamped before it becomes an integer */
    uint64_t span = (uint64_t)high - (uint64_t)low;
    for (int64_t i = 0; i < n; i++) {
        double x = floor(ud[i] * (double)span);
        uint64_t off = x < 18446744073709551616.0 ? (uint64_t)x : span - 1;
        if (off >= span) off = span - 1;
        ddpl_store_i64((char *)r->storage->data + i * esz, dt, (int64_t)((uint64_t)low + off));
    }
    ddpl_tensor_release(u);
    if (dev.type == DDPL_CPU) return r;
    ddpl_tensor *moved = ddpl_to(r, dt, dev);
    ddpl_tensor_release(r);
    return moved;
}

/* Fisher-Yates with the Philox stream: deterministic for a seed, any thread count. */
ddpl_tensor *ddpl_randperm(int64_t n, ddpl_device dev)
{
    if (n < 0) return ddpl_error("randperm: n must be non-negative, got %lld", (long long)n), NULL;
    ddpl_tensor *r = ddpl_tensor_new(1, &n, DDPL_INT64, ddpl_cpu());
    if (!r) return NULL;
    int64_t *d = (int64_t *)r->storage->data;
    for (int64_t i = 0; i < n; i++) d[i] = i;
    ddpl_philox_state s = ddpl_rng_reserve((uint64_t)(n > 0 ? n : 1) * 2);
    uint32_t block[4];
    for (int64_t i = n - 1; i > 0; i--) {
        uint64_t k = (uint64_t)(n - 1 - i);
        ddpl_philox4x32(s.seed, s.offset + k / 2, block);
        uint64_t x = ((uint64_t)block[(k % 2) * 2] << 32) | block[(k % 2) * 2 + 1];
        int64_t j = (int64_t)(x % (uint64_t)(i + 1));
        int64_t tmp = d[i];
        d[i] = d[j];
        d[j] = tmp;
    }
    if (dev.type == DDPL_CPU) return r;
    ddpl_tensor *moved = ddpl_to(r, DDPL_INT64, dev);
    ddpl_tensor_release(r);
    return moved;
}
