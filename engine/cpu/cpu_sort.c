/* cpu/cpu_sort.c: sorting and selecting along one dim, and binary search into sorted rows, on
 * the CPU.
 * defines: cpu_sort, cpu_topk, cpu_kthvalue, cpu_searchsorted.
 *
 * sort is a stable LSD radix sort of order-preserving unsigned keys, one slice per task of the
 * thread pool. Every dtype maps to a key whose unsigned order is PyTorch's order: floats flip
 * their sign-magnitude bits, every NaN becomes one canonical NaN above +inf (PyTorch sorts NaN
 * as the largest value and keeps NaNs in input order), -0.0 becomes +0.0 (they compare equal, so
 * a stable sort keeps them in input order), signed integers flip their sign bit; descending
 * inverts the key. Keys of up to 32 bits share a uint64 with the element's position (key in the
 * high half), so one array moves per pass and the radix passes only touch the key bits; so do
 * 64-bit keys whose range (max - min) fits 32 bits; other 64-bit keys move with a separate
 * position array. A pass whose digit is the same for every element is skipped. Short slices use
 * insertion sort, stable since equal keys never pass each other. The values are then gathered
 * from the input by position, so they are the input's exact bits (-0.0 and NaN payloads kept).
 * Measured (bench/ops, 1 thread): 1M float32 in ~17-25 ms, 4-5x faster than PyTorch 1.13's
 * CPU sort (bench/README.md).
 *
 * topk and kthvalue select instead of sorting: the same keys, each made unique by its position
 * (packed, or a (key, position) pair for 64-bit keys), so "the element of rank r" is the stable
 * sort's r-th element and ties resolve as there (topk: the lower index first). A quickselect
 * (nth_element) per slice puts rank r in place in O(n); topk then sorts its k. */
#include <string.h>

#include "cpu_iter.h"
#include "cpu_kernels.h"
#include "kernel_abi/kernel_params.h"

enum { SORT_INSERTION_MAX = 32 };

/* ---- keys ---- */
static inline uint64_t key_f32(uint32_t u)
{
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) u = 0x7fc00000u; /* NaN */
    if (u == 0x80000000u) u = 0;                                              /* -0.0 */
    return (u & 0x80000000u) ? (uint32_t)~u : u | 0x80000000u;
}

static inline uint64_t key_f64(uint64_t u)
{
    const uint64_t sign = 1ull << 63, exp = 0x7ffull << 52;
    if ((u & exp) == exp && (u & ((1ull << 52) - 1))) u = 0x7ff8ull << 48;
    if (u == sign) u = 0;
    return (u & sign) ? ~u : u | sign;
}

/* float16 (5-bit exponent) and bfloat16 (8-bit exponent) share the 16-bit layout but not the
 * exponent mask; qnan is the canonical NaN of each */
static inline uint64_t key_16(uint16_t u, uint16_t exp, uint16_t qnan)
{
    if ((u & exp) == exp && (u & (uint16_t)(0x7fffu & ~exp))) u = qnan;
    if (u == 0x8000u) u = 0;
    return (u & 0x8000u) ? (uint16_t)~u : (uint16_t)(u | 0x8000u);
}

/* keys[i] (<< shift, | i when packing) for the n elements of a slice at x (stride xs elements);
 * flip inverts the key bits (descending) within the key's width. */
static void load_keys(uint64_t *keys, const char *x, int64_t xs, int64_t n, ddpl_dtype dt,
                      bool descending, bool packed)
{
    int bits = 8 * (int)ddpl_dtype_size(dt);
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1, flip = descending ? mask : 0;
    int shift = packed ? 32 : 0;
#define LOAD(T, KEY)                                                                               \
    for (int64_t i = 0; i < n; i++) {                                                              \
        T u;                                                                                       \
        memcpy(&u, x + i * xs * (int64_t)sizeof(T), sizeof u);                                     \
        uint64_t k = ((KEY) ^ flip) & mask;                                                        \
        keys[i] = (k << shift) | (packed ? (uint64_t)i : 0);                                       \
    }                                                                                              \
    break
    switch (dt) {
    case DDPL_FLOAT32:
        LOAD(uint32_t, key_f32(u));
    case DDPL_FLOAT64:
        LOAD(uint64_t, key_f64(u));
    case DDPL_FLOAT16:
        LOAD(uint16_t, key_16(u, 0x7c00u, 0x7e00u));
    case DDPL_BFLOAT16:
        LOAD(uint16_t, key_16(u, 0x7f80u, 0x7fc0u));
    case DDPL_INT64:
        LOAD(uint64_t, u ^ (1ull << 63));
    case DDPL_INT32:
        LOAD(uint32_t, u ^ 0x80000000u);
    case DDPL_INT16:
        LOAD(uint16_t, u ^ 0x8000u);
    case DDPL_INT8:
        LOAD(uint8_t, u ^ 0x80u);
    default:
        LOAD(uint8_t, u); /* uint8, bool */
    }
#undef LOAD
}

/* ---- radix sort ---- */
/* Digits of 8 bits, or 11 for long slices (3 passes over a 32-bit key instead of 4: the
 * 2048-bucket histograms are then small next to the data). count holds RADIX_COUNTS. */
enum { RADIX_COUNTS = 6 * 2048 }; /* 64-bit keys: 6 passes of 2048 buckets at most */

/* Sorts keys[0..n) by bits [lo, hi) of each key, stably, moving pos[] along when given.
 * tmp_keys/tmp_pos are scratch of n. The result ends in keys/pos. */
static void radix_sort(uint64_t *keys, int64_t *pos, uint64_t *tmp_keys, int64_t *tmp_pos,
                       int64_t n, int lo, int hi, int64_t *count)
{
    int db = n >= (1 << 16) ? 11 : 8, passes = (hi - lo + db - 1) / db;
    int64_t buckets = 1 << db, mask = buckets - 1;
    memset(count, 0, (size_t)(passes * buckets) * sizeof *count);
    for (int64_t i = 0; i < n; i++) /* every pass's histogram in one read */
        for (int p = 0; p < passes; p++) count[p * buckets + ((keys[i] >> (lo + p * db)) & mask)]++;
    uint64_t *src = keys, *dst = tmp_keys;
    int64_t *psrc = pos, *pdst = tmp_pos;
    for (int p = 0; p < passes; p++) {
        int64_t *c = count + p * buckets;
        int sh = lo + p * db;
        if (c[(src[0] >> sh) & mask] == n) continue; /* one bucket: nothing moves */
        int64_t sum = 0;
        for (int64_t d = 0; d < buckets; d++) {
            int64_t t = c[d];
            c[d] = sum;
            sum += t;
        }
        if (psrc)
            for (int64_t i = 0; i < n; i++) {
                int64_t at = c[(src[i] >> sh) & mask]++;
                dst[at] = src[i];
                pdst[at] = psrc[i];
            }
        else
            for (int64_t i = 0; i < n; i++) dst[c[(src[i] >> sh) & mask]++] = src[i];
        uint64_t *t = src;
        src = dst;
        dst = t;
        int64_t *tp = psrc;
        psrc = pdst;
        pdst = tp;
    }
    if (src != keys) {
        memcpy(keys, src, (size_t)n * sizeof *keys);
        if (pos) memcpy(pos, psrc, (size_t)n * sizeof *pos);
    }
}

/* Stable for short slices: an element moves left only past strictly larger keys. */
static void insertion_sort(uint64_t *keys, int64_t *pos, int64_t n)
{
    for (int64_t i = 1; i < n; i++) {
        uint64_t k = keys[i];
        int64_t p = pos ? pos[i] : 0, j = i;
        for (; j > 0 && keys[j - 1] > k; j--) {
            keys[j] = keys[j - 1];
            if (pos) pos[j] = pos[j - 1];
        }
        keys[j] = k;
        if (pos) pos[j] = p;
    }
}

/* 64-bit keys whose range (max - min) fits 32 bits (int64 labels, counts, small floats of one
 * binade) become packed keys, (key - min) << 32 | position, so they sort like 32-bit ones;
 * *hi is set to the last bit the packed keys use. false (keys untouched) when the range is
 * wider. */
static bool pack_narrow(uint64_t *keys, int64_t n, int *hi)
{
    uint64_t mn = UINT64_MAX, mx = 0;
    for (int64_t i = 0; i < n; i++) {
        mn = keys[i] < mn ? keys[i] : mn;
        mx = keys[i] > mx ? keys[i] : mx;
    }
    if (n == 0 || mx - mn > UINT32_MAX) return false;
    for (int64_t i = 0; i < n; i++) keys[i] = (keys[i] - mn) << 32 | (uint64_t)i;
    int bits = 0;
    while (bits < 32 && (mx - mn) >> bits) bits++;
    *hi = 32 + (bits ? bits : 1);
    return true;
}

/* ---- the kernel ---- */
typedef struct {
    ddpl_tensor *values, *indices, *x;
    int dim;
    bool descending, packed;
    int64_t n; /* slice length */
    atomic_int out_of_memory;
} sort_ctx;

/* values[j] <- x[pos j] for esz-byte elements: a typed copy per size (exact bits). */
static void gather_values(char *v, int64_t vs, const char *x, int64_t xs, const uint64_t *keys,
                          const int64_t *pos, int64_t *ib, int64_t is, int64_t n, size_t esz)
{
#define GATHER(T)                                                                                  \
    for (int64_t j = 0; j < n; j++) {                                                              \
        int64_t p = pos ? pos[j] : (int64_t)(keys[j] & 0xffffffffu);                               \
        ((T *)v)[j * vs] = ((const T *)x)[p * xs];                                                 \
        ib[j * is] = p;                                                                            \
    }                                                                                              \
    break
    switch (esz) {
    case 8:
        GATHER(uint64_t);
    case 4:
        GATHER(uint32_t);
    case 2:
        GATHER(uint16_t);
    default:
        GATHER(uint8_t);
    }
#undef GATHER
}

static void sort_slices(int64_t begin, int64_t end, void *ctx)
{
    sort_ctx *c = ctx;
    ddpl_dtype dt = (ddpl_dtype)c->x->dtype;
    int64_t n = c->n;
    int nd = c->x->ndim, kb = (int)ddpl_dtype_size(dt);
    int64_t xs = nd ? c->x->strides[c->dim] : 0, vs = nd ? c->values->strides[c->dim] : 0;
    int64_t is = nd ? c->indices->strides[c->dim] : 0;
    /* keys and their scratch; positions and theirs only for unpacked (64-bit) keys */
    size_t per = c->packed ? 2 : 4;
    uint64_t *buf = ddpl_malloc_array(n, per * sizeof(uint64_t));
    int64_t *count = buf ? malloc(RADIX_COUNTS * sizeof *count) : NULL;
    if (!count) {
        free(buf);
        atomic_store(&c->out_of_memory, 1);
        return;
    }
    uint64_t *keys = buf, *tmp = buf + n;
    int64_t *pos = c->packed ? NULL : (int64_t *)(buf + 2 * n), *tmp_pos = pos ? pos + n : NULL;
    size_t esz = ddpl_dtype_size(dt);
    for (int64_t s = begin; s < end; s++) {
        const char *xb = ddpl_data_ptr(c->x) + cpu_slice_offset(c->x, c->dim, s) * (int64_t)esz;
        load_keys(keys, xb, xs, n, dt, c->descending, c->packed);
        int64_t *p = pos;
        int lo = c->packed ? 32 : 0, hi = lo + 8 * kb;
        if (p && n <= (int64_t)UINT32_MAX && pack_narrow(keys, n, &hi)) {
            p = NULL; /* 64-bit keys of a narrow range: packed after all */
            lo = 32;
        }
        if (p)
            for (int64_t i = 0; i < n; i++) p[i] = i;
        if (n <= SORT_INSERTION_MAX)
            insertion_sort(keys, p, n);
        else
            radix_sort(keys, p, tmp, p ? tmp_pos : NULL, n, lo, hi, count);
        char *vb = ddpl_data_ptr(c->values) + cpu_slice_offset(c->values, c->dim, s) * (int64_t)esz;
        int64_t *ib =
            (int64_t *)ddpl_data_ptr(c->indices) + cpu_slice_offset(c->indices, c->dim, s);
        gather_values(vb, vs, xb, xs, keys, p, ib, is, n, esz);
    }
    free(count);
    free(buf);
}

/* out[0] values, out[1] int64 indices (in[0]'s shape) <- in[0] sorted stably along dim. */
int cpu_sort(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_sort_params *p = params;
    ddpl_tensor *x = in[0];
    int64_t numel = ddpl_tensor_numel(x);
    if (numel == 0) return 0;
    int64_t n = x->ndim ? x->sizes[p->dim] : 1;
    sort_ctx c = {.values = out[0],
                  .indices = out[1],
                  .x = x,
                  .dim = p->dim,
                  .descending = p->descending,
                  .packed = ddpl_dtype_size((ddpl_dtype)x->dtype) <= 4 && n <= (int64_t)UINT32_MAX,
                  .n = n};
    /* about 10 ns an element: a part of CPU_GRAIN elements is worth a task */
    cpu_parallel_for(numel / n, CPU_GRAIN / n + 1, sort_slices, &c);
    if (atomic_load(&c.out_of_memory))
        return ddpl_error("sort: out of memory for the scratch of a slice of %lld elements",
                          (long long)n);
    return 0;
}

/* ---- selection: topk and kthvalue ---- */
/* A 64-bit key with its position (packed keys are plain uint64s). */
typedef struct {
    uint64_t k;
    int64_t i;
} kpair;

#define U64_LESS(a, b)  ((a) < (b))
#define PAIR_LESS(a, b) ((a).k < (b).k || ((a).k == (b).k && (a).i < (b).i))

/* For each key type T: insertion sort, a qsort comparator, and nth_SUF, which rearranges
 * a[lo..hi) so a[r] holds the element of rank r, smaller ones before it and larger ones after
 * (std::nth_element). Quickselect with the median of three sampled keys as pivot and a
 * branchless Lomuto partition (the keys are unique, so no equal-key cases); after 4 log2(n)
 * rounds (an adversarial input) the rest is sorted, so the worst case stays O(n log n). */
#define SELECT_FNS(SUF, T, LESS)                                                                   \
    static void isort_##SUF(T *a, int64_t n)                                                       \
    {                                                                                              \
        for (int64_t i = 1; i < n; i++) {                                                          \
            T v = a[i];                                                                            \
            int64_t j = i;                                                                         \
            for (; j > 0 && LESS(v, a[j - 1]); j--) a[j] = a[j - 1];                               \
            a[j] = v;                                                                              \
        }                                                                                          \
    }                                                                                              \
    static int cmp_##SUF(const void *pa, const void *pb)                                           \
    {                                                                                              \
        const T *a = pa, *b = pb;                                                                  \
        return LESS(*a, *b) ? -1 : LESS(*b, *a);                                                   \
    }                                                                                              \
    static void nth_##SUF(T *a, int64_t lo, int64_t hi, int64_t r)                                 \
    {                                                                                              \
        int budget = 4;                                                                            \
        for (int64_t m = hi - lo; m > 1; m >>= 1) budget += 4;                                     \
        uint64_t rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)(hi - lo);                                \
        while (hi - lo > 16) {                                                                     \
            if (r == lo || r == hi - 1) { /* the least or the greatest: one scan */                \
                int64_t e = r;                                                                     \
                for (int64_t i = lo; i < hi; i++)                                                  \
                    if (r == lo ? LESS(a[i], a[e]) : LESS(a[e], a[i])) e = i;                      \
                T t = a[e];                                                                        \
                a[e] = a[r];                                                                       \
                a[r] = t;                                                                          \
                return;                                                                            \
            }                                                                                      \
            if (budget-- == 0) {                                                                   \
                qsort(a + lo, (size_t)(hi - lo), sizeof *a, cmp_##SUF);                            \
                return;                                                                            \
            }                                                                                      \
            /* three pseudo-random samples (a fixed xorshift, so results are reproducible):        \
             * fixed positions met organ-pipe rows with bad pivots round after round */            \
            int64_t m = hi - lo, last = hi - 1;                                                    \
            T t;                                                                                   \
            for (int k = 0; k < 2; k++) { /* samples into lo and last */                           \
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;                               \
                int64_t sk = lo + (int64_t)(rng % (uint64_t)m), at = k ? last : lo;                \
                t = a[sk], a[sk] = a[at], a[at] = t;                                               \
            }                                                                                      \
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;                                   \
            int64_t mid = lo + 1 + (int64_t)(rng % (uint64_t)(m - 2)); /* strictly inside */       \
            if (LESS(a[mid], a[lo])) t = a[mid], a[mid] = a[lo], a[lo] = t;                        \
            if (LESS(a[last], a[lo])) t = a[last], a[last] = a[lo], a[lo] = t;                     \
            if (LESS(a[mid], a[last])) t = a[mid], a[mid] = a[last], a[last] = t;                  \
            T p = a[last]; /* the median of the three */                                           \
            int64_t st = lo;                                                                       \
            for (int64_t i = lo; i < last; i++) {                                                  \
                T v = a[i];                                                                        \
                a[i] = a[st];                                                                      \
                a[st] = v;                                                                         \
                st += LESS(v, p);                                                                  \
            }                                                                                      \
            a[last] = a[st];                                                                       \
            a[st] = p;                                                                             \
            if (r == st) return;                                                                   \
            if (r < st)                                                                            \
                hi = st;                                                                           \
            else                                                                                   \
                lo = st + 1;                                                                       \
        }                                                                                          \
        isort_##SUF(a + lo, hi - lo);                                                              \
    }
SELECT_FNS(u64, uint64_t, U64_LESS)
SELECT_FNS(pair, kpair, PAIR_LESS)

enum { TOPK_SMALL = 32 }; /* k up to which topk keeps a sorted front instead of selecting */

/* Moves the k least of a[0..n) to a[0..k), in order (k < n): a[0..k) is kept sorted and a key
 * below a[k - 1] is inserted into it, the displaced k-th going to the key's old place. */
#define SMALL_K_FN(SUF, T, LESS)                                                                   \
    static void small_k_##SUF(T *a, int64_t n, int64_t k)                                          \
    {                                                                                              \
        isort_##SUF(a, k);                                                                         \
        for (int64_t i = k; i < n; i++) {                                                          \
            T v = a[i];                                                                            \
            if (!LESS(v, a[k - 1])) continue;                                                      \
            a[i] = a[k - 1];                                                                       \
            int64_t j = k - 1;                                                                     \
            for (; j > 0 && LESS(v, a[j - 1]); j--) a[j] = a[j - 1];                               \
            a[j] = v;                                                                              \
        }                                                                                          \
    }
SMALL_K_FN(u64, uint64_t, U64_LESS)
SMALL_K_FN(pair, kpair, PAIR_LESS)

/* One slice's keys for selection: packed (key << 32 | position) when the dtype has at most 32
 * bits and the slice fits 32-bit positions, else pairs. */
typedef struct {
    uint64_t *keys; /* n packed keys, or the raw keys before pairing */
    kpair *pairs;   /* n pairs, or NULL when packed */
    int64_t n;
    bool packed;
} select_buf;

static bool select_buf_init(select_buf *b, int64_t n, ddpl_dtype dt)
{
    b->n = n;
    b->packed = ddpl_dtype_size(dt) <= 4 && n <= (int64_t)UINT32_MAX;
    b->keys = ddpl_malloc_array(n, sizeof *b->keys);
    b->pairs = b->packed || !b->keys ? NULL : ddpl_malloc_array(n, sizeof *b->pairs);
    return b->keys && (b->packed || b->pairs);
}

static void select_buf_free(select_buf *b)
{
    free(b->keys);
    free(b->pairs);
}

static void select_load(select_buf *b, const char *x, int64_t xs, ddpl_dtype dt, bool descending)
{
    load_keys(b->keys, x, xs, b->n, dt, descending, b->packed);
    if (!b->packed)
        for (int64_t i = 0; i < b->n; i++) b->pairs[i] = (kpair){b->keys[i], i};
}

/* Puts rank r in place within [lo, hi), which holds ranks lo..hi-1 already. */
static void select_rank(select_buf *b, int64_t lo, int64_t hi, int64_t r)
{
    if (b->packed)
        nth_u64(b->keys, lo, hi, r);
    else
        nth_pair(b->pairs, lo, hi, r);
}

/* Puts each of the ascending, distinct ranks r[0..cnt) (all in [lo, hi)) in place: the middle
 * one first, then each half within its own range, so quantile's pairs of neighbours (r, r + 1)
 * cost one selection and a pass over a shrunken range, not a pass over the rest of the row
 * each. */
static void select_ranks(select_buf *b, int64_t lo, int64_t hi, const int64_t *r, int64_t cnt)
{
    while (cnt > 0) {
        int64_t m = cnt / 2;
        select_rank(b, lo, hi, r[m]);
        select_ranks(b, lo, r[m], r, m);
        lo = r[m] + 1;
        r += m + 1;
        cnt -= m + 1;
    }
}

/* The position (along the slice) of the element now at rank r. */
static int64_t select_pos(const select_buf *b, int64_t r)
{
    return b->packed ? (int64_t)(b->keys[r] & 0xffffffffu) : b->pairs[r].i;
}

/* ---- topk ---- */
typedef struct {
    ddpl_tensor *values, *indices, *x;
    const ddpl_topk_params *p;
    int64_t n; /* slice length */
    atomic_int out_of_memory;
} topk_ctx;

/* Largest: descending keys, so NaN comes first (PyTorch ranks NaN above everything) and ties
 * keep the lower index first; smallest: ascending keys, NaN last. The k selected are sorted
 * whether or not sorted is asked (any order is allowed then; this one is deterministic). */
static void topk_slices(int64_t begin, int64_t end, void *ctx)
{
    topk_ctx *c = ctx;
    const ddpl_topk_params *p = c->p;
    ddpl_dtype dt = (ddpl_dtype)c->x->dtype;
    int64_t esz = (int64_t)ddpl_dtype_size(dt), n = c->n, k = p->k;
    int nd = c->x->ndim;
    int64_t xs = nd ? c->x->strides[p->dim] : 0, vs = nd ? c->values->strides[p->dim] : 0;
    int64_t is = nd ? c->indices->strides[p->dim] : 0;
    select_buf b;
    if (!select_buf_init(&b, n, dt)) {
        select_buf_free(&b);
        atomic_store(&c->out_of_memory, 1);
        return;
    }
    for (int64_t s = begin; s < end; s++) {
        const char *xb = ddpl_data_ptr(c->x) + cpu_slice_offset(c->x, p->dim, s) * esz;
        select_load(&b, xb, xs, dt, p->largest);
        if (k <= TOPK_SMALL && k < n) {
            /* a few of many: one pass keeping the k least keys sorted in place at the front;
             * past the first k most keys fail the one compare with the k-th (quickselect moves
             * every key about three times) */
            if (b.packed)
                small_k_u64(b.keys, n, k);
            else
                small_k_pair(b.pairs, n, k);
        } else if (k < n) {
            select_rank(&b, 0, n, k - 1);
        }
        if (k <= TOPK_SMALL && k < n) {
            /* already in order */
        } else if (b.packed) {
            if (k <= 64)
                isort_u64(b.keys, k);
            else
                qsort(b.keys, (size_t)k, sizeof *b.keys, cmp_u64);
        } else {
            if (k <= 64)
                isort_pair(b.pairs, k);
            else
                qsort(b.pairs, (size_t)k, sizeof *b.pairs, cmp_pair);
        }
        char *vb = ddpl_data_ptr(c->values) + cpu_slice_offset(c->values, p->dim, s) * esz;
        int64_t *ib =
            (int64_t *)ddpl_data_ptr(c->indices) + cpu_slice_offset(c->indices, p->dim, s);
        for (int64_t j = 0; j < k; j++) {
            int64_t i = select_pos(&b, j);
            memcpy(vb + j * vs * esz, xb + i * xs * esz, (size_t)esz); /* exact, whatever dtype */
            ib[j * is] = i;
        }
    }
    select_buf_free(&b);
}

/* out[0] values, out[1] int64 indices (x's shape with k along dim) <- top k of in[0]. */
int cpu_topk(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_topk_params *p = params;
    ddpl_tensor *x = in[0];
    int64_t n = x->ndim ? x->sizes[p->dim] : 1;
    if (p->k == 0 || ddpl_tensor_numel(x) == 0) return 0;
    topk_ctx c = {.values = out[0], .indices = out[1], .x = x, .p = p, .n = n};
    cpu_parallel_for(ddpl_tensor_numel(x) / n, CPU_GRAIN / n + 1, topk_slices, &c);
    if (atomic_load(&c.out_of_memory))
        return ddpl_error("topk: out of memory for %lld scratch items", (long long)n);
    return 0;
}

/* ---- kthvalue: positions of given ranks ---- */
typedef struct {
    ddpl_tensor *out, *ranks, *x;
    const ddpl_kthvalue_params *p;
    int64_t n, m; /* slice length, ranks per slice */
    atomic_int out_of_memory, bad_rank;
    atomic_llong bad_value;
} kth_ctx;

/* The key every NaN of dt maps to (load_keys, ascending), or none for non-float dtypes. */
static bool nan_key(ddpl_dtype dt, uint64_t *key)
{
    switch (dt) {
    case DDPL_FLOAT32:
        return *key = key_f32(0x7fc00000u), true;
    case DDPL_FLOAT64:
        return *key = key_f64(0x7ff8ull << 48), true;
    case DDPL_FLOAT16:
        return *key = key_16(0x7e00u, 0x7c00u, 0x7e00u), true;
    case DDPL_BFLOAT16:
        return *key = key_16(0x7fc0u, 0x7f80u, 0x7fc0u), true;
    default:
        return false;
    }
}

/* Element offset in t (x's rank + 1 dims: the rank, then x's sizes with dim of size 1) of
 * slice s of x, rank 0. */
static int64_t rank_offset(const ddpl_tensor *t, const ddpl_tensor *x, int dim, int64_t s)
{
    int64_t off = 0;
    for (int d = x->ndim - 1; d >= 0; d--) {
        if (d == dim) continue;
        off += (s % x->sizes[d]) * t->strides[d + 1];
        s /= x->sizes[d];
    }
    return off;
}

enum { KTH_MAX_RANKS = 64 }; /* ranks selected per pass over a slice's scratch */

static void kth_slices(int64_t begin, int64_t end, void *ctx)
{
    kth_ctx *c = ctx;
    const ddpl_kthvalue_params *p = c->p;
    ddpl_dtype dt = (ddpl_dtype)c->x->dtype;
    int64_t esz = (int64_t)ddpl_dtype_size(dt), n = c->n;
    int64_t xs = c->x->strides[p->dim];
    uint64_t nk = 0;
    bool floating = nan_key(dt, &nk);
    select_buf b;
    if (!select_buf_init(&b, n, dt)) {
        select_buf_free(&b);
        atomic_store(&c->out_of_memory, 1);
        return;
    }
    int64_t *out = (int64_t *)ddpl_data_ptr(c->out), os = c->out->strides[0];
    const int64_t *rk = c->ranks ? (const int64_t *)ddpl_data_ptr(c->ranks) : NULL;
    int64_t rs = c->ranks ? c->ranks->strides[0] : 0;
    for (int64_t s = begin; s < end; s++) {
        const char *xb = ddpl_data_ptr(c->x) + cpu_slice_offset(c->x, p->dim, s) * esz;
        select_load(&b, xb, xs, dt, false);
        int64_t nans = 0;
        if (floating && p->mode != DDPL_SELECT_KTH && p->mode != DDPL_SELECT_RANKS) {
            if (b.packed)
                for (int64_t i = 0; i < n; i++) nans += (b.keys[i] >> 32) == nk;
            else
                for (int64_t i = 0; i < n; i++) nans += b.pairs[i].k == nk;
        }
        int64_t *o = out + rank_offset(c->out, c->x, p->dim, s);
        if (p->mode != DDPL_SELECT_RANKS) {
            int64_t r = p->mode == DDPL_SELECT_KTH      ? p->k
                        : p->mode == DDPL_SELECT_MEDIAN ? (nans ? n - nans : (n - 1) / 2)
                                                        : (n - nans > 1 ? n - nans - 1 : 0) / 2;
            select_rank(&b, 0, n, r);
            *o = select_pos(&b, r);
            continue;
        }
        /* several ranks (quantile's neighbours), KTH_MAX_RANKS at a time: sorted and made
         * distinct, selected, then each output reads its rank's position */
        const int64_t *rr = rk + rank_offset(c->ranks, c->x, p->dim, s);
        for (int64_t j0 = 0; j0 < c->m; j0 += KTH_MAX_RANKS) {
            int64_t cnt = c->m - j0 < KTH_MAX_RANKS ? c->m - j0 : KTH_MAX_RANKS, nd = 0;
            int64_t want[KTH_MAX_RANKS], distinct[KTH_MAX_RANKS];
            for (int64_t j = 0; j < cnt; j++) {
                int64_t r = rr[(j0 + j) * rs];
                if (r < 0 || r >= n) {
                    atomic_store(&c->bad_rank, 1);
                    atomic_store(&c->bad_value, (long long)r);
                    r = 0;
                }
                want[j] = distinct[j] = r;
            }
            isort_u64((uint64_t *)distinct, cnt); /* ranks are >= 0: unsigned order is theirs */
            for (int64_t j = 0; j < cnt; j++)
                if (nd == 0 || distinct[j] != distinct[nd - 1]) distinct[nd++] = distinct[j];
            select_ranks(&b, 0, n, distinct, nd);
            for (int64_t j = 0; j < cnt; j++) o[(j0 + j) * os] = select_pos(&b, want[j]);
        }
    }
    select_buf_free(&b);
}

/* out (int64, (M, x's sizes with dim 1)) <- positions along dim of the selected ranks of each
 * slice of in[0]; in[1] the ranks (out's shape) for DDPL_SELECT_RANKS. */
int cpu_kthvalue(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_kthvalue_params *p = params;
    ddpl_tensor *x = in[0];
    int64_t n = x->sizes[p->dim];
    if (ddpl_tensor_numel(out[0]) == 0 || n == 0) return 0;
    kth_ctx c = {.out = out[0],
                 .ranks = p->mode == DDPL_SELECT_RANKS ? in[1] : NULL,
                 .x = x,
                 .p = p,
                 .n = n,
                 .m = out[0]->sizes[0]};
    if (p->mode != DDPL_SELECT_RANKS &&
        (c.m != 1 || (p->mode == DDPL_SELECT_KTH && (p->k < 0 || p->k >= n))))
        return ddpl_error("kthvalue: rank %lld of a slice of %lld elements, %lld outputs",
                          (long long)p->k, (long long)n, (long long)c.m);
    /* about 5 ns an element (keys, then ~3n for the selection) */
    cpu_parallel_for(ddpl_tensor_numel(x) / n, CPU_GRAIN / n + 1, kth_slices, &c);
    if (atomic_load(&c.out_of_memory))
        return ddpl_error("kthvalue: cannot allocate the scratch of a slice of %lld elements",
                          (long long)n);
    if (atomic_load(&c.bad_rank))
        return ddpl_error("kthvalue: rank %lld is out of range for a slice of %lld elements",
                          (long long)atomic_load(&c.bad_value), (long long)n);
    return 0;
}

/* ---- searchsorted ---- */
/* PyTorch's cus_lower_bound and cus_upper_bound (its bucketization kernels): negated
 * comparisons, so a NaN value goes past every element (its index is the length), as there. */
#define SEARCH(T)                                                                                  \
    static void search_##T(const T *seq, int64_t m, const T *v, int64_t n, int64_t per_row,        \
                           bool right, void *out, bool i32)                                        \
    {                                                                                              \
        for (int64_t i = 0; i < n; i++) {                                                          \
            const T *row = per_row ? seq + (i / per_row) * m : seq;                                \
            T val = v[i];                                                                          \
            /* branch-free halving, the step taken through a mask (GCC kept a compare-and-jump     \
             * for a select, and a random value's path mispredicted half its steps: 50 ns a        \
             * search into 1000 boundaries) */                                                     \
            int64_t lo = 0, len = m;                                                               \
            while (len > 0) {                                                                      \
                int64_t half = len >> 1;                                                           \
                T e = row[lo + half];                                                              \
                int64_t go = -(int64_t)(right ? !(e > val) : !(e >= val)); /* all ones: right */   \
                lo += (half + 1) & go;                                                             \
                len = half + ((len - 2 * half - 1) & go);                                          \
            }                                                                                      \
            if (i32)                                                                               \
                ((int32_t *)out)[i] = (int32_t)lo;                                                 \
            else                                                                                   \
                ((int64_t *)out)[i] = lo;                                                          \
        }                                                                                          \
    }
SEARCH(float)
SEARCH(double)
SEARCH(int64_t)
SEARCH(int32_t)
SEARCH(int16_t)
SEARCH(int8_t)
SEARCH(uint8_t)
#undef SEARCH

/* out (int64 or int32, in[1]'s shape) <- insertion points of in[1] into the rows of in[0]
 * (the last dim; contiguous, one dtype: not float16/bfloat16, which the op widens). */
typedef struct {
    ddpl_tensor *seq, *v, *out;
    const ddpl_searchsorted_params *p;
} search_ctx;

/* Values [begin, end): each search is independent, so the values are split over threads
 * (a binary search of 1M values into 1000 boundaries: 50 ms on one thread). */
static void search_range(int64_t begin, int64_t end, void *ctx)
{
    const search_ctx *c = ctx;
    const ddpl_searchsorted_params *p = c->p;
    ddpl_tensor *seq = c->seq, *v = c->v;
    int64_t m = seq->ndim ? seq->sizes[seq->ndim - 1] : 1, n = end - begin;
    bool i32 = c->out->dtype == DDPL_INT32;
    int64_t vsz = (int64_t)ddpl_dtype_size((ddpl_dtype)v->dtype);
    int64_t row0 = p->per_row ? begin / p->per_row : 0; /* begin is a row start then */
    const void *s = (const char *)ddpl_data_ptr(seq) + row0 * m * vsz;
    const void *vp = (const char *)ddpl_data_ptr(v) + begin * vsz;
    void *o = (char *)ddpl_data_ptr(c->out) + begin * (i32 ? 4 : 8);
    switch ((ddpl_dtype)v->dtype) {
    case DDPL_FLOAT32:
        search_float(s, m, vp, n, p->per_row, p->right, o, i32);
        break;
    case DDPL_FLOAT64:
        search_double(s, m, vp, n, p->per_row, p->right, o, i32);
        break;
    case DDPL_INT64:
        search_int64_t(s, m, vp, n, p->per_row, p->right, o, i32);
        break;
    case DDPL_INT32:
        search_int32_t(s, m, vp, n, p->per_row, p->right, o, i32);
        break;
    case DDPL_INT16:
        search_int16_t(s, m, vp, n, p->per_row, p->right, o, i32);
        break;
    case DDPL_INT8:
        search_int8_t(s, m, vp, n, p->per_row, p->right, o, i32);
        break;
    case DDPL_UINT8:
    case DDPL_BOOL:
        search_uint8_t(s, m, vp, n, p->per_row, p->right, o, i32);
        break;
    default:
        break; /* refused by cpu_searchsorted */
    }
}

typedef struct {
    const search_ctx *c;
    int64_t per_row;
} search_rows_ctx;

static void search_rows(int64_t begin, int64_t end, void *ctx)
{
    const search_rows_ctx *rc = ctx;
    search_range(begin * rc->per_row, end * rc->per_row, (void *)rc->c);
}

int cpu_searchsorted(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_searchsorted_params *p = params;
    ddpl_tensor *seq = in[0], *v = in[1];
    int64_t m = seq->ndim ? seq->sizes[seq->ndim - 1] : 1, n = ddpl_tensor_numel(v);
    if (n == 0) return 0;
    switch ((ddpl_dtype)v->dtype) {
    case DDPL_FLOAT32:
    case DDPL_FLOAT64:
    case DDPL_INT64:
    case DDPL_INT32:
    case DDPL_INT16:
    case DDPL_INT8:
    case DDPL_UINT8:
    case DDPL_BOOL:
        break;
    default:
        return ddpl_error("searchsorted: dtype %s is not supported by the CPU kernel",
                          ddpl_dtype_name((ddpl_dtype)v->dtype));
    }
    search_ctx c = {seq, v, out[0], p};
    /* a search costs ~log2(m) steps */
    int64_t steps = 1;
    for (int64_t w = m; w > 1; w >>= 1) steps++;
    int64_t grain = CPU_GRAIN / steps + 1;
    if (p->per_row) { /* tasks of whole rows, each searching its own row */
        search_rows_ctx rc = {&c, p->per_row};
        cpu_parallel_for(n / p->per_row, grain / p->per_row + 1, search_rows, &rc);
    } else {
        cpu_parallel_for(n, grain, search_range, &c);
    }
    return 0;
}
