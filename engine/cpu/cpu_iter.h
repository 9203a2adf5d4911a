/* cpu/cpu_iter.h: strided N-d iteration over up to 4 operands, the loop under every pointwise
 * CPU kernel.
 * defines: cpu_iter, cpu_iter_init, cpu_iter_run, cpu_parallel_for, CPU_GRAIN.
 *
 * Operand 0 is the output; inputs must have the output's shape or be broadcastable to it (their
 * missing or size-1 dims iterate with stride 0). Dims that are contiguous across every operand
 * are merged, so a contiguous tensor becomes one long inner loop the compiler vectorises. */
#ifndef DDPL_CPU_ITER_H
#define DDPL_CPU_ITER_H

#include "core/core.h"

#define CPU_ITER_MAX_OPS 4
/* Elements below which a loop stays on one thread: forking costs about a microsecond. */
#define CPU_GRAIN 32768

typedef struct cpu_iter {
    int ndim; /* >= 1; innermost dim last */
    int nops;
    int64_t numel;
    int64_t sizes[DDPL_MAX_DIMS];
    int64_t strides[CPU_ITER_MAX_OPS][DDPL_MAX_DIMS]; /* bytes */
    char *data[CPU_ITER_MAX_OPS];
} cpu_iter;

/* data[k] points at operand k's first element of the segment; strides[k] is its byte stride
 * along the inner dim; n elements. */
typedef void (*cpu_loop_fn)(char **data, const int64_t *strides, int64_t n, void *ctx);

void cpu_iter_init(cpu_iter *it, int nops, ddpl_tensor *const *ops);
/* Runs fn over every inner segment, in parallel chunks when the work is large. */
void cpu_iter_run(const cpu_iter *it, cpu_loop_fn fn, void *ctx);

/* Element offset in t of slice s, the slices being numbered row-major over every dim but dim
 * (the 1-D lines along dim that sort and topk work on). */
static inline int64_t cpu_slice_offset(const ddpl_tensor *t, int dim, int64_t s)
{
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (d == dim) continue;
        off += (s % t->sizes[d]) * t->strides[d];
        s /= t->sizes[d];
    }
    return off;
}

/* Calls fn(begin, end, ctx) over [0, n) split across threads when n >= grain. */
void cpu_parallel_for(int64_t n, int64_t grain, void (*fn)(int64_t begin, int64_t end, void *ctx),
                      void *ctx);

#endif
