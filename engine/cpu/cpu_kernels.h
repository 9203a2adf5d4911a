/* cpu/cpu_kernels.h: the CPU kernel functions, one per entry of kernel_abi/ops.def.
 * defines: cpu_<op> for every op (see kernel_abi/ops.def for what each computes), cpu_has_half,
 *          cpu_run_widened (cpu_widen.c), CPU_AVX512_KERNELS, cpu_has_avx512f. */
#ifndef DDPL_CPU_KERNELS_H
#define DDPL_CPU_KERNELS_H

#include "kernel_abi/kernel.h"

#define DDPL_CPU_KERNEL(fn) int fn(ddpl_tensor **out, ddpl_tensor **in, const void *params)

/* AVX-512F variants of a kernel (functions marked __attribute__((target("avx512f"))), written
 * with the x86 intrinsics) are compiled where CPU_AVX512_KERNELS is 1 (x86-64, GCC or Clang) and
 * taken where cpu_has_avx512f() is true: the CPU has AVX-512F and the OS saves its state
 * (__builtin_cpu_supports reads libgcc's table, filled once at start-up). */
#if defined(__x86_64__) && defined(__GNUC__)
#define CPU_AVX512_KERNELS 1
static inline bool cpu_has_avx512f(void)
{
    return __builtin_cpu_supports("avx512f");
}
#else
#define CPU_AVX512_KERNELS 0
static inline bool cpu_has_avx512f(void)
{
    return false;
}
#endif

DDPL_CPU_KERNEL(cpu_fill);
DDPL_CPU_KERNEL(cpu_copy);
DDPL_CPU_KERNEL(cpu_uniform);
DDPL_CPU_KERNEL(cpu_normal);
DDPL_CPU_KERNEL(cpu_arange);
DDPL_CPU_KERNEL(cpu_add);
DDPL_CPU_KERNEL(cpu_sub);
DDPL_CPU_KERNEL(cpu_mul);
DDPL_CPU_KERNEL(cpu_div);
DDPL_CPU_KERNEL(cpu_pow);
DDPL_CPU_KERNEL(cpu_maximum);
DDPL_CPU_KERNEL(cpu_minimum);
DDPL_CPU_KERNEL(cpu_eq);
DDPL_CPU_KERNEL(cpu_ne);
DDPL_CPU_KERNEL(cpu_lt);
DDPL_CPU_KERNEL(cpu_le);
DDPL_CPU_KERNEL(cpu_gt);
DDPL_CPU_KERNEL(cpu_ge);
DDPL_CPU_KERNEL(cpu_where);
DDPL_CPU_KERNEL(cpu_neg);
DDPL_CPU_KERNEL(cpu_exp);
DDPL_CPU_KERNEL(cpu_log);
DDPL_CPU_KERNEL(cpu_sqrt);
DDPL_CPU_KERNEL(cpu_rsqrt);
DDPL_CPU_KERNEL(cpu_abs);
DDPL_CPU_KERNEL(cpu_sign);
DDPL_CPU_KERNEL(cpu_sin);
DDPL_CPU_KERNEL(cpu_cos);
DDPL_CPU_KERNEL(cpu_tanh);
DDPL_CPU_KERNEL(cpu_sigmoid);
DDPL_CPU_KERNEL(cpu_relu);
DDPL_CPU_KERNEL(cpu_gelu);
DDPL_CPU_KERNEL(cpu_silu);
DDPL_CPU_KERNEL(cpu_clamp);
DDPL_CPU_KERNEL(cpu_unary_fn);  /* cpu_math_fns.c */
DDPL_CPU_KERNEL(cpu_binary_fn); /* cpu_math_fns.c */
DDPL_CPU_KERNEL(cpu_relu_backward);
DDPL_CPU_KERNEL(cpu_gelu_backward);
DDPL_CPU_KERNEL(cpu_silu_backward);
DDPL_CPU_KERNEL(cpu_sigmoid_backward);
DDPL_CPU_KERNEL(cpu_tanh_backward);
DDPL_CPU_KERNEL(cpu_sum);
DDPL_CPU_KERNEL(cpu_prod);
DDPL_CPU_KERNEL(cpu_amax);
DDPL_CPU_KERNEL(cpu_amin);
DDPL_CPU_KERNEL(cpu_max_dim);
DDPL_CPU_KERNEL(cpu_min_dim);
DDPL_CPU_KERNEL(cpu_cumsum); /* cpu_scan.c */
DDPL_CPU_KERNEL(cpu_cumprod);
DDPL_CPU_KERNEL(cpu_cummax);
DDPL_CPU_KERNEL(cpu_cummin);
DDPL_CPU_KERNEL(cpu_any); /* cpu_logic.c */
DDPL_CPU_KERNEL(cpu_all);
DDPL_CPU_KERNEL(cpu_gemm);
bool cpu_gemm_native(ddpl_dtype dt); /* the backend's gemm_native (cpu_gemm.c) */
DDPL_CPU_KERNEL(cpu_index_select);
DDPL_CPU_KERNEL(cpu_index_add);
DDPL_CPU_KERNEL(cpu_gather);
DDPL_CPU_KERNEL(cpu_scatter_add);
DDPL_CPU_KERNEL(cpu_topk);         /* cpu_sort.c */
DDPL_CPU_KERNEL(cpu_kthvalue);     /* cpu_sort.c */
DDPL_CPU_KERNEL(cpu_sum_squares);  /* cpu_reduce.c */
DDPL_CPU_KERNEL(cpu_nansum);       /* cpu_reduce.c */
DDPL_CPU_KERNEL(cpu_aminmax);      /* cpu_reduce.c */
DDPL_CPU_KERNEL(cpu_scatter);      /* cpu_scatter.c */
DDPL_CPU_KERNEL(cpu_nonzero);      /* cpu_scatter.c */
DDPL_CPU_KERNEL(cpu_sort);         /* cpu_sort.c */
DDPL_CPU_KERNEL(cpu_searchsorted); /* cpu_sort.c */
DDPL_CPU_KERNEL(cpu_bincount);     /* cpu_histogram.c */
DDPL_CPU_KERNEL(cpu_histc);        /* cpu_histogram.c */
DDPL_CPU_KERNEL(cpu_conv2d);
DDPL_CPU_KERNEL(cpu_conv2d_backward);
DDPL_CPU_KERNEL(cpu_max_pool2d);
DDPL_CPU_KERNEL(cpu_max_pool2d_backward);
DDPL_CPU_KERNEL(cpu_avg_pool2d);
DDPL_CPU_KERNEL(cpu_avg_pool2d_backward);
DDPL_CPU_KERNEL(cpu_adaptive_avg_pool2d);
DDPL_CPU_KERNEL(cpu_adaptive_avg_pool2d_backward);
DDPL_CPU_KERNEL(cpu_batch_norm);
DDPL_CPU_KERNEL(cpu_batch_norm_backward);
DDPL_CPU_KERNEL(cpu_layer_norm);
DDPL_CPU_KERNEL(cpu_layer_norm_backward);
DDPL_CPU_KERNEL(cpu_softmax);
DDPL_CPU_KERNEL(cpu_log_softmax);
DDPL_CPU_KERNEL(cpu_softmax_backward);
DDPL_CPU_KERNEL(cpu_log_softmax_backward);
DDPL_CPU_KERNEL(cpu_nll_loss);
DDPL_CPU_KERNEL(cpu_nll_loss_backward);
DDPL_CPU_KERNEL(cpu_cross_entropy);
DDPL_CPU_KERNEL(cpu_cross_entropy_backward);
DDPL_CPU_KERNEL(cpu_sgd_step);
DDPL_CPU_KERNEL(cpu_adam_step);
DDPL_CPU_KERNEL(cpu_rmsprop_step);
DDPL_CPU_KERNEL(cpu_adagrad_step);
DDPL_CPU_KERNEL(cpu_amp_unscale);
DDPL_CPU_KERNEL(cpu_ctc_loss);          /* cpu_ctc.c */
DDPL_CPU_KERNEL(cpu_ctc_loss_backward); /* cpu_ctc.c */

/* n contiguous float32 <-> bfloat16 values: widened exactly, or rounded to nearest even
 * (ddpl_float_to_bf16). Plain loops the compiler vectorises: the casts, the 16-bit pointwise
 * blocks and the bf16 kernels' float32 sums all round through these. */
static inline void cpu_bf16_to_float(float *restrict dst, const uint16_t *restrict src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = ddpl_bf16_to_float(src[i]);
}
static inline void cpu_float_to_bf16(uint16_t *restrict dst, const float *restrict src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = ddpl_float_to_bf16(src[i]);
}

/* cpu_widen.c: whether any of ts is float16/bfloat16, and a float32 kernel run on float32
 * copies of such operands, outputs (and the inputs whose bit is set in updated_inputs, which
 * the kernel writes in place) rounded back. At most CPU_WIDEN_MAX outputs and inputs. */
#define CPU_WIDEN_MAX 6
bool cpu_has_half(int n, ddpl_tensor *const *ts);
int cpu_run_widened(ddpl_kernel fn, int n_out, ddpl_tensor **out, int n_in, ddpl_tensor **in,
                    const void *params, unsigned updated_inputs);

#endif
