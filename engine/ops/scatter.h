/* ops/scatter.h: the steps of ops/scatter.c that the other issue-29 index ops build on
 * (ops/index_ops.c, ops/masked.c, ops/advanced_index.c). Not public API.
 * defines: ddpl_scatter_into, ddpl_scatter_as, ddpl_scatter_as_, ddpl_index_int64,
 *          ddpl_index_wrap, ddpl_flat_nonzero, ddpl_check_index_range. */
#ifndef DDPL_OPS_SCATTER_H
#define DDPL_OPS_SCATTER_H

#include "op_util.h"

/* out (written in place, no autograd, no checks) combined with src scattered by index along
 * the wrapped dim d; mode a ddpl_scatter_mode (or 100: mean). 0, or -1 naming op. */
int ddpl_scatter_into(const char *op, ddpl_tensor *out, int d, ddpl_tensor *index, ddpl_tensor *src,
                      int mode, bool include_self);
/* A plain scatter (the last write wins) reported as op: src (x's dtype), or value when src is
 * NULL; d wrapped and the shapes checked by the caller. Out of place with scatter's gradients,
 * or in place (0 or -1) with the in-place rules of ops/scatter.c. */
ddpl_tensor *ddpl_scatter_as(const char *op, ddpl_tensor *x, int d, ddpl_tensor *index,
                             ddpl_tensor *src, double value);
int ddpl_scatter_as_(const char *op, ddpl_tensor *x, int d, ddpl_tensor *index, ddpl_tensor *src,
                     double value);
/* index as int64 (a new reference; int32 converted), or NULL with an error naming op when it
 * is neither. */
ddpl_tensor *ddpl_index_int64(const char *op, ddpl_tensor *index);
/* int64 ix with the values in [-size, 0) moved up by size (PyTorch's negative indices); the
 * others unchanged, so the range check reports a bad one as the user wrote it. */
ddpl_tensor *ddpl_index_wrap(ddpl_tensor *ix, int64_t size);
/* The flat (row-major) positions, int64 1-D ascending, of t's non-zero elements; *count how
 * many (ops/masked.c). No autograd. */
ddpl_tensor *ddpl_flat_nonzero(ddpl_tensor *t, int64_t *count);
/* 0, or an error naming op and dim d unless every value of ix (int64, any shape) lies in
 * [0, size); on CUDA without a host sync, reported at the next synchronisation
 * (ops/advanced_index.c). */
int ddpl_check_index_range(const char *op, ddpl_tensor *ix, int d, int64_t size);

#endif
