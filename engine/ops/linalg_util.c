/* ops/linalg_util.c: the helpers of ops/linalg_util.h. */
#include "linalg_util.h"

int la_check_matrix(const char *op, const ddpl_tensor *x, bool square, la_batch *b)
{
    ddpl_dtype dt = (ddpl_dtype)x->dtype;
    if (!ddpl_dtype_is_floating(dt))
        return ddpl_error("%s: Expected a floating point tensor as input. Got %s", op,
                          ddpl_dtype_name(dt));
    if (dt != DDPL_FLOAT32 && dt != DDPL_FLOAT64)
        return ddpl_error("%s: Low precision dtypes not supported. Got %s", op,
                          ddpl_dtype_name(dt));
    if (x->ndim < 2)
        return ddpl_error("%s: The input tensor A must have at least 2 dimensions.", op);
    b->bdim = x->ndim - 2;
    b->nb = 1;
    for (int i = 0; i < b->bdim; i++) b->nb *= b->bsizes[i] = x->sizes[i];
    b->m = x->sizes[x->ndim - 2];
    b->n = x->sizes[x->ndim - 1];
    if (square && b->m != b->n)
        return ddpl_error("%s: A must be batches of square matrices, but they are %lld by %lld "
                          "matrices",
                          op, (long long)b->m, (long long)b->n);
    return 0;
}

double *la_host_f64(ddpl_tensor *x)
{
    ddpl_tensor *d = ddpl_as_dtype(x, DDPL_FLOAT64);
    double *h = d ? ddpl_tensor_host_copy(d) : NULL;
    ddpl_tensor_release(d);
    return h;
}

ddpl_tensor *la_from_host(const double *data, int ndim, const int64_t *sizes,
                          const ddpl_tensor *like)
{
    ddpl_tensor *d = ddpl_from_data(ndim, sizes, DDPL_FLOAT64, data, like->device);
    ddpl_tensor *r = d ? ddpl_as_dtype(d, (ddpl_dtype)like->dtype) : NULL;
    ddpl_tensor_release(d);
    return r;
}

ddpl_tensor *la_mT(ddpl_tensor *x)
{
    return ddpl_transpose(x, -2, -1);
}

ddpl_tensor *la_weights(int64_t n, double lo, double diag, double hi, const ddpl_tensor *like)
{
    double *w = ddpl_malloc_array(n * n, sizeof *w);
    if (!w) return NULL;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) w[i * n + j] = i > j ? lo : i == j ? diag : hi;
    int64_t sizes[2] = {n, n};
    ddpl_tensor *r = la_from_host(w, 2, sizes, like);
    free(w);
    return r;
}

int la_shape(const la_batch *b, int ntrail, const int64_t *trail, int64_t *sizes)
{
    for (int i = 0; i < b->bdim; i++) sizes[i] = b->bsizes[i];
    for (int i = 0; i < ntrail; i++) sizes[b->bdim + i] = trail[i];
    return b->bdim + ntrail;
}

int la_parts(ddpl_tensor *packed, const la_batch *b, int np, const int *nd,
             const int64_t (*shapes)[2], ddpl_tensor **outs)
{
    int64_t off = 0;
    for (int i = 0; i < np; i++) {
        int64_t len = nd[i] == 2 ? shapes[i][0] * shapes[i][1] : shapes[i][0];
        int64_t sizes[DDPL_MAX_DIMS];
        int ndim = la_shape(b, nd[i], shapes[i], sizes);
        ddpl_tensor *s = ddpl_narrow(packed, -1, off, len);
        outs[i] = s ? ddpl_reshape(s, ndim, sizes) : NULL;
        ddpl_tensor_release(s);
        if (!outs[i]) {
            for (int j = 0; j < i; j++) ddpl_tensor_release(outs[j]);
            return -1;
        }
        off += len;
    }
    return 0;
}

int la_batch_error(const char *op, int64_t nb, int64_t index, const char *message)
{
    if (nb > 1) return ddpl_error("%s: (Batch element %lld): %s", op, (long long)index, message);
    return ddpl_error("%s: %s", op, message);
}
