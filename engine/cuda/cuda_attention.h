/* cuda/cuda_attention.h: the C face of the fused scaled dot-product attention kernels
 * (cuda_attention.cu).
 * defines: cuda_attention_shape, CUDA_ATTENTION_MAX_HEAD, cuda_launch_attention,
 *          cuda_launch_attention_backward.
 *
 * Operands are contiguous, on the current device, of one dtype (`dtype`, a ddpl_dtype: float32,
 * float16 or bfloat16; the kernels accumulate in float32): q (BH,L,E), k (BH,S,E), v (BH,S,Ev),
 * y and dY (BH,L,Ev); logsumexp (BH,L) is float32, in natural-log units. `what` names the op,
 * shapes, dtype and device in CUDA errors. Each returns 0, or -1 with ddpl_error set. */
#ifndef DDPL_CUDA_ATTENTION_H
#define DDPL_CUDA_ATTENTION_H

#include "cuda_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Head sizes (E and Ev) up to this run fused; larger ones compose (matmul, softmax). */
enum { CUDA_ATTENTION_MAX_HEAD = 128 };

typedef struct cuda_attention_shape {
    int64_t BH;  /* batch * heads */
    int L, S;    /* query and key counts */
    int E, Ev;   /* head sizes of q/k and of v */
    float scale; /* applied to q.k */
    int causal;  /* key j hidden from query i when j > i */
} cuda_attention_shape;

/* y (BH,L,Ev), lse (BH,L) float32 <- q, k, v */
int cuda_launch_attention(const cuda_attention_shape *s, int dtype, const void *q, const void *k,
                          const void *v, void *y, float *lse, const char *what);
/* dq, dk, dv <- dy, q, k, v, y, lse; delta is float32 scratch of BH*L (rowsum(dY*Y)) */
int cuda_launch_attention_backward(const cuda_attention_shape *s, int dtype, const void *dy,
                                   const void *q, const void *k, const void *v, const void *y,
                                   const float *lse, float *delta, void *dq, void *dk, void *dv,
                                   const char *what);

#ifdef __cplusplus
}
#endif
#endif
