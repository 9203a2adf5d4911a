/* cpu/cpu_iter.c: see cpu_iter.h.
 * defines: cpu_iter_init, cpu_iter_run, cpu_parallel_for. */
#include "cpu_iter.h"

#include "cpu_threads.h"

void cpu_iter_init(cpu_iter *it, int nops, ddpl_tensor *const *ops)
{
    const ddpl_tensor *out = ops[0];
    int nd = out->ndim;
    it->nops = nops;
    it->numel = ddpl_numel(out->ndim, out->sizes);
    for (int k = 0; k < nops; k++) it->data[k] = ddpl_data_ptr(ops[k]);

    /* gather sizes and byte strides, dropping size-1 dims */
    int n = 0;
    int64_t sizes[DDPL_MAX_DIMS], strides[CPU_ITER_MAX_OPS][DDPL_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        if (out->sizes[d] == 1) continue;
        sizes[n] = out->sizes[d];
        for (int k = 0; k < nops; k++) {
            const ddpl_tensor *t = ops[k];
            int td = d - (nd - t->ndim); /* right-aligned broadcasting */
            int64_t esz = (int64_t)ddpl_dtype_size((ddpl_dtype)t->dtype);
            strides[k][n] = (td < 0 || t->sizes[td] == 1) ? 0 : t->strides[td] * esz;
        }
        n++;
    }
    if (n == 0) { /* a single element */
        sizes[0] = 1;
        for (int k = 0; k < nops; k++) strides[k][0] = 0;
        n = 1;
    }
    /* merge dim i into i+1 when every operand steps through them as one */
    int m = 0;
    it->sizes[0] = sizes[0];
    for (int k = 0; k < nops; k++) it->strides[k][0] = strides[k][0];
    for (int d = 1; d < n; d++) {
        bool mergeable = true;
        for (int k = 0; k < nops; k++) {
            int64_t span; /* overflow-safe: a huge as_strided stride must not wrap into a match */
            if (ddpl_mul_overflow(strides[k][d], sizes[d], &span) || it->strides[k][m] != span)
                mergeable = false;
        }
        if (mergeable) {
            it->sizes[m] *= sizes[d];
            for (int k = 0; k < nops; k++) it->strides[k][m] = strides[k][d];
        } else {
            m++;
            it->sizes[m] = sizes[d];
            for (int k = 0; k < nops; k++) it->strides[k][m] = strides[k][d];
        }
    }
    it->ndim = m + 1;
}

typedef struct {
    const cpu_iter *it;
    cpu_loop_fn fn;
    void *ctx;
} run_ctx;

/* Processes logical elements [begin, end) of the iteration space. */
static void run_range(int64_t begin, int64_t end, void *p)
{
    run_ctx *rc = p;
    const cpu_iter *it = rc->it;
    int nd = it->ndim, nops = it->nops;
    int64_t inner = it->sizes[nd - 1];
    int64_t idx[DDPL_MAX_DIMS];
    int64_t rem = begin / inner;
    for (int d = nd - 2; d >= 0; d--) {
        idx[d] = rem % it->sizes[d];
        rem /= it->sizes[d];
    }
    int64_t inner_strides[CPU_ITER_MAX_OPS];
    for (int k = 0; k < nops; k++) inner_strides[k] = it->strides[k][nd - 1];
    int64_t pos = begin;
    while (pos < end) {
        int64_t i0 = pos % inner;
        int64_t n = inner - i0;
        if (n > end - pos) n = end - pos;
        char *ptrs[CPU_ITER_MAX_OPS];
        for (int k = 0; k < nops; k++) {
            int64_t off = i0 * it->strides[k][nd - 1];
            for (int d = 0; d < nd - 1; d++) off += idx[d] * it->strides[k][d];
            ptrs[k] = it->data[k] + off;
        }
        rc->fn(ptrs, inner_strides, n, rc->ctx);
        pos += n;
        for (int d = nd - 2; d >= 0; d--) { /* odometer step of the outer dims */
            if (++idx[d] < it->sizes[d]) break;
            idx[d] = 0;
        }
    }
}

void cpu_iter_run(const cpu_iter *it, cpu_loop_fn fn, void *ctx)
{
    if (it->numel == 0) return;
    run_ctx rc = {it, fn, ctx};
    cpu_parallel_for(it->numel, CPU_GRAIN, run_range, &rc);
}

typedef struct {
    int64_t n, chunk;
    void (*fn)(int64_t, int64_t, void *);
    void *ctx;
} range_job;

static void range_part(int part, int thread, void *p)
{
    DDPL_UNUSED(thread);
    const range_job *j = p;
    int64_t b = (int64_t)part * j->chunk, e = b + j->chunk < j->n ? b + j->chunk : j->n;
    if (b < e) j->fn(b, e, j->ctx);
}

void cpu_parallel_for(int64_t n, int64_t grain, void (*fn)(int64_t, int64_t, void *), void *ctx)
{
    if (n <= 0) return;
    int nt = cpu_threads_get();
    if (n < 2 * grain || nt == 1 || cpu_threads_in_parallel()) {
        fn(0, n, ctx);
        return;
    }
    /* a few parts per thread, each at least `grain`: a late thread's share is taken by the
     * others, and the job ends at most one short part after its last start (cpu_threads.h) */
    int64_t want = n / grain, most = (int64_t)CPU_PARTS_PER_THREAD * nt;
    int64_t parts = want < most ? want : most;
    range_job j = {n, (n + parts - 1) / parts, fn, ctx};
    cpu_threads_run((int)((n + j.chunk - 1) / j.chunk), range_part, &j);
}
