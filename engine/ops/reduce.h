/* ops/reduce.h: helpers shared by the reduction op files (reduce.c, reduce_stats.c).
 * defines: reduce_ctx, red_mask_dims, red_mask_all, red_forward, red_expand_back,
 *          red_keep_view, red_drop_reduced, red_count, red_scale_, red_amax_keep,
 *          ddpl_select_positions, ddpl_select_ranks (ops/sort.c).
 *
 * A reduction is described by a bit mask of input dims (bit d: dim d is reduced) and keepdim.
 * The kernels write a keepdim-shaped output; without keepdim the op returns a view of it with
 * the reduced dims dropped. Backward formulas get the input's geometry from their edge. */
#ifndef DDPL_OPS_REDUCE_H
#define DDPL_OPS_REDUCE_H

#include "pointwise.h"

/* What a reduction node keeps in its ctx block. */
typedef struct reduce_ctx {
    uint32_t mask;
    bool keepdim;
    int correction; /* var/std */
    double p;       /* norm */
} reduce_ctx;

/* mask of the given dims of x (negative dims count from the end); repeated dims are an error
 * naming op. An empty list reduces every dim, as PyTorch's dim=[]. */
int red_mask_dims(const char *op, const ddpl_tensor *x, int ndims, const int *dims, uint32_t *mask);
static inline uint32_t red_mask_all(const ddpl_tensor *x)
{
    return x->ndim ? (uint32_t)((1ull << x->ndim) - 1) : 0;
}
/* Number of elements each output reduces. */
int64_t red_count(const ddpl_tensor *x, uint32_t mask);

/* kop over the masked dims of x into a new tensor of dtype out_dt (keepdim shape, or the view
 * without the reduced dims); no autograd. */
ddpl_tensor *red_forward(const char *op, ddpl_op kop, ddpl_tensor *x, uint32_t mask, bool keepdim,
                         ddpl_dtype out_dt);
/* amax over mask with keepdim shape; no autograd, no emptiness check. */
ddpl_tensor *red_amax_keep(ddpl_tensor *x, uint32_t mask);

/* t (a reduction's result or its gradient) viewed with the input's full shape: stride 0 along
 * the reduced dims. */
ddpl_tensor *red_expand_back(ddpl_tensor *t, int ndim, const int64_t *sizes, uint32_t mask,
                             bool keepdim);
/* t viewed with the keepdim shape (size 1 at reduced dims). */
ddpl_tensor *red_keep_view(ddpl_tensor *t, int ndim, const int64_t *sizes, uint32_t mask,
                           bool keepdim);
/* The view of a keepdim result t without the reduced dims (consumes t's reference). */
ddpl_tensor *red_drop_reduced(ddpl_tensor *t, uint32_t mask);
/* t <- kop(t, s) in place (DIV: t / s), without autograd (t is a fresh result). */
int red_scale_(ddpl_tensor *t, ddpl_op kop, double s);

/* Selection by rank through the KTHVALUE kernel (ops/sort.c; callers check that the backend
 * has it): the int64 positions (M, x's sizes with dim of size 1) of the ranks p names (ranks of
 * that shape for DDPL_SELECT_RANKS), and the values and indices of a single rank, gathered
 * from x (differentiable), keepdim as asked. Errors are named for op. */
ddpl_tensor *ddpl_select_positions(const char *op, ddpl_tensor *x, const ddpl_kthvalue_params *p,
                                   ddpl_tensor *ranks);
int ddpl_select_ranks(const char *op, ddpl_tensor *x, int d, const ddpl_kthvalue_params *p,
                      bool keepdim, ddpl_tensor **values, ddpl_tensor **indices);

#endif
