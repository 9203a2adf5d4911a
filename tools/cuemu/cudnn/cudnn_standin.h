/* tools/cuemu/cudnn/cudnn_standin.h: the cuDNN stand-in's handle and descriptors, shared by its
 * files, and the convolution geometry every call checks.
 * defines: struct cudnnContext, cudnnTensorStruct, cudnnFilterStruct, cudnnConvolutionStruct,
 *          conv_geom, cudnn_standin_geometry, cudnn_standin_algo_runs,
 *          cudnn_standin_conversion_algo, cudnn_standin_heuristics, cudnn_standin_heuristics_mode,
 *          cudnn_standin_conversion_offered, cudnn_standin_dtype_size.
 *
 * The stand-in replaces libcudnn in the CUDA emulation build (issue 28): device memory is host
 * memory and every stream runs synchronously on the calling thread, so a call does its work
 * before it returns. Types, prototypes and enum values are NVIDIA's own (cudnn.h); the opaque
 * structs behind the descriptor pointers are ours to define. Only the legacy convolution API the
 * engine uses (engine/cuda/cuda_conv.c) is provided. */
#ifndef CUDNN_STANDIN_H
#define CUDNN_STANDIN_H

#include <cudnn.h>
#include <stdbool.h>
#include <stddef.h>

struct cudnnContext {
    cudaStream_t stream; /* the stream last set; work runs at once, so it is only recorded */
};

/* A 4-d tensor (N,C,H,W); strides in elements, from the format (NCHW or NHWC). */
struct cudnnTensorStruct {
    bool set;
    cudnnDataType_t dtype;
    int dims[4];     /* n, c, h, w */
    long strides[4]; /* of n, c, h, w */
};

/* A 4-d filter (K,C,R,S): K output channels, C input channels per group, R x S taps. */
struct cudnnFilterStruct {
    bool set;
    cudnnDataType_t dtype;
    int dims[4];     /* k, c, r, s */
    long strides[4]; /* of k, c, r, s: KCRS for NCHW, KRSC for NHWC */
};

struct cudnnConvolutionStruct {
    bool set;
    int pad[2], stride[2], dilation[2]; /* (h, w) */
    cudnnConvolutionMode_t mode;        /* CONVOLUTION flips the filter, CROSS_CORRELATION not */
    cudnnDataType_t compute;
    int groups;
    cudnnMathType_t math;
};

/* Everything a pass loops over, checked against the descriptors. */
typedef struct {
    int n, c, h, w;  /* x */
    int k, cg, r, s; /* filter: k out channels, cg = c / groups in, r x s taps */
    int oh, ow;      /* y */
    int groups;
    int pad[2], stride[2], dilation[2];
    bool flip; /* CUDNN_CONVOLUTION: correlate with the filter rotated 180 degrees */
    bool f64;  /* double data: alpha/beta are doubles, accumulation in double */
    cudnnDataType_t dtype;
} conv_geom;

typedef enum { PASS_FWD, PASS_BWD_DATA, PASS_BWD_FILTER } cudnn_standin_pass;

/* Checks x, w and conv (and y unless NULL) as real cuDNN does: set descriptors, one data type
 * for all three, x's C = filter C * groups, K a multiple of groups, the dilated filter within
 * the padded input, and y (n, k, oh, ow) as cudnnGetConvolution2dForwardOutputDim computes it
 * (BAD_PARAM otherwise); last, a data/compute pairing cuDNN has (NOT_SUPPORTED otherwise, with
 * g filled). */
cudnnStatus_t cudnn_standin_geometry(const struct cudnnTensorStruct *x,
                                     const struct cudnnFilterStruct *w,
                                     const struct cudnnConvolutionStruct *conv,
                                     const struct cudnnTensorStruct *y, conv_geom *g);

/* Whether `algo` of `pass` is one of the two the stand-in runs under any math type (status
 * SUCCESS in the normal searches); running one it reports NOT_SUPPORTED answers NOT_SUPPORTED, as
 * real cuDNN does. */
bool cudnn_standin_algo_runs(cudnn_standin_pass pass, int algo);

/* The algorithm of `pass` that DDPL_CUEMU_CUDNN_HEURISTICS=conversion_first ranks first: it runs
 * only for float data under CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, on inputs rounded to float16
 * (cudnn_algo.c's header). */
int cudnn_standin_conversion_algo(cudnn_standin_pass pass);

/* DDPL_CUEMU_CUDNN_HEURISTICS, read from the environment at every call (cudnn_algo.c's header) */
typedef enum {
    HEURISTICS_NORMAL,           /* unset, empty or "normal" */
    HEURISTICS_NONE,             /* "none" */
    HEURISTICS_CONVERSION_FIRST, /* "conversion_first" */
    HEURISTICS_UNKNOWN           /* anything else: the searches answer BAD_PARAM */
} cudnn_standin_heuristics;

cudnn_standin_heuristics cudnn_standin_heuristics_mode(void);

/* Whether the conversion algorithm is offered (and may run) for a checked geometry now:
 * conversion_first and float data. */
bool cudnn_standin_conversion_offered(const conv_geom *g);

/* bytes of one element; 0 for a type the stand-in does not compute with */
size_t cudnn_standin_dtype_size(cudnnDataType_t t);

#endif
