/* cpu/cpu_index.c: CPU kernels that pick, scatter and rank elements by int64 indices.
 * defines: cpu_index_select, cpu_index_add, cpu_gather, cpu_scatter_add, cpu_topk.
 *
 * Indices are checked before anything is written, so a bad index leaves the output untouched
 * and the error names the op, the index value and the size it had to stay below. Tensors may
 * have any strides; contiguous float32/float64 data take row-wise fast paths (index_select on
 * dim 0 is a memcpy per row: the data loader gathers its batches with it). */
#include "cpu_iter.h"
#include "cpu_kernels.h"
#include "kernel_abi/kernel_params.h"

/* ---- shared helpers ---- */

/* First index of idx[0..n) (stride in elements) outside [0, size), or -1 when all are valid. */
static int64_t find_bad_index(const int64_t *idx, int64_t n, int64_t stride, int64_t size)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t v = idx[i * stride];
        if (v < 0 || v >= size) return i;
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

/* Checks every index of w->index against size; -1 with an error naming op on the first bad one. */
static int walk_check(const char *op, const walk *w, int64_t size)
{
    const ddpl_tensor *ix = w->index;
    int nd = ix->ndim;
    int64_t n = ddpl_tensor_numel(ix), pos[DDPL_MAX_DIMS] = {0};
    const int64_t *base = (const int64_t *)ddpl_data_ptr(ix);
    for (int64_t e = 0; e < n; e++) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++) off += pos[d] * ix->strides[d];
        int64_t v = base[off];
        if (v < 0 || v >= size) return index_error(op, v, w->dim, size);
        for (int d = nd - 1; d >= 0; d--) {
            if (++pos[d] < ix->sizes[d]) break;
            pos[d] = 0;
        }
    }
    return 0;
}

/* gather (scatter false): out[p] = x[p with dim = index[p]];
 * scatter_add (scatter true): out[p with dim = index[p]] += src[p]. Runs serially: scatter's
 * duplicate targets would race, and gather is not a hot path. */
static void walk_run(const walk *w, bool scatter)
{
    const ddpl_tensor *ix = w->index, *a = w->a, *b = w->b;
    ddpl_dtype dt = (ddpl_dtype)a->dtype;
    int64_t esz = (int64_t)ddpl_dtype_size(dt);
    int nd = ix->ndim;
    int64_t n = ddpl_tensor_numel(ix), pos[DDPL_MAX_DIMS] = {0};
    const int64_t *ib = (const int64_t *)ddpl_data_ptr(ix);
    char *ab = ddpl_data_ptr(a), *bb = ddpl_data_ptr(b);
    for (int64_t e = 0; e < n; e++) {
        int64_t ioff = 0, aoff = 0, boff = 0;
        for (int d = 0; d < nd; d++) {
            ioff += pos[d] * ix->strides[d];
            boff += pos[d] * b->strides[d];
            if (d != w->dim) aoff += pos[d] * a->strides[d];
        }
        aoff += ib[ioff] * (nd ? a->strides[w->dim] : 0);
        if (scatter)
            add_into(ab + aoff * esz, 0, bb + boff * esz, 0, 1, dt);
        else
            memcpy(bb + boff * esz, ab + aoff * esz, (size_t)esz);
        for (int d = nd - 1; d >= 0; d--) {
            if (++pos[d] < ix->sizes[d]) break;
            pos[d] = 0;
        }
    }
}

/* out[0] (index's shape) <- in[0] gathered along dim by in[1] (int64, in[0]'s rank). */
int cpu_gather(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    int dim = ((const ddpl_dim_params *)params)->dim;
    walk w = {in[1], in[0], out[0], dim};
    if (walk_check("gather", &w, in[0]->ndim ? in[0]->sizes[dim] : 1) < 0) return -1;
    walk_run(&w, false);
    return 0;
}

/* out[0] (accumulated in place) += in[1] scattered along dim by in[0] (int64, in[1]'s shape). */
int cpu_scatter_add(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    int dim = ((const ddpl_dim_params *)params)->dim;
    walk w = {in[0], out[0], in[1], dim};
    if (walk_check("scatter_add", &w, out[0]->ndim ? out[0]->sizes[dim] : 1) < 0) return -1;
    walk_run(&w, true);
    return 0;
}

/* ---- topk ---- */
/* long double holds every int64 and every float exactly, so one key type serves all dtypes. */
typedef struct {
    long double v;
    int64_t i;
    bool nan;
} topk_item;

/* Order for "largest": NaN first (PyTorch ranks NaN above everything), then by value
 * descending; "smallest": by value ascending, NaN last. Ties keep the lower index first. */
static int cmp_largest(const void *pa, const void *pb)
{
    const topk_item *a = pa, *b = pb;
    if (a->nan != b->nan) return a->nan ? -1 : 1;
    if (!a->nan && a->v != b->v) return a->v > b->v ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

static int cmp_smallest(const void *pa, const void *pb)
{
    const topk_item *a = pa, *b = pb;
    if (a->nan != b->nan) return a->nan ? 1 : -1;
    if (!a->nan && a->v != b->v) return a->v < b->v ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

/* Moves the k first items (in cmp order) to items[0..k), in any order (quickselect). */
static void select_k(topk_item *items, int64_t n, int64_t k, int (*cmp)(const void *, const void *))
{
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        topk_item pivot = items[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (cmp(&items[i], &pivot) < 0) i++;
            while (cmp(&items[j], &pivot) > 0) j--;
            if (i <= j) {
                topk_item t = items[i];
                items[i++] = items[j];
                items[j--] = t;
            }
        }
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            return;
    }
}

typedef struct {
    ddpl_tensor *values, *indices, *x;
    const ddpl_topk_params *p;
    int64_t size;
    atomic_int out_of_memory; /* a thread could not get its scratch */
} topk_ctx;

/* Byte offset of slice s (all dims but dim, row-major) in t. */
static int64_t slice_offset(const ddpl_tensor *t, int dim, int64_t s)
{
    return cpu_slice_offset(t, dim, s) * (int64_t)ddpl_dtype_size((ddpl_dtype)t->dtype);
}

static void topk_slices(int64_t begin, int64_t end, void *ctx)
{
    topk_ctx *c = ctx;
    const ddpl_topk_params *p = c->p;
    ddpl_dtype dt = (ddpl_dtype)c->x->dtype;
    int64_t esz = (int64_t)ddpl_dtype_size(dt), n = c->size, k = p->k;
    int nd = c->x->ndim;
    int64_t xs = nd ? c->x->strides[p->dim] * esz : 0;
    int64_t vs = nd ? c->values->strides[p->dim] * esz : 0;
    int64_t is = nd ? c->indices->strides[p->dim] : 0;
    int (*cmp)(const void *, const void *) = p->largest ? cmp_largest : cmp_smallest;
    topk_item *items = ddpl_malloc_array(n, sizeof *items); /* n may be 2^62 (an expanded dim) */
    if (!items) {
        atomic_store(&c->out_of_memory, 1);
        return;
    }
    for (int64_t s = begin; s < end; s++) {
        const char *xb = ddpl_data_ptr(c->x) + slice_offset(c->x, p->dim, s);
        for (int64_t i = 0; i < n; i++) {
            const char *e = xb + i * xs;
            items[i].i = i;
            if (ddpl_dtype_is_integral(dt)) {
                items[i].v = (long double)ddpl_load_i64(e, dt);
                items[i].nan = false;
            } else {
                double v = ddpl_load_f64(e, dt);
                items[i].v = v;
                items[i].nan = v != v;
            }
        }
        if (k < n) select_k(items, n, k, cmp);
        if (p->sorted || k >= n) qsort(items, (size_t)k, sizeof *items, cmp);
        char *vb = ddpl_data_ptr(c->values) + slice_offset(c->values, p->dim, s);
        int64_t *ib = (int64_t *)(ddpl_data_ptr(c->indices) + slice_offset(c->indices, p->dim, s));
        for (int64_t j = 0; j < k; j++) {
            memcpy(vb + j * vs, xb + items[j].i * xs, (size_t)esz); /* exact, whatever dtype */
            ib[j * is] = items[j].i;
        }
    }
    free(items);
}

/* out[0] values, out[1] int64 indices (x's shape with k along dim) <- top k of in[0]. */
int cpu_topk(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_topk_params *p = params;
    ddpl_tensor *x = in[0];
    int64_t size = x->ndim ? x->sizes[p->dim] : 1;
    if (p->k == 0 || ddpl_tensor_numel(x) == 0) return 0;
    topk_ctx c = {.values = out[0], .indices = out[1], .x = x, .p = p, .size = size};
    int64_t slices = ddpl_tensor_numel(x) / size;
    cpu_parallel_for(slices, CPU_GRAIN / size + 1, topk_slices, &c);
    if (atomic_load(&c.out_of_memory))
        return ddpl_error("topk: out of memory for %lld scratch items", (long long)size);
    return 0;
}
