/* ops/autocast.h: automatic mixed precision (autocast) state and casting policy (the float32
 * matmul precision switch is core/matmul_precision.h).
 * defines: ddpl_autocast_state, ddpl_autocast_set, ddpl_autocast_enabled,
 *          ddpl_autocast_dtype, ddpl_autocast_suspend, ddpl_autocast_lower, ddpl_autocast_upcast,
 *          ddpl_autocast_lower_n, ddpl_autocast_upcast_n, ddpl_autocast_release_n,
 *          ddpl_autocast_enter, ddpl_autocast_leave, ddpl_autocast_cache_size,
 *          ddpl_autocast_upcasts_norms.
 *
 * Autocast follows PyTorch's op lists: the "lower precision" ops (matmul, mm, bmm, addmm,
 * linear, conv2d, scaled_dot_product_attention) cast their floating inputs other than float64
 * to the autocast dtype; the "float32" ops cast 16-bit inputs up to float32 and return
 * float32. The float32 lists differ by device type, as PyTorch 1.13's: both have cross_entropy,
 * nll_loss and mse_loss; CUDA's also has softmax, log_softmax, layer_norm and batch_norm, which
 * on the CPU keep a 16-bit input's dtype (computed in float32 with float32 parameters and
 * rounded once): ddpl_autocast_upcasts_norms. The casts go
 * through ddpl_to_dtype, so autograd records them: gradients reach float32 leaves in float32.
 * The state is thread-local, one entry per device type, as PyTorch's.
 *
 * The cast cache (PyTorch's cache_enabled): inside an autocast region the lower-precision copy
 * of a float32 leaf that requires grad (a parameter) is made once and reused, so a weight used
 * by several ops of a step (an RNN's gates at every time step, a tied embedding) is cast once
 * per forward, not once per use. An entry remembers the storage version it was cast at: a
 * parameter written in place inside the region (an optimizer step) is cast again. The cache
 * is emptied when the outermost region ends (ddpl_autocast_leave). */
#ifndef DDPL_AUTOCAST_H
#define DDPL_AUTOCAST_H

#include "core/core.h"

typedef struct ddpl_autocast_state {
    bool enabled;
    ddpl_dtype dtype; /* DDPL_BFLOAT16 or DDPL_FLOAT16 */
} ddpl_autocast_state;

/* Sets the state for device type `type` and returns the previous one (to restore later).
 * Refuses (-1, error set) a dtype other than bfloat16/float16. Both work on every device
 * type (PyTorch 1.13 refuses float16 on the CPU; ddplua's CPU kernels have float16). */
int ddpl_autocast_set(ddpl_device_type type, ddpl_autocast_state s, ddpl_autocast_state *prev);
bool ddpl_autocast_enabled(ddpl_device_type type);
ddpl_dtype ddpl_autocast_dtype(ddpl_device_type type);
/* Turns autocast off on device type `type` and returns the state to restore with
 * ddpl_autocast_set(type, prev, NULL): for a composite op's inner products, whose operands are
 * already in the dtype they compute in (the LSTM/GRU layers, forward and backward). */
ddpl_autocast_state ddpl_autocast_suspend(ddpl_device_type type);

/* Lower-precision policy: x cast to the autocast dtype of its device (with autograd) when
 * autocast is on there and x is float32 (or the other 16-bit dtype); else x retained. */
ddpl_tensor *ddpl_autocast_lower(ddpl_tensor *x);
/* Float32 policy: a float16/bfloat16 x cast to float32 (with autograd) when autocast is on for
 * its device; else x retained. */
ddpl_tensor *ddpl_autocast_upcast(ddpl_tensor *x);
/* Whether softmax, log_softmax, layer_norm and batch_norm return float32 under autocast on this
 * device type (CUDA's float32 list); false on the CPU and when autocast is off. */
bool ddpl_autocast_upcasts_norms(ddpl_device_type type);
/* Applies the policy to n inputs (NULL entries stay NULL): out[i] is a new reference.
 * Returns 0, or -1 with every out[i] released and NULL. */
int ddpl_autocast_lower_n(int n, ddpl_tensor *const *in, ddpl_tensor **out);
int ddpl_autocast_upcast_n(int n, ddpl_tensor *const *in, ddpl_tensor **out);
void ddpl_autocast_release_n(int n, ddpl_tensor **t);

/* Region bookkeeping for the cast cache (the Lua binding's autocast calls both): enter counts
 * one more region on this thread, with the cache on or off inside it (PyTorch's
 * cache_enabled), and returns the previous cache setting; leave restores it and, when the
 * outermost region ends, empties the cache. */
bool ddpl_autocast_enter(bool cache_enabled);
void ddpl_autocast_leave(bool prev_cache_enabled);
/* Casts held by this thread's cache (for tests). */
int ddpl_autocast_cache_size(void);

#endif
