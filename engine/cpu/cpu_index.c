/* cpu/cpu_index.c: CPU kernels that pick, scatter and rank elements by int64 indices.
 * defines: cpu_index_select, cpu_index_add, cpu_gather, cpu_scatter_add (topk: cpu_sort.c).
 *
 * Indices are checked before anything is written, so a bad index leaves the output untouched
 * (gather checks as it reads: its output is fresh and dropped on error), and the error names
 * the op, the index value and the size it had to stay below. Tensors may
 * have any strides; contiguous float32/float64 data take row-wise fast paths (index_select on
 * dim 0 is a memcpy per row: the data loader gathers its batches with it). */
#include "cpu_iter.h"
#include "cpu_kernels.h"
#if CPU_AVX512_KERNELS
#include <immintrin.h> /* 64-byte row gathers (gather_row_512) */
#endif
#include "kernel_abi/kernel_params.h"

/* ---- shared helpers ---- */

/* First index of idx[0..n) (stride in elements) outside [0, size), or -1 when all are valid. */
static int64_t find_bad_index(const int64_t *idx, int64_t n, int64_t stride, int64_t size)
{
    /* blocks of an OR of unsigned compares (negatives are huge), which vectorises; the exit
     * test per element kept the loop scalar (a third of a 1-D index_add's time) */
    for (int64_t b = 0; b < n; b += 1024) {
        int64_t e = n - b < 1024 ? n : b + 1024;
        uint64_t bad = 0;
        if (stride == 1)
            for (int64_t i = b; i < e; i++) bad |= (uint64_t)idx[i] >= (uint64_t)size;
        else
            for (int64_t i = b; i < e; i++) bad |= (uint64_t)idx[i * stride] >= (uint64_t)size;
        if (bad)
            for (int64_t i = b; i < e; i++)
                if (idx[i * stride] < 0 || idx[i * stride] >= size) return i;
    }
    return -1;
}

static int index_error(const char *op, int64_t value, int dim, int64_t size)
{
    return ddpl_error("%s: index %lld is out of range for dimension %d with size %lld", op,
                      (long long)value, dim, (long long)size);
}

/* dst <- src over an ndim block of the given sizes; strides in elements; esz-byte elements. */
static void strided_copy(int ndim, const int64_t *sizes, char *dst, const int64_t *ds,
                         const char *src, const int64_t *ss, size_t esz)
{
    if (ndim == 0) {
        memcpy(dst, src, esz);
        return;
    }
    int64_t idx[DDPL_MAX_DIMS] = {0};
    int64_t inner = sizes[ndim - 1], dsi = ds[ndim - 1] * (int64_t)esz,
            ssi = ss[ndim - 1] * (int64_t)esz;
    if (ddpl_numel(ndim, sizes) == 0) return;
    for (;;) {
        int64_t doff = 0, soff = 0;
        for (int d = 0; d < ndim - 1; d++) {
            doff += idx[d] * ds[d];
            soff += idx[d] * ss[d];
        }
        char *o = dst + doff * (int64_t)esz;
        const char *x = src + soff * (int64_t)esz;
        if (dsi == (int64_t)esz && ssi == (int64_t)esz)
            memcpy(o, x, (size_t)inner * esz);
        else
            for (int64_t i = 0; i < inner; i++) memcpy(o + i * dsi, x + i * ssi, esz);
        int d = ndim - 2;
        for (; d >= 0; d--) {
            if (++idx[d] < sizes[d]) break;
            idx[d] = 0;
        }
        if (d < 0) return;
    }
}

/* out[i] += x[i] for n elements with byte strides, in out's dtype (same as x's). */
static void add_into(char *o, int64_t so, const char *x, int64_t sx, int64_t n, ddpl_dtype dt)
{
    if (dt == DDPL_FLOAT32 && so == 4 && sx == 4) {
        float *po = (float *)o;
        const float *px = (const float *)x;
        for (int64_t i = 0; i < n; i++) po[i] += px[i];
    } else if (dt == DDPL_FLOAT64 && so == 8 && sx == 8) {
        double *po = (double *)o;
        const double *px = (const double *)x;
        for (int64_t i = 0; i < n; i++) po[i] += px[i];
    } else if (ddpl_dtype_is_integral(dt)) {
        for (int64_t i = 0; i < n; i++)
            ddpl_store_i64(o + i * so, dt,
                           ddpl_load_i64(o + i * so, dt) + ddpl_load_i64(x + i * sx, dt));
    } else {
        for (int64_t i = 0; i < n; i++)
            ddpl_store_f64(o + i * so, dt,
                           ddpl_load_f64(o + i * so, dt) + ddpl_load_f64(x + i * sx, dt));
    }
}

/* ---- index_select: out (pre, n, post) <- x (pre, size, post) rows idx ---- */
typedef struct {
    const char *x;
    char *out;
    const int64_t *idx;
    int64_t idx_stride, n, size, row_bytes;
} rows_ctx;

/* item = (o, i): one contiguous row of post elements */
static void select_rows(int64_t begin, int64_t end, void *p)
{
    rows_ctx *c = p;
    for (int64_t item = begin; item < end; item++) {
        int64_t o = item / c->n, i = item % c->n;
        memcpy(c->out + item * c->row_bytes,
               c->x + (o * c->size + c->idx[i * c->idx_stride]) * c->row_bytes,
               (size_t)c->row_bytes);
    }
}

/* out[0] = in[0] indexed along params->dim by in[1] (int64, 1-D or 0-dim). */
int cpu_index_select(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    int dim = ((const ddpl_dim_params *)params)->dim;
    ddpl_tensor *o = out[0], *x = in[0], *index = in[1];
    const int64_t *idx = (const int64_t *)ddpl_data_ptr(index);
    int64_t n = ddpl_tensor_numel(index), istride = index->ndim ? index->strides[0] : 1;
    int64_t size = x->sizes[dim];
    int64_t bad = find_bad_index(idx, n, istride, size);
    if (bad >= 0) return index_error("index_select", idx[bad * istride], dim, size);
    if (ddpl_tensor_numel(o) == 0) return 0;

    size_t esz = ddpl_dtype_size((ddpl_dtype)x->dtype);
    if (ddpl_tensor_is_contiguous(x) && ddpl_tensor_is_contiguous(o)) {
        int64_t pre = ddpl_numel(dim, x->sizes),
                post = ddpl_numel(x->ndim - dim - 1, x->sizes + dim + 1);
        rows_ctx c = {ddpl_data_ptr(x),   ddpl_data_ptr(o), idx, istride, n, size,
                      post * (int64_t)esz};
        /* a thread per chunk of rows once the copy is ~128 KB: rows gathered from a large
         * table (a training batch of 64 Fashion-MNIST images from the 188 MB split, 200 KB)
         * miss the cache, and two threads keep twice the misses in flight */
        int64_t grain =
            c.row_bytes >= CPU_GRAIN ? 1 : CPU_GRAIN / (c.row_bytes ? c.row_bytes : 1) * 2;
        cpu_parallel_for(pre * n, grain, select_rows, &c);
        return 0;
    }
    /* general strides: one strided block copy per selected index */
    int64_t sizes[DDPL_MAX_DIMS], os[DDPL_MAX_DIMS], xs[DDPL_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (d == dim) continue;
        sizes[nd] = o->sizes[d];
        os[nd] = o->strides[d];
        xs[nd] = x->strides[d];
        nd++;
    }
    char *ob = ddpl_data_ptr(o);
    const char *xb = ddpl_data_ptr(x);
    for (int64_t i = 0; i < n; i++)
        strided_copy(nd, sizes, ob + i * o->strides[dim] * (int64_t)esz, os,
                     xb + idx[i * istride] * x->strides[dim] * (int64_t)esz, xs, esz);
    return 0;
}

/* ---- index_add: out (pre, size, post)[:, idx[i], :] += src (pre, n, post)[:, i, :] ---- */
typedef struct {
    ddpl_tensor *o, *src;
    const int64_t *idx;
    int64_t istride, n;
    int dim;
} index_add_ctx;

/* Each thread owns a range of `pre` slabs, so duplicate indices never race. */
static void index_add_slabs(int64_t begin, int64_t end, void *p)
{
    index_add_ctx *c = p;
    ddpl_tensor *o = c->o, *s = c->src;
    ddpl_dtype dt = (ddpl_dtype)o->dtype;
    int64_t esz = (int64_t)ddpl_dtype_size(dt);
    int dim = c->dim, nd = o->ndim;
    /* the dims after `dim`, iterated with their strides; `pre` dims decoded from the slab */
    for (int64_t slab = begin; slab < end; slab++) {
        int64_t ooff = 0, soff = 0, rem = slab;
        for (int d = dim - 1; d >= 0; d--) {
            int64_t i = rem % o->sizes[d];
            rem /= o->sizes[d];
            ooff += i * o->strides[d];
            soff += i * s->strides[d];
        }
        if (dim == nd - 1 && (dt == DDPL_FLOAT32 || dt == DDPL_FLOAT64)) {
            /* one element per index (a 1-D index_add, bincount-like): a typed loop; through
             * add_into's generic path it cost 18 ns an element, 12x torch */
            int64_t os = o->strides[dim], ss = s->strides[dim];
#define INDEX_ADD_ELEMS(T)                                                                         \
    do {                                                                                           \
        T *ob = (T *)ddpl_data_ptr(o) + ooff;                                                      \
        const T *sb = (const T *)ddpl_data_ptr(s) + soff;                                          \
        const int64_t *ix = c->idx;                                                                \
        if (os == 1 && ss == 1 && c->istride == 1) /* all contiguous: plain indexing */            \
            for (int64_t i = 0; i < c->n; i++) ob[ix[i]] += sb[i];                                 \
        else                                                                                       \
            for (int64_t i = 0; i < c->n; i++) ob[ix[i * c->istride] * os] += sb[i * ss];          \
    } while (0)
            if (dt == DDPL_FLOAT32)
                INDEX_ADD_ELEMS(float);
            else
                INDEX_ADD_ELEMS(double);
#undef INDEX_ADD_ELEMS
            continue;
        }
        for (int64_t i = 0; i < c->n; i++) {
            char *ob = ddpl_data_ptr(o) + (ooff + c->idx[i * c->istride] * o->strides[dim]) * esz;
            const char *sb = ddpl_data_ptr(s) + (soff + i * s->strides[dim]) * esz;
            if (dim == nd - 1) {
                add_into(ob, 0, sb, 0, 1, dt);
                continue;
            }
            int64_t idx[DDPL_MAX_DIMS] = {0}, inner = o->sizes[nd - 1];
            int64_t post = ddpl_numel(nd - dim - 1, o->sizes + dim + 1);
            for (int64_t done = 0; done < post; done += inner) {
                int64_t oo = 0, so = 0;
                for (int d = dim + 1; d < nd - 1; d++) {
                    oo += idx[d] * o->strides[d];
                    so += idx[d] * s->strides[d];
                }
                add_into(ob + oo * esz, o->strides[nd - 1] * esz, sb + so * esz,
                         s->strides[nd - 1] * esz, inner, dt);
                for (int d = nd - 2; d > dim; d--) {
                    if (++idx[d] < o->sizes[d]) break;
                    idx[d] = 0;
                }
            }
        }
    }
}

/* out[0] (accumulated in place) along dim at in[0] (int64 1-D) += in[1]; dtypes equal. */
int cpu_index_add(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    int dim = ((const ddpl_dim_params *)params)->dim;
    ddpl_tensor *o = out[0], *index = in[0], *src = in[1];
    const int64_t *idx = (const int64_t *)ddpl_data_ptr(index);
    int64_t n = ddpl_tensor_numel(index), istride = index->ndim ? index->strides[0] : 1;
    int64_t bad = find_bad_index(idx, n, istride, o->sizes[dim]);
    if (bad >= 0) return index_error("index_add", idx[bad * istride], dim, o->sizes[dim]);
    if (ddpl_tensor_numel(src) == 0) return 0;
    index_add_ctx c = {o, src, idx, istride, n, dim};
    int64_t pre = ddpl_numel(dim, o->sizes);
    int64_t work_per_slab = ddpl_tensor_numel(src) / (pre ? pre : 1);
    cpu_parallel_for(pre, work_per_slab >= CPU_GRAIN ? 1 : CPU_GRAIN / (work_per_slab + 1) + 1,
                     index_add_slabs, &c);
    return 0;
}

/* ---- gather / scatter_add: walk every position of the index tensor ---- */

/* A walk over every position p of index (row-major): a is the tensor addressed through the
 * index (p with dim replaced by index[p]), b the one addressed at p itself. */
typedef struct {
    const ddpl_tensor *index, *a, *b;
    int dim;
} walk;

/* Element offsets in index, a and b of row r of the walk: the rows are the 1-D lines along
 * index's last dim, numbered row-major over the other dims (a 0-dim index is one row of one). */
static void walk_row(const walk *w, int64_t r, int64_t *io, int64_t *ao, int64_t *bo)
{
    const ddpl_tensor *ix = w->index;
    *io = *ao = *bo = 0;
    for (int d = ix->ndim - 2; d >= 0; d--) {
        int64_t p = r % ix->sizes[d];
        r /= ix->sizes[d];
        *io += p * ix->strides[d];
        *bo += p * w->b->strides[d];
        if (d != w->dim) *ao += p * w->a->strides[d];
    }
}

/* The walk's row geometry: rows, their length, and the inner strides (elements) of index, b,
 * a along the row (0 when the row runs along dim: a moves by the index alone) and a along dim. */
typedef struct {
    int64_t rows, inner, is, bs, as, ad;
} walk_geom;

static walk_geom walk_geometry(const walk *w)
{
    const ddpl_tensor *ix = w->index;
    int nd = ix->ndim, last = nd - 1;
    walk_geom g = {0, 1, 0, 0, 0, 0};
    if (nd) {
        g.inner = ix->sizes[last];
        g.is = ix->strides[last];
        g.bs = w->b->strides[last];
        g.as = last == w->dim ? 0 : w->a->strides[last];
        g.ad = w->a->strides[w->dim];
    }
    int64_t n = ddpl_tensor_numel(ix);
    g.rows = g.inner ? n / g.inner : 0;
    return g;
}

/* Checks every index of w->index against size; -1 with an error naming op on the first bad one. */
static int walk_check(const char *op, const walk *w, int64_t size)
{
    walk_geom g = walk_geometry(w);
    const int64_t *base = (const int64_t *)ddpl_data_ptr(w->index);
    for (int64_t r = 0; r < g.rows; r++) {
        int64_t io, ao, bo;
        walk_row(w, r, &io, &ao, &bo);
        for (int64_t i = 0; i < g.inner; i++) {
            int64_t v = base[io + i * g.is];
            if (v < 0 || v >= size) return index_error(op, v, w->dim, size);
        }
    }
    return 0;
}

#if CPU_AVX512_KERNELS
/* b[i] = a[ir[i]] for i < n, esz 4 or 8 bytes; whether an index was outside [0, size), in which
 * case b is partly written (gather's output is fresh and dropped on error). Loads 8 indices at a
 * time, compares them with size (unsigned: negatives are huge) and gathers the lanes in range
 * only, so a bad index is never dereferenced; the check rides in the same pass. Against the
 * compiler's 32-byte gathers behind a separate checking loop: gather 1024^2 along dim 1, one
 * thread, 0.75 -> 0.56 ms. */
__attribute__((target("avx512f"))) static bool
gather_row_512(void *b, const void *a, const int64_t *ir, int64_t n, int64_t size, int64_t esz)
{
    const __m512i limit = _mm512_set1_epi64(size);
    __mmask8 bad = 0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512i v = _mm512_loadu_si512(ir + i);
        __mmask8 ok = _mm512_cmplt_epu64_mask(v, limit);
        bad |= (__mmask8)~ok;
        if (esz == 4)
            _mm256_storeu_si256((__m256i *)((uint32_t *)b + i),
                                _mm512_mask_i64gather_epi32(_mm256_setzero_si256(), ok, v, a, 4));
        else
            _mm512_storeu_si512((uint64_t *)b + i,
                                _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), ok, v, a, 8));
    }
    for (; i < n; i++) {
        uint64_t v = (uint64_t)ir[i];
        if (v >= (uint64_t)size) return true;
        if (esz == 4)
            ((uint32_t *)b)[i] = ((const uint32_t *)a)[v];
        else
            ((uint64_t *)b)[i] = ((const uint64_t *)a)[v];
    }
    return bad != 0;
}
#endif

/* gather (scatter false): out[p] = x[p with dim = index[p]];
 * scatter_add (scatter true): out[p with dim = index[p]] += src[p]. Row by row along index's
 * last dim with typed inner loops (a per-element N-d walk cost 12 ns an element, 9x torch's
 * gather). gather splits rows over threads; scatter_add runs serially, since duplicate targets
 * would race. */
typedef struct {
    const walk *w;
    walk_geom g;
    bool scatter;
    bool row512;      /* gather: rows go through gather_row_512 */
    int64_t size;     /* gather: the bound every index must stay below */
    atomic_llong bad; /* gather: an index found out of range (valid when has_bad) */
    atomic_int has_bad;
} walk_job;

/* Whether row ir (j->g.inner indices, stride j->g.is) holds one outside [0, j->size); with
 * j->row512 the row is gathered from a into b in the same pass. */
static bool gather_check_row(const walk_job *j, const int64_t *ir, void *b, const void *a,
                             int64_t esz)
{
    const walk_geom *g = &j->g;
#if CPU_AVX512_KERNELS
    if (j->row512) return gather_row_512(b, a, ir, g->inner, j->size, esz);
#else
    (void)b, (void)a, (void)esz;
#endif
    uint64_t bad = 0; /* an OR of unsigned compares vectorises (negatives are huge) */
    if (g->is == 1)
        for (int64_t i = 0; i < g->inner; i++) bad |= (uint64_t)ir[i] >= (uint64_t)j->size;
    else
        for (int64_t i = 0; i < g->inner; i++) bad |= (uint64_t)ir[i * g->is] >= (uint64_t)j->size;
    return bad != 0;
}

static void walk_rows(int64_t begin, int64_t end, void *ctx)
{
    const walk_job *j = ctx;
    const walk *w = j->w;
    const walk_geom *g = &j->g;
    ddpl_dtype dt = (ddpl_dtype)w->a->dtype;
    int64_t esz = (int64_t)ddpl_dtype_size(dt);
    const int64_t *ib = (const int64_t *)ddpl_data_ptr(w->index);
    char *ab = ddpl_data_ptr(w->a), *bb = ddpl_data_ptr(w->b);
    for (int64_t r = begin; r < end; r++) {
        int64_t io, ao, bo;
        walk_row(w, r, &io, &ao, &bo);
        const int64_t *ir = ib + io;
#define WALK_TYPED(T, STMT)                                                                        \
    do {                                                                                           \
        T *a = (T *)ab + ao, *b = (T *)bb + bo;                                                    \
        for (int64_t i = 0; i < g->inner; i++) {                                                   \
            T *pa = a + i * g->as + ir[i * g->is] * g->ad, *pb = b + i * g->bs;                    \
            STMT;                                                                                  \
        }                                                                                          \
    } while (0)
        if (j->scatter) {
            if (dt == DDPL_FLOAT32)
                WALK_TYPED(float, *pa += *pb);
            else if (dt == DDPL_FLOAT64)
                WALK_TYPED(double, *pa += *pb);
            else
                for (int64_t i = 0; i < g->inner; i++)
                    add_into(ab + (ao + i * g->as + ir[i * g->is] * g->ad) * esz, 0,
                             bb + (bo + i * g->bs) * esz, 0, 1, dt);
        } else {
            /* gather checks its indices as it goes: out is a fresh tensor, dropped on error,
             * so a separate checking pass over the index (8 MB for 1M) is not needed */
            bool bad = gather_check_row(j, ir, bb + bo * esz, ab + ao * esz, esz);
            if (bad) {
                for (int64_t i = 0; i < g->inner; i++) {
                    int64_t v = ir[i * g->is];
                    if (v < 0 || v >= j->size) atomic_store(&((walk_job *)j)->bad, (long long)v);
                }
                atomic_store(&((walk_job *)j)->has_bad, 1);
                continue;
            }
            if (j->row512) continue; /* gathered with the check */
            if (g->is == 1 && g->bs == 1 && g->as == 0 && (esz == 4 || esz == 8)) {
                /* along a contiguous last dim (take_along_dim, a row gather): a plain indexed
                 * load, which the compiler turns into vector gathers */
#define GATHER_ROW(T)                                                                              \
    do {                                                                                           \
        const T *a = (const T *)ab + ao;                                                           \
        T *b = (T *)bb + bo;                                                                       \
        for (int64_t i = 0; i < g->inner; i++) b[i] = a[ir[i] * g->ad];                            \
    } while (0)
                if (esz == 4)
                    GATHER_ROW(uint32_t);
                else
                    GATHER_ROW(uint64_t);
#undef GATHER_ROW
            } else if (esz == 4) {
                WALK_TYPED(uint32_t, *pb = *pa);
            } else if (esz == 8) {
                WALK_TYPED(uint64_t, *pb = *pa);
            } else {
                for (int64_t i = 0; i < g->inner; i++)
                    memcpy(bb + (bo + i * g->bs) * esz,
                           ab + (ao + i * g->as + ir[i * g->is] * g->ad) * esz, (size_t)esz);
            }
        }
#undef WALK_TYPED
    }
}

/* scatter: serial, indices checked first; gather: rows over threads, indices checked as they
 * are read (-1 with the error then). */
static int walk_run(const walk *w, bool scatter, int64_t size)
{
    walk_job j = {.w = w, .g = walk_geometry(w), .scatter = scatter, .size = size};
#if CPU_AVX512_KERNELS
    /* rows along a contiguous last dim of 4- or 8-byte elements (take_along_dim, a row gather) */
    int64_t esz = (int64_t)ddpl_dtype_size((ddpl_dtype)w->a->dtype);
    j.row512 = !scatter && j.g.is == 1 && j.g.bs == 1 && j.g.as == 0 && j.g.ad == 1 &&
               (esz == 4 || esz == 8) && cpu_has_avx512f();
#endif
    if (scatter) {
        walk_rows(0, j.g.rows, &j);
        return 0;
    }
    cpu_parallel_for(j.g.rows, CPU_GRAIN / (j.g.inner + 1) + 1, walk_rows, &j);
    if (atomic_load(&j.has_bad)) return index_error("gather", atomic_load(&j.bad), w->dim, size);
    return 0;
}

/* out[0] (index's shape) <- in[0] gathered along dim by in[1] (int64, in[0]'s rank). */
int cpu_gather(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    int dim = ((const ddpl_dim_params *)params)->dim;
    walk w = {in[1], in[0], out[0], dim};
    return walk_run(&w, false, in[0]->ndim ? in[0]->sizes[dim] : 1);
}

/* out[0] (accumulated in place) += in[1] scattered along dim by in[0] (int64, in[1]'s shape). */
int cpu_scatter_add(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    int dim = ((const ddpl_dim_params *)params)->dim;
    walk w = {in[0], out[0], in[1], dim};
    int64_t size = out[0]->ndim ? out[0]->sizes[dim] : 1;
    if (walk_check("scatter_add", &w, size) < 0) return -1;
    return walk_run(&w, true, size);
}
