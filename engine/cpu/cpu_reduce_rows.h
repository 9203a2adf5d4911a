/* cpu/cpu_reduce_rows.h: the typed row loops of the reduction kernels (cpu_reduce_rows.c),
 * which cpu_reduce.c's drivers run over the rows of a reduction. Internal to engine/cpu. */
#ifndef DDPL_CPU_REDUCE_ROWS_H
#define DDPL_CPU_REDUCE_ROWS_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu_kernels.h"

/* RED_SUMSQ: the sum of squares (norm p=2), each square rounded to the dtype as the separate
 * x * x it replaces was, then accumulated like a sum, so the result bits are unchanged.
 * RED_NANSUM: a sum that reads each NaN element as 0 (a NaN made by the sum itself, +inf plus
 * -inf, stays), in the sum's order: without NaN its bits are the sum's. */
typedef enum { RED_SUM, RED_PROD, RED_MAX, RED_MIN, RED_SUMSQ, RED_NANSUM } red_kind;

/* Keeps a float64 square and the add after it two roundings (no fma), as x * x then sum; and
 * the column loops' float -> double accumulation as the rows' (cpu_reduce.c col_range). */
#define NO_FP_CONTRACT __attribute__((optimize("fp-contract=off")))

/* max/min in double where a NaN wins, as in PyTorch */
#define OP_MAX(a, b) (((a) != (a) || (a) > (b)) ? (a) : (b))
#define OP_MIN(a, b) (((a) != (a) || (a) < (b)) ? (a) : (b))

/* an element read as a double: as it is, NaN as 0, a bfloat16 widened exactly */
#define LOAD_PLAIN(v) ((double)(v))
#define NAN0(v)       ((v) != (v) ? 0.0 : (v))
#define LOAD_BF16(v)  ((double)ddpl_bf16_to_float(v))

/* init combined with the n elements at p (element stride s), accumulated in double */
typedef double (*row_fn)(const char *p, int64_t n, int64_t s, double init);
/* indexed by red_kind; bfloat16 has no sum of squares (each square is rounded to bfloat16
 * first: the generic loop) */
extern const row_fn cpu_rows_f32[6], cpu_rows_f64[6], cpu_rows_bf16[6];

/* both extremes of a contiguous row, folded into *mn and *mx (a NaN makes both NaN) */
void cpu_row_minmax_f32(const char *p, int64_t n, double *mn, double *mx);
void cpu_row_minmax_f64(const char *p, int64_t n, double *mn, double *mx);

/* integer rows: the wrap-around sum of a contiguous row of bool/uint8/int32/int64 (the dtypes
 * cpu_has_isum_row accepts), and an int64 row's max (is_max) or min from acc */
int64_t cpu_row_isum(const char *p, int64_t n, ddpl_dtype dt);
bool cpu_has_isum_row(ddpl_dtype dt);
int64_t cpu_row_iext(const int64_t *p, int64_t n, bool is_max, int64_t acc);

#endif
