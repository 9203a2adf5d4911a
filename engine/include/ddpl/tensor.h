/* ddpl/tensor.h: dtypes, devices, errors and the tensor handle of the public C API.
 * defines: ddpl_dtype, ddpl_device, ddpl_tensor, creation, views, accessors, refcounting. */
#ifndef DDPL_TENSOR_H
#define DDPL_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* public: exported from libddplua.so, which is otherwise built with hidden visibility (the
 * ABI is what include/ddpl declares; spec/api/abi_spec.lua) */
#pragma GCC visibility push(default)

#define DDPL_MAX_DIMS 8

/* Element types. New values go at the end (they are stored in checkpoints by name, not number). */
typedef enum ddpl_dtype {
    DDPL_FLOAT32,
    DDPL_FLOAT64,
    DDPL_FLOAT16,
    DDPL_BFLOAT16,
    DDPL_INT64,
    DDPL_INT32,
    DDPL_UINT8,
    DDPL_BOOL,
    DDPL_INT8,
    DDPL_INT16,
    DDPL_DTYPE_COUNT
} ddpl_dtype;

typedef enum ddpl_device_type {
    DDPL_CPU = 0,
    DDPL_CUDA = 1,
    DDPL_DEVICE_TYPE_COUNT
} ddpl_device_type;

typedef struct ddpl_device {
    int16_t type;  /* ddpl_device_type */
    int16_t index; /* CUDA ordinal; 0 for the CPU */
} ddpl_device;

static inline ddpl_device ddpl_cpu(void)
{
    return (ddpl_device){DDPL_CPU, 0};
}

/* Opaque, refcounted tensor: a view (sizes, strides, offset) over a shared storage. Every
 * function returning a ddpl_tensor* hands the caller one reference, released with
 * ddpl_tensor_release. NULL means failure; ddpl_last_error() says why. */
typedef struct ddpl_tensor ddpl_tensor;

/* The message of the last failed call on this thread ("matmul: shapes [2,3] and [4,5] ..."). */
const char *ddpl_last_error(void);
/* Sets this thread's error message (printf format); always returns -1 for `return ddpl_error(..)`.
 */
int ddpl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

const char *ddpl_dtype_name(ddpl_dtype dt);             /* "float32" */
int ddpl_dtype_from_name(const char *name);             /* -1 if unknown */
size_t ddpl_dtype_size(ddpl_dtype dt);                  /* bytes per element */
bool ddpl_dtype_is_floating(ddpl_dtype dt);             /* float32/64/16, bfloat16 */
int ddpl_device_parse(const char *s, ddpl_device *out); /* "cpu", "cuda", "cuda:1"; -1 on error */
void ddpl_device_format(ddpl_device d, char *buf, size_t n);

/* refcounting */
ddpl_tensor *ddpl_tensor_retain(ddpl_tensor *t);
void ddpl_tensor_release(ddpl_tensor *t); /* NULL is fine */

/* creation: sizes has ndim entries (ndim 0 is a scalar) */
ddpl_tensor *ddpl_empty(int ndim, const int64_t *sizes, ddpl_dtype dt, ddpl_device dev);
ddpl_tensor *ddpl_zeros(int ndim, const int64_t *sizes, ddpl_dtype dt, ddpl_device dev);
ddpl_tensor *ddpl_ones(int ndim, const int64_t *sizes, ddpl_dtype dt, ddpl_device dev);
ddpl_tensor *ddpl_full(int ndim, const int64_t *sizes, double value, ddpl_dtype dt,
                       ddpl_device dev);
/* copies numel elements of dtype dt from host memory */
ddpl_tensor *ddpl_from_data(int ndim, const int64_t *sizes, ddpl_dtype dt, const void *data,
                            ddpl_device dev);
ddpl_tensor *ddpl_scalar(double value, ddpl_dtype dt, ddpl_device dev); /* 0-dim */
ddpl_tensor *ddpl_arange(double start, double stop, double step, ddpl_dtype dt, ddpl_device dev);
/* arange of integers, exact over all of int64 (an integral dt; other dtypes take ddpl_arange). */
ddpl_tensor *ddpl_arange_int(int64_t start, int64_t stop, int64_t step, ddpl_dtype dt,
                             ddpl_device dev);
ddpl_tensor *ddpl_eye(int64_t n, int64_t m, ddpl_dtype dt, ddpl_device dev);
/* steps evenly spaced values from start to end (both included), as torch.linspace; and
 * base ^ those, as torch.logspace. Integer dtypes truncate, as PyTorch's. */
ddpl_tensor *ddpl_linspace(double start, double end, int64_t steps, ddpl_dtype dt, ddpl_device dev);
ddpl_tensor *ddpl_logspace(double start, double end, int64_t steps, double base, ddpl_dtype dt,
                           ddpl_device dev);
ddpl_tensor *ddpl_rand(int ndim, const int64_t *sizes, ddpl_dtype dt, ddpl_device dev);
ddpl_tensor *ddpl_randn(int ndim, const int64_t *sizes, ddpl_dtype dt, ddpl_device dev);
ddpl_tensor *ddpl_randint(int64_t low, int64_t high, int ndim, const int64_t *sizes, ddpl_dtype dt,
                          ddpl_device dev);
ddpl_tensor *ddpl_randperm(int64_t n, ddpl_device dev); /* int64 */

/* Seeds every generator of this process (CPU and CUDA). */
void ddpl_manual_seed(uint64_t seed);
/* The generator's state: its seed and the next Philox4x32-10 counter block. One generator
 * serves the CPU and CUDA kernels; restoring a state makes the draws that followed it repeat
 * (a resumed run draws the same numbers). */
void ddpl_get_rng_state(uint64_t *seed, uint64_t *offset);
void ddpl_set_rng_state(uint64_t seed, uint64_t offset);

/* accessors */
int ddpl_tensor_ndim(const ddpl_tensor *t);
int64_t ddpl_tensor_size(const ddpl_tensor *t, int dim);   /* dim >= 0, < ndim */
int64_t ddpl_tensor_stride(const ddpl_tensor *t, int dim); /* in elements */
const int64_t *ddpl_tensor_sizes(const ddpl_tensor *t);
const int64_t *ddpl_tensor_strides(const ddpl_tensor *t);
/* PyTorch's _version: the writes into t's memory so far (shared by its views) */
unsigned ddpl_tensor_version(const ddpl_tensor *t);
/* Whether a view op made t from another tensor's memory (PyTorch's _is_view()) */
bool ddpl_tensor_is_view(const ddpl_tensor *t);
int64_t ddpl_tensor_numel(const ddpl_tensor *t);
ddpl_dtype ddpl_tensor_dtype(const ddpl_tensor *t);
ddpl_device ddpl_tensor_device(const ddpl_tensor *t);
bool ddpl_tensor_is_contiguous(const ddpl_tensor *t);
void *ddpl_tensor_data(const ddpl_tensor *t);    /* address of element 0 (offset applied) */
size_t ddpl_tensor_nbytes(const ddpl_tensor *t); /* numel * element size */
/* Value of a one-element tensor as a double (int64 beyond 2^53 rounds); -1 on error. */
int ddpl_tensor_item(const ddpl_tensor *t, double *out);
int ddpl_tensor_item_int64(const ddpl_tensor *t, int64_t *out);
/* Copies the values, converted to float64, into out[numel] (any strides, any device). */
int ddpl_tensor_to_doubles(const ddpl_tensor *t, double *out);
/* Human-readable text as PyTorch prints it; caller frees. */
char *ddpl_tensor_format(const ddpl_tensor *t);
/* Bytes of tensor storage currently allocated on a device type (for GC accounting, tests). */
int64_t ddpl_memory_allocated(ddpl_device_type type);
/* The highest ddpl_memory_allocated has been since start-up (or the last reset). */
int64_t ddpl_memory_max_allocated(ddpl_device_type type);
void ddpl_memory_reset_peak(ddpl_device_type type);

/* Number of CPU threads used by kernels and BLAS. */
void ddpl_set_num_threads(int n);
int ddpl_get_num_threads(void);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
