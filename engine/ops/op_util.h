/* ops/op_util.h: checks and small helpers shared by the op implementations.
 * defines: ddpl_check_inplace, ddpl_inplace_recorded, ddpl_inplace_source,
 * ddpl_inplace_commit, ddpl_inplace_written, ddpl_alias_view, ddpl_overlap_status,
 * ddpl_check_no_internal_overlap, ddpl_check_write,
 * ddpl_check_same_device, ddpl_check_floating, ddpl_as_dtype, ddpl_tensor_host_copy,
 * ddpl_mark_not_differentiable, op_temps (OP_T, OP_NUM, OP_U, OP_B, op_temps_result), OP_INPUTS. */
#ifndef DDPL_OP_UTIL_H
#define DDPL_OP_UTIL_H

#include "autograd/graph.h"
#include "ddpl/ops.h"
#include "dispatch.h"
#include "kernel_abi/kernel_params.h"

/* For in-place ops that autograd does not record: refused on tensors that take part in
 * autograd (leaves that require grad, as PyTorch, and non-leaves, whose history such an op
 * cannot rebase). Ops that record go through ddpl_inplace_recorded instead. */
int ddpl_check_inplace(const char *op, const ddpl_tensor *x);
/* In-place ops with autograd (ops/inplace.c). Whether autograd records an in-place op on x with
 * these operands (NULL entries allowed): 1 when grad mode is on and x, the tensor x views or an
 * operand requires grad, 0 when not, -1 (error) when x is a leaf that requires grad or a view
 * of one. */
int ddpl_inplace_recorded(const char *op, ddpl_tensor *x, int n, ddpl_tensor *const *others);
/* What a recorded op computes from in x's place: a recorded clone when its formula saves that
 * input (saved: mul_ saves x for the other operand's gradient), else x (a new reference). */
ddpl_tensor *ddpl_inplace_source(ddpl_tensor *x, bool saved);
/* Ends a recorded op computed out of place as r (takes r; NULL: fails): writes r into x (x's
 * shape, any dtype the op checked castable), bumps x's version and gives x r's history (when r
 * has none, a node named fill_name that passes no gradient, ZeroBackward0), or, for a view,
 * rewrites its base's history (CopySlices). */
int ddpl_inplace_commit(const char *op, const char *fill_name, ddpl_tensor *x, ddpl_tensor *r);
/* After a recorded op that wrote x itself with values that depend on nothing requiring grad
 * (fill_, normal_): x gets a node named fill_name that passes no gradient. */
void ddpl_inplace_written(ddpl_tensor *x, const char *fill_name);
/* Memory overlap, PyTorch's rules (ops/mem_overlap.c). How a tensor an op reads lies in memory
 * against the tensor it writes: FULL (the same elements in the same layout), PARTIAL (both dense,
 * sharing some bytes otherwise), TOO_HARD (one is not dense: undecided) or NO. */
typedef enum {
    DDPL_OVERLAP_NO,
    DDPL_OVERLAP_FULL,
    DDPL_OVERLAP_PARTIAL,
    DDPL_OVERLAP_TOO_HARD
} ddpl_overlap;
ddpl_overlap ddpl_overlap_status(const ddpl_tensor *a, const ddpl_tensor *b);
/* An error unless every element of x, the tensor an op writes, has a memory location of its
 * own: PyTorch's internal-overlap rule, which refuses a stride of 0 in a dimension of size > 1
 * (an expanded view) and lets other layouts through. */
int ddpl_check_no_internal_overlap(const char *op, const ddpl_tensor *x);
/* How an op reads what it writes x with: element by element at the same positions (add_,
 * copy_: an operand that is x itself, or FULL, is fine), or at other positions (index_add_,
 * scatter_, index_put_: any overlap is refused). */
typedef enum { DDPL_WRITE_ELEMENTWISE, DDPL_WRITE_SCATTERED } ddpl_write_kind;
/* The checks every in-place entry point runs before it writes x, reading ins (n of them, NULL
 * entries skipped): no internal overlap in x, and no operand overlapping x in a way PyTorch
 * refuses for that kind; -1 with PyTorch's message naming op, else 0. */
int ddpl_check_write(const char *op, const ddpl_tensor *x, ddpl_write_kind kind, int n,
                     ddpl_tensor *const *ins);
int ddpl_check_same_device(const char *op, const ddpl_tensor *a, const ddpl_tensor *b);
int ddpl_check_floating(const char *op, const ddpl_tensor *x);
/* An alias of x that knows the tensor it views (core.h: view_base), as every view op makes its
 * result (ops/views.c); the caller records the view's history. */
ddpl_tensor *ddpl_alias_view(ddpl_tensor *x, int ndim, const int64_t *sizes, const int64_t *strides,
                             int64_t offset);
/* x converted to dt without autograd (x itself, retained, when it already has dt). */
ddpl_tensor *ddpl_as_dtype(ddpl_tensor *x, ddpl_dtype dt);
/* x converted to dt with autograd (for ops that compute in a promoted dtype). */
ddpl_tensor *ddpl_to_dtype(ddpl_tensor *x, ddpl_dtype dt);
/* Gradient of a broadcast input: sums grad over the broadcast dims down to sizes (ndim dims). */
ddpl_tensor *ddpl_sum_to(ddpl_tensor *grad, int ndim, const int64_t *sizes);
/* Temporaries of a formula written with ops (create_graph formulas): kept for one release at
 * the end; the first failure (a NULL result) makes a later OP_T skip its op. Nested, an inner
 * failure still hands NULL to the op around it (its argument is evaluated first), so nesting
 * with OP_T suits steps that fail only when memory runs out; OP_U/OP_B below nest safely.
 *     op_temps k = {0};
 *     ddpl_tensor *d = OP_T(&k, ddpl_mul(x, OP_T(&k, ddpl_sub(OP_NUM(&k, 1.0), y))));
 *     gi[0] = k.failed ? NULL : ddpl_mul(grad, d);
 *     op_temps_release(&k); */
typedef struct {
    ddpl_tensor *t[32];
    int n;
    bool failed;
} op_temps;

static inline ddpl_tensor *op_temps_keep(op_temps *k, ddpl_tensor *t)
{
    if (!t || k->n == (int)(sizeof k->t / sizeof k->t[0])) {
        if (t) /* a formula's bug, not the user's: say so rather than fail without a message */
            ddpl_error("internal error: a formula keeps more than %d temporaries (op_temps); "
                       "split it into two sets",
                       (int)(sizeof k->t / sizeof k->t[0]));
        ddpl_tensor_release(t);
        k->failed = true;
        return NULL;
    }
    return k->t[k->n++] = t;
}

static inline void op_temps_release(op_temps *k)
{
    for (int i = 0; i < k->n; i++) ddpl_tensor_release(k->t[i]);
}

#define OP_T(k, expr) ((k)->failed ? NULL : op_temps_keep((k), (expr)))
#define OP_NUM(k, v)  OP_T(k, ddpl_wrapped_number((v), false))

/* Nesting that is safe when a step can fail on its input (a composition of user tensors whose
 * shapes may not broadcast): the op runs only when nothing failed before and its operands
 * exist, where OP_T(k, f(OP_T(k, g(x)))) would still call f(NULL) after g failed.
 *     ddpl_tensor *r = OP_B(&k, ddpl_add, x, OP_B(&k, ddpl_mul, w, y)); */
typedef ddpl_tensor *(*op_unary_fn)(ddpl_tensor *);
typedef ddpl_tensor *(*op_binary_fn)(ddpl_tensor *, ddpl_tensor *);
static inline ddpl_tensor *op_temps_unary(op_temps *k, op_unary_fn f, ddpl_tensor *a)
{
    if (k->failed || !a) return k->failed = true, NULL;
    return op_temps_keep(k, f(a));
}
static inline ddpl_tensor *op_temps_binary(op_temps *k, op_binary_fn f, ddpl_tensor *a,
                                           ddpl_tensor *b)
{
    if (k->failed || !a || !b) return k->failed = true, NULL;
    return op_temps_keep(k, f(a, b));
}
/* The result r of a composition as a new reference (NULL when a step failed); releases k. */
static inline ddpl_tensor *op_temps_result(op_temps *k, ddpl_tensor *r)
{
    r = k->failed || !r ? NULL : ddpl_tensor_retain(r);
    op_temps_release(k);
    return r;
}
#define OP_U(k, f, a)    op_temps_unary((k), (f), (a))
#define OP_B(k, f, a, b) op_temps_binary((k), (f), (a), (b))

/* For backward formulas that run native kernels (pooling's, norms', ...): when the pass
 * records itself (create_graph) and the incoming gradient or a saved tensor of n requires grad
 * (or, with through_inputs, for formulas whose results depend on the forward inputs, one of
 * n's inputs does), gives each non-NULL outs[i] without history a node whose backward fails
 * with "create_graph: the backward of <op> is not differentiable", so a second derivative
 * through it is an error, not a silently wrong (zero) value. 0, or -1 with an error. */
int ddpl_mark_not_differentiable(const char *op, ddpl_node *n, ddpl_tensor *grad, int n_outs,
                                 ddpl_tensor **outs, bool through_inputs);
/* Contiguous host copy of the elements (malloc; caller frees); NULL with an error
 * (ops/readback.c). */
void *ddpl_tensor_host_copy(const ddpl_tensor *t);

#define OP_INPUTS(...) ((ddpl_tensor *[]){__VA_ARGS__})

#endif
