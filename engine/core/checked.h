/* core/checked.h: overflow-checked size arithmetic and float-to-integer conversion, the one
 * place every layer takes them from.
 * defines: DDPL_MAX_NUMEL, ddpl_mul_overflow, ddpl_add_overflow, ddpl_bytes_overflow,
 *          ddpl_malloc_array, ddpl_check_shape, ddpl_check_view_geometry, ddpl_f64_to_i64.
 *
 * Sizes, strides and offsets are int64 element counts. A shape is accepted when its sizes are
 * non-negative and the product of max(size, 1) over its dimensions (its numel, and what its
 * contiguous strides reach) is at most DDPL_MAX_NUMEL, so that every element index, contiguous
 * stride and numel of a tensor that exists fits in int64 with room for one more product by a
 * small factor. Byte counts are size_t and go through ddpl_bytes_overflow. The helpers are
 * compiler builtins (no division): they run on every tensor creation.
 * docs/internals/hostile-input.md explains the limits. */
#ifndef DDPL_CHECKED_H
#define DDPL_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "ddpl/tensor.h"

/* 2^62 elements: far above any memory, far below int64's wrap. */
#define DDPL_MAX_NUMEL ((int64_t)1 << 62)

/* A double as int64: truncated toward zero as C and PyTorch do; NaN gives 0 and values beyond
 * int64's range clamp to its ends, where a plain cast is undefined behaviour. */
static inline int64_t ddpl_f64_to_i64(double v)
{
    if (v != v) return 0;
    if (v >= 9.2233720368547758e18) return INT64_MAX; /* 2^63 */
    if (v <= -9.2233720368547758e18) return INT64_MIN;
    return (int64_t)v;
}

/* *out = a * b; true when the exact product does not fit in int64 (then *out is unspecified). */
static inline bool ddpl_mul_overflow(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}

/* *out = a + b; true when the exact sum does not fit in int64. */
static inline bool ddpl_add_overflow(int64_t a, int64_t b, int64_t *out)
{
    return __builtin_add_overflow(a, b, out);
}

/* *out = count * elem_size bytes; true when count is negative or the product does not fit in
 * size_t. */
static inline bool ddpl_bytes_overflow(int64_t count, size_t elem_size, size_t *out)
{
    if (count < 0) return true;
    return __builtin_mul_overflow((uint64_t)count, (uint64_t)elem_size, out);
}

/* malloc of count items of size bytes (at least one byte); NULL when the count is negative,
 * the byte count overflows or memory runs out. */
static inline void *ddpl_malloc_array(int64_t count, size_t size)
{
    size_t n;
    if (ddpl_bytes_overflow(count, size, &n)) return NULL;
    return malloc(n ? n : 1);
}

/* 0 when sizes[0..ndim) is a shape a tensor may have (see above), storing its numel in *numel
 * (may be NULL); else -1 with an error "op: ..." naming the shape. */
int ddpl_check_shape(const char *op, int ndim, const int64_t *sizes, int64_t *numel);

/* 0 when a view of the given geometry over a storage of storage_bytes bytes of elements of
 * elem_size bytes reaches only elements inside it (offset and strides non-negative; an empty
 * view may start at the storage's end); else -1 with an error naming op, the geometry and the
 * storage size. The shape is checked too (ddpl_check_shape). */
int ddpl_check_view_geometry(const char *op, int ndim, const int64_t *sizes, const int64_t *strides,
                             int64_t offset, size_t elem_size, size_t storage_bytes);

#endif
