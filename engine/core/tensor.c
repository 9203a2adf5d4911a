/* core/tensor.c: storages, tensor headers, refcounting, accessors and shape helpers.
 * defines: ddpl_storage_*, ddpl_tensor_new/alias/retain/release, ddpl_set_autograd_free,
 *          ddpl_from_blob, accessors, ddpl_wrap_dim, ddpl_broadcast_shape, shape formatting, device
 * names. */
#include <inttypes.h>

#include "alloc.h"
#include "checked.h"
#include "core.h"

/* Set before any tensor has autograd state; read when one dies (ddpl_tensor_release). */
static _Atomic(ddpl_autograd_free_fn) autograd_free;

void ddpl_set_autograd_free(ddpl_autograd_free_fn fn)
{
    atomic_store(&autograd_free, fn);
}

ddpl_storage *ddpl_storage_new(size_t nbytes, ddpl_device dev)
{
    void *data = ddpl_device_alloc(nbytes, dev);
    if (!data) return NULL;
    ddpl_storage *s = ddpl_xmalloc(sizeof *s);
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    atomic_init(&s->recorded_writes, 0);
    s->data = data;
    s->nbytes = nbytes;
    s->device = dev;
    s->deleter = NULL;
    s->deleter_ctx = NULL;
    return s;
}

void ddpl_storage_retain(ddpl_storage *s)
{
    atomic_fetch_add(&s->refcount, 1);
}

void ddpl_storage_release(ddpl_storage *s)
{
    if (!s || atomic_fetch_sub(&s->refcount, 1) != 1) return;
    if (s->deleter)
        s->deleter(s->data, s->deleter_ctx);
    else
        ddpl_device_free(s->data, s->nbytes, s->device);
    free(s);
}

void ddpl_storage_swap_memory(ddpl_storage *a, ddpl_storage *b)
{
    void *data = a->data, *ctx = a->deleter_ctx;
    void (*deleter)(void *, void *) = a->deleter;
    a->data = b->data;
    a->deleter = b->deleter;
    a->deleter_ctx = b->deleter_ctx;
    b->data = data;
    b->deleter = deleter;
    b->deleter_ctx = ctx;
}

int ddpl_storage_release_memory(ddpl_storage *s)
{
    if (s->deleter)
        return ddpl_error("internal error: cannot release memory the storage does not own");
    if (ddpl_storage_released(s) || s->nbytes == 0) return 0;
    ddpl_device_free(s->data, s->nbytes, s->device);
    s->data = NULL;
    return 0;
}

int ddpl_storage_restore_memory(ddpl_storage *s)
{
    if (!ddpl_storage_released(s)) return 0;
    void *data = ddpl_device_alloc(s->nbytes, s->device);
    if (!data) return -1;
    s->data = data;
    return 0;
}

int ddpl_tensor_take_memory(ddpl_tensor *t)
{
    ddpl_storage *s = t->storage;
    if (atomic_load(&s->refcount) == 1) return 0;
    if (s->device.type != DDPL_CPU || t->offset != 0)
        return ddpl_error("internal error: take_memory needs a CPU tensor over a whole storage");
    ddpl_storage *mine = ddpl_storage_new(s->nbytes, s->device); /* private, for the others */
    if (!mine) return -1;
    memcpy(mine->data, s->data, s->nbytes);
    ddpl_storage_swap_memory(s, mine); /* the others keep the copy, t the original memory */
    t->storage = mine;
    ddpl_storage_release(s); /* t's reference; the others hold it still */
    return 0;
}

/* Every tensor's shape passed ddpl_check_shape, so its numel fits; an unchecked shape whose
 * product overflows gives INT64_MAX (above DDPL_MAX_NUMEL), never a wrapped count. */
int64_t ddpl_numel(int ndim, const int64_t *sizes)
{
    int64_t n = 1;
    bool over = false;
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] == 0) return 0;
        over |= ddpl_mul_overflow(n, sizes[i], &n);
    }
    return over ? INT64_MAX : n;
}

/* Saturates at INT64_MAX for a shape that ddpl_check_shape would refuse. */
void ddpl_contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides)
{
    int64_t s = 1;
    bool over = false;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = over ? INT64_MAX : s;
        over |= ddpl_mul_overflow(s, sizes[i] > 0 ? sizes[i] : 1, &s);
    }
}

int ddpl_check_shape(const char *op, int ndim, const int64_t *sizes, int64_t *numel)
{
    char buf[160];
    if (ndim < 0 || ndim > DDPL_MAX_DIMS)
        return ddpl_error("%s: %d dimensions requested, at most %d are supported", op, ndim,
                          DDPL_MAX_DIMS);
    int64_t extent = 1; /* product of max(size, 1): what contiguous strides reach */
    bool empty = false, over = false;
    for (int i = 0; i < ndim; i++) {
        if (sizes[i] < 0)
            return ddpl_error("%s: negative size %lld in shape %s", op, (long long)sizes[i],
                              ddpl_sizes_str(ndim, sizes, buf, sizeof buf));
        empty |= sizes[i] == 0;
        over |= ddpl_mul_overflow(extent, sizes[i] ? sizes[i] : 1, &extent);
    }
    if (over || extent > DDPL_MAX_NUMEL)
        return ddpl_error("%s: shape %s is too large (its sizes multiply past the limit of 2^62 "
                          "elements)",
                          op, ddpl_sizes_str(ndim, sizes, buf, sizeof buf));
    if (numel) *numel = empty ? 0 : extent;
    return 0;
}

int ddpl_check_view_geometry(const char *op, int ndim, const int64_t *sizes, const int64_t *strides,
                             int64_t offset, size_t elem_size, size_t storage_bytes)
{
    int64_t numel;
    if (ddpl_check_shape(op, ndim, sizes, &numel) < 0) return -1;
    char a[160], b[160];
    int64_t last = offset; /* the last element the view reaches */
    bool over = offset < 0;
    for (int i = 0; i < ndim && !over; i++) {
        int64_t reach;
        if (strides[i] < 0)
            return ddpl_error("%s: negative stride %lld in strides %s", op, (long long)strides[i],
                              ddpl_sizes_str(ndim, strides, a, sizeof a));
        if (sizes[i] == 0) continue;
        over = ddpl_mul_overflow(sizes[i] - 1, strides[i], &reach) ||
               ddpl_add_overflow(last, reach, &last);
    }
    /* elements [offset, last] must lie in the storage; an empty view only needs its offset in
     * [0, end] */
    size_t end_bytes = 0;
    int64_t end = offset; /* one past the last element; the offset for an empty view */
    if (!over && numel) over = ddpl_add_overflow(last, 1, &end);
    if (!over) over = ddpl_bytes_overflow(end, elem_size, &end_bytes);
    if (over || end_bytes > storage_bytes)
        return ddpl_error("%s: a view of size %s, strides %s and offset %lld reaches outside "
                          "the storage of %zu bytes",
                          op, ddpl_sizes_str(ndim, sizes, a, sizeof a),
                          ddpl_sizes_str(ndim, strides, b, sizeof b), (long long)offset,
                          storage_bytes);
    return 0;
}

static ddpl_tensor *header_new(ddpl_storage *s, int ndim, const int64_t *sizes,
                               const int64_t *strides, int64_t offset, ddpl_dtype dt)
{
    ddpl_tensor *t = ddpl_xcalloc(1, sizeof *t);
    atomic_init(&t->refcount, 1);
    t->storage = s;
    t->offset = offset;
    t->ndim = (int8_t)ndim;
    t->dtype = (uint8_t)dt;
    t->device = s->device;
    if (ndim) memcpy(t->sizes, sizes, ndim * sizeof *sizes);
    if (strides)
        memcpy(t->strides, strides, ndim * sizeof *strides);
    else
        ddpl_contiguous_strides(ndim, sizes, t->strides);
    return t;
}

ddpl_tensor *ddpl_tensor_new(int ndim, const int64_t *sizes, ddpl_dtype dt, ddpl_device dev)
{
    if ((unsigned)dt >= DDPL_DTYPE_COUNT) {
        ddpl_error("tensor: invalid dtype %d", (int)dt);
        return NULL;
    }
    int64_t n;
    size_t nbytes;
    if (ddpl_check_shape("tensor", ndim, sizes, &n) < 0) return NULL;
    if (ddpl_bytes_overflow(n, ddpl_dtype_size(dt), &nbytes)) {
        char buf[160];
        ddpl_error("tensor: shape %s of %s needs more bytes than memory can address",
                   ddpl_sizes_str(ndim, sizes, buf, sizeof buf), ddpl_dtype_name(dt));
        return NULL;
    }
    ddpl_storage *s = ddpl_storage_new(nbytes, dev);
    if (!s) return NULL;
    return header_new(s, ndim, sizes, NULL, 0, dt);
}

ddpl_tensor *ddpl_tensor_alias(const ddpl_tensor *x, int ndim, const int64_t *sizes,
                               const int64_t *strides, int64_t offset)
{
    ddpl_storage_retain(x->storage);
    return header_new(x->storage, ndim, sizes, strides, offset, (ddpl_dtype)x->dtype);
}

ddpl_tensor *ddpl_empty_like_dtype(const ddpl_tensor *x, ddpl_dtype dt)
{
    return ddpl_tensor_new(x->ndim, x->sizes, dt, x->device);
}

ddpl_tensor *ddpl_from_blob(void *data, int ndim, const int64_t *sizes, ddpl_dtype dt,
                            void (*deleter)(void *, void *), void *ctx)
{
    ddpl_storage *s = ddpl_xmalloc(sizeof *s);
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    atomic_init(&s->recorded_writes, 0);
    s->data = data;
    s->nbytes = (size_t)ddpl_numel(ndim, sizes) * ddpl_dtype_size(dt);
    s->device = ddpl_cpu();
    s->deleter = deleter;
    s->deleter_ctx = ctx;
    return header_new(s, ndim, sizes, NULL, 0, dt);
}

ddpl_tensor *ddpl_tensor_retain(ddpl_tensor *t)
{
    if (t) atomic_fetch_add(&t->refcount, 1);
    return t;
}

void ddpl_tensor_release(ddpl_tensor *t)
{
    if (!t || atomic_fetch_sub(&t->refcount, 1) != 1) return;
    if (t->autograd) atomic_load_explicit(&autograd_free, memory_order_relaxed)(t);
    ddpl_tensor_release(t->view_base);
    ddpl_storage_release(t->storage);
    free(t);
}

/* ---- accessors ---- */
int ddpl_tensor_ndim(const ddpl_tensor *t)
{
    return t->ndim;
}
unsigned ddpl_tensor_version(const ddpl_tensor *t)
{
    return atomic_load(&t->storage->version);
}
bool ddpl_tensor_is_view(const ddpl_tensor *t)
{
    return t->view_base != NULL;
}
int64_t ddpl_tensor_size(const ddpl_tensor *t, int dim)
{
    return t->sizes[dim];
}
int64_t ddpl_tensor_stride(const ddpl_tensor *t, int dim)
{
    return t->strides[dim];
}
const int64_t *ddpl_tensor_sizes(const ddpl_tensor *t)
{
    return t->sizes;
}
const int64_t *ddpl_tensor_strides(const ddpl_tensor *t)
{
    return t->strides;
}
int64_t ddpl_tensor_numel(const ddpl_tensor *t)
{
    return ddpl_numel(t->ndim, t->sizes);
}
ddpl_dtype ddpl_tensor_dtype(const ddpl_tensor *t)
{
    return (ddpl_dtype)t->dtype;
}
ddpl_device ddpl_tensor_device(const ddpl_tensor *t)
{
    return t->device;
}
void *ddpl_tensor_data(const ddpl_tensor *t)
{
    return ddpl_data_ptr(t);
}
size_t ddpl_tensor_nbytes(const ddpl_tensor *t)
{
    return (size_t)ddpl_tensor_numel(t) * ddpl_dtype_size((ddpl_dtype)t->dtype);
}

/* Size-1 dims may have any stride, as in PyTorch. */
bool ddpl_tensor_is_contiguous(const ddpl_tensor *t)
{
    int64_t expected = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->sizes[i] == 0) return true;
        if (t->sizes[i] != 1 && t->strides[i] != expected) return false;
        expected *= t->sizes[i];
    }
    return true;
}

bool ddpl_same_shape(const ddpl_tensor *a, const ddpl_tensor *b)
{
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->sizes[i] != b->sizes[i]) return false;
    return true;
}

const char *ddpl_sizes_str(int ndim, const int64_t *sizes, char *buf, size_t n)
{
    size_t used = 0;
    used += snprintf(buf + used, n - used, "[");
    for (int i = 0; i < ndim && used < n; i++)
        used += snprintf(buf + used, n - used, i ? ",%" PRId64 : "%" PRId64, sizes[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

const char *ddpl_shape_str(const ddpl_tensor *t, char *buf, size_t n)
{
    return ddpl_sizes_str(t->ndim, t->sizes, buf, n);
}

int ddpl_wrap_dim(const char *op, int dim, int ndim)
{
    int n = ndim > 0 ? ndim : 1; /* a 0-dim tensor accepts dim 0 and -1, as in PyTorch */
    if (dim < -n || dim >= n)
        return ddpl_error("%s: dimension %d out of range for a tensor of %d dimensions (expected "
                          "%d to %d)",
                          op, dim, ndim, -n, n - 1);
    return dim < 0 ? dim + n : dim;
}

int ddpl_broadcast_shape(const char *op, int na, const int64_t *a, int nb, const int64_t *b,
                         int *out_ndim, int64_t *out_sizes)
{
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int64_t sa = i < n - na ? 1 : a[i - (n - na)];
        int64_t sb = i < n - nb ? 1 : b[i - (n - nb)];
        if (sa != sb && sa != 1 && sb != 1) {
            char ba[128], bb[128];
            return ddpl_error("%s: shapes %s and %s cannot be broadcast together", op,
                              ddpl_sizes_str(na, a, ba, sizeof ba),
                              ddpl_sizes_str(nb, b, bb, sizeof bb));
        }
        out_sizes[i] = sa == 1 ? sb : sa;
    }
    *out_ndim = n;
    return 0;
}

/* ---- devices ---- */
const char *ddpl_device_str(ddpl_device d, char *buf, size_t n)
{
    if (d.type == DDPL_CPU)
        snprintf(buf, n, "cpu");
    else
        snprintf(buf, n, "cuda:%d", d.index);
    return buf;
}

void ddpl_device_format(ddpl_device d, char *buf, size_t n)
{
    ddpl_device_str(d, buf, n);
}
