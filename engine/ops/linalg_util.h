/* ops/linalg_util.h: what the linear-algebra ops share (internal to engine/ops).
 * defines: la_batch, la_check_matrix, la_host_f64, la_from_host, la_mT, la_eye_like,
 *          la_weights, la_parts, la_batch_error.
 *
 * The decompositions run on the host in float64 (core/linalg_ref.h) whatever the device and
 * dtype: the operand is converted to float64 and copied to the host, each matrix of the batch
 * is factored there, and the results are copied back and converted to the operand's dtype. For
 * CUDA this is the documented choice (no cuSOLVER on every build; the matrices these ops see
 * are small); gradients are compositions of ops, so they run on the device. */
#ifndef DDPL_OPS_LINALG_UTIL_H
#define DDPL_OPS_LINALG_UTIL_H

#include "op_util.h"

/* A batch of matrices (..., m, n): nb matrices, batch dims bsizes[0..bdim). */
typedef struct la_batch {
    int bdim;
    int64_t bsizes[DDPL_MAX_DIMS];
    int64_t nb, m, n;
} la_batch;

/* Checks that x is a float32/float64 tensor with at least 2 dims (square ones when square) and
 * fills b; -1 with an error naming op. */
int la_check_matrix(const char *op, const ddpl_tensor *x, bool square, la_batch *b);
/* x's elements as float64 on the host, contiguous (malloc; the caller frees); NULL with an
 * error. */
double *la_host_f64(ddpl_tensor *x);
/* A new tensor of sizes (ndim) on like's device with like's dtype from float64 host data. */
ddpl_tensor *la_from_host(const double *data, int ndim, const int64_t *sizes,
                          const ddpl_tensor *like);
/* x with its last two dims swapped (a view, with autograd). */
ddpl_tensor *la_mT(ddpl_tensor *x);
/* An n x n matrix on like's device and dtype whose entries are below the diagonal `lo`, on it
 * `diag` and above it `hi` (tril/triu masks and the 0.5-diagonal weights of the formulas). */
ddpl_tensor *la_weights(int64_t n, double lo, double diag, double hi, const ddpl_tensor *like);
/* The batch dims of b followed by the given trailing sizes, into sizes; returns the ndim. */
int la_shape(const la_batch *b, int ntrail, const int64_t *trail, int64_t *sizes);
/* Splits the last dim of packed (..., total) into parts: part i is reshaped to the batch dims
 * of b followed by the trailing sizes shapes[i][0..nd[i]) (with autograd: narrow and reshape).
 * Returns 0, or -1 with the parts made so far released. */
int la_parts(ddpl_tensor *packed, const la_batch *b, int np, const int *nd,
             const int64_t (*shapes)[2], ddpl_tensor **outs);
/* The error for matrix `index` of a batch of nb (PyTorch's "(Batch element i): " prefix when
 * nb > 1); message is formatted after it. Returns -1. */
int la_batch_error(const char *op, int64_t nb, int64_t index, const char *message);

#endif
