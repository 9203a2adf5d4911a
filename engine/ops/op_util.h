/* ops/op_util.h: checks and small helpers shared by the op implementations.
 * defines: ddpl_check_inplace, ddpl_check_no_internal_overlap, ddpl_check_same_device,
 * ddpl_check_floating, ddpl_as_dtype, ddpl_tensor_host_copy, OP_INPUTS. */
#ifndef DDPL_OP_UTIL_H
#define DDPL_OP_UTIL_H

#include "autograd/graph.h"
#include "ddpl/ops.h"
#include "dispatch.h"
#include "kernel_params.h"

/* In-place writes are refused on tensors that take part in autograd (PyTorch refuses leaves
 * that require grad; we also refuse non-leaves, whose history we do not rebase). */
int ddpl_check_inplace(const char *op, const ddpl_tensor *x);
/* An error unless every element of x, the tensor an op writes, has a memory location of its
 * own: PyTorch's internal-overlap rule, which refuses a stride of 0 in a dimension of size > 1
 * (an expanded view) and lets other layouts through. */
int ddpl_check_no_internal_overlap(const char *op, const ddpl_tensor *x);
int ddpl_check_same_device(const char *op, const ddpl_tensor *a, const ddpl_tensor *b);
int ddpl_check_floating(const char *op, const ddpl_tensor *x);
/* x converted to dt without autograd (x itself, retained, when it already has dt). */
ddpl_tensor *ddpl_as_dtype(ddpl_tensor *x, ddpl_dtype dt);
/* x converted to dt with autograd (for ops that compute in a promoted dtype). */
ddpl_tensor *ddpl_to_dtype(ddpl_tensor *x, ddpl_dtype dt);
/* Gradient of a broadcast input: sums grad over the broadcast dims down to sizes (ndim dims). */
ddpl_tensor *ddpl_sum_to(ddpl_tensor *grad, int ndim, const int64_t *sizes);
/* Contiguous host copy of the elements (malloc; caller frees); NULL with an error
 * (ops/readback.c). */
void *ddpl_tensor_host_copy(const ddpl_tensor *t);

#define OP_INPUTS(...) ((ddpl_tensor *[]){__VA_ARGS__})

#endif
