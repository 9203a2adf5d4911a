/* lua/bind_optim.c: the native halves of lua/ddplua/optim (one C call per parameter group and
 * step, as torch._fused_adam_ is for PyTorch).
 * defines: lb_optim_functions (ddpl._fused_sgd_, ddpl._fused_adam_, ddpl._fused_rmsprop_,
 *          ddpl._fused_adagrad_, ddpl._amp_unscale_).
 *
 *   ddpl._fused_sgd_(params, grads, bufs, init, hyper)
 *       params, grads: lists of n tensors; bufs: list of n momentum buffers (ignored, may be
 *       {}, when hyper.momentum == 0); init: list of n booleans (buffer i is new);
 *       hyper: {lr, momentum, dampening, weight_decay, nesterov, maximize}
 *   ddpl._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, steps, hyper [, max_exp_avg_sqs])
 *       steps: list of n integers (each parameter's step after this one);
 *       hyper: {lr, beta1, beta2, eps, weight_decay, decoupled, amsgrad, maximize, name};
 *       max_exp_avg_sqs: list of n tensors, required with hyper.amsgrad
 *   ddpl._fused_rmsprop_(params, grads, square_avgs, momentum_bufs, grad_avgs, hyper)
 *       momentum_bufs: read only when hyper.momentum > 0, grad_avgs only when hyper.centered
 *       (otherwise may be {}); hyper: {lr, alpha, eps, weight_decay, momentum, centered,
 *       maximize}
 *   ddpl._fused_adagrad_(params, grads, sums, steps, hyper)
 *       hyper: {lr, lr_decay, weight_decay, eps, maximize}
 *   ddpl._amp_unscale_(grads, found_infs, inv_scale)
 *       found_infs: list of n one-element float32 tensors (found_infs[i] on grads[i]'s device);
 *       each grad is multiplied by inv_scale and its found_inf set to 1 if it holds inf/NaN.
 * All update the tensors in place and return nothing. */
#include "binding.h"
#include "ops/optim.h"

/* hyper[name] as a number (required) */
static double hyper_num(lua_State *L, int idx, const char *fname, const char *name)
{
    lua_getfield(L, idx, name);
    if (lua_type(L, -1) != LUA_TNUMBER)
        luaL_error(L, "%s: expected a number for '%s', got %s", fname, name, luaL_typename(L, -1));
    double v = lua_tonumber(L, -1);
    lua_pop(L, 1);
    return v;
}

static bool hyper_bool(lua_State *L, int idx, const char *name)
{
    lua_getfield(L, idx, name);
    bool v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

/* The list at idx must have n entries. */
static void check_len(lua_State *L, int idx, const char *fname, const char *what, int n)
{
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_Integer k = luaL_len(L, idx);
    if (k != n) luaL_error(L, "%s: %d parameters but %d %s", fname, n, (int)k, what);
}

static int f_fused_sgd(lua_State *L)
{
    const char *fname = "SGD";
    luaL_checktype(L, 5, LUA_TTABLE);
    ddpl_sgd_hyper h = {
        .lr = hyper_num(L, 5, fname, "lr"),
        .momentum = hyper_num(L, 5, fname, "momentum"),
        .dampening = hyper_num(L, 5, fname, "dampening"),
        .weight_decay = hyper_num(L, 5, fname, "weight_decay"),
        .nesterov = hyper_bool(L, 5, "nesterov"),
        .maximize = hyper_bool(L, 5, "maximize"),
    };
    ddpl_tensor **params, **grads, **bufs = NULL;
    int n = lb_tensor_list(L, 1, fname, &params);
    check_len(L, 2, fname, "gradients", n);
    lb_tensor_list(L, 2, fname, &grads);
    check_len(L, 4, fname, "init flags", n);
    bool *init = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *init, 0);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, 4, i + 1);
        init[i] = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    if (h.momentum != 0) {
        check_len(L, 3, fname, "momentum buffers", n);
        lb_tensor_list(L, 3, fname, &bufs);
    }
    if (ddpl_sgd_step(n, params, grads, bufs, init, &h) < 0) lb_error(L);
    return 0;
}

/* The integers of the list at idx (n entries) in a new userdata left on the stack. */
static int64_t *step_list(lua_State *L, int idx, const char *fname, int n)
{
    int64_t *steps = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *steps, 0);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, idx, i + 1);
        int isint = 0;
        steps[i] = (int64_t)lua_tointegerx(L, -1, &isint);
        if (!isint) luaL_error(L, "%s: step count %d is not an integer", fname, i + 1);
        lua_pop(L, 1);
    }
    return steps;
}

static int f_fused_adam(lua_State *L)
{
    luaL_checktype(L, 6, LUA_TTABLE);
    lua_getfield(L, 6, "name");
    const char *fname = lua_isstring(L, -1) ? lua_tostring(L, -1) : "Adam";
    /* fname stays valid: the string is anchored on the stack until we return */
    ddpl_adam_hyper h = {
        .lr = hyper_num(L, 6, fname, "lr"),
        .beta1 = hyper_num(L, 6, fname, "beta1"),
        .beta2 = hyper_num(L, 6, fname, "beta2"),
        .eps = hyper_num(L, 6, fname, "eps"),
        .weight_decay = hyper_num(L, 6, fname, "weight_decay"),
        .decoupled = hyper_bool(L, 6, "decoupled"),
        .amsgrad = hyper_bool(L, 6, "amsgrad"),
        .maximize = hyper_bool(L, 6, "maximize"),
    };
    ddpl_tensor **params, **grads, **m, **v, **vmax = NULL;
    int n = lb_tensor_list(L, 1, fname, &params);
    check_len(L, 2, fname, "gradients", n);
    check_len(L, 3, fname, "exp_avg buffers", n);
    check_len(L, 4, fname, "exp_avg_sq buffers", n);
    check_len(L, 5, fname, "step counts", n);
    lb_tensor_list(L, 2, fname, &grads);
    lb_tensor_list(L, 3, fname, &m);
    lb_tensor_list(L, 4, fname, &v);
    if (h.amsgrad) {
        check_len(L, 7, fname, "max_exp_avg_sq buffers", n);
        lb_tensor_list(L, 7, fname, &vmax);
    }
    int64_t *steps = step_list(L, 5, fname, n);
    if (ddpl_adam_step(fname, n, params, grads, m, v, vmax, steps, &h) < 0) lb_error(L);
    return 0;
}

static int f_fused_rmsprop(lua_State *L)
{
    const char *fname = "RMSprop";
    luaL_checktype(L, 6, LUA_TTABLE);
    ddpl_rmsprop_hyper h = {
        .lr = hyper_num(L, 6, fname, "lr"),
        .alpha = hyper_num(L, 6, fname, "alpha"),
        .eps = hyper_num(L, 6, fname, "eps"),
        .weight_decay = hyper_num(L, 6, fname, "weight_decay"),
        .momentum = hyper_num(L, 6, fname, "momentum"),
        .centered = hyper_bool(L, 6, "centered"),
        .maximize = hyper_bool(L, 6, "maximize"),
    };
    ddpl_tensor **params, **grads, **sq, **bufs = NULL, **gavg = NULL;
    int n = lb_tensor_list(L, 1, fname, &params);
    check_len(L, 2, fname, "gradients", n);
    check_len(L, 3, fname, "square_avg buffers", n);
    lb_tensor_list(L, 2, fname, &grads);
    lb_tensor_list(L, 3, fname, &sq);
    if (h.momentum > 0) {
        check_len(L, 4, fname, "momentum buffers", n);
        lb_tensor_list(L, 4, fname, &bufs);
    }
    if (h.centered) {
        check_len(L, 5, fname, "grad_avg buffers", n);
        lb_tensor_list(L, 5, fname, &gavg);
    }
    if (ddpl_rmsprop_step(n, params, grads, sq, bufs, gavg, &h) < 0) lb_error(L);
    return 0;
}

static int f_fused_adagrad(lua_State *L)
{
    const char *fname = "Adagrad";
    luaL_checktype(L, 5, LUA_TTABLE);
    ddpl_adagrad_hyper h = {
        .lr = hyper_num(L, 5, fname, "lr"),
        .lr_decay = hyper_num(L, 5, fname, "lr_decay"),
        .weight_decay = hyper_num(L, 5, fname, "weight_decay"),
        .eps = hyper_num(L, 5, fname, "eps"),
        .maximize = hyper_bool(L, 5, "maximize"),
    };
    ddpl_tensor **params, **grads, **sums;
    int n = lb_tensor_list(L, 1, fname, &params);
    check_len(L, 2, fname, "gradients", n);
    check_len(L, 3, fname, "sum buffers", n);
    check_len(L, 4, fname, "step counts", n);
    lb_tensor_list(L, 2, fname, &grads);
    lb_tensor_list(L, 3, fname, &sums);
    int64_t *steps = step_list(L, 4, fname, n);
    if (ddpl_adagrad_step(n, params, grads, sums, steps, &h) < 0) lb_error(L);
    return 0;
}

static int f_amp_unscale(lua_State *L)
{
    const char *fname = "GradScaler";
    ddpl_tensor **grads, **found;
    int n = lb_tensor_list(L, 1, fname, &grads);
    check_len(L, 2, fname, "found_inf tensors", n);
    lb_tensor_list(L, 2, fname, &found);
    double inv_scale = luaL_checknumber(L, 3);
    if (ddpl_amp_unscale(n, grads, found, inv_scale) < 0) lb_error(L);
    return 0;
}

const luaL_Reg lb_optim_functions[] = {
    {"_fused_sgd_", f_fused_sgd},         {"_fused_adam_", f_fused_adam},
    {"_fused_rmsprop_", f_fused_rmsprop}, {"_fused_adagrad_", f_fused_adagrad},
    {"_amp_unscale_", f_amp_unscale},     {NULL, NULL},
};
