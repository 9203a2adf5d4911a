/* cpu/cpu_widen.c: runs a float32 CPU kernel on float16/bfloat16 operands.
 * defines: cpu_has_half, cpu_run_widened.
 *
 * The normalisation and pooling kernels are written for float32 and float64. A 16-bit operand
 * is read once into a float32 buffer (exact: every 16-bit float is a float32), the float32
 * kernel computes, and each output is rounded once into its 16-bit tensor (round to nearest
 * even), which is how PyTorch's CPU kernels treat bfloat16 (load as float, compute, store).
 * Operands the kernel updates in place (batch_norm's running statistics) are rounded back too.
 * The cost is one float32 copy of each 16-bit operand; integer operands (targets, argmax
 * indices) are passed through untouched. */
#include "cpu_kernels.h"

static bool is_half(const ddpl_tensor *t)
{
    return t && (t->dtype == DDPL_FLOAT16 || t->dtype == DDPL_BFLOAT16);
}

bool cpu_has_half(int n, ddpl_tensor *const *ts)
{
    for (int i = 0; i < n; i++)
        if (is_half(ts[i])) return true;
    return false;
}

/* A float32 tensor of t's shape (contiguous), holding t's values when `fill`. */
static ddpl_tensor *widened(ddpl_tensor *t, bool fill)
{
    ddpl_tensor *w = ddpl_tensor_new(t->ndim, t->sizes, DDPL_FLOAT32, t->device);
    if (w && fill && cpu_copy(&w, &t, NULL) < 0) {
        ddpl_tensor_release(w);
        return NULL;
    }
    return w;
}

int cpu_run_widened(ddpl_kernel fn, int n_out, ddpl_tensor **out, int n_in, ddpl_tensor **in,
                    const void *params, unsigned updated_inputs)
{
    ddpl_tensor *wout[CPU_WIDEN_MAX] = {NULL}, *win[CPU_WIDEN_MAX] = {NULL};
    if (n_out > CPU_WIDEN_MAX || n_in > CPU_WIDEN_MAX)
        return ddpl_error("cpu_run_widened: %d outputs and %d inputs exceed %d", n_out, n_in,
                          CPU_WIDEN_MAX);
    int rc = 0;
    for (int i = 0; i < n_in && rc == 0; i++) {
        win[i] = is_half(in[i]) ? widened(in[i], true) : (in[i] ? ddpl_tensor_retain(in[i]) : NULL);
        if (in[i] && !win[i]) rc = -1;
    }
    for (int i = 0; i < n_out && rc == 0; i++) {
        wout[i] =
            is_half(out[i]) ? widened(out[i], false) : (out[i] ? ddpl_tensor_retain(out[i]) : NULL);
        if (out[i] && !wout[i]) rc = -1;
    }
    if (rc == 0) rc = fn(wout, win, params);
    for (int i = 0; i < n_out && rc == 0; i++)
        if (is_half(out[i])) rc = cpu_copy(&out[i], &wout[i], NULL);
    for (int i = 0; i < n_in && rc == 0; i++)
        if (is_half(in[i]) && (updated_inputs >> i & 1u)) rc = cpu_copy(&in[i], &win[i], NULL);
    for (int i = 0; i < CPU_WIDEN_MAX; i++) {
        ddpl_tensor_release(wout[i]);
        ddpl_tensor_release(win[i]);
    }
    return rc;
}
