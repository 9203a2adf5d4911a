/* cpu/cpu_gemm.c: batched matrix products on the CPU through OpenBLAS.
 * defines: cpu_gemm, cpu_blas_gemm, cpu_blas_parallel_for, cpu_blas_parts, cpu_blas_max_threads.
 *
 * cpu_gemm computes out[b] = alpha * in0[b] @ in1[b] + beta * out[b] for 3-D operands with any
 * strides: out (B,M,N), in0 (B,M,K), in1 (B,K,N); a batch stride of 0 broadcasts a matrix.
 * A matrix that has a unit stride in one of its two dims is handed to BLAS in place (a
 * transposed view becomes CblasTrans, never a copy); any other layout is packed into a
 * contiguous scratch buffer first. bfloat16 runs on the CPU's bf16 dot-product units where it
 * has them (cpu_gemm_bf16.c); float16, and bfloat16 elsewhere, compute in float32 through
 * sgemm; integer dtypes use a plain loop with int64 accumulation (wrapping as PyTorch's does). */
#include <cblas.h>
#include <limits.h>

#include "core/alloc.h"
#include "cpu_blas.h"
#include "cpu_gemm_bf16.h"
#include "cpu_kernels.h"
#include "kernel_abi/gemm_layout.h"
#include "kernel_abi/kernel_params.h"

#include "cpu_threads.h"

/* ---- BLAS front ----
 * OpenBLAS (Debian's pthread build) runs its own thread pool, whose idle threads spin for a
 * long while after every threaded call (2^28 cycles by default), stealing the cores from the
 * OpenMP loops of every other kernel: measured, a log_softmax after a large GEMM ran 10x
 * slower with 2 threads. So OpenBLAS is only ever called single-threaded, and a large GEMM is
 * split over the engine's threads here (row or column blocks of C, one BLAS call each): the
 * same pool as every other kernel (cpu_threads.h), and within a few percent of OpenBLAS's own
 * threading. */

/* One BLAS call, on the calling thread. */
static void blas_call(ddpl_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                      double alpha, const void *A, int64_t lda, const void *B, int64_t ldb,
                      double beta, void *C, int64_t ldc)
{
    enum CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE opb = tb ? CblasTrans : CblasNoTrans;
    if (dt == DDPL_FLOAT32)
        cblas_sgemm(CblasRowMajor, opa, opb, (blasint)M, (blasint)N, (blasint)K, (float)alpha, A,
                    (blasint)lda, B, (blasint)ldb, (float)beta, C, (blasint)ldc);
    else
        cblas_dgemm(CblasRowMajor, opa, opb, (blasint)M, (blasint)N, (blasint)K, alpha, A,
                    (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
}

/* OpenBLAS restricted to the calling thread (ddpl_set_num_threads may have raised it). */
static void blas_single_threaded(void)
{
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

int cpu_blas_max_threads(void)
{
    return cpu_threads_get();
}

/* Below this many multiply-adds one thread is faster than splitting (OpenBLAS's own cut-off). */
#define GEMM_SPLIT_MNK 262144.0

typedef struct {
    ddpl_dtype dt;
    bool ta, tb, rows; /* rows: split C's rows, else its columns */
    int64_t M, N, K, lda, ldb, ldc, chunk, len;
    double alpha, beta;
    const void *A, *B;
    void *C;
} gemm_split;

/* One block of C: rows (or columns) [part*chunk, +chunk) of the product. */
static void gemm_part(int part, int thread, void *p)
{
    DDPL_UNUSED(thread);
    const gemm_split *g = p;
    int64_t esz = (int64_t)ddpl_dtype_size(g->dt);
    int64_t b = part * g->chunk, n = b + g->chunk < g->len ? g->chunk : g->len - b;
    if (g->rows) /* C rows [b, b+n): op(A) rows, all of op(B) */
        blas_call(g->dt, g->ta, g->tb, n, g->N, g->K, g->alpha,
                  (const char *)g->A + (g->ta ? b : b * g->lda) * esz, g->lda, g->B, g->ldb,
                  g->beta, (char *)g->C + b * g->ldc * esz, g->ldc);
    else /* C columns [b, b+n): all of op(A), op(B) columns */
        blas_call(g->dt, g->ta, g->tb, g->M, n, g->K, g->alpha, g->A, g->lda,
                  (const char *)g->B + (g->tb ? b * g->ldb : b) * esz, g->ldb, g->beta,
                  (char *)g->C + b * esz, g->ldc);
}

void cpu_blas_gemm(ddpl_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                   const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C,
                   int64_t ldc)
{
    blas_single_threaded();
    int nt = cpu_threads_get();
    if (nt > 1 && !cpu_threads_in_parallel() &&
        (double)M * (double)N * (double)K > GEMM_SPLIT_MNK) {
        /* split the larger side of C into one block per thread, multiples of 16 (whole SIMD
         * tiles); a thread that is late leaves its block to the others (cpu_threads.h) */
        bool rows = M >= N;
        int64_t len = rows ? M : N, chunk = ((len + nt - 1) / nt + 15) / 16 * 16;
        gemm_split g = {dt, ta, tb, rows, M, N, K, lda, ldb, ldc, chunk, len, alpha, beta, A, B, C};
        cpu_threads_run((int)((len + chunk - 1) / chunk), gemm_part, &g);
        return;
    }
    blas_call(dt, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

typedef struct {
    int64_t n, chunk;
    void (*fn)(int64_t, int64_t, int, int, void *);
    void *ctx;
} blas_range;

static void blas_range_part(int part, int thread, void *p)
{
    const blas_range *r = p;
    int64_t b = (int64_t)part * r->chunk, e = b + r->chunk < r->n ? b + r->chunk : r->n;
    if (b < e) r->fn(b, e, part, thread, r->ctx);
}

/* true when cpu_blas_parallel_for runs its items on the pool */
static bool blas_items_parallel(int64_t n, int nt)
{
    return n >= 2 && nt > 1 && !cpu_threads_in_parallel();
}

int cpu_blas_parts(int64_t n)
{
    int nt = cpu_threads_get();
    if (!blas_items_parallel(n, nt)) return 1;
    /* a few parts per thread: late threads are covered, short parts end the job evenly */
    int64_t most = (int64_t)CPU_PARTS_PER_THREAD * nt;
    return (int)(n < most ? n : most);
}

void cpu_blas_parallel_for(int64_t n, int parts, void (*fn)(int64_t, int64_t, int, int, void *),
                           void *ctx)
{
    if (n <= 0) return;
    blas_single_threaded(); /* here, not racing in every thread's first GEMM */
    if (parts <= 0) parts = cpu_blas_parts(n);
    if (parts > 1 && blas_items_parallel(n, cpu_threads_get())) {
        blas_range r = {n, (n + parts - 1) / parts, fn, ctx};
        cpu_threads_run((int)((n + r.chunk - 1) / r.chunk), blas_range_part, &r);
        return;
    }
    fn(0, n, 0, 0, ctx);
}

/* ---- operand layouts ---- */
/* One operand: matrix b starts at base + b*bstride bytes; element (i, j) at i*rs + j*cs
 * elements from there. */
typedef struct {
    char *base;
    int64_t bstride; /* bytes */
    int64_t rows, cols, rs, cs;
    gemm_layout layout;
    int64_t ld; /* leading dimension for LAYOUT_ROW / LAYOUT_COL */
} mat_desc;

static void mat_desc_init(mat_desc *m, const ddpl_tensor *t)
{
    size_t esz = ddpl_dtype_size((ddpl_dtype)t->dtype);
    m->base = ddpl_data_ptr(t);
    m->bstride = t->sizes[0] == 1 ? 0 : t->strides[0] * (int64_t)esz;
    m->rows = t->sizes[1];
    m->cols = t->sizes[2];
    m->rs = t->strides[1];
    m->cs = t->strides[2];
    m->layout = gemm_layout_of(m->rows, m->cols, m->rs, m->cs, &m->ld);
}

/* One row of the widening path: n float32 values d <-> n 16-bit values s (element stride cs),
 * widened (to_src false) or rounded back (to_src true, round to nearest even). */
static void widen_row(uint16_t *s, int64_t cs, float *d, int64_t n, bool bf16, bool to_src)
{
    if (bf16 && cs == 1) {
        if (to_src)
            cpu_float_to_bf16(s, d, n);
        else
            cpu_bf16_to_float(d, s, n);
    } else if (bf16) {
        for (int64_t j = 0; j < n; j++)
            if (to_src)
                s[j * cs] = ddpl_float_to_bf16(d[j]);
            else
                d[j] = ddpl_bf16_to_float(s[j * cs]);
    } else {
        for (int64_t j = 0; j < n; j++)
            if (to_src)
                s[j * cs] = ddpl_float_to_half(d[j]);
            else
                d[j] = ddpl_half_to_float(s[j * cs]);
    }
}

/* dst (rows, cols) row-major in dt_dst <- src with strides (rs, cs) in dt_src (to_src false), or
 * the reverse (to_src true: src <- dst). A 16-bit src and a float32 dst (the widening path) take
 * typed loops, vectorised along a contiguous row: the generic per-element conversion was 60% of
 * a bf16 LSTM step where the operand is a transposed weight. */
static void pack(const mat_desc *m, char *src, ddpl_dtype dt_src, void *dst, ddpl_dtype dt_dst,
                 bool to_src)
{
    size_t es = ddpl_dtype_size(dt_src), ed = ddpl_dtype_size(dt_dst);
    bool half = (dt_src == DDPL_BFLOAT16 || dt_src == DDPL_FLOAT16) && dt_dst == DDPL_FLOAT32;
    for (int64_t i = 0; i < m->rows; i++) {
        if (half) {
            widen_row((uint16_t *)src + i * m->rs, m->cs, (float *)dst + i * m->cols, m->cols,
                      dt_src == DDPL_BFLOAT16, to_src);
            continue;
        }
        for (int64_t j = 0; j < m->cols; j++) {
            char *s = src + (i * m->rs + j * m->cs) * (int64_t)es;
            char *d = (char *)dst + (i * m->cols + j) * (int64_t)ed;
            if (dt_src == dt_dst) {
                if (to_src)
                    memcpy(s, d, es);
                else
                    memcpy(d, s, es);
            } else if (to_src) {
                ddpl_store_f64(s, dt_src, ddpl_load_f64(d, dt_dst));
            } else {
                ddpl_store_f64(d, dt_dst, ddpl_load_f64(s, dt_src));
            }
        }
    }
}

typedef struct {
    mat_desc a, b, c;
    ddpl_dtype dt;      /* the tensors' dtype */
    ddpl_dtype compute; /* float32 or float64: what BLAS sees */
    int64_t M, N, K;
    double alpha, beta;
    atomic_int out_of_memory; /* set by a thread that could not get scratch */
} gemm_job;

/* Where BLAS reads operand m of batch b: in place, or packed into scratch (converted to the
 * compute dtype). */
static const char *operand(const gemm_job *j, const mat_desc *m, int64_t b, void *scratch,
                           int64_t *ld, bool *trans)
{
    char *p = m->base + b * m->bstride;
    if (m->layout == LAYOUT_COL && j->dt != j->compute) {
        /* widen a column-major operand (a transposed weight) column by column, contiguous
         * reads and writes, and let BLAS read the copy transposed */
        mat_desc t = {.rows = m->cols, .cols = m->rows, .rs = m->cs, .cs = m->rs};
        pack(&t, p, j->dt, scratch, j->compute, false);
        *ld = m->rows > 1 ? m->rows : 1;
        *trans = true;
        return scratch;
    }
    if (m->layout == LAYOUT_PACK || j->dt != j->compute) {
        pack(m, p, j->dt, scratch, j->compute, false);
        *ld = m->cols > 1 ? m->cols : 1;
        *trans = false;
        return scratch;
    }
    *ld = m->ld;
    *trans = m->layout == LAYOUT_COL;
    return p;
}

/* Bytes of a scratch of rows x cols elements (at least 1); 0 when the product overflows
 * (expanded operands can have 2^62 elements). */
static size_t gemm_scratch_bytes(int64_t rows, int64_t cols, size_t esz)
{
    int64_t n;
    size_t bytes;
    if (ddpl_mul_overflow(rows, cols, &n) || ddpl_bytes_overflow(n, esz, &bytes)) return 0;
    return bytes ? bytes : 1;
}

/* Scratch from the host caching allocator (the packing buffers of a training step have the
 * same sizes every step: cached, their pages stay mapped); NULL on overflow or out of memory. */
static void *gemm_scratch(size_t bytes)
{
    return bytes ? ddpl_host_scratch_alloc(bytes) : NULL;
}

static void gemm_batches(int64_t begin, int64_t end, int part, int thread, void *ctx)
{
    DDPL_UNUSED(part);
    DDPL_UNUSED(thread);
    const gemm_job *j = ctx;
    size_t esz = ddpl_dtype_size(j->compute);
    bool pack_a = j->a.layout == LAYOUT_PACK || j->dt != j->compute;
    bool pack_b = j->b.layout == LAYOUT_PACK || j->dt != j->compute;
    bool pack_c = j->c.layout == LAYOUT_PACK || j->dt != j->compute;
    /* scratch is small next to the product for the layouts that need it; it is only allocated
     * for operands that BLAS cannot read in place */
    size_t na = gemm_scratch_bytes(j->M, j->K, esz), nb = gemm_scratch_bytes(j->K, j->N, esz),
           nc = gemm_scratch_bytes(j->M, j->N, esz);
    void *sa = pack_a ? gemm_scratch(na) : NULL;
    void *sb = pack_b ? gemm_scratch(nb) : NULL;
    void *sc = pack_c ? gemm_scratch(nc) : NULL;
    if ((pack_a && !sa) || (pack_b && !sb) || (pack_c && !sc)) {
        atomic_store(&((gemm_job *)ctx)->out_of_memory, 1);
        begin = end;
    }
    for (int64_t b = begin; b < end; b++) {
        int64_t lda, ldb;
        bool ta, tb;
        const char *pa = operand(j, &j->a, b, sa, &lda, &ta);
        const char *pb = operand(j, &j->b, b, sb, &ldb, &tb);
        char *pc = j->c.base + b * j->c.bstride;
        if (pack_c) {
            if (j->beta != 0) pack(&j->c, pc, j->dt, sc, j->compute, false);
            cpu_blas_gemm(j->compute, ta, tb, j->M, j->N, j->K, j->alpha, pa, lda, pb, ldb, j->beta,
                          sc, j->N > 1 ? j->N : 1);
            pack(&j->c, pc, j->dt, sc, j->compute, true);
        } else if (j->c.layout == LAYOUT_COL) {
            /* C^T (N,M) = op(B)^T @ op(A)^T, row-major with C's leading dimension */
            cpu_blas_gemm(j->compute, !tb, !ta, j->N, j->M, j->K, j->alpha, pb, ldb, pa, lda,
                          j->beta, pc, j->c.ld);
        } else {
            cpu_blas_gemm(j->compute, ta, tb, j->M, j->N, j->K, j->alpha, pa, lda, pb, ldb, j->beta,
                          pc, j->c.ld);
        }
    }
    ddpl_host_scratch_free(sa, na);
    ddpl_host_scratch_free(sb, nb);
    ddpl_host_scratch_free(sc, nc);
}

/* Integer dtypes: out = alpha*sum_k a*b + beta*out in int64, wrapping. */
static void gemm_integer(const gemm_job *j, int64_t batches)
{
    int64_t alpha = (int64_t)j->alpha, beta = (int64_t)j->beta;
    size_t esz = ddpl_dtype_size(j->dt);
    for (int64_t b = 0; b < batches; b++) {
        const char *pa = j->a.base + b * j->a.bstride, *pb = j->b.base + b * j->b.bstride;
        char *pc = j->c.base + b * j->c.bstride;
        for (int64_t m = 0; m < j->M; m++)
            for (int64_t n = 0; n < j->N; n++) {
                uint64_t acc = 0; /* unsigned: overflow wraps instead of being undefined */
                for (int64_t k = 0; k < j->K; k++)
                    acc += (uint64_t)ddpl_load_i64(pa + (m * j->a.rs + k * j->a.cs) * esz, j->dt) *
                           (uint64_t)ddpl_load_i64(pb + (k * j->b.rs + n * j->b.cs) * esz, j->dt);
                char *o = pc + (m * j->c.rs + n * j->c.cs) * esz;
                uint64_t r = (uint64_t)alpha * acc;
                if (beta != 0) r += (uint64_t)beta * (uint64_t)ddpl_load_i64(o, j->dt);
                ddpl_store_i64(o, j->dt, (int64_t)r);
            }
    }
}

/* bfloat16 on AVX512-BF16: one cpu_bf16_gemm per batch (it reads any strides itself). */
static void bf16_batches(int64_t begin, int64_t end, int part, int thread, void *ctx)
{
    DDPL_UNUSED(part);
    DDPL_UNUSED(thread);
    gemm_job *j = ctx;
    for (int64_t b = begin; b < end; b++) {
        cpu_bf16_matrix A = {(const uint16_t *)(j->a.base + b * j->a.bstride), j->a.rs, j->a.cs};
        cpu_bf16_matrix B = {(const uint16_t *)(j->b.base + b * j->b.bstride), j->b.rs, j->b.cs};
        if (cpu_bf16_gemm(j->M, j->N, j->K, (float)j->alpha, A, B, (float)j->beta,
                          j->c.base + b * j->c.bstride, DDPL_BFLOAT16, j->c.rs, j->c.cs) < 0) {
            atomic_store(&j->out_of_memory, 1);
            return;
        }
    }
}

/* K == 0: the product is zero, so out = beta*out. */
static void scale_output(const gemm_job *j, int64_t batches)
{
    size_t esz = ddpl_dtype_size(j->dt);
    for (int64_t b = 0; b < batches; b++) {
        char *pc = j->c.base + b * j->c.bstride;
        for (int64_t m = 0; m < j->M; m++)
            for (int64_t n = 0; n < j->N; n++) {
                char *o = pc + (m * j->c.rs + n * j->c.cs) * esz;
                ddpl_store_f64(o, j->dt, j->beta == 0 ? 0.0 : j->beta * ddpl_load_f64(o, j->dt));
            }
    }
}

/* float16 always widens on the CPU; bfloat16 runs natively on AVX512-BF16. */
bool cpu_gemm_native(ddpl_dtype dt)
{
    return dt == DDPL_BFLOAT16 ? cpu_bf16_gemm_available() : dt != DDPL_FLOAT16;
}

/* out[0] (B,M,N), in[0] (B,M,K), in[1] (B,K,N); params ddpl_gemm_params. */
int cpu_gemm(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_gemm_params *p = params;
    ddpl_tensor *c = out[0], *a = in[0], *b = in[1];
    gemm_job j = {.dt = (ddpl_dtype)c->dtype, .alpha = p->alpha, .beta = p->beta};
    int64_t batches = c->sizes[0];
    j.M = c->sizes[1];
    j.N = c->sizes[2];
    j.K = a->sizes[2];
    if (batches == 0 || j.M == 0 || j.N == 0) return 0;
    if (j.M > INT_MAX || j.N > INT_MAX || j.K > INT_MAX)
        return ddpl_error("matmul: matrix sizes (%lld,%lld,%lld) exceed the BLAS limit of "
                          "2^31-1",
                          (long long)j.M, (long long)j.N, (long long)j.K);
    mat_desc_init(&j.a, a);
    mat_desc_init(&j.b, b);
    mat_desc_init(&j.c, c);
    if (j.K == 0) {
        scale_output(&j, batches);
        return 0;
    }
    switch (j.dt) {
    case DDPL_FLOAT32:
    case DDPL_FLOAT64:
        j.compute = j.dt;
        break;
    case DDPL_BFLOAT16:
        if (cpu_bf16_gemm_available()) {
            j.compute = DDPL_BFLOAT16;
            break;
        }
        __attribute__((fallthrough)); /* no bf16 units: widen to float32 */
    case DDPL_FLOAT16:
        j.compute = DDPL_FLOAT32;
        break;
    default:
        gemm_integer(&j, batches);
        return 0;
    }
    /* OpenBLAS splits one GEMM over threads only above about 2^18 multiply-adds; below that,
     * or with many batches, splitting over the batch is what keeps every core busy */
    double mnk = (double)j.M * (double)j.N * (double)j.K;
    void (*run)(int64_t, int64_t, int, int, void *) =
        j.compute == DDPL_BFLOAT16 ? bf16_batches : gemm_batches;
    if (batches >= 2 && (mnk <= 1048576.0 || batches >= 2 * cpu_blas_max_threads()))
        cpu_blas_parallel_for(batches, 0, run, &j);
    else
        run(0, batches, 0, 0, &j);
    if (atomic_load(&j.out_of_memory))
        return ddpl_error("matmul: out of memory for the scratch copy of a strided operand");
    return 0;
}
