/* ops/nn_misc.c: the layers that are compositions of other ops: linear, embedding, dropout.
 * defines: ddpl_linear, ddpl_embedding, ddpl_dropout, ddpl_dropout_.
 *
 * Their gradients come from the ops they are built of (addmm/matmul, index_select, mul). */
#include "autocast.h"
#include "nn_common.h"

/* ---- linear ---- */

static ddpl_tensor *linear_impl(ddpl_tensor *x, ddpl_tensor *weight, ddpl_tensor *bias);

/* Under autocast x, weight and bias are cast to the autocast dtype first (PyTorch's lower
 * precision list), so a float32 weight meets a bfloat16 activation without a dtype error. */
ddpl_tensor *ddpl_linear(ddpl_tensor *x, ddpl_tensor *weight, ddpl_tensor *bias)
{
    if (!ddpl_autocast_enabled((ddpl_device_type)x->device.type))
        return linear_impl(x, weight, bias);
    ddpl_tensor *c[3];
    ddpl_tensor *y = ddpl_autocast_lower_n(3, OP_INPUTS(x, weight, bias), c) == 0
                         ? linear_impl(c[0], c[1], c[2])
                         : NULL;
    ddpl_autocast_release_n(3, c);
    return y;
}

/* x (*, in) @ weight^T (in, out) + bias (out): leading dims fold into GEMM rows, and the
 * transposed weight is a view that BLAS reads with CblasTrans, so nothing is copied. */
static ddpl_tensor *linear_impl(ddpl_tensor *x, ddpl_tensor *weight, ddpl_tensor *bias)
{
    char sx[128], sw[128];
    if (ddpl_check_floating("linear", x) < 0 || ddpl_check_same_device("linear", x, weight) < 0)
        return NULL;
    if (weight->ndim != 2 || x->ndim < 1 || x->sizes[x->ndim - 1] != weight->sizes[1])
        return ddpl_error("linear: input %s and weight %s do not match (expected input (*, in) "
                          "and weight (out, in))",
                          ddpl_shape_str(x, sx, sizeof sx), ddpl_shape_str(weight, sw, sizeof sw)),
               NULL;
    if (weight->dtype != x->dtype)
        return ddpl_error("linear: input (%s) and weight (%s) must have the same dtype",
                          ddpl_dtype_name((ddpl_dtype)x->dtype),
                          ddpl_dtype_name((ddpl_dtype)weight->dtype)),
               NULL;
    if (bias && nn_check_param("linear", "bias", bias, x, weight->sizes[0]) < 0) return NULL;

    int64_t in = weight->sizes[1], out = weight->sizes[0];
    ddpl_tensor *wt = ddpl_t(weight);
    if (!wt) return NULL;
    ddpl_tensor *x2 =
        x->ndim == 2 ? ddpl_tensor_retain(x) : ddpl_reshape(x, 2, (int64_t[]){-1, in});
    ddpl_tensor *y2 = NULL;
    if (x2) y2 = bias ? ddpl_addmm(bias, x2, wt, 1.0, 1.0) : ddpl_mm(x2, wt);
    ddpl_tensor *y = NULL;
    if (y2 && x->ndim == 2) {
        y = ddpl_tensor_retain(y2);
    } else if (y2) {
        int64_t sizes[DDPL_MAX_DIMS];
        memcpy(sizes, x->sizes, (size_t)(x->ndim - 1) * sizeof *sizes);
        sizes[x->ndim - 1] = out;
        y = ddpl_view(y2, x->ndim, sizes);
    }
    ddpl_tensor_release(wt);
    ddpl_tensor_release(x2);
    ddpl_tensor_release(y2);
    return y;
}

/* ---- embedding ---- */

/* index (*) int64, weight (n, d) -> (*, d): rows of weight picked with index_select, whose
 * gradient adds the incoming rows back at their indices (repeated tokens accumulate). */
ddpl_tensor *ddpl_embedding(ddpl_tensor *index, ddpl_tensor *weight)
{
    char sw[128];
    if (index->dtype != DDPL_INT64)
        return ddpl_error("embedding: indices must be an int64 tensor, got %s",
                          ddpl_dtype_name((ddpl_dtype)index->dtype)),
               NULL;
    if (weight->ndim != 2)
        return ddpl_error("embedding: weight must be 2-D (num_embeddings, embedding_dim), got "
                          "shape %s",
                          ddpl_shape_str(weight, sw, sizeof sw)),
               NULL;
    if (index->ndim >= DDPL_MAX_DIMS)
        return ddpl_error("embedding: indices have %d dimensions, at most %d are supported",
                          index->ndim, DDPL_MAX_DIMS - 1),
               NULL;
    ddpl_tensor *flat = ddpl_reshape(index, 1, (int64_t[]){-1});
    ddpl_tensor *rows = flat ? ddpl_index_select(weight, 0, flat) : NULL;
    ddpl_tensor_release(flat);
    if (!rows) {
        nn_rename_error("index_select", "embedding");
        return NULL;
    }
    int64_t sizes[DDPL_MAX_DIMS];
    memcpy(sizes, index->sizes, (size_t)index->ndim * sizeof *sizes);
    sizes[index->ndim] = weight->sizes[1];
    ddpl_tensor *y = ddpl_view(rows, index->ndim + 1, sizes);
    ddpl_tensor_release(rows);
    return y;
}

/* ---- dropout ---- */

/* The mask of dropout with probability p of x's shape and dtype: 0 where dropped, 1/(1-p) where
 * kept, so the expectation is unchanged; the gradient is the same mask. NULL when nothing is
 * dropped (p = 0 or evaluation mode; *err tells a failure apart). */
static ddpl_tensor *dropout_mask(const char *op, ddpl_tensor *x, double p, bool training, int *err)
{
    *err = -1;
    if (!(p >= 0 && p <= 1))
        return ddpl_error("%s: probability has to be between 0 and 1, but got %g", op, p), NULL;
    if (ddpl_check_floating(op, x) < 0) return NULL;
    *err = 0;
    if (!training || p == 0) return NULL;
    *err = -1;
    ddpl_tensor *mask = ddpl_tensor_new(x->ndim, x->sizes, (ddpl_dtype)x->dtype, x->device);
    if (!mask) return NULL;
    int rc = 0;
    if (p == 1) {
        rc = ddpl_fill_(mask, 0.0); /* everything dropped: zeros, and zero gradient */
    } else {
        rc = ddpl_bernoulli_(mask, 1 - p);
        ddpl_tensor *scale = rc == 0 ? ddpl_wrapped_number(1 / (1 - p), false) : NULL;
        rc = scale ? ddpl_mul_(mask, scale) : -1;
        ddpl_tensor_release(scale);
    }
    if (rc < 0) {
        ddpl_tensor_release(mask);
        return NULL;
    }
    *err = 0;
    return mask;
}

/* p = 0 or evaluation mode returns x itself. */
ddpl_tensor *ddpl_dropout(ddpl_tensor *x, double p, bool training)
{
    int err;
    ddpl_tensor *mask = dropout_mask("dropout", x, p, training, &err);
    if (!mask) return err ? NULL : ddpl_tensor_retain(x);
    ddpl_tensor *y = ddpl_mul(x, mask);
    ddpl_tensor_release(mask);
    return y;
}

/* In place, mul_ by the mask: recorded by autograd as mul_ is (a MulBackward0 node). */
int ddpl_dropout_(ddpl_tensor *x, double p, bool training)
{
    int err;
    ddpl_tensor *mask = dropout_mask("dropout_", x, p, training, &err);
    if (!mask) return err;
    int rc = ddpl_mul_(x, mask);
    ddpl_tensor_release(mask);
    return rc;
}
