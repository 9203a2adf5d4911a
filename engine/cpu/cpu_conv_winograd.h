/* cpu/cpu_conv_winograd.h: float32 3x3 stride-1 convolution by Winograd F(2x2,3x3).
 * defines: cpu_winograd_shape, cpu_winograd_applies, cpu_winograd_conv3x3,
 *          cpu_winograd_weight_grad3x3.
 *
 * The fast path of cpu_conv.c for the examples' 3x3 "same" convolutions (models/lenet.lua,
 * models/resnet.lua): 2.25x fewer multiply-adds than im2col + GEMM, done as 16 GEMMs per chunk
 * of tiles. It serves the forward (y = conv(x, w)) and the input gradient, which is the same
 * kind of convolution of dy with the flipped, transposed kernel (`adjoint`), and the weight
 * gradient through the same transforms (cpu_winograd_weight_grad3x3). Results differ
 * from the im2col path by float32 rounding only (see docs/internals/cpu-conv.md). */
#ifndef DDPL_CPU_CONV_WINOGRAD_H
#define DDPL_CPU_CONV_WINOGRAD_H

#include <stdbool.h>
#include <stdint.h>

/* in (N, Cin, H, W) -> out (N, Cout, OH, OW) with OH = H + 2*ph - 2, OW = W + 2*pw - 2. */
typedef struct {
    int64_t N, Cin, H, W, Cout, OH, OW;
    int ph, pw;
} cpu_winograd_shape;

/* Whether the Winograd path is worth taking for this shape (enough channels for its GEMMs,
 * padding <= 2, sizes that fit a BLAS int); the caller has checked float32, a 3x3 kernel,
 * stride 1, dilation 1 and one group. */
bool cpu_winograd_applies(const cpu_winograd_shape *s);

/* out = conv(in, k) (+ bias[o] when bias is not NULL), written whole. adjoint false: k is the
 * (Cout, Cin, 3, 3) weight; adjoint true: k is a (Cin, Cout, 3, 3) forward weight and the
 * kernel used is k[i][o] flipped in both spatial dims (the input gradient of that forward
 * convolution, with padding 2 - p). Returns 0, or -1 with the error set (out of memory). */
int cpu_winograd_conv3x3(const cpu_winograd_shape *s, const float *in, const float *k, bool adjoint,
                         const float *bias, float *out);

/* dw (Cout, Cin, 3, 3) = the weight gradient of out = conv(in, w) for the output gradient dy
 * (N, Cout, OH, OW), written whole; s as for the forward. Returns 0, or -1 with the error set. */
int cpu_winograd_weight_grad3x3(const cpu_winograd_shape *s, const float *in, const float *dy,
                                float *dw);

#endif
