/* ddpl/ddpl.h: the public C API of ddplua. Include this one header.
 *
 * A short tour
 * ------------
 * Tensors are refcounted handles. Every function that returns a ddpl_tensor* gives you one
 * reference, which you drop with ddpl_tensor_release; arguments are only borrowed. Failures
 * return NULL (or -1) and leave a message in ddpl_last_error():
 *
 *     int64_t shape[2] = {64, 784};
 *     ddpl_tensor *x = ddpl_randn(2, shape, DDPL_FLOAT32, ddpl_cpu());
 *     ddpl_tensor *w = ddpl_randn(2, (int64_t[]){10, 784}, DDPL_FLOAT32, ddpl_cpu());
 *     ddpl_tensor_set_requires_grad(w, true);
 *
 *     ddpl_tensor *logits = ddpl_linear(x, w, NULL);                  // (64,10)
 *     ddpl_tensor *target = ddpl_randint(0, 10, 1, (int64_t[]){64}, DDPL_INT64, ddpl_cpu());
 *     ddpl_tensor *loss = ddpl_cross_entropy(logits, target, NULL, DDPL_REDUCTION_MEAN, -100, 0);
 *     if (!loss) fprintf(stderr, "%s\n", ddpl_last_error());
 *     ddpl_backward(loss, NULL, false);                              // fills w's gradient
 *     ddpl_tensor *gw = ddpl_tensor_grad(w);                         // borrowed, (10,784)
 *
 *     ddpl_tensor_release(loss); ... // and the rest
 *
 * Operations follow PyTorch: broadcasting, dtype promotion, 0-based dims (negative counts from
 * the end), views that share storage. Autograd records while ddpl_is_grad_enabled() and an
 * input requires grad; ddpl_tensor_register_grad_ready_hook tells C code (the DDP reducer) when
 * a parameter's gradient is final during backward.
 *
 * To script the engine from your own Lua state, see ddpl/lua.h: ddpl_lua_open(L) makes
 * `require 'ddplua'` work there.
 *
 * Headers: tensor.h (dtypes, devices, creation, accessors), ops.h (operations), autograd.h
 * (backward, hooks), cuda.h (GPU queries), lua.h (Lua embedding), config.h (build options). */
#ifndef DDPL_H
#define DDPL_H

#include "ddpl/config.h"
#include "tensor.h"
#include "ops.h"
#include "autograd.h"
#include "cuda.h"

#endif
