/* ddpl/ops.h: the differentiable operations of the C API.
 * defines: views, conversions, pointwise math, reductions, linear algebra, indexing, nn functions.
 *
 * Every function returns a new reference (or NULL with ddpl_last_error() set) and records
 * autograd when gradient mode is on and an input requires grad. Binary ops broadcast and
 * promote dtypes as PyTorch does. Dimensions may be negative (counted from the end).
 * In-place functions (trailing _) return 0 or -1 and leave the tensor untouched on failure. */
#ifndef DDPL_OPS_H
#define DDPL_OPS_H

#include "tensor.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* public: exported from libddplua.so, which is otherwise built with hidden visibility (the
 * ABI is what include/ddpl declares; spec/api/abi_spec.lua) */
#pragma GCC visibility push(default)

/* A 0-dim tensor that takes part in type promotion like a Python number: float32 + 2.5 stays
 * float32, int64 + 2.5 becomes float32. integral says whether the number is an integer. */
ddpl_tensor *ddpl_wrapped_number(double value, bool integral);

/* ---- views (share storage) ---- */
ddpl_tensor *ddpl_view(ddpl_tensor *x, int ndim, const int64_t *sizes);    /* one size may be -1 */
ddpl_tensor *ddpl_reshape(ddpl_tensor *x, int ndim, const int64_t *sizes); /* copies if needed */
ddpl_tensor *ddpl_flatten(ddpl_tensor *x, int start_dim, int end_dim);
ddpl_tensor *ddpl_unsqueeze(ddpl_tensor *x, int dim);
ddpl_tensor *ddpl_squeeze(ddpl_tensor *x, int dim); /* dim must have size 1, else unchanged */
ddpl_tensor *ddpl_squeeze_all(ddpl_tensor *x);
ddpl_tensor *ddpl_transpose(ddpl_tensor *x, int d0, int d1);
ddpl_tensor *ddpl_t(ddpl_tensor *x); /* <= 2-D */
ddpl_tensor *ddpl_permute(ddpl_tensor *x, int ndim, const int *dims);
ddpl_tensor *ddpl_narrow(ddpl_tensor *x, int dim, int64_t start, int64_t length);
/* x[start:end:step] along dim as Python slices it (bounds clamped, negatives from the end;
 * step >= 1): a view */
ddpl_tensor *ddpl_slice(ddpl_tensor *x, int dim, int64_t start, int64_t end, int64_t step);
ddpl_tensor *ddpl_select(ddpl_tensor *x, int dim, int64_t index); /* index may be negative */
ddpl_tensor *ddpl_expand(ddpl_tensor *x, int ndim, const int64_t *sizes); /* -1 keeps a size */
ddpl_tensor *ddpl_as_strided(ddpl_tensor *x, int ndim, const int64_t *sizes, const int64_t *strides,
                             int64_t offset); /* no autograd */

/* ---- copies and conversion ---- */
ddpl_tensor *ddpl_contiguous(ddpl_tensor *x); /* x itself (retained) when already contiguous */
ddpl_tensor *ddpl_clone(ddpl_tensor *x);
ddpl_tensor *ddpl_detach(ddpl_tensor *x); /* shares storage, no history */
ddpl_tensor *ddpl_to(ddpl_tensor *x, ddpl_dtype dt, ddpl_device dev); /* x itself if same */

/* ---- pointwise, binary (broadcasting) ---- */
ddpl_tensor *ddpl_add(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_sub(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_mul(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_div(ddpl_tensor *a, ddpl_tensor *b); /* true division: ints give float32 */
ddpl_tensor *ddpl_pow(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_maximum(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_minimum(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_add_scaled(ddpl_tensor *a, ddpl_tensor *b, double alpha); /* a + alpha*b */
/* comparisons return bool tensors and are not differentiable */
ddpl_tensor *ddpl_eq(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_ne(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_lt(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_le(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_gt(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_ge(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_where(ddpl_tensor *cond, ddpl_tensor *x, ddpl_tensor *y);
ddpl_tensor *ddpl_masked_fill(ddpl_tensor *x, ddpl_tensor *mask, double value);
/* PyTorch's remaining binary functions (ops/pointwise_math_binary.c). remainder is Python's %
 * (the sign of b), fmod C's (the sign of a); floor_divide is Python's // and not differentiable;
 * integer division by zero is an error on the CPU. atan2, hypot, logaddexp(2), xlogy and
 * copysign compute integers in float32; the bitwise functions take integers and bool, the shifts
 * integers (counts outside [0, 64) give 0, or the sign for a right shift). */
ddpl_tensor *ddpl_remainder(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_fmod(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_floor_divide(ddpl_tensor *a, ddpl_tensor *b);
/* rounding_mode NULL (true division), "floor" or "trunc" */
ddpl_tensor *ddpl_div_rounded(ddpl_tensor *a, ddpl_tensor *b, const char *rounding_mode);
ddpl_tensor *ddpl_atan2(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_hypot(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_fmax(ddpl_tensor *a, ddpl_tensor *b); /* NaN only where both are NaN */
ddpl_tensor *ddpl_fmin(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_logaddexp(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_logaddexp2(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_xlogy(ddpl_tensor *a, ddpl_tensor *b); /* a log b, 0 where a == 0 */
ddpl_tensor *ddpl_copysign(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_bitwise_and(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_bitwise_or(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_bitwise_xor(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_bitwise_left_shift(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_bitwise_right_shift(ddpl_tensor *a, ddpl_tensor *b);
/* bool results; nonzero counts as true */
ddpl_tensor *ddpl_logical_and(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_logical_or(ddpl_tensor *a, ddpl_tensor *b);
ddpl_tensor *ddpl_logical_xor(ddpl_tensor *a, ddpl_tensor *b);
/* compositions (ops/pointwise_compose.c): start + weight (end - start) (weight a tensor or a
 * wrapped number); input + value a b; input + value a / b (a and b not both integers); clamp
 * with tensor bounds (either NULL), ties and NaN as PyTorch's clamp */
ddpl_tensor *ddpl_lerp(ddpl_tensor *start, ddpl_tensor *end, ddpl_tensor *weight);
ddpl_tensor *ddpl_addcmul(ddpl_tensor *input, ddpl_tensor *a, ddpl_tensor *b, double value);
ddpl_tensor *ddpl_addcdiv(ddpl_tensor *input, ddpl_tensor *a, ddpl_tensor *b, double value);
ddpl_tensor *ddpl_clamp_tensor(ddpl_tensor *x, ddpl_tensor *min, ddpl_tensor *max);
/* |a - b| <= atol + rtol |b| elementwise (bool), NaNs equal only with equal_nan; allclose
 * and equal (same shape, equal elements) answer in *result */
ddpl_tensor *ddpl_isclose(ddpl_tensor *a, ddpl_tensor *b, double rtol, double atol, bool equal_nan);
int ddpl_allclose(ddpl_tensor *a, ddpl_tensor *b, double rtol, double atol, bool equal_nan,
                  bool *result);
int ddpl_equal(ddpl_tensor *a, ddpl_tensor *b, bool *result);

/* ---- pointwise, unary ---- */
ddpl_tensor *ddpl_neg(ddpl_tensor *x);
ddpl_tensor *ddpl_exp(ddpl_tensor *x);
ddpl_tensor *ddpl_log(ddpl_tensor *x);
ddpl_tensor *ddpl_sqrt(ddpl_tensor *x);
ddpl_tensor *ddpl_rsqrt(ddpl_tensor *x);
ddpl_tensor *ddpl_abs(ddpl_tensor *x);
ddpl_tensor *ddpl_sign(ddpl_tensor *x);
ddpl_tensor *ddpl_sin(ddpl_tensor *x);
ddpl_tensor *ddpl_cos(ddpl_tensor *x);
ddpl_tensor *ddpl_tanh(ddpl_tensor *x);
ddpl_tensor *ddpl_sigmoid(ddpl_tensor *x);
ddpl_tensor *ddpl_relu(ddpl_tensor *x);
ddpl_tensor *ddpl_gelu(ddpl_tensor *x, bool tanh_approximation);
ddpl_tensor *ddpl_silu(ddpl_tensor *x);
/* has_min/has_max select which bounds apply (PyTorch's None) */
ddpl_tensor *ddpl_clamp(ddpl_tensor *x, bool has_min, double min, bool has_max, double max);
/* PyTorch's remaining unary functions (ops/pointwise_math.c). floor, ceil, round and trunc
 * return integer tensors unchanged; the others compute integers in float32. round is half to
 * even, with decimals as PyTorch (scale by 10^decimals, round, scale back). */
ddpl_tensor *ddpl_floor(ddpl_tensor *x);
ddpl_tensor *ddpl_ceil(ddpl_tensor *x);
ddpl_tensor *ddpl_round(ddpl_tensor *x, int decimals);
ddpl_tensor *ddpl_trunc(ddpl_tensor *x);
ddpl_tensor *ddpl_frac(ddpl_tensor *x); /* x - trunc(x) */
ddpl_tensor *ddpl_reciprocal(ddpl_tensor *x);
ddpl_tensor *ddpl_exp2(ddpl_tensor *x);
ddpl_tensor *ddpl_expm1(ddpl_tensor *x);
ddpl_tensor *ddpl_log2(ddpl_tensor *x);
ddpl_tensor *ddpl_log10(ddpl_tensor *x);
ddpl_tensor *ddpl_log1p(ddpl_tensor *x);
ddpl_tensor *ddpl_tan(ddpl_tensor *x);
ddpl_tensor *ddpl_asin(ddpl_tensor *x);
ddpl_tensor *ddpl_acos(ddpl_tensor *x);
ddpl_tensor *ddpl_atan(ddpl_tensor *x);
ddpl_tensor *ddpl_sinh(ddpl_tensor *x);
ddpl_tensor *ddpl_cosh(ddpl_tensor *x);
ddpl_tensor *ddpl_asinh(ddpl_tensor *x);
ddpl_tensor *ddpl_acosh(ddpl_tensor *x);
ddpl_tensor *ddpl_atanh(ddpl_tensor *x);
ddpl_tensor *ddpl_erf(ddpl_tensor *x);
ddpl_tensor *ddpl_erfc(ddpl_tensor *x);
ddpl_tensor *ddpl_erfinv(ddpl_tensor *x);
ddpl_tensor *ddpl_square(ddpl_tensor *x); /* x * x: integers stay integers */
/* bool results */
ddpl_tensor *ddpl_isnan(ddpl_tensor *x);
ddpl_tensor *ddpl_isinf(ddpl_tensor *x);
ddpl_tensor *ddpl_isfinite(ddpl_tensor *x);
ddpl_tensor *ddpl_logical_not(ddpl_tensor *x);
ddpl_tensor *ddpl_bitwise_not(ddpl_tensor *x); /* integers and bool */
/* NaN -> nan, +inf -> *posinf, -inf -> *neginf (NULL: the dtype's largest finite values) */
ddpl_tensor *ddpl_nan_to_num(ddpl_tensor *x, double nan, const double *posinf,
                             const double *neginf);

/* ---- in place: with autograd as PyTorch (recorded, then backward fails only if a value it
 * saved was overwritten; a write into a view rewrites its base's history); refused on leaves
 * that require grad and views of them ---- */
int ddpl_zero_(ddpl_tensor *x);
int ddpl_fill_(ddpl_tensor *x, double value);
int ddpl_copy_(ddpl_tensor *dst, ddpl_tensor *src); /* src broadcasts to dst; converts dtype */
int ddpl_add_(ddpl_tensor *x, ddpl_tensor *y, double alpha); /* x += alpha*y */
int ddpl_mul_(ddpl_tensor *x, ddpl_tensor *y);
int ddpl_div_(ddpl_tensor *x, ddpl_tensor *y);
/* x <- div(x, y, rounding_mode): "floor", "trunc" or NULL (div_); integer x stays integer */
int ddpl_div_rounded_(ddpl_tensor *x, ddpl_tensor *y, const char *rounding_mode);
/* out <- x * y in one pass: x and y broadcast to out's shape (out is not resized; PyTorch's
 * torch.mul(x, y, out=out)); neither may overlap out other than element for element. */
int ddpl_mul_out(ddpl_tensor *out, ddpl_tensor *x, ddpl_tensor *y);
int ddpl_clamp_(ddpl_tensor *x, bool has_min, double min, bool has_max, double max);
int ddpl_relu_(ddpl_tensor *x);
int ddpl_sigmoid_(ddpl_tensor *x);
int ddpl_tanh_(ddpl_tensor *x);
int ddpl_silu_(ddpl_tensor *x);
/* x <- dropout(x): F.dropout(x, {inplace=true}) */
int ddpl_dropout_(ddpl_tensor *x, double p, bool training);
int ddpl_uniform_(ddpl_tensor *x, double from, double to);
int ddpl_normal_(ddpl_tensor *x, double mean, double std);
int ddpl_bernoulli_(ddpl_tensor *x, double p);

/* ---- reductions: dim < 0 counts from the end; all_dims reduces everything to 0-dim ---- */
ddpl_tensor *ddpl_sum(ddpl_tensor *x);
ddpl_tensor *ddpl_sum_dim(ddpl_tensor *x, int dim, bool keepdim);
ddpl_tensor *ddpl_sum_dims(ddpl_tensor *x, int ndims, const int *dims, bool keepdim);
ddpl_tensor *ddpl_mean(ddpl_tensor *x);
ddpl_tensor *ddpl_mean_dim(ddpl_tensor *x, int dim, bool keepdim);
ddpl_tensor *ddpl_mean_dims(ddpl_tensor *x, int ndims, const int *dims, bool keepdim);
ddpl_tensor *ddpl_prod(ddpl_tensor *x);
ddpl_tensor *ddpl_prod_dim(ddpl_tensor *x, int dim, bool keepdim);
/* correction 1 is the unbiased estimate (PyTorch's default) */
ddpl_tensor *ddpl_var(ddpl_tensor *x, int correction);
ddpl_tensor *ddpl_var_dim(ddpl_tensor *x, int dim, int correction, bool keepdim);
ddpl_tensor *ddpl_std(ddpl_tensor *x, int correction);
ddpl_tensor *ddpl_std_dim(ddpl_tensor *x, int dim, int correction, bool keepdim);
ddpl_tensor *ddpl_max(ddpl_tensor *x); /* 0-dim */
ddpl_tensor *ddpl_min(ddpl_tensor *x);
/* values and int64 indices along dim (first occurrence on ties) */
int ddpl_max_dim(ddpl_tensor *x, int dim, bool keepdim, ddpl_tensor **values,
                 ddpl_tensor **indices);
int ddpl_min_dim(ddpl_tensor *x, int dim, bool keepdim, ddpl_tensor **values,
                 ddpl_tensor **indices);
ddpl_tensor *ddpl_argmax(ddpl_tensor *x, bool all_dims, int dim, bool keepdim);
ddpl_tensor *ddpl_argmin(ddpl_tensor *x, bool all_dims, int dim, bool keepdim);
ddpl_tensor *ddpl_logsumexp(ddpl_tensor *x, int dim, bool keepdim);
ddpl_tensor *ddpl_norm(ddpl_tensor *x, double p, bool all_dims, int dim, bool keepdim);
/* scans along dim: cumsum/cumprod give dt, or with DDPL_DTYPE_COUNT x's dtype
 * (integers and bool: int64); cummax/cummin give values and int64 indices (the last index of
 * the running extreme on ties, as PyTorch) */
ddpl_tensor *ddpl_cumsum(ddpl_tensor *x, int dim, ddpl_dtype dt);
ddpl_tensor *ddpl_cumprod(ddpl_tensor *x, int dim, ddpl_dtype dt);
int ddpl_cummax(ddpl_tensor *x, int dim, ddpl_tensor **values, ddpl_tensor **indices);
int ddpl_cummin(ddpl_tensor *x, int dim, ddpl_tensor **values, ddpl_tensor **indices);
/* over ndims dims (ndims 0: every dim); any/all give bool (uint8 for uint8), count_nonzero
 * int64; amax/amin keep the dtype and share the gradient among ties; nansum/nanmean skip NaN */
ddpl_tensor *ddpl_any(ddpl_tensor *x, int ndims, const int *dims, bool keepdim);
ddpl_tensor *ddpl_all(ddpl_tensor *x, int ndims, const int *dims, bool keepdim);
ddpl_tensor *ddpl_count_nonzero(ddpl_tensor *x, int ndims, const int *dims);
ddpl_tensor *ddpl_amax(ddpl_tensor *x, int ndims, const int *dims, bool keepdim);
ddpl_tensor *ddpl_amin(ddpl_tensor *x, int ndims, const int *dims, bool keepdim);
int ddpl_aminmax(ddpl_tensor *x, bool all_dims, int dim, bool keepdim, ddpl_tensor **min,
                 ddpl_tensor **max);
ddpl_tensor *ddpl_nansum(ddpl_tensor *x, int ndims, const int *dims, bool keepdim);
ddpl_tensor *ddpl_nanmean(ddpl_tensor *x, int ndims, const int *dims, bool keepdim);

/* ---- linear algebra ---- */
ddpl_tensor *ddpl_matmul(ddpl_tensor *a, ddpl_tensor *b); /* 1-D .. batched N-D, broadcast */
ddpl_tensor *ddpl_mm(ddpl_tensor *a, ddpl_tensor *b);     /* (n,k) @ (k,m) */
ddpl_tensor *ddpl_bmm(ddpl_tensor *a, ddpl_tensor *b);    /* (b,n,k) @ (b,k,m) */
/* beta*bias + alpha*(a @ b), bias broadcast to (n,m) */
ddpl_tensor *ddpl_addmm(ddpl_tensor *bias, ddpl_tensor *a, ddpl_tensor *b, double beta,
                        double alpha);

/* ---- joining and picking ---- */
ddpl_tensor *ddpl_cat(int n, ddpl_tensor *const *xs, int dim);
ddpl_tensor *ddpl_stack(int n, ddpl_tensor *const *xs, int dim);
ddpl_tensor *ddpl_index_select(ddpl_tensor *x, int dim, ddpl_tensor *index); /* index int64 1-D */
ddpl_tensor *ddpl_gather(ddpl_tensor *x, int dim, ddpl_tensor *index);
int ddpl_topk(ddpl_tensor *x, int64_t k, int dim, bool largest, bool sorted, ddpl_tensor **values,
              ddpl_tensor **indices);

/* ---- sorting, searching and counting (ops/sort.c, ops/unique.c, ops/histogram.c) ---- */
/* values and int64 indices of x sorted along dim; always stable (PyTorch's stable=true), NaN
 * sorts as the largest value; differentiable in x */
int ddpl_sort(ddpl_tensor *x, int dim, bool descending, ddpl_tensor **values,
              ddpl_tensor **indices);
ddpl_tensor *ddpl_argsort(ddpl_tensor *x, int dim, bool descending); /* sort's indices */
/* the k-th smallest along dim, k 1-based as in PyTorch (1 = the smallest) */
int ddpl_kthvalue(ddpl_tensor *x, int64_t k, int dim, bool keepdim, ddpl_tensor **values,
                  ddpl_tensor **indices);
/* distinct elements of x, sorted ascending (flattened; with has_dim, the distinct slices along
 * dim), the int64 inverse (x's shape; with a dim, x.size(dim)) and the int64 counts; inverse
 * and counts may be NULL (not wanted) */
int ddpl_unique(ddpl_tensor *x, bool has_dim, int dim, ddpl_tensor **out, ddpl_tensor **inverse,
                ddpl_tensor **counts);
/* insertion points of values in sorted_sequence (1-D, or one row per leading index of values):
 * the first index with seq >= v (right: seq > v); int64, or int32 with out_int32 */
ddpl_tensor *ddpl_searchsorted(ddpl_tensor *sorted_sequence, ddpl_tensor *values, bool right,
                               bool out_int32);
ddpl_tensor *ddpl_bucketize(ddpl_tensor *input, ddpl_tensor *boundaries, bool right,
                            bool out_int32); /* boundaries 1-D */
/* counts of each value of x (1-D, non-negative integers) in max(x)+1 or minlength bins; with
 * weights (NULL: none) their sums: float32 for float32 weights, else float64 */
ddpl_tensor *ddpl_bincount(ddpl_tensor *x, ddpl_tensor *weights, int64_t minlength);
/* histogram of x (float32/float64) in bins equal bins of [min, max] (min == max: the data's
 * range) */
ddpl_tensor *ddpl_histc(ddpl_tensor *x, int64_t bins, double min, double max);
/* medians and quantiles (ops/reduce_median.c): median is the lower of the two middles, NaN
 * (and the index of the first NaN) for a row with a NaN; nanmedian skips NaNs. The whole-tensor
 * forms give a 0-dim value (NaN when empty). quantile takes q as a 0-/1-D tensor of x's dtype
 * (float32/float64) or, with q NULL, the number q_number; without has_dim x is flattened;
 * interpolation "linear" (NULL), "lower", "higher", "midpoint" or "nearest"; ignore_nan is
 * nanquantile. Output (len(q), reduced...) for a 1-D q, else (reduced...). */
ddpl_tensor *ddpl_median(ddpl_tensor *x);
ddpl_tensor *ddpl_nanmedian(ddpl_tensor *x);
int ddpl_median_dim(ddpl_tensor *x, int dim, bool keepdim, ddpl_tensor **values,
                    ddpl_tensor **indices);
int ddpl_nanmedian_dim(ddpl_tensor *x, int dim, bool keepdim, ddpl_tensor **values,
                       ddpl_tensor **indices);
ddpl_tensor *ddpl_quantile(ddpl_tensor *x, ddpl_tensor *q, double q_number, bool has_dim, int dim,
                           bool keepdim, const char *interpolation, bool ignore_nan);

/* ---- neural-network functions (PyTorch's torch.nn.functional) ---- */
/* losses reduce as ddpl_reduction says (ddpl/types.h) */
/* x (*,in), weight (out,in), bias (out) or NULL */
ddpl_tensor *ddpl_linear(ddpl_tensor *x, ddpl_tensor *weight, ddpl_tensor *bias);
/* x (N,C,H,W), weight (O,C/groups,kh,kw), bias (O) or NULL; pairs are (h, w) */
ddpl_tensor *ddpl_conv2d(ddpl_tensor *x, ddpl_tensor *weight, ddpl_tensor *bias,
                         const int stride[2], const int padding[2], const int dilation[2],
                         int groups);
/* x (N,Cin,H,W) or (Cin,H,W), weight (Cin,Cout/groups,kh,kw), bias (Cout) or NULL; the
 * adjoint of conv2d, output (N,Cout,(H-1)*sh-2*ph+dh*(kh-1)+oph+1, likewise W) */
ddpl_tensor *ddpl_conv_transpose2d(ddpl_tensor *x, ddpl_tensor *weight, ddpl_tensor *bias,
                                   const int stride[2], const int padding[2],
                                   const int output_padding[2], int groups, const int dilation[2]);
ddpl_tensor *ddpl_max_pool2d(ddpl_tensor *x, const int kernel[2], const int stride[2],
                             const int padding[2]);
ddpl_tensor *ddpl_avg_pool2d(ddpl_tensor *x, const int kernel[2], const int stride[2],
                             const int padding[2], bool count_include_pad);
ddpl_tensor *ddpl_adaptive_avg_pool2d(ddpl_tensor *x, int out_h, int out_w);
/* the pools with PyTorch's ceil_mode (round the output size up; the last window starts inside
 * the input or the left padding) and avg_pool2d's divisor_override (0: none, else the divisor
 * of every window) */
ddpl_tensor *ddpl_max_pool2d_ex(ddpl_tensor *x, const int kernel[2], const int stride[2],
                                const int padding[2], bool ceil_mode);
ddpl_tensor *ddpl_avg_pool2d_ex(ddpl_tensor *x, const int kernel[2], const int stride[2],
                                const int padding[2], bool ceil_mode, bool count_include_pad,
                                int divisor_override);
/* x (N,C,*); running stats (C) may be NULL; in training they are updated in place with
 * momentum (unbiased variance), as PyTorch does */
ddpl_tensor *ddpl_batch_norm(ddpl_tensor *x, ddpl_tensor *running_mean, ddpl_tensor *running_var,
                             ddpl_tensor *weight, ddpl_tensor *bias, bool training, double momentum,
                             double eps);
/* normalises over the last n_normalized dims; weight/bias have those sizes or are NULL */
ddpl_tensor *ddpl_layer_norm(ddpl_tensor *x, int n_normalized, ddpl_tensor *weight,
                             ddpl_tensor *bias, double eps);
/* index int64 (*), weight (n,d) -> (*,d) */
ddpl_tensor *ddpl_embedding(ddpl_tensor *index, ddpl_tensor *weight);
ddpl_tensor *ddpl_dropout(ddpl_tensor *x, double p, bool training);
ddpl_tensor *ddpl_softmax(ddpl_tensor *x, int dim);
ddpl_tensor *ddpl_log_softmax(ddpl_tensor *x, int dim);
/* logits (N,C) or (N,C,d...), target int64 (N) or (N,d...) with 0-based classes; weight (C) or
 * NULL */
ddpl_tensor *ddpl_cross_entropy(ddpl_tensor *logits, ddpl_tensor *target, ddpl_tensor *weight,
                                ddpl_reduction reduction, int64_t ignore_index,
                                double label_smoothing);
ddpl_tensor *ddpl_nll_loss(ddpl_tensor *logp, ddpl_tensor *target, ddpl_tensor *weight,
                           ddpl_reduction reduction, int64_t ignore_index);
ddpl_tensor *ddpl_mse_loss(ddpl_tensor *input, ddpl_tensor *target, ddpl_reduction reduction);
/* CTC loss (ops/nn_ctc.c): log_probs (T,N,C) or unbatched (T,C) float32/float64; targets
 * integers, padded (N,S) (unbatched (S)) or the N targets concatenated (1-D); input_lengths and
 * target_lengths integer tensors of N elements; 'mean' divides each loss by its target length
 * (at least 1), then averages; zero_infinity turns +inf losses (and their gradients) to 0 */
ddpl_tensor *ddpl_ctc_loss(ddpl_tensor *log_probs, ddpl_tensor *targets, ddpl_tensor *input_lengths,
                           ddpl_tensor *target_lengths, int64_t blank, ddpl_reduction reduction,
                           bool zero_infinity);
/* q (*,L,E), k (*,S,E), v (*,S,Ev); attn_mask bool (true = keep) or float (added), or NULL;
 * scale <= 0 means 1/sqrt(E) */
ddpl_tensor *ddpl_scaled_dot_product_attention(ddpl_tensor *q, ddpl_tensor *k, ddpl_tensor *v,
                                               ddpl_tensor *attn_mask, bool is_causal,
                                               double scale);
/* One recurrent time step's gate nonlinearities, fused (PyTorch's gate order): input and
 * hidden gate pre-activations (B,4H) and c_prev (B,H) give hc (2,B,H), h = hc[0], c = hc[1];
 * the GRU's input gates (B,3H, with b_ih), hidden gates (B,3H, with b_hh) and h_prev (B,H)
 * give h (B,H). */
ddpl_tensor *ddpl_lstm_cell_fused(ddpl_tensor *igates, ddpl_tensor *hgates, ddpl_tensor *cx);
ddpl_tensor *ddpl_gru_cell_fused(ddpl_tensor *igates, ddpl_tensor *hgates, ddpl_tensor *hx);
/* One direction of one recurrent layer over a sequence: gates (T,B,G*H) are the input
 * projection x W_ih^T + b_ih (the LSTM's also + b_hh), w_hh (G*H,H); reverse runs t = T-1..0.
 * The LSTM returns hc (2,T,B,H): hc[0] the outputs h_t, hc[1] the cells c_t; the GRU (b_hh may
 * be NULL) returns the outputs (T,B,H). */
ddpl_tensor *ddpl_lstm_layer(ddpl_tensor *gates, ddpl_tensor *w_hh, ddpl_tensor *h0,
                             ddpl_tensor *c0, bool reverse);
ddpl_tensor *ddpl_gru_layer(ddpl_tensor *gates, ddpl_tensor *w_hh, ddpl_tensor *b_hh,
                            ddpl_tensor *h0, bool reverse);

/* ---- scatter, index_add/copy/fill, masks, advanced indexing (issue 29, part 2: ops/scatter.c,
 * ops/index_ops.c, ops/masked.c, ops/advanced_index.c). PyTorch 1.13 semantics; dims may be
 * negative; index tensors int64 (index_* and advanced indexing also take int32); a bad index
 * is an error naming the function (on CUDA at the next synchronisation). The in-place forms
 * (trailing _) return 0 or -1 and leave x untouched on error. ---- */
/* scatter: index of x's rank, src of x's dtype; reduce NULL, "add" or "multiply" (PyTorch's
 * legacy reduce: not differentiable) */
ddpl_tensor *ddpl_scatter(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *src,
                          const char *reduce);
ddpl_tensor *ddpl_scatter_value(ddpl_tensor *x, int dim, ddpl_tensor *index, double value,
                                const char *reduce);
int ddpl_scatter_(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *src,
                  const char *reduce);
int ddpl_scatter_value_(ddpl_tensor *x, int dim, ddpl_tensor *index, double value,
                        const char *reduce);
ddpl_tensor *ddpl_scatter_add(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *src);
int ddpl_scatter_add_(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *src);
/* reduce: "sum", "prod", "mean", "amax", "amin" */
ddpl_tensor *ddpl_scatter_reduce(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *src,
                                 const char *reduce, bool include_self);
int ddpl_scatter_reduce_(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *src,
                         const char *reduce, bool include_self);
/* index 1-D (or 0-dim); source of x's dtype and shape except index's length along dim */
ddpl_tensor *ddpl_index_add(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *source,
                            double alpha);
int ddpl_index_add_(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *source, double alpha);
ddpl_tensor *ddpl_index_copy(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *source);
int ddpl_index_copy_(ddpl_tensor *x, int dim, ddpl_tensor *index, ddpl_tensor *source);
ddpl_tensor *ddpl_index_fill(ddpl_tensor *x, int dim, ddpl_tensor *index, double value);
int ddpl_index_fill_(ddpl_tensor *x, int dim, ddpl_tensor *index, double value);
/* nonzero: int64 (n, ndim), row-major order; the tuple form fills outs[0 .. max(ndim, 1)) with
 * 1-D int64 tensors and returns how many (or -1) */
ddpl_tensor *ddpl_nonzero(ddpl_tensor *x);
int ddpl_nonzero_tuple(ddpl_tensor *x, ddpl_tensor **outs);
/* mask bool, broadcast with x; the result 1-D */
ddpl_tensor *ddpl_masked_select(ddpl_tensor *x, ddpl_tensor *mask);
/* x's shape; mask (bool) broadcasts to x; source's first count(mask) elements in order */
ddpl_tensor *ddpl_masked_scatter(ddpl_tensor *x, ddpl_tensor *mask, ddpl_tensor *source);
int ddpl_masked_scatter_(ddpl_tensor *x, ddpl_tensor *mask, ddpl_tensor *source);
int ddpl_masked_fill_(ddpl_tensor *x, ddpl_tensor *mask, double value);
/* take: x flattened, at index (any shape, negative counts from the end); take_along_dim:
 * has_dim false takes along the flattened x */
ddpl_tensor *ddpl_take(ddpl_tensor *x, ddpl_tensor *index);
ddpl_tensor *ddpl_take_along_dim(ddpl_tensor *x, ddpl_tensor *indices, bool has_dim, int dim);
/* x[i0, ..., i_{n-1}] as PyTorch: each entry NULL (a full slice), an int64/int32 index tensor
 * (negative counts from the end) or a bool mask (k dims: its nonzero() over k dims of x);
 * index tensors broadcast together; the result dims go where the first indexed dim is when the
 * indexed dims are adjacent, else first. index_put writes values (broadcast to x[indices]'s
 * shape, x's dtype) there, adding duplicates when accumulate. */
ddpl_tensor *ddpl_index(ddpl_tensor *x, int n, ddpl_tensor *const *indices);
ddpl_tensor *ddpl_index_put(ddpl_tensor *x, int n, ddpl_tensor *const *indices, ddpl_tensor *values,
                            bool accumulate);
int ddpl_index_put_(ddpl_tensor *x, int n, ddpl_tensor *const *indices, ddpl_tensor *values,
                    bool accumulate);

/* ---- shape functions (ops/shape_repeat.c, shape_flip.c, shape_misc.c, shape_diag.c) ----
 * PyTorch's; all copies unless marked as views, all differentiable (compositions of the ops
 * above, so every device works). */
/* repeats: n >= x's rank (leading dims are new); tile: fewer dims are padded with 1 in front */
ddpl_tensor *ddpl_repeat(ddpl_tensor *x, int n, const int64_t *repeats);
ddpl_tensor *ddpl_tile(ddpl_tensor *x, int n, const int64_t *dims);
/* each slice along dim (has_dim false: of the flattened x) repeated; output_size < 0: not given,
 * else it must match. The tensor form takes int64/int32 counts (0-D, or 1-D of dim's size); x
 * NULL gives the index of each repeated position (repeat_interleave(repeats)) */
ddpl_tensor *ddpl_repeat_interleave(ddpl_tensor *x, int64_t repeats, bool has_dim, int dim,
                                    int64_t output_size);
ddpl_tensor *ddpl_repeat_interleave_tensor(ddpl_tensor *x, ddpl_tensor *repeats, bool has_dim,
                                           int dim, int64_t output_size);
ddpl_tensor *ddpl_flip(ddpl_tensor *x, int n, const int *dims);
ddpl_tensor *ddpl_fliplr(ddpl_tensor *x); /* flip(1), x at least 2-D */
ddpl_tensor *ddpl_flipud(ddpl_tensor *x); /* flip(0), x at least 1-D */
/* n_dims 0: one shift of the flattened x */
ddpl_tensor *ddpl_roll(ddpl_tensor *x, int n_shifts, const int64_t *shifts, int n_dims,
                       const int *dims);
ddpl_tensor *ddpl_rot90(ddpl_tensor *x, int64_t k, int dim0, int dim1);
/* views */
ddpl_tensor *ddpl_movedim(ddpl_tensor *x, int n, const int *source, const int *destination,
                          int n_destination);
ddpl_tensor *ddpl_unflatten(ddpl_tensor *x, int dim, int n, const int64_t *sizes); /* one -1 */
/* outs: sections views (indices NULL), or n_indices + 1 views split at indices */
int ddpl_tensor_split(ddpl_tensor *x, int64_t sections, int n_indices, const int64_t *indices,
                      int dim, ddpl_tensor **outs);
int ddpl_broadcast_tensors(int n, ddpl_tensor *const *xs, ddpl_tensor **outs);  /* n outs */
int ddpl_meshgrid(int n, ddpl_tensor *const *xs, bool xy, ddpl_tensor **outs);  /* n outs */
ddpl_tensor *ddpl_diagonal(ddpl_tensor *x, int64_t offset, int dim1, int dim2); /* a view */
/* copies */
ddpl_tensor *ddpl_cartesian_prod(int n, ddpl_tensor *const *xs);
ddpl_tensor *ddpl_block_diag(int n, ddpl_tensor *const *xs);
ddpl_tensor *ddpl_tril(ddpl_tensor *x, int64_t diagonal);
ddpl_tensor *ddpl_triu(ddpl_tensor *x, int64_t diagonal);
int ddpl_tril_(ddpl_tensor *x, int64_t diagonal);
int ddpl_triu_(ddpl_tensor *x, int64_t diagonal);
/* (2, N) coordinates of the triangle, row by row; dt int64 or int32 */
ddpl_tensor *ddpl_tril_indices(int64_t row, int64_t col, int64_t offset, ddpl_dtype dt,
                               ddpl_device dev);
ddpl_tensor *ddpl_triu_indices(int64_t row, int64_t col, int64_t offset, ddpl_dtype dt,
                               ddpl_device dev);
ddpl_tensor *ddpl_diag_embed(ddpl_tensor *x, int64_t offset, int dim1, int dim2);
ddpl_tensor *ddpl_diag(ddpl_tensor *x, int64_t diagonal); /* 1-D -> matrix, 2-D -> 1-D */
ddpl_tensor *ddpl_trace(ddpl_tensor *x);                  /* 2-D; integers sum to int64 */

/* ---- linear algebra, issue 29 (ops/linalg_products.c, einsum.c, linalg_decomp.c,
 * linalg_spectral.c, linalg_norms.c) ---- */
ddpl_tensor *ddpl_outer(ddpl_tensor *a, ddpl_tensor *b); /* 1-D, 1-D */
ddpl_tensor *ddpl_dot(ddpl_tensor *a, ddpl_tensor *b);   /* 1-D, 1-D, same dtype */
ddpl_tensor *ddpl_inner(ddpl_tensor *a, ddpl_tensor *b);
/* a's dims_a[i] contracted with b's dims_b[i], i < n */
ddpl_tensor *ddpl_tensordot(ddpl_tensor *a, ddpl_tensor *b, int n, const int *dims_a,
                            const int *dims_b);
ddpl_tensor *ddpl_kron(ddpl_tensor *a, ddpl_tensor *b);
/* has_dim false: the first dim of size 3 (torch.cross); linalg names the error "linalg.cross" */
ddpl_tensor *ddpl_cross(ddpl_tensor *a, ddpl_tensor *b, bool has_dim, int dim, bool linalg);
ddpl_tensor *ddpl_einsum(const char *equation, int n, ddpl_tensor *const *operands);
/* beta * input + alpha * product; beta 0 ignores input's values */
ddpl_tensor *ddpl_baddbmm(ddpl_tensor *input, ddpl_tensor *b1, ddpl_tensor *b2, double beta,
                          double alpha);
ddpl_tensor *ddpl_addbmm(ddpl_tensor *input, ddpl_tensor *b1, ddpl_tensor *b2, double beta,
                         double alpha);
ddpl_tensor *ddpl_addmv(ddpl_tensor *input, ddpl_tensor *mat, ddpl_tensor *vec, double beta,
                        double alpha);
ddpl_tensor *ddpl_addr(ddpl_tensor *input, ddpl_tensor *v1, ddpl_tensor *v2, double beta,
                       double alpha);
ddpl_tensor *ddpl_cdist(ddpl_tensor *x1, ddpl_tensor *x2, double p);
/* ndims 0: all dims; dtype DDPL_DTYPE_COUNT: x's */
ddpl_tensor *ddpl_linalg_vector_norm(ddpl_tensor *x, double ord, int ndims, const int *dims,
                                     bool keepdim, ddpl_dtype dtype);
/* sord "fro" or "nuc", or NULL for the numeric ord (+-1, +-2, +-inf) */
ddpl_tensor *ddpl_linalg_matrix_norm(ddpl_tensor *x, const char *sord, double ord, int dim0,
                                     int dim1, bool keepdim);
/* decompositions: float32/float64 (..., m, n), computed on the host in float64 */
ddpl_tensor *ddpl_linalg_inv(ddpl_tensor *a);
ddpl_tensor *ddpl_linalg_solve(ddpl_tensor *a, ddpl_tensor *b); /* AX = B; B a matrix or vector */
ddpl_tensor *ddpl_linalg_det(ddpl_tensor *a);
int ddpl_linalg_slogdet(ddpl_tensor *a, ddpl_tensor **sign, ddpl_tensor **logabsdet);
ddpl_tensor *ddpl_linalg_cholesky(ddpl_tensor *a, bool upper);
/* mode "reduced", "complete" or "r" (q is then an empty tensor) */
int ddpl_linalg_qr(ddpl_tensor *a, const char *mode, ddpl_tensor **q, ddpl_tensor **r);
int ddpl_linalg_svd(ddpl_tensor *a, bool full_matrices, ddpl_tensor **u, ddpl_tensor **s,
                    ddpl_tensor **vh);
ddpl_tensor *ddpl_linalg_svdvals(ddpl_tensor *a);
/* uplo "L" or "U": the triangle read; eigenvalues ascending */
int ddpl_linalg_eigh(ddpl_tensor *a, const char *uplo, ddpl_tensor **eigenvalues,
                     ddpl_tensor **eigenvectors);
ddpl_tensor *ddpl_linalg_eigvalsh(ddpl_tensor *a, const char *uplo);
/* singular values above max(atol, rtol * the largest) count (has_*: given; rtol's default
 * eps * max(m, n), 0 when atol > 0 is given); hermitian: from eigh */
ddpl_tensor *ddpl_linalg_pinv(ddpl_tensor *a, double atol, double rtol, bool has_atol,
                              bool has_rtol, bool hermitian);
ddpl_tensor *ddpl_linalg_matrix_rank(ddpl_tensor *a, double atol, double rtol, bool has_atol,
                                     bool has_rtol, bool hermitian); /* int64 */

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
