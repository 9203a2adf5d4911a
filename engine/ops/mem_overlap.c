/* ops/mem_overlap.c: PyTorch's memory-overlap rules for ops that write into an existing tensor
 * (ATen's MemoryOverlap.cpp and TensorIterator's compute_mem_overlaps, PyTorch 1.13), in one
 * place for every in-place entry point.
 * defines: ddpl_overlap_status, ddpl_check_no_internal_overlap, ddpl_check_write.
 *
 * Internal overlap: the tensor written has several elements on one memory location (stride 0
 * in a dimension of size > 1: an expanded view). The result would depend on the order of the
 * writes, so it is refused. Other layouts PyTorch calls "too hard" to decide and lets through.
 *
 * Overlap between the tensor written (a) and a tensor the op reads (b):
 *   NO        different storages, disjoint byte ranges, or either is empty;
 *   FULL      a and b are one tensor, or have the same first and last byte and the same
 *             strides (x:add_(x), x:copy_(x:view(...))): each element is read at the place it
 *             is written, so an elementwise op may read and write one by one;
 *   PARTIAL   both dense (their elements fill one range without gaps or repeats) and their
 *             ranges meet otherwise: x[1:]:copy_(x[:-1]), x:add_(x:t()), x:add_(x[0]);
 *   TOO_HARD  either is not dense (a column, a strided slice): PyTorch does not decide and lets
 *             the write through, reading values it may have overwritten already. The engine lets
 *             it through as well, and the op reads such an operand from a copy, so the result is
 *             what a clone() would give.
 * Elementwise ops (add_, copy_, mul_, ...: PyTorch's TensorIterator ops) refuse PARTIAL; ops
 * that read an operand at other positions than they write (index_add_, index_copy_, scatter_*,
 * index_put_, so x[idx] = v) refuse FULL too (PyTorch's assert_no_overlap). The messages keep
 * PyTorch's sentences whole, then say which tensors. */
#include "op_util.h"

/* PyTorch's is_non_overlapping_and_dense: sorted by stride (dims of size < 2 last), each
 * stride is the product of the sizes before it, so the elements fill one range exactly. */
static bool dense(const ddpl_tensor *t)
{
    int perm[DDPL_MAX_DIMS], n = 0;
    for (int d = 0; d < t->ndim; d++)
        if (t->sizes[d] >= 2) perm[n++] = d;
    for (int i = 1; i < n; i++) /* insertion sort by stride: at most 8 dims */
        for (int j = i; j > 0 && t->strides[perm[j]] < t->strides[perm[j - 1]]; j--) {
            int s = perm[j];
            perm[j] = perm[j - 1];
            perm[j - 1] = s;
        }
    int64_t want = 1;
    for (int i = 0; i < n; i++) {
        if (t->strides[perm[i]] != want) return false;
        want *= t->sizes[perm[i]];
    }
    return true;
}

static bool same_strides(const ddpl_tensor *a, const ddpl_tensor *b)
{
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->strides[d] != b->strides[d]) return false;
    return true;
}

ddpl_overlap ddpl_overlap_status(const ddpl_tensor *a, const ddpl_tensor *b)
{
    if (a == b) return DDPL_OVERLAP_FULL;
    if (a->storage != b->storage || ddpl_tensor_numel(a) == 0 || ddpl_tensor_numel(b) == 0)
        return DDPL_OVERLAP_NO;
    if (!dense(a) || !dense(b)) return DDPL_OVERLAP_TOO_HARD;
    /* byte ranges: a dense tensor covers numel elements from its first one */
    int64_t ea = (int64_t)ddpl_dtype_size((ddpl_dtype)a->dtype);
    int64_t eb = (int64_t)ddpl_dtype_size((ddpl_dtype)b->dtype);
    int64_t a0 = a->offset * ea, a1 = a0 + ddpl_tensor_numel(a) * ea;
    int64_t b0 = b->offset * eb, b1 = b0 + ddpl_tensor_numel(b) * eb;
    if (a0 == b0 && a1 == b1) return same_strides(a, b) ? DDPL_OVERLAP_FULL : DDPL_OVERLAP_PARTIAL;
    return a0 < b1 && b0 < a1 ? DDPL_OVERLAP_PARTIAL : DDPL_OVERLAP_NO;
}

/* "shape [3,3], strides [1,3], offset 0" */
static const char *layout_str(const ddpl_tensor *t, char *buf, size_t cap)
{
    char s[128], st[128];
    snprintf(buf, cap, "shape %s, strides %s, offset %lld", ddpl_shape_str(t, s, sizeof s),
             ddpl_sizes_str(t->ndim, t->strides, st, sizeof st), (long long)t->offset);
    return buf;
}

int ddpl_check_no_internal_overlap(const char *op, const ddpl_tensor *x)
{
    char a[300];
    for (int d = 0; d < x->ndim; d++)
        if (x->strides[d] == 0 && x->sizes[d] > 1)
            return ddpl_error("%s: unsupported operation: more than one element of the "
                              "written-to tensor refers to a single memory location. Please "
                              "clone() the tensor before performing the operation. (written-to "
                              "tensor: %s)",
                              op, layout_str(x, a, sizeof a));
    return 0;
}

int ddpl_check_write(const char *op, const ddpl_tensor *x, ddpl_write_kind kind, int n,
                     ddpl_tensor *const *ins)
{
    if (ddpl_check_no_internal_overlap(op, x) < 0) return -1;
    for (int i = 0; i < n; i++) {
        if (!ins[i] || (kind == DDPL_WRITE_ELEMENTWISE && ins[i] == x)) continue;
        ddpl_overlap s = ddpl_overlap_status(x, ins[i]);
        if (s == DDPL_OVERLAP_PARTIAL || (kind == DDPL_WRITE_SCATTERED && s == DDPL_OVERLAP_FULL)) {
            char a[300], b[300];
            return ddpl_error("%s: unsupported operation: some elements of the input tensor and "
                              "the written-to tensor refer to a single memory location. Please "
                              "clone() the tensor before performing the operation. (written-to "
                              "tensor: %s; input: %s)",
                              op, layout_str(x, a, sizeof a), layout_str(ins[i], b, sizeof b));
        }
    }
    return 0;
}
