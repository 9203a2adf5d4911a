/* lua/bind_pointwise_linalg.c: pointwise, comparison, linear-algebra and in-place tensor methods.
 * defines: lb_math_methods (add sub mul div pow maximum minimum eq ne lt le gt ge neg exp log
 *          sqrt rsqrt abs sign sin cos tanh sigmoid relu gelu silu clamp masked_fill where
 *          matmul mm bmm and the in-place zero_ fill_ copy_ add_ sub_ mul_ div_ clamp_
 *          uniform_ normal_ bernoulli_), lb_math_functions (where, addmm).
 *
 * The second operand of a binary op may be a tensor or a Lua number (a wrapped number: it does
 * not widen the tensor's dtype, as a Python scalar in PyTorch). In-place methods return the
 * tensor itself so they chain (x:mul_(2):add_(1)). */
#include <string.h>

#include "binding.h"

/* self op other, other a tensor or number */
static int binary(lua_State *L, const char *fname, lb_binary_op fn)
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_check_operand(L, 2, fname);
    lb_check_no_more_args(L, 2, fname);
    lb_box *box = lb_newbox(L);
    bool owned;
    ddpl_tensor *y = lb_operand(L, 2, &owned);
    box->t = y ? fn(x, y) : NULL;
    if (owned) ddpl_tensor_release(y);
    return lb_finish_in(L, box, fname);
}

static const char *const alpha_opts[] = {"alpha", NULL};

/* add/sub with PyTorch's alpha (positional or {alpha=}): self + sign*alpha*other */
static int add_like(lua_State *L, const char *fname, double sign, lb_binary_op plain)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, alpha_opts);
    int ai = lb_arg(L, &a, 3, "alpha");
    if (!ai) return binary(L, fname, plain);
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_check_operand(L, 2, fname);
    double alpha = lb_num(L, ai, fname, "alpha", 1.0);
    lb_box *box = lb_newbox(L);
    bool owned;
    ddpl_tensor *y = lb_operand(L, 2, &owned);
    box->t = y ? ddpl_add_scaled(x, y, sign * alpha) : NULL;
    if (owned) ddpl_tensor_release(y);
    return lb_finish_in(L, box, fname); /* sub's errors come from add */
}

static int m_add(lua_State *L)
{
    return add_like(L, "add", 1.0, ddpl_add);
}
static int m_sub(lua_State *L)
{
    return add_like(L, "sub", -1.0, ddpl_sub);
}
static int m_mul(lua_State *L)
{
    return binary(L, "mul", ddpl_mul);
}
static const char *const div_opts[] = {"rounding_mode", NULL};

/* x:div(y [, {rounding_mode = 'floor' | 'trunc'}]) (keyword-only in PyTorch, so only the
 * options table carries it) */
static int m_div(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "div", div_opts);
    ddpl_tensor *x = lb_check(L, 1, "div");
    lb_check_operand(L, 2, "div");
    lb_check_no_more_args(L, a.opts ? a.opts : 2, "div");
    if (a.opts && a.opts != 3)
        return luaL_error(L, "div: expected the options table as argument 3");
    int mi = a.opts ? lb_arg(L, &a, 0, "rounding_mode") : 0;
    if (mi && lua_type(L, mi) != LUA_TSTRING)
        return lb_opterror(L, mi, "div", "rounding_mode", "'floor', 'trunc' or nil");
    const char *mode = mi ? lua_tostring(L, mi) : NULL;
    lb_box *box = lb_newbox(L);
    bool owned;
    ddpl_tensor *y = lb_operand(L, 2, &owned);
    box->t = y ? ddpl_div_rounded(x, y, mode) : NULL;
    if (owned) ddpl_tensor_release(y);
    return lb_finish_in(L, box, "div");
}
static int m_pow(lua_State *L)
{
    return binary(L, "pow", ddpl_pow);
}
static int m_maximum(lua_State *L)
{
    return binary(L, "maximum", ddpl_maximum);
}
static int m_minimum(lua_State *L)
{
    return binary(L, "minimum", ddpl_minimum);
}
static int m_eq(lua_State *L)
{
    return binary(L, "eq", ddpl_eq);
}
static int m_ne(lua_State *L)
{
    return binary(L, "ne", ddpl_ne);
}
static int m_lt(lua_State *L)
{
    return binary(L, "lt", ddpl_lt);
}
static int m_le(lua_State *L)
{
    return binary(L, "le", ddpl_le);
}
static int m_gt(lua_State *L)
{
    return binary(L, "gt", ddpl_gt);
}
static int m_ge(lua_State *L)
{
    return binary(L, "ge", ddpl_ge);
}

/* binding.h: fn(x) for a tensor x and nothing more */
int lb_unary(lua_State *L, const char *fname, lb_unary_op fn)
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_check_no_more_args(L, 1, fname);
    lb_box *box = lb_newbox(L);
    box->t = fn(x);
    return lb_finish_in(L, box, fname);
}

static int m_neg(lua_State *L)
{
    return lb_unary(L, "neg", ddpl_neg);
}
static int m_exp(lua_State *L)
{
    return lb_unary(L, "exp", ddpl_exp);
}
static int m_log(lua_State *L)
{
    return lb_unary(L, "log", ddpl_log);
}
static int m_sqrt(lua_State *L)
{
    return lb_unary(L, "sqrt", ddpl_sqrt);
}
static int m_rsqrt(lua_State *L)
{
    return lb_unary(L, "rsqrt", ddpl_rsqrt);
}
static int m_abs(lua_State *L)
{
    return lb_unary(L, "abs", ddpl_abs);
}
static int m_sign(lua_State *L)
{
    return lb_unary(L, "sign", ddpl_sign);
}
static int m_sin(lua_State *L)
{
    return lb_unary(L, "sin", ddpl_sin);
}
static int m_cos(lua_State *L)
{
    return lb_unary(L, "cos", ddpl_cos);
}
static int m_tanh(lua_State *L)
{
    return lb_unary(L, "tanh", ddpl_tanh);
}
static int m_sigmoid(lua_State *L)
{
    return lb_unary(L, "sigmoid", ddpl_sigmoid);
}
static int m_relu(lua_State *L)
{
    return lb_unary(L, "relu", ddpl_relu);
}
static int m_silu(lua_State *L)
{
    return lb_unary(L, "silu", ddpl_silu);
}

static const char *const gelu_opts[] = {"approximate", NULL};

/* x:gelu(), x:gelu('tanh'), x:gelu({approximate='tanh'}) */
static int m_gelu(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "gelu");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "gelu", gelu_opts);
    int i = lb_arg(L, &a, 2, "approximate");
    bool tanh_approx = false;
    if (i) {
        const char *s = lua_type(L, i) == LUA_TSTRING ? lua_tostring(L, i) : "";
        if (strcmp(s, "tanh") == 0)
            tanh_approx = true;
        else if (strcmp(s, "none") != 0)
            return lb_opterror(L, i, "gelu", "approximate", "'none' or 'tanh'");
    }
    lb_box *box = lb_newbox(L);
    box->t = ddpl_gelu(x, tanh_approx);
    return lb_finish_in(L, box, "gelu");
}

static const char *const clamp_opts[] = {"min", "max", NULL};

/* Bounds of clamp/clamp_: positional (min, max) or {min=, max=}; nil leaves a side open. An
 * integer bound must fit an integer x's dtype (PyTorch refuses int8 clamp(0, 300)); a float
 * bound promotes the result to float instead. */
static void clamp_bounds(lua_State *L, const char *fname, ddpl_dtype dt, bool has[2], double v[2])
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, clamp_opts);
    static const char *const names[2] = {"min", "max"};
    for (int k = 0; k < 2; k++) {
        int i = lb_arg(L, &a, 2 + k, names[k]);
        has[k] = i != 0;
        v[k] = lb_num(L, i, fname, names[k], 0.0);
        if (i && lua_isinteger(L, i)) lb_check_value_fits(L, i, fname, dt);
    }
    if (!has[0] && !has[1]) luaL_error(L, "%s: at least one of min and max must be given", fname);
}

/* clamp with a tensor bound (the other a tensor, a number or nil): PyTorch's clamp(Tensor) */
static int clamp_tensor(lua_State *L, ddpl_tensor *x)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "clamp", clamp_opts);
    lb_check_no_more_args(L, a.opts ? a.opts : 3, "clamp");
    int idx[2] = {lb_arg(L, &a, 2, "min"), lb_arg(L, &a, 3, "max")};
    for (int k = 0; k < 2; k++)
        if (idx[k]) lb_check_operand(L, idx[k], "clamp");
    lb_box *box = lb_newbox(L);
    bool owned[2] = {false, false};
    ddpl_tensor *bound[2] = {NULL, NULL};
    bool ok = true;
    for (int k = 0; k < 2 && ok; k++)
        if (idx[k]) ok = (bound[k] = lb_operand(L, idx[k], &owned[k])) != NULL;
    box->t = ok ? ddpl_clamp_tensor(x, bound[0], bound[1]) : NULL;
    for (int k = 0; k < 2; k++)
        if (owned[k]) ddpl_tensor_release(bound[k]);
    return lb_finish_in(L, box, "clamp");
}

/* x:clamp(min, max): numbers (or nil) take the clamp kernel, a tensor bound clamp_tensor */
static int m_clamp(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "clamp");
    int top = lua_gettop(L);
    lb_args a = lb_parse_args(L);
    int lo = lb_arg(L, &a, 2, "min"), hi = lb_arg(L, &a, 3, "max");
    bool tensor_bound = (lo && lb_testbox(L, lo)) || (hi && lb_testbox(L, hi));
    lua_settop(L, top); /* drop what lb_arg pushed */
    if (tensor_bound) return clamp_tensor(L, x);
    bool has[2];
    double v[2];
    clamp_bounds(L, "clamp", ddpl_tensor_dtype(x), has, v);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_clamp(x, has[0], v[0], has[1], v[1]);
    return lb_finish_in(L, box, "clamp");
}

/* A fill value for a tensor of dtype dt: a number, a boolean, or a one-element tensor; one
 * that dt cannot hold is refused, as PyTorch does (fill_(300) on int8). */
static double fill_value(lua_State *L, int idx, const char *fname, ddpl_dtype dt)
{
    if (lua_type(L, idx) == LUA_TNUMBER) {
        lb_check_value_fits(L, idx, fname, dt);
        return lua_tonumber(L, idx);
    }
    if (lua_type(L, idx) == LUA_TBOOLEAN) return lua_toboolean(L, idx);
    lb_box *b = lb_testbox(L, idx);
    if (!b) lb_argerror(L, idx, fname, "a number");
    lb_check_box(L, b, fname);
    double v;
    if (ddpl_tensor_item(b->t, &v) < 0) lb_error_in(L, fname);
    lb_check_number_fits(L, fname, false, 0, v, dt);
    return v;
}

static int m_masked_fill(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "masked_fill");
    ddpl_tensor *mask = lb_check(L, 2, "masked_fill");
    double v = fill_value(L, 3, "masked_fill", ddpl_tensor_dtype(x));
    lb_box *box = lb_newbox(L);
    box->t = ddpl_masked_fill(x, mask, v);
    return lb_finish_in(L, box, "masked_fill");
}

/* A number beside a tensor in where keeps the tensor's dtype when the tensor is floating or the
 * number an integer, so it must fit it (PyTorch refuses where(c, int8_x, 300) and where(c,
 * half_x, 1e10)); a float number beside an integer tensor promotes to float instead. */
static void where_number_fits(lua_State *L, int num, int other)
{
    lb_box *b = lb_testbox(L, other);
    if (!b || !b->t) return;
    lb_check_box(L, b, "where");
    ddpl_dtype dt = ddpl_tensor_dtype(b->t);
    if (lua_isinteger(L, num) || ddpl_dtype_is_floating(dt))
        lb_check_value_fits(L, num, "where", dt);
}

/* where(cond, x, y) with x and y tensors or numbers. */
static int where3(lua_State *L, int ci, int xi, int yi)
{
    ddpl_tensor *cond = lb_check(L, ci, "where");
    lb_check_operand(L, xi, "where");
    lb_check_operand(L, yi, "where");
    where_number_fits(L, xi, yi);
    where_number_fits(L, yi, xi);
    lb_box *box = lb_newbox(L);
    bool own_x, own_y = false;
    ddpl_tensor *x = lb_operand(L, xi, &own_x);
    ddpl_tensor *y = x ? lb_operand(L, yi, &own_y) : NULL;
    box->t = x && y ? ddpl_where(cond, x, y) : NULL;
    if (own_x) ddpl_tensor_release(x);
    if (own_y) ddpl_tensor_release(y);
    return lb_finish_in(L, box, "where");
}

static int m_where(lua_State *L)
{
    return where3(L, 2, 1, 3);
} /* x:where(cond, y) */
static int f_where(lua_State *L)
{
    if (lua_gettop(L) == 1) return lb_where_nonzero(L); /* ddpl.where(cond): nonzero as_tuple */
    return where3(L, 1, 2, 3);
} /* ddpl.where(cond, x, y) */

static int matrix(lua_State *L, const char *fname, lb_binary_op fn)
{
    ddpl_tensor *a = lb_check(L, 1, fname);
    ddpl_tensor *b = lb_check(L, 2, fname);
    lb_box *box = lb_newbox(L);
    box->t = fn(a, b);
    return lb_finish_in(L, box, fname);
}

static int m_matmul(lua_State *L)
{
    return matrix(L, "matmul", ddpl_matmul);
}
static int m_mm(lua_State *L)
{
    return matrix(L, "mm", ddpl_mm);
}
static int m_bmm(lua_State *L)
{
    return matrix(L, "bmm", ddpl_bmm);
}

static const char *const addmm_opts[] = {"beta", "alpha", NULL};

/* ddpl.addmm(bias, a, b [, {beta=1, alpha=1}]) */
static int f_addmm(lua_State *L)
{
    lb_args args = lb_parse_args(L);
    lb_check_opts(L, args.opts, "addmm", addmm_opts);
    ddpl_tensor *bias = lb_check(L, 1, "addmm");
    ddpl_tensor *a = lb_check(L, 2, "addmm");
    ddpl_tensor *b = lb_check(L, 3, "addmm");
    double beta = lb_num(L, lb_arg(L, &args, 4, "beta"), "addmm", "beta", 1.0);
    double alpha = lb_num(L, lb_arg(L, &args, 5, "alpha"), "addmm", "alpha", 1.0);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_addmm(bias, a, b, beta, alpha);
    return lb_finish_in(L, box, "addmm");
}

/* ---- in place: return self ---- */

static int done_inplace(lua_State *L, int rc, const char *fname)
{
    if (rc < 0) lb_error_in(L, fname);
    lua_settop(L, 1);
    return 1;
}

/* relu_ sigmoid_ tanh_: x:f_() */
static int activation_(lua_State *L, const char *fname, int (*fn)(ddpl_tensor *))
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_check_no_more_args(L, 1, fname);
    return done_inplace(L, fn(x), fname);
}

static int m_relu_(lua_State *L)
{
    return activation_(L, "relu_", ddpl_relu_);
}

static int m_sigmoid_(lua_State *L)
{
    return activation_(L, "sigmoid_", ddpl_sigmoid_);
}

static int m_tanh_(lua_State *L)
{
    return activation_(L, "tanh_", ddpl_tanh_);
}

static int m_zero_(lua_State *L)
{
    return done_inplace(L, ddpl_zero_(lb_check(L, 1, "zero_")), "zero_");
}

static int m_fill_(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "fill_");
    return done_inplace(L, ddpl_fill_(x, fill_value(L, 2, "fill_", ddpl_tensor_dtype(x))), "fill_");
}

static int m_copy_(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "copy_");
    return done_inplace(L, ddpl_copy_(x, lb_check(L, 2, "copy_")), "copy_");
}

typedef int (*inplace_fn)(ddpl_tensor *, ddpl_tensor *);

/* self op= other (tensor or number); alpha for add_/sub_ */
static int inplace_binary(lua_State *L, const char *fname, inplace_fn fn, double sign)
{
    lb_args a = lb_parse_args(L);
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_check_operand(L, 2, fname);
    double alpha = 1.0;
    if (!fn) {
        lb_check_opts(L, a.opts, fname, alpha_opts);
        alpha = lb_num(L, lb_arg(L, &a, 3, "alpha"), fname, "alpha", 1.0);
    } else {
        lb_check_no_more_args(L, 2, fname);
    }
    bool owned;
    ddpl_tensor *y = lb_operand(L, 2, &owned);
    if (!y) lb_error_in(L, fname);
    int rc = fn ? fn(x, y) : ddpl_add_(x, y, sign * alpha);
    if (owned) ddpl_tensor_release(y);
    return done_inplace(L, rc, fname);
}

static int m_add_(lua_State *L)
{
    return inplace_binary(L, "add_", NULL, 1.0);
}
static int m_sub_(lua_State *L)
{
    return inplace_binary(L, "sub_", NULL, -1.0);
}
static int m_mul_(lua_State *L)
{
    return inplace_binary(L, "mul_", ddpl_mul_, 1.0);
}
/* x:div_(y [, {rounding_mode = 'floor' | 'trunc'}]), div's options */
static int m_div_(lua_State *L)
{
    const char *fname = "div_";
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, div_opts);
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_check_operand(L, 2, fname);
    lb_check_no_more_args(L, a.opts ? a.opts : 2, fname);
    if (a.opts && a.opts != 3)
        return luaL_error(L, "div_: expected the options table as argument 3");
    int mi = a.opts ? lb_arg(L, &a, 0, "rounding_mode") : 0;
    if (mi && lua_type(L, mi) != LUA_TSTRING)
        return lb_opterror(L, mi, fname, "rounding_mode", "'floor', 'trunc' or nil");
    bool owned;
    ddpl_tensor *y = lb_operand(L, 2, &owned);
    if (!y) lb_error_in(L, fname);
    int rc = ddpl_div_rounded_(x, y, mi ? lua_tostring(L, mi) : NULL);
    if (owned) ddpl_tensor_release(y);
    return done_inplace(L, rc, fname);
}

static int m_clamp_(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "clamp_");
    bool has[2];
    double v[2];
    clamp_bounds(L, "clamp_", ddpl_tensor_dtype(x), has, v);
    return done_inplace(L, ddpl_clamp_(x, has[0], v[0], has[1], v[1]), "clamp_");
}

/* uniform_(from=0, to=1), normal_(mean=0, std=1): positional or by name */
static int random_two(lua_State *L, const char *fname, const char *n0, double d0, const char *n1,
                      double d1, int (*fn)(ddpl_tensor *, double, double))
{
    lb_args a = lb_parse_args(L);
    const char *names[] = {n0, n1, NULL};
    lb_check_opts(L, a.opts, fname, names);
    ddpl_tensor *x = lb_check(L, 1, fname);
    double v0 = lb_num(L, lb_arg(L, &a, 2, n0), fname, n0, d0);
    double v1 = lb_num(L, lb_arg(L, &a, 3, n1), fname, n1, d1);
    return done_inplace(L, fn(x, v0, v1), fname);
}

static int m_uniform_(lua_State *L)
{
    return random_two(L, "uniform_", "from", 0.0, "to", 1.0, ddpl_uniform_);
}
static int m_normal_(lua_State *L)
{
    return random_two(L, "normal_", "mean", 0.0, "std", 1.0, ddpl_normal_);
}

static const char *const p_opts[] = {"p", NULL};

static int m_bernoulli_(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "bernoulli_", p_opts);
    ddpl_tensor *x = lb_check(L, 1, "bernoulli_");
    double p = lb_num(L, lb_arg(L, &a, 2, "p"), "bernoulli_", "p", 0.5);
    return done_inplace(L, ddpl_bernoulli_(x, p), "bernoulli_");
}

const luaL_Reg lb_math_methods[] = {
    {"add", m_add},
    {"sub", m_sub},
    {"mul", m_mul},
    {"div", m_div},
    {"pow", m_pow},
    {"maximum", m_maximum},
    {"minimum", m_minimum},
    {"eq", m_eq},
    {"ne", m_ne},
    {"lt", m_lt},
    {"le", m_le},
    {"gt", m_gt},
    {"ge", m_ge},
    {"neg", m_neg},
    {"exp", m_exp},
    {"log", m_log},
    {"sqrt", m_sqrt},
    {"rsqrt", m_rsqrt},
    {"abs", m_abs},
    {"sign", m_sign},
    {"sin", m_sin},
    {"cos", m_cos},
    {"tanh", m_tanh},
    {"sigmoid", m_sigmoid},
    {"relu", m_relu},
    {"gelu", m_gelu},
    {"silu", m_silu},
    {"clamp", m_clamp},
    {"masked_fill", m_masked_fill},
    {"where", m_where},
    {"matmul", m_matmul},
    {"mm", m_mm},
    {"bmm", m_bmm},
    {"zero_", m_zero_},
    {"fill_", m_fill_},
    {"copy_", m_copy_},
    {"add_", m_add_},
    {"sub_", m_sub_},
    {"mul_", m_mul_},
    {"div_", m_div_},
    {"clamp_", m_clamp_},
    {"relu_", m_relu_},
    {"sigmoid_", m_sigmoid_},
    {"tanh_", m_tanh_},
    {"uniform_", m_uniform_},
    {"normal_", m_normal_},
    {"bernoulli_", m_bernoulli_},
    {NULL, NULL},
};

const luaL_Reg lb_math_functions[] = {
    {"where", f_where},
    {"addmm", f_addmm},
    {NULL, NULL},
};
