/* cuda/cuda_optim.cu: fused per-tensor optimizer updates on CUDA.
 * defines: cuda_launch_sgd_step, cuda_launch_adam_step, cuda_launch_rmsprop_step,
 *          cuda_launch_adagrad_step, cuda_launch_amp_unscale (ops.def SGD_STEP, ADAM_STEP,
 *          RMSPROP_STEP, ADAGRAD_STEP, AMP_UNSCALE).
 *
 * One elementwise kernel per tensor: each element's update reads param, grad and state once and
 * writes them once. The arithmetic is cpu_optim.c's (torch 1.13 _single_tensor_sgd/_adam(w)),
 * (and _rmsprop, _adagrad, and GradScaler's unscale) step by step, in the compute type C: float for
 * float32 and the 16-bit types (which round back on store), double for float64, with the double
 * hyperparameters rounded to C first as the CPU kernels do. (nvcc may fuse a*b + c into one FMA
 * where the CPU rounds twice: results agree to a rounding, not bit for bit.) Index math is 32-bit
 * below 2^30 elements. */
#include "cuda_nn_util.cuh"
#include "cuda_optim.h"

/* param (n), buf (n)? <- grad (n) */
template <typename T, typename I>
__global__ static void sgd_step_kernel(T *param, T *buf, const T *grad, I n, cuda_sgd_args a)
{
    typedef nn_num<T> num;
    typedef typename num::acc C;
    const C wd = (C)a.weight_decay, mom = (C)a.momentum;
    const C damp1 = (C)(1.0 - a.dampening), neg_lr = (C)(-a.lr);
    const C sign = a.maximize ? (C)-1 : (C)1;
    const bool has_wd = a.weight_decay != 0;
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        const C x = num::load(param[i]);
        C d = sign * num::load(grad[i]);
        if (has_wd) d = d + wd * x;
        if (buf) {
            const C m = a.init_buf ? d : num::load(buf[i]) * mom + damp1 * d;
            buf[i] = num::store(m);
            d = a.nesterov ? d + mom * m : m;
        }
        param[i] = num::store(x + neg_lr * d);
    }
}

/* param (n), exp_avg (n), exp_avg_sq (n), max_exp_avg_sq (n)? <- grad (n):
 *   g = grad (+ wd*p, Adam) | p *= 1 - lr*wd (AdamW)
 *   m = m*beta1 + (1-beta1)*g;  v = v*beta2 + (1-beta2)*g*g
 *   amsgrad: vmax = max(vmax, v) (NaN wins, as torch.maximum), used in place of v below
 *   p = p - step_size * m / (sqrt(v)/bc2_sqrt + eps) */
template <typename T, typename I>
__global__ static void adam_step_kernel(T *param, T *exp_avg, T *exp_avg_sq, T *vmax, const T *grad,
                                        I n, cuda_adam_args a)
{
    typedef nn_num<T> num;
    typedef typename num::acc C;
    const C b1 = (C)a.beta1, b2 = (C)a.beta2;
    const C one_b1 = (C)(1.0 - a.beta1), one_b2 = (C)(1.0 - a.beta2);
    const C wd = (C)a.weight_decay, decay = (C)a.decay, eps = (C)a.eps;
    const C neg_step = (C)(-a.step_size), bc2 = (C)a.bc2_sqrt;
    const C sign = a.maximize ? (C)-1 : (C)1;
    const bool has_wd = a.weight_decay != 0;
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        C d = sign * num::load(grad[i]), p = num::load(param[i]);
        if (has_wd) {
            if (a.decoupled)
                p = p * decay;
            else
                d = d + wd * p;
        }
        const C mi = num::load(exp_avg[i]) * b1 + one_b1 * d;
        C vi = num::load(exp_avg_sq[i]) * b2 + one_b2 * (d * d);
        exp_avg[i] = num::store(mi);
        exp_avg_sq[i] = num::store(vi);
        if (vmax) {
            const C old = num::load(vmax[i]);
            vi = (old < vi || vi != vi) ? vi : old;
            vmax[i] = num::store(vi);
        }
        const C denom = sqrt(vi) / bc2 + eps;
        param[i] = num::store(p + neg_step * (mi / denom));
    }
}

/* param (n), square_avg (n), buf (n)?, grad_avg (n)? <- grad (n), ATen's order of operations
 * (cpu_optim.c's RMSPROP_LOOP):
 *   g = grad (+ wd*p);  sq = sq*alpha + (1-alpha)*g*g
 *   centered: ga = ga*alpha + (1-alpha)*g;  avg = sqrt(sq - ga*ga) + eps;  else sqrt(sq) + eps
 *   momentum: buf = buf*momentum + g/avg;  p = p - lr*buf;  else p = p - lr*g/avg */
template <typename T, typename I>
__global__ static void rmsprop_step_kernel(T *param, T *sq, T *buf, T *gavg, const T *grad, I n,
                                           cuda_rmsprop_args a)
{
    typedef nn_num<T> num;
    typedef typename num::acc C;
    const C alpha = (C)a.alpha, one_alpha = (C)(1.0 - a.alpha);
    const C wd = (C)a.weight_decay, mom = (C)a.momentum, eps = (C)a.eps;
    const C neg_lr = (C)(-a.lr), sign = a.maximize ? (C)-1 : (C)1;
    const bool has_wd = a.weight_decay != 0;
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        C d = sign * num::load(grad[i]);
        const C p = num::load(param[i]);
        if (has_wd) d = d + wd * p;
        const C s = num::load(sq[i]) * alpha + one_alpha * d * d;
        sq[i] = num::store(s);
        C avg;
        if (gavg) {
            const C ga = num::load(gavg[i]) * alpha + one_alpha * d;
            gavg[i] = num::store(ga);
            avg = sqrt(s + (C)-1 * ga * ga);
        } else {
            avg = sqrt(s);
        }
        avg = avg + eps;
        if (buf) {
            const C b = num::load(buf[i]) * mom + d / avg;
            buf[i] = num::store(b);
            param[i] = num::store(p + neg_lr * b);
        } else {
            param[i] = num::store(p + neg_lr * d / avg);
        }
    }
}

/* param (n), sum (n) <- grad (n): g = grad (+ wd*p);  sum += g*g;  p -= clr*g/(sqrt(sum)+eps) */
template <typename T, typename I>
__global__ static void adagrad_step_kernel(T *param, T *sum, const T *grad, I n,
                                           cuda_adagrad_args a)
{
    typedef nn_num<T> num;
    typedef typename num::acc C;
    const C wd = (C)a.weight_decay, eps = (C)a.eps, neg_clr = (C)(-a.clr);
    const C sign = a.maximize ? (C)-1 : (C)1;
    const bool has_wd = a.weight_decay != 0;
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        C d = sign * num::load(grad[i]);
        const C p = num::load(param[i]);
        if (has_wd) d = d + wd * p;
        const C s = num::load(sum[i]) + d * d;
        sum[i] = num::store(s);
        param[i] = num::store(p + neg_clr * d / (sqrt(s) + eps));
    }
}

/* grad (n) *= inv_scale (skipped when it is 1, as PyTorch's kernel); a non-finite element sets
 * *found_inf = 1 (every writer stores the same value, so plain stores suffice). */
template <typename T, typename I>
__global__ static void amp_unscale_kernel(T *grad, float *found_inf, I n, double inv_scale)
{
    typedef nn_num<T> num;
    typedef typename num::acc C;
    const C s = (C)inv_scale;
    const bool scale = inv_scale != 1.0;
    for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
        const C v = num::load(grad[i]);
        if (!isfinite(v)) *found_inf = 1.0f;
        if (scale) grad[i] = num::store(v * s);
    }
}

extern "C" int cuda_launch_sgd_step(void *param, void *buf, const void *grad, int64_t n,
                                    const cuda_sgd_args *a, int dtype, const char *what)
{
    if (n == 0) return 0;
    CUDA_DISPATCH_FLOAT(
        dtype, return ddpl_error("%s: unsupported dtype", what),
        if (nn_fits_int(n)) {
            sgd_step_kernel<scalar_t, int><<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(
                (scalar_t *)param, (scalar_t *)buf, (const scalar_t *)grad, (int)n, *a);
        } else {
            sgd_step_kernel<scalar_t, int64_t><<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(
                (scalar_t *)param, (scalar_t *)buf, (const scalar_t *)grad, n, *a);
        });
    return cuda_check(cudaGetLastError(), what);
}

extern "C" int cuda_launch_adam_step(void *param, void *exp_avg, void *exp_avg_sq,
                                     void *max_exp_avg_sq, const void *grad, int64_t n,
                                     const cuda_adam_args *a, int dtype, const char *what)
{
    if (n == 0) return 0;
    CUDA_DISPATCH_FLOAT(
        dtype, return ddpl_error("%s: unsupported dtype", what),
        if (nn_fits_int(n)) {
            adam_step_kernel<scalar_t, int><<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(
                (scalar_t *)param, (scalar_t *)exp_avg, (scalar_t *)exp_avg_sq,
                (scalar_t *)max_exp_avg_sq, (const scalar_t *)grad, (int)n, *a);
        } else {
            adam_step_kernel<scalar_t, int64_t><<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(
                (scalar_t *)param, (scalar_t *)exp_avg, (scalar_t *)exp_avg_sq,
                (scalar_t *)max_exp_avg_sq, (const scalar_t *)grad, n, *a);
        });
    return cuda_check(cudaGetLastError(), what);
}

extern "C" int cuda_launch_rmsprop_step(void *param, void *square_avg, void *buf, void *grad_avg,
                                        const void *grad, int64_t n, const cuda_rmsprop_args *a,
                                        int dtype, const char *what)
{
    if (n == 0) return 0;
    CUDA_DISPATCH_FLOAT(
        dtype, return ddpl_error("%s: unsupported dtype", what),
        if (nn_fits_int(n)) {
            rmsprop_step_kernel<scalar_t, int><<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(
                (scalar_t *)param, (scalar_t *)square_avg, (scalar_t *)buf, (scalar_t *)grad_avg,
                (const scalar_t *)grad, (int)n, *a);
        } else {
            rmsprop_step_kernel<scalar_t, int64_t>
                <<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(
                    (scalar_t *)param, (scalar_t *)square_avg, (scalar_t *)buf,
                    (scalar_t *)grad_avg, (const scalar_t *)grad, n, *a);
        });
    return cuda_check(cudaGetLastError(), what);
}

extern "C" int cuda_launch_adagrad_step(void *param, void *sum, const void *grad, int64_t n,
                                        const cuda_adagrad_args *a, int dtype, const char *what)
{
    if (n == 0) return 0;
    CUDA_DISPATCH_FLOAT(
        dtype, return ddpl_error("%s: unsupported dtype", what),
        if (nn_fits_int(n)) {
            adagrad_step_kernel<scalar_t, int><<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(
                (scalar_t *)param, (scalar_t *)sum, (const scalar_t *)grad, (int)n, *a);
        } else {
            adagrad_step_kernel<scalar_t, int64_t>
                <<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(
                    (scalar_t *)param, (scalar_t *)sum, (const scalar_t *)grad, n, *a);
        });
    return cuda_check(cudaGetLastError(), what);
}

extern "C" int cuda_launch_amp_unscale(void *grad, float *found_inf, int64_t n, double inv_scale,
                                       int dtype, const char *what)
{
    if (n == 0) return 0;
    CUDA_DISPATCH_FLOAT(
        dtype, return ddpl_error("%s: unsupported dtype", what),
        if (nn_fits_int(n)) {
            amp_unscale_kernel<scalar_t, int><<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>(
                (scalar_t *)grad, found_inf, (int)n, inv_scale);
        } else {
            amp_unscale_kernel<scalar_t, int64_t>
                <<<cuda_blocks(n), CUDA_THREADS, 0, cuda_stream()>>>((scalar_t *)grad, found_inf, n,
                                                                     inv_scale);
        });
    return cuda_check(cudaGetLastError(), what);
}
