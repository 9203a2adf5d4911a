/* ops/pointwise.h: helpers shared by the pointwise op files (pointwise.c, pointwise_unary.c,
 * pointwise_inplace.c) and the reductions.
 * defines: kernel_input, kin_prepare, kin_scalar, kin_release, pw_pick_device, pw_can_cast,
 *          pw_grad_to_input, pw_scalar_is_integral, pw_wrapped, pw_binary_forward,
 *          pw_unary_forward, pw_unary_recorded, pw_clamp_dtype, pw_fused_backward,
 *          pw_activation_grad_recorded.
 *
 * Kernels read only the geometry, dtype and data pointer of their inputs, so an input is handed
 * over as a header on the C stack (a kernel_input) that views it broadcast to the output's
 * shape. Only a dtype or device conversion allocates, and a one-element CPU input is converted
 * into the header's own 8 bytes: `x * 2.5` costs one allocation, the output's. */
#ifndef DDPL_OPS_POINTWISE_H
#define DDPL_OPS_POINTWISE_H

#include "op_util.h"

typedef struct kernel_input {
    ddpl_tensor hdr;    /* what the kernel sees; never retained or released */
    ddpl_storage store; /* backs hdr for a scalar converted on the stack */
    _Alignas(16) unsigned char scalar[16];
    ddpl_tensor *owned; /* a converted copy that hdr views, or NULL */
} kernel_input;

/* Presents t to a kernel as dtype dt on dev, broadcast to (ndim, sizes) (which t must
 * broadcast to). t may be a one-element CPU tensor when dev is another device. */
int kin_prepare(kernel_input *k, ddpl_tensor *t, ddpl_dtype dt, ddpl_device dev, int ndim,
                const int64_t *sizes);
/* A 0-dim value of dtype dt on dev, broadcast to (ndim, sizes). */
int kin_scalar(kernel_input *k, double value, ddpl_dtype dt, ddpl_device dev, int ndim,
               const int64_t *sizes);
void kin_release(kernel_input *k);

/* The device an op on ts[0..n) runs on: theirs when equal; a 0-dim CPU tensor (a Lua number,
 * or a CPU scalar) joins the other operands' device, as in PyTorch. -1 with an error naming op
 * otherwise. */
int pw_pick_device(const char *op, int n, ddpl_tensor *const *ts, ddpl_device *dev);

/* PyTorch's canCast: no floating result into an integer tensor, no non-bool into a bool one. */
bool pw_can_cast(ddpl_dtype from, ddpl_dtype to);

/* A gradient computed at an op's output shape, summed down to input i's shape and moved to its
 * device. Takes the reference to g (NULL passes through). */
ddpl_tensor *pw_grad_to_input(ddpl_node *n, int i, ddpl_tensor *g);

/* Whether a C double given for a tensor scalar (clamp bound, alpha, fill value) counts as an
 * integer for type promotion: integral values do not turn an int tensor into a float one. */
bool pw_scalar_is_integral(double v);

/* A wrapped number (CPU, 0-dim) for v, integral when v is. */
ddpl_tensor *pw_wrapped(double v);

/* out (the broadcast of a and b, out_dt) <- kop(a, b) computed in dtype compute, without
 * autograd; op names the operation in errors (pointwise.c). */
ddpl_tensor *pw_binary_forward(const char *op, ddpl_op kop, ddpl_tensor *a, ddpl_tensor *b,
                               ddpl_dtype compute, ddpl_dtype out_dt, const void *params);

/* out (x's shape, out_dt) <- kop(x) computed in out_dt, without autograd
 * (pointwise_unary.c). */
ddpl_tensor *pw_unary_forward(ddpl_op kop, ddpl_tensor *x, ddpl_dtype out_dt, const void *params);

/* pw_unary_forward, then (when x needs a gradient) a node named node_name with backward fn,
 * saving x in slot 0 (save & PW_SAVE_INPUT) and the output in slot 1 (save & PW_SAVE_OUTPUT),
 * ctx_size bytes of ctx copied into its parameter block (pointwise_unary.c). */
enum { PW_SAVE_INPUT = 1, PW_SAVE_OUTPUT = 2 };
ddpl_tensor *pw_unary_recorded(ddpl_op kop, ddpl_tensor *x, ddpl_dtype out_dt, const void *params,
                               const char *node_name, ddpl_backward_fn fn, int save,
                               const void *ctx, size_t ctx_size);

/* gi[0] <- the fused activation backward kernel kop (RELU_BACKWARD, ...) on grad and the saved
 * tensor, in their promoted dtype; records nothing (pointwise_unary.c). */
int pw_fused_backward(ddpl_op kop, ddpl_tensor *grad, ddpl_tensor *saved, const void *params,
                      ddpl_tensor **gi);
/* The same gradient written with ops, recorded for create_graph (activation_grad.c). */
int pw_activation_grad_recorded(ddpl_op kop, ddpl_tensor *grad, ddpl_tensor *saved,
                                const void *params, ddpl_tensor **gi);

/* The result dtype of clamping x with the bounds in p (pointwise_unary.c). */
int pw_clamp_dtype(const char *op, ddpl_tensor *x, const ddpl_clamp_params *p, ddpl_dtype *dt);

#endif
