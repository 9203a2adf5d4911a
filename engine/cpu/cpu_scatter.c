/* cpu/cpu_scatter.c: the CPU SCATTER kernel (issue 29): scatter, scatter_add, scatter_reduce,
 * index_copy and index_fill all end here (ops/scatter.c, ops/index_ops.c).
 * defines: cpu_scatter, cpu_nonzero (the flat positions of non-zero elements, ops/masked.c).
 *
 * out[p with dim = index[p]] = combine(that element, src[p]) for every position p of index
 * (src has index's rank and may be an expanded view, stride 0). Every index is checked before
 * anything is written (a long 1-D index into a small output checks as it goes and puts back a
 * copy of the output on a bad index), so a bad index leaves out untouched and the error names
 * the op, the value and the size it had to stay below. Runs serially: duplicate targets would race,
 * and the order of a plain scatter's duplicates must stay PyTorch's on the CPU (the last wins). The
 * walk keeps the last dim of index as a strided inner loop, typed per dtype; float16, bfloat16 and
 * bool go through double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "kernel_abi/kernel_params.h"

/* The geometry of one scatter, dims of index (a 0-dim index is one element of a 1-D shape). */
typedef struct {
    int nd, dim;
    int64_t sizes[DDPL_MAX_DIMS];
    int64_t is[DDPL_MAX_DIMS], ss[DDPL_MAX_DIMS], os[DDPL_MAX_DIMS]; /* element strides */
    int64_t odim_stride, bound;
    const int64_t *idx;
    char *o;
    const char *s;
} scatter_geom;

/* Calls BODY(ioff, soff, ooff, n): one inner run of n elements along the last dim, with the
 * element offsets of its first element (ooff leaves out dim, which the index supplies). */
#define SCATTER_WALK(g, BODY)                                                                      \
    do {                                                                                           \
        int64_t pos_[DDPL_MAX_DIMS] = {0}, n_ = (g)->sizes[(g)->nd - 1];                           \
        int64_t outer_ = ddpl_numel((g)->nd - 1, (g)->sizes);                                      \
        for (int64_t r_ = 0; r_ < outer_; r_++) {                                                  \
            int64_t ioff = 0, soff = 0, ooff = 0;                                                  \
            for (int d_ = 0; d_ < (g)->nd - 1; d_++) {                                             \
                ioff += pos_[d_] * (g)->is[d_];                                                    \
                soff += pos_[d_] * (g)->ss[d_];                                                    \
                ooff += pos_[d_] * (g)->os[d_];                                                    \
            }                                                                                      \
            BODY(ioff, soff, ooff, n_);                                                            \
            for (int d_ = (g)->nd - 2; d_ >= 0; d_--) {                                            \
                if (++pos_[d_] < (g)->sizes[d_]) break;                                            \
                pos_[d_] = 0;                                                                      \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* os holds 0 at dim, so ooff + i * os[last] + v * odim_stride addresses the target. */

/* combine(a, b) for each reduce, per C type; integers wrap (two's complement, as PyTorch). */
#define WRAP_ADD(T, a, b) ((T)((uint64_t)(int64_t)(a) + (uint64_t)(int64_t)(b)))
#define WRAP_MUL(T, a, b) ((T)((uint64_t)(int64_t)(a) * (uint64_t)(int64_t)(b)))

static inline double f_max(double a, double b)
{
    return isnan(b) ? b : (a < b ? b : a); /* a NaN a stays (a < b is false) */
}
static inline double f_min(double a, double b)
{
    return isnan(b) ? b : (a > b ? b : a);
}
static inline float f_maxf(float a, float b)
{
    return isnan(b) ? b : (a < b ? b : a);
}
static inline float f_minf(float a, float b)
{
    return isnan(b) ? b : (a > b ? b : a);
}

/* One typed kernel per (type, reduce): combine as an inline function, the inner loop over n
 * elements reaching it through a constant pointer (inlined) and the elem_t typedef. */
#define DEFINE_SCATTER(NAME, T, COMBINE)                                                           \
    static inline T NAME##_op(T a, T b)                                                            \
    {                                                                                              \
        (void)a;                                                                                   \
        return (COMBINE);                                                                          \
    }                                                                                              \
    static void NAME(const scatter_geom *g)                                                        \
    {                                                                                              \
        typedef T elem_t;                                                                          \
        T (*const op)(T, T) = NAME##_op;                                                           \
        T *o = (T *)g->o;                                                                          \
        const T *s = (const T *)g->s;                                                              \
        int64_t il = g->is[g->nd - 1], sl = g->ss[g->nd - 1], ol = g->os[g->nd - 1];               \
        int64_t od = g->odim_stride;                                                               \
        const int64_t *ix = g->idx;                                                                \
        SCATTER_WALK(g, INNER);                                                                    \
    }                                                                                              \
    /* A 1-D run (index and src stride 1) into a small output, the indices checked as they are     \
     * read: 64 at a time with an OR of unsigned compares (vectorised), then their 64 combines;    \
     * returns the position of the first bad index (the elements of its block before it are not    \
     * combined, earlier blocks are), or -1 */                                                     \
    static int64_t NAME##_checked(const scatter_geom *g)                                           \
    {                                                                                              \
        T *o = (T *)g->o;                                                                          \
        const T *s = (const T *)g->s;                                                              \
        const int64_t *ir = g->idx;                                                                \
        int64_t n = g->sizes[0], od = g->odim_stride, i = 0;                                       \
        uint64_t b = (uint64_t)g->bound;                                                           \
        for (; i + 64 <= n; i += 64) {                                                             \
            uint64_t any = 0;                                                                      \
            for (int j = 0; j < 64; j++) any |= (uint64_t)ir[i + j] >= b;                          \
            if (any) break;                                                                        \
            for (int j = 0; j < 64; j += 4) {                                                      \
                int64_t t0 = ir[i + j] * od, t1 = ir[i + j + 1] * od, t2 = ir[i + j + 2] * od,     \
                        t3 = ir[i + j + 3] * od;                                                   \
                T v0 = s[i + j], v1 = s[i + j + 1], v2 = s[i + j + 2], v3 = s[i + j + 3];          \
                o[t0] = NAME##_op(o[t0], v0);                                                      \
                o[t1] = NAME##_op(o[t1], v1);                                                      \
                o[t2] = NAME##_op(o[t2], v2);                                                      \
                o[t3] = NAME##_op(o[t3], v3);                                                      \
            }                                                                                      \
        }                                                                                          \
        for (; i < n; i++) {                                                                       \
            if ((uint64_t)ir[i] >= b) return i;                                                    \
            o[ir[i] * od] = NAME##_op(o[ir[i] * od], s[i]);                                        \
        }                                                                                          \
        return -1;                                                                                 \
    }
/* An index constant along the run (stride 0: an expanded 1-D index, as index_copy and a
 * scatter of whole rows make) picks one target row, combined with src's run like a pointwise
 * op; contiguous rows vectorise. */
#define INNER(ioff, soff, ooff, n)                                                                 \
    if (il == 0) {                                                                                 \
        elem_t *row = o + (ooff) + ix[(ioff)] * od;                                                \
        const elem_t *sr = s + (soff);                                                             \
        if (ol == 1 && sl == 1)                                                                    \
            for (int64_t i = 0; i < (n); i++) row[i] = op(row[i], sr[i]);                          \
        else                                                                                       \
            for (int64_t i = 0; i < (n); i++) row[i * ol] = op(row[i * ol], sr[i * sl]);           \
    } else if (il == 1 && sl == 1 && ol == 0) {                                                    \
        /* a 1-D scatter (bincount-like: scatter_add of values into bins), plain addressing; the   \
         * indices and values of four elements are loaded before their four read-modify-writes,    \
         * which stay in order (duplicates combine as in the plain loop): 0.75x the time on 1M     \
         * values into 1000 bins */                                                                \
        elem_t *ob = o + (ooff);                                                                   \
        const int64_t *ir = ix + (ioff);                                                           \
        const elem_t *sr = s + (soff);                                                             \
        int64_t i = 0;                                                                             \
        for (; i + 4 <= (n); i += 4) {                                                             \
            int64_t t0 = ir[i] * od, t1 = ir[i + 1] * od, t2 = ir[i + 2] * od,                     \
                    t3 = ir[i + 3] * od;                                                           \
            elem_t v0 = sr[i], v1 = sr[i + 1], v2 = sr[i + 2], v3 = sr[i + 3];                     \
            ob[t0] = op(ob[t0], v0);                                                               \
            ob[t1] = op(ob[t1], v1);                                                               \
            ob[t2] = op(ob[t2], v2);                                                               \
            ob[t3] = op(ob[t3], v3);                                                               \
        }                                                                                          \
        for (; i < (n); i++) ob[ir[i] * od] = op(ob[ir[i] * od], sr[i]);                           \
    } else {                                                                                       \
        for (int64_t i = 0; i < (n); i++) {                                                        \
            elem_t *t = o + (ooff) + i * ol + ix[(ioff) + i * il] * od;                            \
            *t = op(*t, s[(soff) + i * sl]);                                                       \
        }                                                                                          \
    }

#define DEFINE_ALL(SUF, T, ADD, MUL, MAX, MIN)                                                     \
    DEFINE_SCATTER(assign_##SUF, T, b)                                                             \
    DEFINE_SCATTER(sum_##SUF, T, ADD)                                                              \
    DEFINE_SCATTER(prod_##SUF, T, MUL)                                                             \
    DEFINE_SCATTER(amax_##SUF, T, MAX)                                                             \
    DEFINE_SCATTER(amin_##SUF, T, MIN)                                                             \
    static void (*const fns_##SUF[])(const scatter_geom *) = {assign_##SUF, sum_##SUF, prod_##SUF, \
                                                              amax_##SUF, amin_##SUF};             \
    static int64_t (*const checked_##SUF[])(const scatter_geom *) = {                              \
        assign_##SUF##_checked, sum_##SUF##_checked, prod_##SUF##_checked, amax_##SUF##_checked,   \
        amin_##SUF##_checked};

DEFINE_ALL(f32, float, a + b, a *b, f_maxf(a, b), f_minf(a, b))
DEFINE_ALL(f64, double, a + b, a *b, f_max(a, b), f_min(a, b))
DEFINE_ALL(i64, int64_t, WRAP_ADD(int64_t, a, b), WRAP_MUL(int64_t, a, b),
           a<b ? b : a, a> b ? b : a)
DEFINE_ALL(i32, int32_t, WRAP_ADD(int32_t, a, b), WRAP_MUL(int32_t, a, b),
           a<b ? b : a, a> b ? b : a)
DEFINE_ALL(i16, int16_t, WRAP_ADD(int16_t, a, b), WRAP_MUL(int16_t, a, b),
           a<b ? b : a, a> b ? b : a)
DEFINE_ALL(i8, int8_t, WRAP_ADD(int8_t, a, b), WRAP_MUL(int8_t, a, b), a<b ? b : a, a> b ? b : a)
DEFINE_ALL(u8, uint8_t, (uint8_t)(a + b), (uint8_t)(a *b), a<b ? b : a, a> b ? b : a)

/* float16, bfloat16 and bool: through double (bool: add is or, prod is and, as PyTorch). */
static void scatter_generic(const scatter_geom *g, ddpl_dtype dt, int reduce)
{
    int64_t esz = (int64_t)ddpl_dtype_size(dt);
    int64_t il = g->is[g->nd - 1], sl = g->ss[g->nd - 1], ol = g->os[g->nd - 1];
    bool is_bool = dt == DDPL_BOOL;
#define GENERIC_INNER(ioff, soff, ooff, n)                                                         \
    for (int64_t i = 0; i < (n); i++) {                                                            \
        char *t = g->o + ((ooff) + i * ol + g->idx[(ioff) + i * il] * g->odim_stride) * esz;       \
        double b = ddpl_load_f64(g->s + ((soff) + i * sl) * esz, dt), a = ddpl_load_f64(t, dt);    \
        double r = b;                                                                              \
        switch (reduce) {                                                                          \
        case DDPL_SCATTER_SUM:                                                                     \
            r = is_bool ? (double)(a != 0 || b != 0) : a + b;                                      \
            break;                                                                                 \
        case DDPL_SCATTER_PROD:                                                                    \
            r = is_bool ? (double)(a != 0 && b != 0) : a * b;                                      \
            break;                                                                                 \
        case DDPL_SCATTER_AMAX:                                                                    \
            r = f_max(a, b);                                                                       \
            break;                                                                                 \
        case DDPL_SCATTER_AMIN:                                                                    \
            r = f_min(a, b);                                                                       \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
        ddpl_store_f64(t, dt, r);                                                                  \
    }
    SCATTER_WALK(g, GENERIC_INNER);
#undef GENERIC_INNER
}

/* The checked 1-D kernels of a dtype, or NULL (float16, bfloat16, bool: the two-pass path). */
static int64_t (*const *checked_fns(ddpl_dtype dt))(const scatter_geom *)
{
    switch (dt) {
    case DDPL_FLOAT32:
        return checked_f32;
    case DDPL_FLOAT64:
        return checked_f64;
    case DDPL_INT64:
        return checked_i64;
    case DDPL_INT32:
        return checked_i32;
    case DDPL_INT16:
        return checked_i16;
    case DDPL_INT8:
        return checked_i8;
    case DDPL_UINT8:
        return checked_u8;
    default:
        return NULL;
    }
}

/* out[0] (in place) combined with in[1] scattered along dim by in[0]; ddpl_scatter_params. */
int cpu_scatter(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_scatter_params *p = params;
    ddpl_tensor *o = out[0], *index = in[0], *src = in[1];
    scatter_geom g = {.nd = index->ndim, .dim = p->dim};
    g.bound = o->ndim ? o->sizes[p->dim] : 1;
    g.odim_stride = o->ndim ? o->strides[p->dim] : 0;
    if (index->ndim == 0) {
        g.nd = 1;
        g.dim = 0;
        g.sizes[0] = 1;
    }
    for (int d = 0; d < index->ndim; d++) {
        g.sizes[d] = index->sizes[d];
        g.is[d] = index->strides[d];
        g.ss[d] = src->ndim ? src->strides[d] : 0;
        g.os[d] = d == p->dim || !o->ndim ? 0 : o->strides[d];
    }
    g.idx = (const int64_t *)ddpl_data_ptr(index);
    g.o = ddpl_data_ptr(o);
    g.s = ddpl_data_ptr(src);
    if (ddpl_numel(g.nd, g.sizes) == 0) return 0;
    int r = p->reduce;
    if (r < DDPL_SCATTER_ASSIGN || r > DDPL_SCATTER_AMIN)
        return ddpl_error("%s: unknown scatter reduction %d", p->op, r);
    /* A long 1-D index into a small output (scatter_add of values into bins): one pass that
     * checks the indices as it reads them, not a check pass and a scatter pass that both read
     * them (1M float32 into 1000 bins: 0.50 ms against 0.67, PyTorch 0.61); a copy of the
     * output, taken first, is put back when a bad index turns up, so out is still left
     * untouched then. */
    int64_t on = ddpl_tensor_numel(o);
    int64_t (*const *checked)(const scatter_geom *) = checked_fns((ddpl_dtype)o->dtype);
    if (checked && g.nd == 1 && g.is[0] == 1 && g.ss[0] == 1 && on * 16 <= g.sizes[0] &&
        ddpl_tensor_is_contiguous(o)) {
        size_t obytes = (size_t)on * ddpl_dtype_size((ddpl_dtype)o->dtype);
        void *saved = malloc(obytes ? obytes : 1);
        if (saved) {
            memcpy(saved, g.o, obytes);
            int64_t bad = checked[r](&g);
            if (bad >= 0) memcpy(g.o, saved, obytes);
            free(saved);
            if (bad < 0) return 0;
            return ddpl_error("%s: index %lld is out of range for dimension %d with size %lld",
                              p->op, (long long)g.idx[bad], p->dim, (long long)g.bound);
        }
    }
    /* every index first: nothing is written when one is out of range */
    int64_t bad_value = 0;
    bool found = false;
    /* an index constant along the run (stride 0) is checked once per run */
    int64_t run = g.is[g.nd - 1] == 0 ? 1 : g.sizes[g.nd - 1];
    /* an OR of unsigned compares (a negative index is a huge unsigned one) vectorises; the
     * search for the bad value runs only in a run that has one (with a branch per element the
     * check took a third of scatter_add's time) */
#define CHECK_INNER(ioff, soff, ooff, n)                                                           \
    if (!found) {                                                                                  \
        int64_t m_ = (n) < run ? (n) : run, st_ = g.is[g.nd - 1];                                  \
        const int64_t *ix_ = g.idx + (ioff);                                                       \
        uint64_t any_ = 0;                                                                         \
        for (int64_t i = 0; i < m_; i++) any_ |= (uint64_t)ix_[i * st_] >= (uint64_t)g.bound;      \
        for (int64_t i = 0; any_ && i < m_ && !found; i++)                                         \
            if (ix_[i * st_] < 0 || ix_[i * st_] >= g.bound)                                       \
                found = true, bad_value = ix_[i * st_];                                            \
        (void)(soff), (void)(ooff);                                                                \
    }
    SCATTER_WALK(&g, CHECK_INNER);
#undef CHECK_INNER
    if (found)
        return ddpl_error("%s: index %lld is out of range for dimension %d with size %lld", p->op,
                          (long long)bad_value, p->dim, (long long)g.bound);
    switch ((ddpl_dtype)o->dtype) {
    case DDPL_FLOAT32:
        fns_f32[r](&g);
        break;
    case DDPL_FLOAT64:
        fns_f64[r](&g);
        break;
    case DDPL_INT64:
        fns_i64[r](&g);
        break;
    case DDPL_INT32:
        fns_i32[r](&g);
        break;
    case DDPL_INT16:
        fns_i16[r](&g);
        break;
    case DDPL_INT8:
        fns_i8[r](&g);
        break;
    case DDPL_UINT8:
        fns_u8[r](&g);
        break;
    default:
        scatter_generic(&g, (ddpl_dtype)o->dtype, r);
        break;
    }
    return 0;
}

/* ---- nonzero: the flat positions of the non-zero elements (masked_select, nonzero) ---- */

/* Whether the element at p of dtype dt is non-zero (NaN is; -0.0 is not). */
static inline bool elem_nonzero(const char *p, ddpl_dtype dt)
{
    switch (dt) {
    case DDPL_BOOL:
    case DDPL_UINT8:
    case DDPL_INT8:
        return *(const uint8_t *)p != 0;
    case DDPL_FLOAT32:
        return *(const float *)p != 0.0f;
    case DDPL_FLOAT64:
        return *(const double *)p != 0.0;
    case DDPL_INT64:
        return *(const int64_t *)p != 0;
    case DDPL_INT32:
        return *(const int32_t *)p != 0;
    default:
        return ddpl_load_f64(p, dt) != 0.0;
    }
}

/* out[0] (int64 1-D, one element per non-zero element of in[0]) <- their flat positions. One
 * serial pass (the positions are a running count); a contiguous bool or uint8 mask, the
 * masked_select case, reads bytes directly. */
int cpu_nonzero(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    (void)params;
    ddpl_tensor *x = in[0];
    int64_t *o = (int64_t *)ddpl_data_ptr(out[0]), cap = ddpl_tensor_numel(out[0]), k = 0;
    int64_t n = ddpl_tensor_numel(x);
    ddpl_dtype dt = (ddpl_dtype)x->dtype;
    if (n == 0) return 0;
    if ((dt == DDPL_BOOL || dt == DDPL_UINT8) && ddpl_tensor_is_contiguous(x)) {
        const uint8_t *m = (const uint8_t *)ddpl_data_ptr(x);
        for (int64_t i = 0; i < n && k < cap; i++) {
            o[k] = i;
            k += m[i] != 0; /* branch-free: the slot is overwritten until a hit keeps it */
        }
        return 0;
    }
    int64_t esz = (int64_t)ddpl_dtype_size(dt), pos[DDPL_MAX_DIMS] = {0};
    const char *base = ddpl_data_ptr(x);
    int nd = x->ndim;
    for (int64_t i = 0; i < n && k < cap; i++) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++) off += pos[d] * x->strides[d];
        if (elem_nonzero(base + off * esz, dt)) o[k++] = i;
        for (int d = nd - 1; d >= 0; d--) {
            if (++pos[d] < x->sizes[d]) break;
            pos[d] = 0;
        }
    }
    return 0;
}
