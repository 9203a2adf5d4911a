/* cuda/cuda_attention_ops.c: the ddpl_kernel glue of the CUDA fused scaled dot-product
 * attention kernels (cuda_attention.cu): shapes and data pointers in, launch out.
 * defines: cuda_register_attention.
 *
 * The ops layer (nn_softmax.c) hands contiguous q (B,H,L,E), k (B,H,S,E), v (B,H,S,Ev) of one
 * dtype, none empty, and a float32 logsumexp (B,H,L). Calls the kernels do not cover (a head
 * size over CUDA_ATTENTION_MAX_HEAD, float64, sizes past 32-bit row indexing) return
 * ATTENTION_UNSUPPORTED, not an error: the ops layer then composes matmul and softmax. The only
 * allocation is the backward's float32 D = rowsum(dY*Y) scratch (B*H*L), a device tensor
 * released right after the launches (the compute stream orders its reuse). */
#include <limits.h>
#include <stdio.h>

#include "cuda_attention.h"
#include "cuda_registry.h"
#include "kernel_abi/nn_params.h"

/* What an ATTENTION kernel returns for a call it does not cover (the ops layer composes). */
#define ATTENTION_UNSUPPORTED 1

/* Fills the launch shape from q (B,H,L,E) and v (B,H,S,Ev); ATTENTION_UNSUPPORTED when the
 * kernels do not take this call. */
static int att_shape(cuda_attention_shape *s, const ddpl_tensor *q, const ddpl_tensor *v,
                     const ddpl_tensor *lse, const void *params)
{
    const ddpl_attention_params *p = params;
    int64_t BH = ddpl_numel(q->ndim - 2, q->sizes), L = q->sizes[q->ndim - 2];
    int64_t E = q->sizes[q->ndim - 1], S = v->sizes[v->ndim - 2], Ev = v->sizes[v->ndim - 1];
    bool dtype_ok =
        q->dtype == DDPL_FLOAT32 || q->dtype == DDPL_FLOAT16 || q->dtype == DDPL_BFLOAT16;
    /* blocks = BH * ceil(rows / 32) must fit grid.x (2^31 - 1) */
    int64_t rows = L > S ? L : S;
    if (!dtype_ok || lse->dtype != DDPL_FLOAT32 || E < 1 || Ev < 1 || E > CUDA_ATTENTION_MAX_HEAD ||
        Ev > CUDA_ATTENTION_MAX_HEAD || rows > INT_MAX / 256 ||
        BH > (int64_t)INT_MAX / ((rows + 31) / 32))
        return ATTENTION_UNSUPPORTED;
    *s = (cuda_attention_shape){.BH = BH,
                                .L = (int)L,
                                .S = (int)S,
                                .E = (int)E,
                                .Ev = (int)Ev,
                                .scale = (float)p->scale,
                                .causal = p->causal};
    return 0;
}

/* "op q (..) k (..) v (..) dtype on cuda:N", naming the failing launch in CUDA errors. */
static void describe(char *buf, size_t n, const char *op, const ddpl_tensor *q,
                     const ddpl_tensor *k, const ddpl_tensor *v)
{
    char a[128], b[128], c[128], d[32];
    snprintf(buf, n, "%s: q %s, k %s, v %s %s on %s", op, ddpl_shape_str(q, a, sizeof a),
             ddpl_shape_str(k, b, sizeof b), ddpl_shape_str(v, c, sizeof c),
             ddpl_dtype_name((ddpl_dtype)q->dtype), ddpl_device_str(q->device, d, sizeof d));
}

/* out[0] y (B,H,L,Ev), out[1] logsumexp (B,H,L) float32; in[0] q, in[1] k, in[2] v */
static int cuda_attention(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    cuda_attention_shape s;
    int rc = att_shape(&s, in[0], in[2], out[1], params);
    if (rc) return rc;
    char what[512];
    describe(what, sizeof what, "attention", in[0], in[1], in[2]);
    return cuda_launch_attention(&s, in[0]->dtype, ddpl_data_ptr(in[0]), ddpl_data_ptr(in[1]),
                                 ddpl_data_ptr(in[2]), ddpl_data_ptr(out[0]),
                                 (float *)ddpl_data_ptr(out[1]), what);
}

/* out[0] dq, out[1] dk, out[2] dv; in[0] dY (B,H,L,Ev), in[1] q, in[2] k, in[3] v, in[4] y,
 * in[5] logsumexp */
static int cuda_attention_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    cuda_attention_shape s;
    int rc = att_shape(&s, in[1], in[3], in[5], params);
    if (rc) return rc;
    char what[512];
    describe(what, sizeof what, "attention_backward", in[1], in[2], in[3]);
    int64_t rows = s.BH * s.L;
    ddpl_tensor *delta = ddpl_tensor_new(1, &rows, DDPL_FLOAT32, in[1]->device);
    if (!delta) return -1;
    rc = cuda_launch_attention_backward(
        &s, in[1]->dtype, ddpl_data_ptr(in[0]), ddpl_data_ptr(in[1]), ddpl_data_ptr(in[2]),
        ddpl_data_ptr(in[3]), ddpl_data_ptr(in[4]), (const float *)ddpl_data_ptr(in[5]),
        (float *)ddpl_data_ptr(delta), ddpl_data_ptr(out[0]), ddpl_data_ptr(out[1]),
        ddpl_data_ptr(out[2]), what);
    ddpl_tensor_release(delta);
    return rc;
}

void cuda_register_attention(ddpl_kernel *k)
{
    k[DDPL_OP_ATTENTION] = cuda_attention;
    k[DDPL_OP_ATTENTION_BACKWARD] = cuda_attention_backward;
}
