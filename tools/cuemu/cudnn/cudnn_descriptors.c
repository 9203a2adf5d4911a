/* tools/cuemu/cudnn/cudnn_descriptors.c: the cuDNN stand-in's handle, descriptors, geometry
 * check, version and error strings.
 * defines: cudnnCreate, cudnnDestroy, cudnnSetStream, cudnnGetVersion, cudnnGetErrorString,
 *          cudnnCreate/Destroy/Set{Tensor4d,Filter4d}Descriptor (Set only for 4d),
 *          cudnnCreate/DestroyConvolutionDescriptor, cudnnSetConvolution2dDescriptor,
 *          cudnnSetConvolutionGroupCount, cudnnSetConvolutionMathType,
 *          cudnnGetConvolution2dForwardOutputDim, cudnn_standin_geometry,
 *          cudnn_standin_dtype_size.
 *
 * Argument checks follow the cuDNN documentation of each call (non-positive sizes, negative
 * padding, non-positive stride or dilation, unknown enum values: CUDNN_STATUS_BAD_PARAM; a
 * tensor over 2^31-1 elements: NOT_SUPPORTED). Destroying a NULL descriptor succeeds, as in
 * cuDNN. A new convolution descriptor has one group, default math and no padding. */
#include <limits.h>
#include <stdlib.h>

#include "cudnn_standin.h"

/* ---- handle ---- */
cudnnStatus_t cudnnCreate(cudnnHandle_t *handle)
{
    if (!handle) return CUDNN_STATUS_BAD_PARAM;
    *handle = calloc(1, sizeof **handle);
    return *handle ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle)
{
    if (!handle) return CUDNN_STATUS_BAD_PARAM;
    free(handle);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream)
{
    if (!handle) return CUDNN_STATUS_BAD_PARAM;
    handle->stream = stream;
    return CUDNN_STATUS_SUCCESS;
}

size_t cudnnGetVersion(void)
{
    return CUDNN_VERSION; /* the header's: major * 10000 + minor * 100 + patch */
}

const char *cudnnGetErrorString(cudnnStatus_t status)
{
    switch ((int)status) {
#define NAME(s)                                                                                    \
    case s:                                                                                        \
        return #s;
        NAME(CUDNN_STATUS_SUCCESS)
        NAME(CUDNN_STATUS_NOT_INITIALIZED)
        NAME(CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH)
        NAME(CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH)
        NAME(CUDNN_STATUS_DEPRECATED)
        NAME(CUDNN_STATUS_LICENSE_ERROR)
        NAME(CUDNN_STATUS_RUNTIME_IN_PROGRESS)
        NAME(CUDNN_STATUS_RUNTIME_FP_OVERFLOW)
        NAME(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED)
        NAME(CUDNN_STATUS_BAD_PARAM)
        NAME(CUDNN_STATUS_BAD_PARAM_NULL_POINTER)
        NAME(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER)
        NAME(CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED)
        NAME(CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND)
        NAME(CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT)
        NAME(CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH)
        NAME(CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH)
        NAME(CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES)
        NAME(CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE)
        NAME(CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH)
        NAME(CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE)
        NAME(CUDNN_STATUS_NOT_SUPPORTED)
        NAME(CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN)
        NAME(CUDNN_STATUS_NOT_SUPPORTED_SHAPE)
        NAME(CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE)
        NAME(CUDNN_STATUS_NOT_SUPPORTED_LAYOUT)
        NAME(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER)
        NAME(CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART)
        NAME(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH)
        NAME(CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING)
        NAME(CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE)
        NAME(CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT)
        NAME(CUDNN_STATUS_NOT_SUPPORTED_PADDING)
        NAME(CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM)
        NAME(CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API)
        NAME(CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE)
        NAME(CUDNN_STATUS_INTERNAL_ERROR)
        NAME(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED)
        NAME(CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE)
        NAME(CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
        NAME(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
        NAME(CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM)
        NAME(CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED)
        NAME(CUDNN_STATUS_EXECUTION_FAILED)
        NAME(CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER)
        NAME(CUDNN_STATUS_EXECUTION_FAILED_CUBLAS)
        NAME(CUDNN_STATUS_EXECUTION_FAILED_CUDART)
        NAME(CUDNN_STATUS_EXECUTION_FAILED_CURAND)
#undef NAME
    case 2001:
        return "CUDNN_STATUS_INVALID_VALUE"; /* deprecated, still in the enum */
    }
    return "CUDNN_UNKNOWN_STATUS_FOUND";
}

/* ---- tensors and filters ---- */
size_t cudnn_standin_dtype_size(cudnnDataType_t t)
{
    switch (t) {
    case CUDNN_DATA_DOUBLE:
        return 8;
    case CUDNN_DATA_FLOAT:
        return 4;
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16:
        return 2;
    default:
        return 0;
    }
}

static bool known_dtype(cudnnDataType_t t)
{
    return (int)t >= CUDNN_DATA_FLOAT && (int)t <= CUDNN_DATA_COMPLEX_FP64;
}

/* strides of (d0, d1, d2, d3) = (n|k, c, h|r, w|s) stored as NCHW or as NHWC */
static cudnnStatus_t set_4d(cudnnTensorFormat_t format, cudnnDataType_t dtype, int d0, int d1,
                            int d2, int d3, int dims[4], long strides[4])
{
    if (!known_dtype(dtype) || d0 <= 0 || d1 <= 0 || d2 <= 0 || d3 <= 0)
        return CUDNN_STATUS_BAD_PARAM;
    if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC)
        return CUDNN_STATUS_BAD_PARAM; /* NCHW_VECT_C is for the packed int8 types only */
    if ((long long)d0 * d1 * d2 * d3 > INT_MAX) return CUDNN_STATUS_NOT_SUPPORTED;
    dims[0] = d0, dims[1] = d1, dims[2] = d2, dims[3] = d3;
    if (format == CUDNN_TENSOR_NCHW) {
        strides[3] = 1, strides[2] = d3, strides[1] = (long)d2 * d3;
        strides[0] = (long)d1 * d2 * d3;
    } else {
        strides[1] = 1, strides[3] = d1, strides[2] = (long)d3 * d1;
        strides[0] = (long)d2 * d3 * d1;
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *desc)
{
    if (!desc) return CUDNN_STATUS_BAD_PARAM;
    *desc = calloc(1, sizeof **desc);
    return *desc ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t desc)
{
    free(desc);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t desc, cudnnTensorFormat_t format,
                                         cudnnDataType_t dtype, int n, int c, int h, int w)
{
    if (!desc) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = set_4d(format, dtype, n, c, h, w, desc->dims, desc->strides);
    if (st == CUDNN_STATUS_SUCCESS) desc->set = true, desc->dtype = dtype;
    return st;
}

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *desc)
{
    if (!desc) return CUDNN_STATUS_BAD_PARAM;
    *desc = calloc(1, sizeof **desc);
    return *desc ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t desc)
{
    free(desc);
    return CUDNN_STATUS_SUCCESS;
}

/* note the argument order: data type before format here, format first for tensors */
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t desc, cudnnDataType_t dtype,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w)
{
    if (!desc) return CUDNN_STATUS_BAD_PARAM;
    cudnnStatus_t st = set_4d(format, dtype, k, c, h, w, desc->dims, desc->strides);
    if (st == CUDNN_STATUS_SUCCESS) desc->set = true, desc->dtype = dtype;
    return st;
}

/* ---- convolutions ---- */
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *desc)
{
    if (!desc) return CUDNN_STATUS_BAD_PARAM;
    struct cudnnConvolutionStruct *c = calloc(1, sizeof *c);
    if (!c) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    c->stride[0] = c->stride[1] = c->dilation[0] = c->dilation[1] = 1;
    c->mode = CUDNN_CONVOLUTION;
    c->compute = CUDNN_DATA_FLOAT;
    c->groups = 1;
    c->math = CUDNN_DEFAULT_MATH;
    *desc = c;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t desc)
{
    free(desc);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t desc, int pad_h,
                                              int pad_w, int u, int v, int dilation_h,
                                              int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute)
{
    if (!desc || pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dilation_h <= 0 || dilation_w <= 0)
        return CUDNN_STATUS_BAD_PARAM;
    if ((mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION) || !known_dtype(compute))
        return CUDNN_STATUS_BAD_PARAM;
    desc->pad[0] = pad_h, desc->pad[1] = pad_w, desc->stride[0] = u, desc->stride[1] = v;
    desc->dilation[0] = dilation_h, desc->dilation[1] = dilation_w;
    desc->mode = mode, desc->compute = compute, desc->set = true;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t desc, int groups)
{
    if (!desc || groups < 1) return CUDNN_STATUS_BAD_PARAM;
    desc->groups = groups;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t desc, cudnnMathType_t math)
{
    if (!desc || (int)math < CUDNN_DEFAULT_MATH || (int)math > CUDNN_FMA_MATH)
        return CUDNN_STATUS_BAD_PARAM;
    desc->math = math;
    return CUDNN_STATUS_SUCCESS;
}

/* The data / compute pairings of cuDNN's convolution tables, less the int8 ones. */
static bool pairing_ok(cudnnDataType_t data, cudnnDataType_t compute)
{
    switch (data) {
    case CUDNN_DATA_FLOAT:
        return compute == CUDNN_DATA_FLOAT;
    case CUDNN_DATA_DOUBLE:
        return compute == CUDNN_DATA_DOUBLE;
    case CUDNN_DATA_HALF: /* TRUE_HALF_CONFIG and PSEUDO_HALF_CONFIG */
        return compute == CUDNN_DATA_HALF || compute == CUDNN_DATA_FLOAT;
    case CUDNN_DATA_BFLOAT16:
        return compute == CUDNN_DATA_FLOAT; /* PSEUDO_BFLOAT16_CONFIG */
    default:
        return false;
    }
}

cudnnStatus_t cudnn_standin_geometry(const struct cudnnTensorStruct *x,
                                     const struct cudnnFilterStruct *w,
                                     const struct cudnnConvolutionStruct *conv,
                                     const struct cudnnTensorStruct *y, conv_geom *g)
{
    if (!x || !w || !conv || !x->set || !w->set || !conv->set) return CUDNN_STATUS_BAD_PARAM;
    if (y && !y->set) return CUDNN_STATUS_BAD_PARAM;
    if (x->dtype != w->dtype || (y && y->dtype != x->dtype)) return CUDNN_STATUS_BAD_PARAM;
    g->n = x->dims[0], g->c = x->dims[1], g->h = x->dims[2], g->w = x->dims[3];
    g->k = w->dims[0], g->cg = w->dims[1], g->r = w->dims[2], g->s = w->dims[3];
    g->groups = conv->groups;
    if ((long long)g->cg * g->groups != g->c || g->k % g->groups != 0)
        return CUDNN_STATUS_BAD_PARAM;
    int in[2] = {g->h, g->w}, taps[2] = {g->r, g->s}, out[2];
    for (int i = 0; i < 2; i++) {
        g->pad[i] = conv->pad[i], g->stride[i] = conv->stride[i];
        g->dilation[i] = conv->dilation[i];
        /* the dilated filter must fit in the padded input: at least one output */
        long long span = (long long)(taps[i] - 1) * conv->dilation[i] + 1;
        long long room = (long long)in[i] + 2LL * conv->pad[i] - span;
        if (room < 0) return CUDNN_STATUS_BAD_PARAM;
        out[i] = (int)(room / conv->stride[i] + 1);
    }
    g->oh = out[0], g->ow = out[1];
    g->flip = conv->mode == CUDNN_CONVOLUTION;
    g->f64 = x->dtype == CUDNN_DATA_DOUBLE;
    g->dtype = x->dtype;
    if (y &&
        (y->dims[0] != g->n || y->dims[1] != g->k || y->dims[2] != g->oh || y->dims[3] != g->ow))
        return CUDNN_STATUS_BAD_PARAM;
    /* last, so that a shape query on a pairing nobody computes still fills g */
    return pairing_ok(x->dtype, conv->compute) ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t conv,
                                                    const cudnnTensorDescriptor_t x,
                                                    const cudnnFilterDescriptor_t w, int *n, int *c,
                                                    int *h, int *wo)
{
    if (!n || !c || !h || !wo) return CUDNN_STATUS_BAD_PARAM;
    conv_geom g;
    cudnnStatus_t st = cudnn_standin_geometry(x, w, conv, NULL, &g);
    /* a pairing no convolution computes still has an output shape (g is filled then) */
    if (st != CUDNN_STATUS_SUCCESS && st != CUDNN_STATUS_NOT_SUPPORTED) return st;
    *n = g.n, *c = g.k, *h = g.oh, *wo = g.ow;
    return CUDNN_STATUS_SUCCESS;
}
