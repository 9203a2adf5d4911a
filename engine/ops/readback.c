/* ops/readback.c: reading tensor values back to the host (item, to_doubles); a device tensor is
 * made contiguous there first (an op), then copied in one piece.
 * defines: ddpl_tensor_item, ddpl_tensor_item_int64, ddpl_tensor_to_doubles,
 *          ddpl_tensor_host_copy. */
#include "op_util.h"

/* Contiguous host copy of t's bytes (t may live on any device, with any strides); NULL with an
 * error on failure. Only the bytes of the elements are copied, in row-major order. */
void *ddpl_tensor_host_copy(const ddpl_tensor *t)
{
    size_t esz = ddpl_dtype_size((ddpl_dtype)t->dtype);
    int64_t n = ddpl_tensor_numel(t);
    char *buf = ddpl_malloc_array(n, esz);
    if (!buf) {
        ddpl_error("out of memory copying %lld elements to the host", (long long)n);
        return NULL;
    }
    if (n == 0) return buf;
    if (t->device.type == DDPL_CPU) {
        /* strided gather with an odometer over the dims */
        int64_t idx[DDPL_MAX_DIMS] = {0};
        const char *base = ddpl_data_ptr(t);
        for (int64_t i = 0; i < n; i++) {
            int64_t off = 0;
            for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
            memcpy(buf + i * esz, base + off * (int64_t)esz, esz);
            for (int d = t->ndim - 1; d >= 0; d--) {
                if (++idx[d] < t->sizes[d]) break;
                idx[d] = 0;
            }
        }
        return buf;
    }
    /* device tensors: make them contiguous there first (not recorded: values are only read),
     * then one copy, which waits for the device's compute stream */
    bool prev = ddpl_set_grad_enabled(false);
    ddpl_tensor *c = ddpl_contiguous((ddpl_tensor *)t);
    ddpl_set_grad_enabled(prev);
    if (!c || ddpl_device_copy(buf, ddpl_cpu(), ddpl_data_ptr(c), c->device, (size_t)n * esz) < 0) {
        ddpl_tensor_release(c);
        free(buf);
        return NULL;
    }
    ddpl_tensor_release(c);
    return buf;
}

int ddpl_tensor_to_doubles(const ddpl_tensor *t, double *out)
{
    char *buf = ddpl_tensor_host_copy(t);
    if (!buf) return -1;
    ddpl_dtype dt = (ddpl_dtype)t->dtype;
    size_t esz = ddpl_dtype_size(dt);
    int64_t n = ddpl_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) out[i] = ddpl_load_f64(buf + i * esz, dt);
    free(buf);
    return 0;
}

static int check_one(const ddpl_tensor *t)
{
    if (ddpl_tensor_numel(t) == 1) return 0;
    char b[128];
    return ddpl_error("item: only one-element tensors can be converted to a number, got shape %s",
                      ddpl_shape_str(t, b, sizeof b));
}

int ddpl_tensor_item(const ddpl_tensor *t, double *out)
{
    if (check_one(t) < 0) return -1;
    return ddpl_tensor_to_doubles(t, out);
}

int ddpl_tensor_item_int64(const ddpl_tensor *t, int64_t *out)
{
    if (check_one(t) < 0) return -1;
    char *buf = ddpl_tensor_host_copy(t);
    if (!buf) return -1;
    *out = ddpl_load_i64(buf, (ddpl_dtype)t->dtype);
    free(buf);
    return 0;
}
