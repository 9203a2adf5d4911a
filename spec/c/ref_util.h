/* spec/c/ref_util.h: helpers for the C tests that compare ops with naive reference loops.
 * defines: t_from, t_rand, t_vals, max_diff, CHECK_ERROR, CHECK_VALUES, release_all. */
#ifndef DDPL_SPEC_REF_UTIL_H
#define DDPL_SPEC_REF_UTIL_H

#include <string.h>

#include "check.h"

/* A tensor of dtype dt holding the doubles v (row-major). */
static inline ddpl_tensor *t_from(int ndim, const int64_t *sizes, const double *v, ddpl_dtype dt)
{
    ddpl_tensor *d = ddpl_from_data(ndim, sizes, DDPL_FLOAT64, v, ddpl_cpu());
    ddpl_tensor *t = ddpl_to(d, dt, ddpl_cpu());
    ddpl_tensor_release(d);
    return t;
}

/* A float tensor of dtype dt with standard normal values. */
static inline ddpl_tensor *t_rand(int ndim, const int64_t *sizes, ddpl_dtype dt)
{
    return ddpl_randn(ndim, sizes, dt, ddpl_cpu());
}

/* The values of t as doubles (malloc'd; caller frees). */
static inline double *t_vals(const ddpl_tensor *t)
{
    int64_t n = ddpl_tensor_numel(t);
    double *v = calloc((size_t)(n ? n : 1), sizeof *v);
    if (ddpl_tensor_to_doubles(t, v) < 0) {
        free(v);
        return NULL;
    }
    return v;
}

/* Largest |a[i] - b[i]| / (1 + |b[i]|) (NaN positions must agree). */
static inline double max_diff(const double *a, const double *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) {
            if (isnan(a[i]) != isnan(b[i])) return INFINITY;
            continue;
        }
        if (a[i] == b[i]) continue; /* equal infinities */
        double d = fabs(a[i] - b[i]) / (1 + fabs(b[i]));
        if (!(d <= m)) m = d;
    }
    return m;
}

/* t's values equal ref[numel] within tol (relative to 1 + |ref|); t NULL fails. */
#define CHECK_VALUES(t, ref, tol)                                                                  \
    do {                                                                                           \
        ddpl_tensor *t_ = (t);                                                                     \
        double *v_ = t_ ? t_vals(t_) : NULL;                                                       \
        double d_ = v_ ? max_diff(v_, (ref), ddpl_tensor_numel(t_)) : INFINITY;                    \
        if (!(d_ <= (tol))) fprintf(stderr, "  max relative difference %g\n", d_);                 \
        CHECK(d_ <= (tol));                                                                        \
        free(v_);                                                                                  \
    } while (0)

/* expr returns NULL (or -1) and the error message starts with prefix (the op's name) and
 * contains `needle` (may be ""). */
#define CHECK_ERROR(expr_is_failure, prefix, needle)                                               \
    do {                                                                                           \
        bool failed_ = (expr_is_failure);                                                          \
        CHECK(failed_);                                                                            \
        const char *m_ = ddpl_last_error();                                                        \
        bool named_ = strncmp(m_, prefix, strlen(prefix)) == 0 && strstr(m_, needle) != NULL;      \
        if (!named_) fprintf(stderr, "  unexpected error message: %s\n", m_);                      \
        CHECK(named_);                                                                             \
    } while (0)

static inline void release_all(int n, ddpl_tensor **ts)
{
    for (int i = 0; i < n; i++) ddpl_tensor_release(ts[i]);
}
#define RELEASE(...)                                                                               \
    release_all((int)(sizeof((ddpl_tensor *[]){__VA_ARGS__}) / sizeof(ddpl_tensor *)),             \
                (ddpl_tensor *[]){__VA_ARGS__})

#endif
