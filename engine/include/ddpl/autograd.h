/* ddpl/autograd.h: reverse-mode automatic differentiation of the C API.
 * defines: grad mode, requires_grad, .grad, backward, autograd_grad, tensor and
 * gradient-ready hooks. */
#ifndef DDPL_AUTOGRAD_H
#define DDPL_AUTOGRAD_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* public: exported from libddplua.so, which is otherwise built with hidden visibility (the
 * ABI is what include/ddpl declares; spec/api/abi_spec.lua) */
#pragma GCC visibility push(default)

/* Gradient recording is a per-thread switch, on by default. Returns the previous value. */
bool ddpl_set_grad_enabled(bool enabled);
bool ddpl_is_grad_enabled(void);

bool ddpl_tensor_requires_grad(const ddpl_tensor *t);
/* Only leaves of a floating dtype may be set; -1 with an error otherwise. */
int ddpl_tensor_set_requires_grad(ddpl_tensor *t, bool requires_grad);
bool ddpl_tensor_is_leaf(const ddpl_tensor *t);
/* Borrowed pointer to the accumulated gradient, or NULL. */
ddpl_tensor *ddpl_tensor_grad(const ddpl_tensor *t);
/* Replaces the gradient (NULL clears it); shape/dtype must match. */
int ddpl_tensor_set_grad(ddpl_tensor *t, ddpl_tensor *grad);
/* Gives a leaf a gradient home (NULL removes it): a contiguous tensor of its shape, dtype and
 * device whose memory backward may compute the leaf's gradient straight into when .grad is
 * empty, .grad then being a tensor over that memory; the DDP reducer points homes at its bucket
 * slots so that gradients are not copied into the buckets. Only gradients a matrix product
 * makes go there (a Linear weight's, directly or through a transpose), and only when the leaf
 * gets its gradient from that one place, without tensor hooks; the others arrive in new memory
 * as before.
 * sole_owner false: the home's memory may be shared with anything (gradient_as_bucket_view,
 * where .grad aliasing the bucket is the contract). sole_owner true: the home must be a CPU
 * tensor over a whole storage of its own, and its memory belongs to the gradient alone: before
 * backward computes into it, any other tensor over it (a .grad kept from an earlier step, a view
 * of one) is moved to a copy of its own (ddpl_tensor_take_memory), so it keeps its values, as
 * gradients in new memory would. */
int ddpl_tensor_set_grad_home(ddpl_tensor *leaf, ddpl_tensor *home, bool sole_owner);
/* Name of the node that made t ("MulBackward0"), or NULL for leaves. */
const char *ddpl_tensor_grad_fn_name(const ddpl_tensor *t);
/* Keep the gradient of a non-leaf in .grad after backward. */
int ddpl_tensor_retain_grad(ddpl_tensor *t);

/* Runs backward from root. grad may be NULL when root has one element (then it is 1).
 * Without retain_graph the graph's saved tensors are freed. */
int ddpl_backward(ddpl_tensor *root, ddpl_tensor *grad, bool retain_graph);
/* As ddpl_backward; with create_graph the backward pass is itself recorded (gradients of
 * gradients: .grad gets a grad_fn) and the graph is retained. Formulas that run native backward
 * kernels give gradients whose own backward raises "create_graph: the backward of <op> is not
 * differentiable" (docs/internals/autograd-extend.md lists them). */
int ddpl_backward_ex(ddpl_tensor *root, ddpl_tensor *grad, bool retain_graph, bool create_graph);

/* Gradients of outputs w.r.t. inputs, without touching .grad. grads_out[i] gets a new
 * reference, or NULL if input i is unreachable and allow_unused. grad_outputs may be NULL.
 * create_graph as in ddpl_backward_ex. */
int ddpl_autograd_grad(int n_outputs, ddpl_tensor *const *outputs, ddpl_tensor *const *grad_outputs,
                       int n_inputs, ddpl_tensor *const *inputs, ddpl_tensor **grads_out,
                       bool retain_graph, bool allow_unused);
int ddpl_autograd_grad_ex(int n_outputs, ddpl_tensor *const *outputs,
                          ddpl_tensor *const *grad_outputs, int n_inputs,
                          ddpl_tensor *const *inputs, ddpl_tensor **grads_out, bool retain_graph,
                          bool create_graph, bool allow_unused);

/* Called with the gradient flowing into t during backward. Return NULL to keep it, or a new
 * reference to use instead; set *failed (with an error set via ddpl_error) to abort backward. */
typedef ddpl_tensor *(*ddpl_tensor_hook_fn)(ddpl_tensor *grad, void *userdata, bool *failed);
/* Called once a leaf's .grad is final for this backward (after accumulation): the DDP reducer's
 * gradient-ready signal. Return 0, or -1 (with an error set) to abort backward. */
typedef int (*ddpl_grad_ready_fn)(ddpl_tensor *leaf, void *userdata);
/* free_userdata (may be NULL) runs when the hook is removed or the tensor dies. */
int ddpl_tensor_register_hook(ddpl_tensor *t, ddpl_tensor_hook_fn fn, void *userdata,
                              void (*free_userdata)(void *));
int ddpl_tensor_register_grad_ready_hook(ddpl_tensor *leaf, ddpl_grad_ready_fn fn, void *userdata,
                                         void (*free_userdata)(void *));
/* Removes every hook whose userdata equals userdata; returns how many were removed. */
int ddpl_tensor_remove_hooks(ddpl_tensor *t, void *userdata);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
