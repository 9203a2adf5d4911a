/* core/core.h: the engine-internal layout of tensors and storages, and helpers every layer uses.
 * defines: ddpl_storage, struct ddpl_tensor, ddpl_set_autograd_free, ddpl_tensor_same_storage,
 *          element load/store, shape helpers, xmalloc (checked size arithmetic: checked.h).
 *
 * Public code sees ddpl_tensor as opaque (ddpl/tensor.h); engine code includes this header. */
#ifndef DDPL_CORE_H
#define DDPL_CORE_H

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "ddpl/tensor.h"

struct ddpl_autograd_meta; /* autograd/graph.h */

/* A block of device memory shared by every view of it. version counts in-place writes, so the
 * backward pass can detect that a tensor it saved was modified after being saved. */
typedef struct ddpl_storage {
    atomic_long refcount;
    void *data;
    size_t nbytes;
    ddpl_device device;
    atomic_uint version;
    /* In-place writes autograd recorded (ops/inplace.c): a view taken before one has a history
     * that no longer describes its values (views remember the count they saw: view_writes). */
    atomic_uint recorded_writes;
    /* Non-NULL for memory the storage does not own (from_blob); called instead of the backend's
     * free. */
    void (*deleter)(void *data, void *ctx);
    void *deleter_ctx;
} ddpl_storage;

struct ddpl_tensor {
    atomic_long refcount;
    ddpl_storage *storage;
    int64_t offset; /* in elements */
    int64_t sizes[DDPL_MAX_DIMS];
    int64_t strides[DDPL_MAX_DIMS]; /* in elements */
    int8_t ndim;
    uint8_t dtype; /* ddpl_dtype */
    ddpl_device device;
    /* A Lua/C number turned into a 0-dim tensor: it does not widen the result dtype. */
    bool wrapped_number;
    /* Set by the view ops (ops/views.c): the tensor, itself no view, whose memory this one
     * views (owned; NULL for every other tensor). A recorded in-place write into the view
     * rewrites that base's history (ops/inplace.c); the view's own history is stale once the
     * storage's recorded_writes moves past view_writes. */
    struct ddpl_tensor *view_base;
    unsigned view_writes;
    /* What autograd knows of the tensor (requires_grad, grad, grad_fn, hooks): NULL until
     * autograd first needs it, as for most tensors; owned, freed by the hook autograd registers
     * (ddpl_set_autograd_free). Core never looks inside. */
    struct ddpl_autograd_meta *autograd;
};

/* Frees t->autograd (non-NULL) when t dies. Autograd registers it before it gives any tensor
 * autograd state, so core calls into autograd without naming it. */
typedef void (*ddpl_autograd_free_fn)(ddpl_tensor *t);
void ddpl_set_autograd_free(ddpl_autograd_free_fn fn);

/* ---- memory ---- */
void *ddpl_xmalloc(size_t n); /* aborts on failure: only for small engine metadata */
void *ddpl_xcalloc(size_t count, size_t n);
char *ddpl_xstrdup(const char *s); /* a copy from ddpl_xmalloc */
/* Storage of nbytes on dev; NULL (error set) when the device cannot provide it. */
ddpl_storage *ddpl_storage_new(size_t nbytes, ddpl_device dev);
void ddpl_storage_retain(ddpl_storage *s);
void ddpl_storage_release(ddpl_storage *s);
static inline void ddpl_storage_bump_version(ddpl_storage *s)
{
    atomic_fetch_add(&s->version, 1);
}
/* Whether a and b are views of one storage object (two storages over one memory are not). */
static inline bool ddpl_tensor_same_storage(const ddpl_tensor *a, const ddpl_tensor *b)
{
    return a->storage == b->storage;
}
/* Tensor over existing host memory; deleter(data, ctx) runs when the last view dies. */
ddpl_tensor *ddpl_from_blob(void *data, int ndim, const int64_t *sizes, ddpl_dtype dt,
                            void (*deleter)(void *, void *), void *ctx);

/* Exchanges the memory (data, deleter) of two storages of one size and device: every tensor
 * over a sees b's bytes afterwards, and the other way round. */
void ddpl_storage_swap_memory(ddpl_storage *a, ddpl_storage *b);
/* Makes t the only tensor over its memory: when other tensors share t's storage (views, other
 * headers), they keep that storage object, which now holds a private copy of the bytes, and t
 * gets a new storage object over the original memory (with its deleter). t must cover its whole
 * storage; CPU only. Nothing is copied when t is alone already. */
int ddpl_tensor_take_memory(ddpl_tensor *t);
/* Frees a storage's memory while its tensors live on (PyTorch's storage.resize_(0) in FSDP:
 * the full parameters that saved tensors of the graph view, between a unit's forward and its
 * backward). The bytes are gone until ddpl_storage_restore_memory gives the storage new memory
 * of its size (uninitialised: the caller refills it), without moving its version, so the saved
 * views stay valid. Meanwhile the Lua binding and saved-tensor unpacking refuse the tensors
 * (ddpl_storage_released). Memory the storage does not own (from_blob) cannot be released. */
int ddpl_storage_release_memory(ddpl_storage *s);
int ddpl_storage_restore_memory(ddpl_storage *s);
static inline bool ddpl_storage_released(const ddpl_storage *s)
{
    return s->data == NULL && s->nbytes > 0;
}

/* ---- tensor headers ---- */
/* New contiguous tensor header with fresh storage (values uninitialised). */
ddpl_tensor *ddpl_tensor_new(int ndim, const int64_t *sizes, ddpl_dtype dt, ddpl_device dev);
/* New header over x's storage with the given geometry (no autograd). */
ddpl_tensor *ddpl_tensor_alias(const ddpl_tensor *x, int ndim, const int64_t *sizes,
                               const int64_t *strides, int64_t offset);
/* Empty tensor of x's shape with dtype dt on x's device. */
ddpl_tensor *ddpl_empty_like_dtype(const ddpl_tensor *x, ddpl_dtype dt);
static inline ddpl_tensor *ddpl_empty_like(const ddpl_tensor *x)
{
    return ddpl_empty_like_dtype(x, (ddpl_dtype)x->dtype);
}
static inline char *ddpl_data_ptr(const ddpl_tensor *t)
{
    return (char *)t->storage->data + t->offset * (int64_t)ddpl_dtype_size((ddpl_dtype)t->dtype);
}
/* numel of a shape: 0 when a size is 0, INT64_MAX when the product overflows. */
int64_t ddpl_numel(int ndim, const int64_t *sizes);
void ddpl_contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides);
bool ddpl_same_shape(const ddpl_tensor *a, const ddpl_tensor *b);
/* "[2,3]" into buf. */
const char *ddpl_shape_str(const ddpl_tensor *t, char *buf, size_t n);
const char *ddpl_sizes_str(int ndim, const int64_t *sizes, char *buf, size_t n);
/* Normalises a possibly negative dim for a tensor of ndim dims; -1 with an error naming op. */
int ddpl_wrap_dim(const char *op, int dim, int ndim);
/* Broadcast shape of a and b into out_sizes; -1 with an error naming op and the shapes. */
int ddpl_broadcast_shape(const char *op, int na, const int64_t *a, int nb, const int64_t *b,
                         int *out_ndim, int64_t *out_sizes);
static inline bool ddpl_same_device(ddpl_device a, ddpl_device b)
{
    return a.type == b.type && a.index == b.index;
}
const char *ddpl_device_str(ddpl_device d, char *buf, size_t n);

/* ---- element access (slow paths, printing, scalars) ---- */
float ddpl_half_to_float(uint16_t h);
uint16_t ddpl_float_to_half(float f);
static inline float ddpl_bf16_to_float(uint16_t b)
{
    union {
        uint32_t u;
        float f;
    } v = {.u = (uint32_t)b << 16};
    return v.f;
}
/* Round to nearest even; a NaN stays a quiet NaN. Inline: the conversion loops vectorise it. */
static inline uint16_t ddpl_float_to_bf16(float f)
{
    union {
        float f;
        uint32_t u;
    } v = {.f = f};
    if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40);
    uint32_t rounding = 0x7fff + ((v.u >> 16) & 1);
    return (uint16_t)((v.u + rounding) >> 16);
}
double ddpl_load_f64(const void *p, ddpl_dtype dt);
void ddpl_store_f64(void *p, ddpl_dtype dt, double v);
int64_t ddpl_load_i64(const void *p, ddpl_dtype dt);
void ddpl_store_i64(void *p, ddpl_dtype dt, int64_t v);
bool ddpl_dtype_is_integral(ddpl_dtype dt); /* ints and bool */
/* The smallest and largest value of an integer dtype (bool: 0 and 1); false for floats. */
bool ddpl_dtype_int_range(ddpl_dtype dt, int64_t *lo, int64_t *hi);
/* Whether a number given by the user (an integer i when is_int, else the float d) cannot be
 * stored in dtype dt: PyTorch's c10::overflows, the check behind full and fill_ (and
 * torch.tensor for integer dtypes). A floating dtype refuses finite numbers beyond its largest
 * finite value (float16 65504: fill_(1e10) is refused, inf and NaN are kept); bool takes any
 * number (nonzero is true). */
bool ddpl_value_overflows(ddpl_dtype dt, bool is_int, int64_t i, double d);

/* ---- dtype promotion (PyTorch's rules: category bool < integer < floating; dimensioned
 * tensors outrank 0-dim ones, which outrank wrapped numbers, unless of a higher category) ---- */
ddpl_dtype ddpl_promote_types(ddpl_dtype a, ddpl_dtype b);
ddpl_dtype ddpl_result_type(int n, ddpl_tensor *const *ts);
ddpl_dtype ddpl_default_float_dtype(void); /* float32 */

/* ---- random numbers: Philox4x32-10, counter-based, so CPU and CUDA kernels can draw the same
 * stream in parallel (the block function is core/philox.h). A draw reserves `count` 32-bit
 * values from the process generator and returns the (seed, offset) pair to generate them
 * from. ---- */
typedef struct ddpl_philox_state {
    uint64_t seed;
    uint64_t offset; /* in blocks of four 32-bit values */
} ddpl_philox_state;
ddpl_philox_state ddpl_rng_reserve(uint64_t count);

#define DDPL_UNUSED(x) (void)(x)

/* Marks the message of an error found by an asynchronous device check (cuda_index_check.c): it
 * names the op that issued the check, which is not an op the reporting call is built on, so the
 * bindings pass it on unchanged rather than re-attributing it (lb_error_in). */
#define DDPL_DEFERRED_ERROR_NOTE " (an asynchronous check of an earlier "

#endif
