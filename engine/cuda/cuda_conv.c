/* cuda/cuda_conv.c: the CONV2D and CONV2D_BACKWARD slots on CUDA through cuDNN's convolution
 * API (cudnnConvolutionForward / BackwardData / BackwardFilter, still in cuDNN 9).
 * defines: cuda_conv2d, cuda_conv2d_backward.
 *
 * x (N,C,H,W), w (O,C/groups,kh,kw), y (N,O,OH,OW), all contiguous (the op ensures it), in
 * float32, float64, float16 or bfloat16 (16-bit data computes in float). Algorithms come from
 * cudnnGet*Algorithm_v7 (cuDNN's heuristics, fastest first), or from cudnnFind* (measured) when
 * the heuristics offer none that qualifies, and are cached per shape key; the workspace comes from
 * the engine's allocator for the duration of the call. float32 uses TF32 tensor cores only when
 * float32 matmul precision is 'high' or 'medium' (FMA math otherwise: cuDNN's default math would
 * allow TF32). The bias is added and its gradient summed with the engine's own ADD and SUM kernels
 * (any dtype, same stream). One handle per device, on that device's compute stream. */
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <limits.h>
#include <pthread.h>

#include "core/alloc.h"
#include "cuda_blas.h"
#include "cuda_dynlib.h"
#include "cuda_launch.h"
#include "cuda_registry.h"
#include "core/matmul_precision.h"
#include "kernel_abi/kernel_params.h"
#include "kernel_abi/nn_params.h"

/* Algorithms needing more scratch than this are passed over (PyTorch caps by free memory). */
#define CONV_WORKSPACE_LIMIT ((size_t)1 << 30)

typedef struct {
    cudnnHandle_t handle;
    cudaStream_t stream;
} conv_device;

static conv_device conv_devices[CUDA_BLAS_MAX_DEVICES];
static pthread_mutex_t conv_lock = PTHREAD_MUTEX_INITIALIZER;

static int conv_handle(int dev, cudnnHandle_t *out)
{
    if (dev < 0 || dev >= CUDA_BLAS_MAX_DEVICES)
        return ddpl_error("conv2d: cuda:%d is beyond the %d devices cuDNN handles are kept for",
                          dev, CUDA_BLAS_MAX_DEVICES);
    conv_device *d = &conv_devices[dev];
    cudaStream_t s = (cudaStream_t)cuda_current_stream();
    if (!s) return -1; /* not the legacy default stream: it is not ordered with ours */
    int rc = 0;
    pthread_mutex_lock(&conv_lock);
    if (!d->handle && cuda_lib_load(CUDA_LIB_CUDNN) < 0) {
        rc = -1;
    } else if (!d->handle) {
        cudnnStatus_t st = CUDA_DL(CUDA_LIB_CUDNN, cudnnCreate)(&d->handle);
        if (st != CUDNN_STATUS_SUCCESS) {
            d->handle = NULL;
            rc = ddpl_error("conv2d: cudnnCreate failed (%s) on cuda:%d",
                            CUDA_DL(CUDA_LIB_CUDNN, cudnnGetErrorString)(st), dev);
        }
        d->stream = NULL;
    }
    if (rc == 0 && (d->stream != s || !d->stream)) {
        cudnnStatus_t st = CUDA_DL(CUDA_LIB_CUDNN, cudnnSetStream)(d->handle, s);
        if (st != CUDNN_STATUS_SUCCESS)
            rc = ddpl_error("conv2d: cuDNN could not use the compute stream (%s) on cuda:%d",
                            CUDA_DL(CUDA_LIB_CUDNN, cudnnGetErrorString)(st), dev);
        else
            d->stream = s;
    }
    pthread_mutex_unlock(&conv_lock);
    *out = d->handle;
    return rc;
}

/* ---- descriptors ---- */
typedef enum { PASS_FWD, PASS_BWD_DATA, PASS_BWD_FILTER } conv_pass;

/* Everything an algorithm choice depends on. */
typedef struct {
    int dev, dtype, pass, tf32;
    int n, c, h, w, o, kh, kw, oh, ow;
    int stride[2], padding[2], dilation[2], groups;
} conv_key;

typedef struct {
    cudnnHandle_t h;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnDataType_t data;
    bool f64, strict_fp32; /* alpha/beta as doubles; float32 without TF32 */
    conv_key key;
    char shapes[160]; /* "x (..) w (..) dtype on cuda:d" for messages */
} conv_setup;

static int cudnn_failed(const char *what, cudnnStatus_t st, const conv_setup *s)
{
    return ddpl_error("conv2d: cuDNN %s failed (%s) for %s", what,
                      CUDA_DL(CUDA_LIB_CUDNN, cudnnGetErrorString)(st), s->shapes);
}

static void setup_destroy(conv_setup *s)
{
    if (s->x) CUDA_DL(CUDA_LIB_CUDNN, cudnnDestroyTensorDescriptor)(s->x);
    if (s->y) CUDA_DL(CUDA_LIB_CUDNN, cudnnDestroyTensorDescriptor)(s->y);
    if (s->w) CUDA_DL(CUDA_LIB_CUDNN, cudnnDestroyFilterDescriptor)(s->w);
    if (s->conv) CUDA_DL(CUDA_LIB_CUDNN, cudnnDestroyConvolutionDescriptor)(s->conv);
}

static bool fits_int(const ddpl_tensor *t)
{
    return ddpl_tensor_numel(t) <= INT_MAX;
}

/* Descriptors for x, w, y (NCHW, contiguous) and the convolution. */
static int setup_init(conv_setup *s, const ddpl_tensor *x, const ddpl_tensor *w,
                      const ddpl_tensor *y, const ddpl_conv_params *p, conv_pass pass)
{
    memset(s, 0, sizeof *s);
    int dev = 0;
    cudaGetDevice(&dev);
    ddpl_dtype dt = (ddpl_dtype)x->dtype;
    char sx[64], sw[64];
    snprintf(s->shapes, sizeof s->shapes, "input %s, weight %s, %s on cuda:%d",
             ddpl_shape_str(x, sx, sizeof sx), ddpl_shape_str(w, sw, sizeof sw),
             ddpl_dtype_name(dt), dev);
    cudnnDataType_t compute;
    switch (dt) {
    case DDPL_FLOAT32:
        s->data = compute = CUDNN_DATA_FLOAT;
        s->strict_fp32 = !ddpl_allow_tf32();
        break;
    case DDPL_FLOAT64:
        s->data = compute = CUDNN_DATA_DOUBLE;
        s->f64 = true;
        break;
    case DDPL_FLOAT16:
        s->data = CUDNN_DATA_HALF, compute = CUDNN_DATA_FLOAT;
        break;
    case DDPL_BFLOAT16:
        s->data = CUDNN_DATA_BFLOAT16, compute = CUDNN_DATA_FLOAT;
        break;
    default:
        return ddpl_error("conv2d: dtype %s is not supported on cuda", ddpl_dtype_name(dt));
    }
    if (!fits_int(x) || !fits_int(w) || !fits_int(y))
        return ddpl_error("conv2d: tensors of more than 2^31-1 elements are not supported by "
                          "cuDNN's convolution (%s)",
                          s->shapes);
    conv_key *k = &s->key;
    k->dev = dev, k->dtype = (int)dt, k->pass = (int)pass, k->tf32 = !s->strict_fp32;
    k->n = (int)x->sizes[0], k->c = (int)x->sizes[1], k->h = (int)x->sizes[2];
    k->w = (int)x->sizes[3], k->o = (int)w->sizes[0], k->kh = (int)w->sizes[2];
    k->kw = (int)w->sizes[3], k->oh = (int)y->sizes[2], k->ow = (int)y->sizes[3];
    for (int i = 0; i < 2; i++)
        k->stride[i] = p->stride[i], k->padding[i] = p->padding[i], k->dilation[i] = p->dilation[i];
    k->groups = p->groups;
    if (conv_handle(dev, &s->h) < 0) return -1;

    cudnnStatus_t st = CUDA_DL(CUDA_LIB_CUDNN, cudnnCreateTensorDescriptor)(&s->x);
    if (st == CUDNN_STATUS_SUCCESS)
        st = CUDA_DL(CUDA_LIB_CUDNN, cudnnCreateTensorDescriptor)(&s->y);
    if (st == CUDNN_STATUS_SUCCESS)
        st = CUDA_DL(CUDA_LIB_CUDNN, cudnnCreateFilterDescriptor)(&s->w);
    if (st == CUDNN_STATUS_SUCCESS)
        st = CUDA_DL(CUDA_LIB_CUDNN, cudnnCreateConvolutionDescriptor)(&s->conv);
    if (st == CUDNN_STATUS_SUCCESS)
        st = CUDA_DL(CUDA_LIB_CUDNN, cudnnSetTensor4dDescriptor)(s->x, CUDNN_TENSOR_NCHW, s->data,
                                                                 k->n, k->c, k->h, k->w);
    if (st == CUDNN_STATUS_SUCCESS)
        st = CUDA_DL(CUDA_LIB_CUDNN, cudnnSetTensor4dDescriptor)(s->y, CUDNN_TENSOR_NCHW, s->data,
                                                                 k->n, k->o, k->oh, k->ow);
    if (st == CUDNN_STATUS_SUCCESS)
        st = CUDA_DL(CUDA_LIB_CUDNN, cudnnSetFilter4dDescriptor)(
            s->w, s->data, CUDNN_TENSOR_NCHW, k->o, (int)w->sizes[1], k->kh, k->kw);
    if (st == CUDNN_STATUS_SUCCESS)
        st = CUDA_DL(CUDA_LIB_CUDNN, cudnnSetConvolution2dDescriptor)(
            s->conv, p->padding[0], p->padding[1], p->stride[0], p->stride[1], p->dilation[0],
            p->dilation[1], CUDNN_CROSS_CORRELATION, compute);
    if (st == CUDNN_STATUS_SUCCESS)
        st = CUDA_DL(CUDA_LIB_CUDNN, cudnnSetConvolutionGroupCount)(s->conv, p->groups);
    if (st != CUDNN_STATUS_SUCCESS) return cudnn_failed("descriptor setup", st, s);
    return 0;
}

/* ---- algorithm choice, cached per key ---- */
typedef struct {
    conv_key key;
    int algo; /* cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    cudnnMathType_t math;
    size_t workspace;
    bool used;
} conv_choice;

enum { CONV_CACHE_SIZE = 256 };
static conv_choice conv_cache[CONV_CACHE_SIZE];
static int conv_cache_next; /* round-robin replacement once full */

static bool cache_lookup(const conv_key *k, conv_choice *out)
{
    bool hit = false;
    pthread_mutex_lock(&conv_lock);
    for (int i = 0; i < CONV_CACHE_SIZE && !hit; i++)
        if (conv_cache[i].used && memcmp(&conv_cache[i].key, k, sizeof *k) == 0) {
            *out = conv_cache[i];
            hit = true;
        }
    pthread_mutex_unlock(&conv_lock);
    return hit;
}

static void cache_store(const conv_choice *c)
{
    pthread_mutex_lock(&conv_lock);
    conv_cache[conv_cache_next] = *c;
    conv_cache[conv_cache_next].used = true;
    conv_cache_next = (conv_cache_next + 1) % CONV_CACHE_SIZE;
    pthread_mutex_unlock(&conv_lock);
}

/* Whether a result of math type m may be used for strict float32 (float32 without TF32):
 * FMA math, or default math, which choose_algo then runs as FMA. Both tensor-op math types are
 * refused: TENSOR_OP_MATH computes in TF32, and TENSOR_OP_MATH_ALLOW_CONVERSION goes further,
 * letting cuDNN down-convert the float32 operands to a lower precision (float16) for the tensor
 * cores; strict float32 forbids both. Nor may such a result be run with FMA math instead: cuDNN
 * offers some algorithms only as tensor-op kernels, and those answer CUDNN_STATUS_NOT_SUPPORTED
 * under FMA math (the CUDA emulation's cuDNN stand-in does this under
 * DDPL_CUEMU_CUDNN_HEURISTICS=conversion_first, spec/cuda/cuda_blas_spec.lua). */
#define STRICT_FP32_MATH_OK(m) ((m) == CUDNN_FMA_MATH || (m) == CUDNN_DEFAULT_MATH)
/* Float32 with TF32 allowed may use tensor-op math, but never ALLOW_CONVERSION: TF32 keeps
 * float32's exponent and 10 bits of mantissa, a down-conversion to float16 loses range as well
 * (PyTorch never asks cuDNN for it either). */
#define FP32_MATH_OK(m) ((m) != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)

/* Picks from cuDNN's ranked list: the first that succeeded, fits the workspace limit and, for
 * float32, uses a math type its precision allows (STRICT_FP32_MATH_OK, FP32_MATH_OK). */
#define PICK_ALGO(perf, count, s, c)                                                               \
    do {                                                                                           \
        for (int i_ = 0; i_ < (count); i_++) {                                                     \
            if ((perf)[i_].status != CUDNN_STATUS_SUCCESS) continue;                               \
            if ((perf)[i_].memory > CONV_WORKSPACE_LIMIT) continue;                                \
            if ((s)->strict_fp32 && !STRICT_FP32_MATH_OK((perf)[i_].mathType)) continue;           \
            if ((s)->data == CUDNN_DATA_FLOAT && !FP32_MATH_OK((perf)[i_].mathType)) continue;     \
            (c)->algo = (int)(perf)[i_].algo;                                                      \
            (c)->math = (perf)[i_].mathType;                                                       \
            (c)->workspace = (perf)[i_].memory;                                                    \
            found = true;                                                                          \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

enum { CONV_MAX_ALGOS = 16 };

/* Ranks the algorithms of the pass in s->key.pass and picks one into c; *found says whether
 * one qualified. exhaustive: cudnnFind* (runs each candidate on scratch buffers cuDNN allocates,
 * slow, once per shape) instead of cudnnGet*_v7 (heuristics, instant). */
static cudnnStatus_t rank_algos(conv_setup *s, conv_choice *c, bool exhaustive, bool *found_out)
{
    int count = 0;
    bool found = false;
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    switch ((conv_pass)s->key.pass) {
    case PASS_FWD: {
        cudnnConvolutionFwdAlgoPerf_t perf[CONV_MAX_ALGOS];
        st = exhaustive ? CUDA_DL(CUDA_LIB_CUDNN, cudnnFindConvolutionForwardAlgorithm)(
                              s->h, s->x, s->w, s->conv, s->y, CONV_MAX_ALGOS, &count, perf)
                        : CUDA_DL(CUDA_LIB_CUDNN, cudnnGetConvolutionForwardAlgorithm_v7)(
                              s->h, s->x, s->w, s->conv, s->y, CONV_MAX_ALGOS, &count, perf);
        if (st == CUDNN_STATUS_SUCCESS) PICK_ALGO(perf, count, s, c);
        break;
    }
    case PASS_BWD_DATA: {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CONV_MAX_ALGOS];
        st = exhaustive ? CUDA_DL(CUDA_LIB_CUDNN, cudnnFindConvolutionBackwardDataAlgorithm)(
                              s->h, s->w, s->y, s->conv, s->x, CONV_MAX_ALGOS, &count, perf)
                        : CUDA_DL(CUDA_LIB_CUDNN, cudnnGetConvolutionBackwardDataAlgorithm_v7)(
                              s->h, s->w, s->y, s->conv, s->x, CONV_MAX_ALGOS, &count, perf);
        if (st == CUDNN_STATUS_SUCCESS) PICK_ALGO(perf, count, s, c);
        break;
    }
    case PASS_BWD_FILTER: {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CONV_MAX_ALGOS];
        st = exhaustive ? CUDA_DL(CUDA_LIB_CUDNN, cudnnFindConvolutionBackwardFilterAlgorithm)(
                              s->h, s->x, s->y, s->conv, s->w, CONV_MAX_ALGOS, &count, perf)
                        : CUDA_DL(CUDA_LIB_CUDNN, cudnnGetConvolutionBackwardFilterAlgorithm_v7)(
                              s->h, s->x, s->y, s->conv, s->w, CONV_MAX_ALGOS, &count, perf);
        if (st == CUDNN_STATUS_SUCCESS) PICK_ALGO(perf, count, s, c);
        break;
    }
    }
    *found_out = found;
    return st;
}

static int choose_algo(conv_setup *s, conv_choice *c)
{
    if (cache_lookup(&s->key, c)) goto apply;
    memset(c, 0, sizeof *c);
    c->key = s->key;
    /* the heuristics see the math type of the descriptor: FMA keeps float32 exact */
    cudnnMathType_t want = s->strict_fp32                 ? CUDNN_FMA_MATH
                           : s->data == CUDNN_DATA_DOUBLE ? CUDNN_DEFAULT_MATH
                                                          : CUDNN_TENSOR_OP_MATH;
    cudnnStatus_t st = CUDA_DL(CUDA_LIB_CUDNN, cudnnSetConvolutionMathType)(s->conv, want);
    if (st != CUDNN_STATUS_SUCCESS) return cudnn_failed("math type", st, s);
    bool found = false;
    st = rank_algos(s, c, false, &found);
    /* cuDNN 9's heuristics may offer nothing that runs under FMA math for some shapes: then
     * measure, as PyTorch's benchmark mode does (once per shape: the choice is cached) */
    if (st == CUDNN_STATUS_SUCCESS && !found) st = rank_algos(s, c, true, &found);
    if (st != CUDNN_STATUS_SUCCESS) return cudnn_failed("algorithm search", st, s);
    if (!found) return ddpl_error("conv2d: cuDNN found no usable algorithm for %s", s->shapes);
    if (s->strict_fp32) c->math = CUDNN_FMA_MATH; /* DEFAULT_MATH would allow TF32 */
    cache_store(c);
apply:
    st = CUDA_DL(CUDA_LIB_CUDNN, cudnnSetConvolutionMathType)(s->conv, c->math);
    return st == CUDNN_STATUS_SUCCESS ? 0 : cudnn_failed("math type", st, s);
}

/* Scratch for one call; freed after the call is enqueued (the allocator orders reuse on the
 * compute stream). */
static void *workspace_alloc(size_t nbytes, int dev, int *rc)
{
    *rc = 0;
    if (nbytes == 0) return NULL;
    void *p = ddpl_device_alloc(nbytes, (ddpl_device){DDPL_CUDA, (int16_t)dev});
    if (!p) *rc = -1;
    return p;
}

static void workspace_free(void *p, size_t nbytes, int dev)
{
    if (p) ddpl_device_free(p, nbytes, (ddpl_device){DDPL_CUDA, (int16_t)dev});
}

/* Runs one pass with its chosen algorithm: out = conv-pass(a, b) (alpha 1, beta 0). */
static int run_pass(conv_setup *s, conv_pass pass, const void *a, const void *b, void *out)
{
    s->key.pass = (int)pass;
    conv_choice c;
    if (choose_algo(s, &c) < 0) return -1;
    int rc;
    void *ws = workspace_alloc(c.workspace, s->key.dev, &rc);
    if (rc < 0) return -1;
    double one_d = 1.0, zero_d = 0.0;
    float one_f = 1.0f, zero_f = 0.0f;
    const void *one = s->f64 ? (const void *)&one_d : (const void *)&one_f;
    const void *zero = s->f64 ? (const void *)&zero_d : (const void *)&zero_f;
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    const char *what = "";
    switch (pass) {
    case PASS_FWD: /* y = conv(x = a, w = b) */
        what = "forward";
        st = CUDA_DL(CUDA_LIB_CUDNN, cudnnConvolutionForward)(s->h, one, s->x, a, s->w, b, s->conv,
                                                              (cudnnConvolutionFwdAlgo_t)c.algo, ws,
                                                              c.workspace, zero, s->y, out);
        break;
    case PASS_BWD_DATA: /* dx = conv^T(w = a, dy = b) */
        what = "backward data";
        st = CUDA_DL(CUDA_LIB_CUDNN, cudnnConvolutionBackwardData)(
            s->h, one, s->w, a, s->y, b, s->conv, (cudnnConvolutionBwdDataAlgo_t)c.algo, ws,
            c.workspace, zero, s->x, out);
        break;
    case PASS_BWD_FILTER: /* dw = (x = a) * (dy = b) */
        what = "backward filter";
        st = CUDA_DL(CUDA_LIB_CUDNN, cudnnConvolutionBackwardFilter)(
            s->h, one, s->x, a, s->y, b, s->conv, (cudnnConvolutionBwdFilterAlgo_t)c.algo, ws,
            c.workspace, zero, s->w, out);
        break;
    }
    workspace_free(ws, c.workspace, s->key.dev);
    return st == CUDNN_STATUS_SUCCESS ? 0 : cudnn_failed(what, st, s);
}

/* y (N,O,OH,OW) += bias (O) broadcast: the engine's ADD kernel with a stride-0 view. */
static int add_bias(ddpl_tensor *y, ddpl_tensor *bias)
{
    int64_t strides[4] = {0, bias->strides[0], 0, 0};
    ddpl_tensor *b4 = ddpl_tensor_alias(bias, 4, y->sizes, strides, bias->offset);
    if (!b4) return -1;
    ddpl_alpha_params p = {1.0};
    ddpl_tensor *ins[2] = {y, b4};
    int rc = cuda_run_kernel(DDPL_OP_ADD, &y, ins, &p);
    ddpl_tensor_release(b4);
    return rc;
}

/* dbias (O) = sum of dy over N, OH, OW: the engine's SUM kernel into a (1,O,1,1) view. */
static int bias_grad(ddpl_tensor *db, ddpl_tensor *dy)
{
    int64_t sizes[4] = {1, db->sizes[0], 1, 1};
    int64_t strides[4] = {db->sizes[0] * db->strides[0], db->strides[0], 1, 1};
    ddpl_tensor *d4 = ddpl_tensor_alias(db, 4, sizes, strides, db->offset);
    if (!d4) return -1;
    ddpl_reduce_params p = {(1u << 0) | (1u << 2) | (1u << 3)};
    int rc = cuda_run_kernel(DDPL_OP_SUM, &d4, &dy, &p);
    ddpl_tensor_release(d4);
    return rc;
}

/* out[0] y (N,O,OH,OW); in[0] x (N,C,H,W), in[1] w (O,C/g,kh,kw), in[2] bias (O)?. */
int cuda_conv2d(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    ddpl_tensor *y = out[0], *x = in[0], *w = in[1], *bias = in[2];
    if (ddpl_tensor_numel(y) == 0) return 0;
    conv_setup s;
    int rc = setup_init(&s, x, w, y, params, PASS_FWD);
    if (rc == 0) rc = run_pass(&s, PASS_FWD, ddpl_data_ptr(x), ddpl_data_ptr(w), ddpl_data_ptr(y));
    setup_destroy(&s);
    if (rc == 0 && bias) rc = add_bias(y, bias);
    return rc;
}

/* out[0] dx?, out[1] dw?, out[2] dbias?; in[0] dy (N,O,OH,OW), in[1] x, in[2] w. Each output
 * is fully written (beta 0). */
int cuda_conv2d_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    ddpl_tensor *dy = in[0], *x = in[1], *w = in[2];
    ddpl_tensor *dx = out[0], *dw = out[1], *db = out[2];
    if (ddpl_tensor_numel(dy) == 0) { /* nothing flowed back: zero gradients */
        ddpl_fill_params f = {0.0};
        for (int i = 0; i < 3; i++)
            if (out[i] && ddpl_tensor_numel(out[i]) &&
                cuda_run_kernel(DDPL_OP_FILL, &out[i], NULL, &f) < 0)
                return -1;
        return 0;
    }
    int rc = 0;
    if (dx || dw) {
        conv_setup s;
        rc = setup_init(&s, x, w, dy, params, PASS_BWD_DATA);
        if (rc == 0 && dx)
            rc =
                run_pass(&s, PASS_BWD_DATA, ddpl_data_ptr(w), ddpl_data_ptr(dy), ddpl_data_ptr(dx));
        if (rc == 0 && dw)
            rc = run_pass(&s, PASS_BWD_FILTER, ddpl_data_ptr(x), ddpl_data_ptr(dy),
                          ddpl_data_ptr(dw));
        setup_destroy(&s);
    }
    if (rc == 0 && db) rc = bias_grad(db, dy);
    return rc;
}
