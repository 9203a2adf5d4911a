/* lua/bind_math.c: PyTorch's remaining pointwise functions (ops/pointwise_math*.c), each a
 * tensor method and a ddpl function: x:floor() and ddpl.floor(x), x:remainder(y) and
 * ddpl.remainder(a, b) (a number on either side, as torch.remainder(5, t)).
 * defines: lb_math_fn_methods, lb_check_no_more_args.
 *
 * The Lua operators // and % (bind_tensor.c) are floor_divide and remainder; & | ~ << >> and
 * unary ~ are the bitwise functions. */
#include "binding.h"

/* trailing nils do not count: f(x, nil) is f(x) */
void lb_check_no_more_args(lua_State *L, int last, const char *fname)
{
    int top = lua_gettop(L);
    while (top > last && lua_isnil(L, top)) top--;
    if (top > last)
        luaL_error(L, "%s: expected %d argument%s, got %d (argument %d is a %s)", fname, last,
                   last == 1 ? "" : "s", top, last + 1, luaL_typename(L, last + 1));
}

/* a op b, either a tensor or a number (not both numbers), and nothing more */
static int binary(lua_State *L, const char *fname, lb_binary_op fn)
{
    lb_check_operand(L, 1, fname);
    lb_check_operand(L, 2, fname);
    lb_check_no_more_args(L, 2, fname);
    if (!lb_testbox(L, 1) && !lb_testbox(L, 2))
        return luaL_error(L, "%s: expected a tensor as argument 1 or 2, got two numbers", fname);
    return lb_arith(L, fname, fn);
}

#define UNARY(name)                                                                                \
    static int m_##name(lua_State *L)                                                              \
    {                                                                                              \
        return lb_unary(L, #name, ddpl_##name);                                                    \
    }
#define BINARY(name)                                                                               \
    static int m_##name(lua_State *L)                                                              \
    {                                                                                              \
        return binary(L, #name, ddpl_##name);                                                      \
    }
UNARY(floor)
UNARY(ceil)
UNARY(trunc)
UNARY(frac)
UNARY(reciprocal)
UNARY(exp2)
UNARY(expm1)
UNARY(log2)
UNARY(log10)
UNARY(log1p)
UNARY(tan)
UNARY(asin)
UNARY(acos)
UNARY(atan)
UNARY(sinh)
UNARY(cosh)
UNARY(asinh)
UNARY(acosh)
UNARY(atanh)
UNARY(erf)
UNARY(erfc)
UNARY(erfinv)
UNARY(square)
UNARY(isnan)
UNARY(isinf)
UNARY(isfinite)
UNARY(logical_not)
UNARY(bitwise_not)
BINARY(remainder)
BINARY(fmod)
BINARY(floor_divide)
BINARY(atan2)
BINARY(hypot)
BINARY(fmax)
BINARY(fmin)
BINARY(logaddexp)
BINARY(logaddexp2)
BINARY(xlogy)
BINARY(copysign)
BINARY(bitwise_and)
BINARY(bitwise_or)
BINARY(bitwise_xor)
BINARY(bitwise_left_shift)
BINARY(bitwise_right_shift)
BINARY(logical_and)
BINARY(logical_or)
BINARY(logical_xor)

static const char *const round_opts[] = {"decimals", NULL};

/* x:round([decimals]) or x:round({decimals=}) */
static int m_round(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "round");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "round", round_opts);
    lb_check_no_more_args(L, a.opts ? a.opts : 2, "round");
    int64_t decimals = lb_int(L, lb_arg(L, &a, 2, "decimals"), "round", "decimals", 0);
    if (decimals < -308 || decimals > 308)
        return luaL_error(L, "round: decimals must be in [-308, 308], got %I",
                          (lua_Integer)decimals);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_round(x, (int)decimals);
    return lb_finish_in(L, box, "round");
}

static const char *const nan_to_num_opts[] = {"nan", "posinf", "neginf", NULL};

/* x:nan_to_num([nan [, posinf [, neginf]]]) or {nan=, posinf=, neginf=} */
static int m_nan_to_num(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "nan_to_num");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "nan_to_num", nan_to_num_opts);
    lb_check_no_more_args(L, a.opts ? a.opts : 4, "nan_to_num");
    double nan = lb_num(L, lb_arg(L, &a, 2, "nan"), "nan_to_num", "nan", 0.0);
    int pi = lb_arg(L, &a, 3, "posinf"), ni = lb_arg(L, &a, 4, "neginf");
    double posinf = lb_num(L, pi, "nan_to_num", "posinf", 0.0);
    double neginf = lb_num(L, ni, "nan_to_num", "neginf", 0.0);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_nan_to_num(x, nan, pi ? &posinf : NULL, ni ? &neginf : NULL);
    return lb_finish_in(L, box, "nan_to_num");
}

/* x:lerp(end, weight): weight a number or a tensor */
static int m_lerp(lua_State *L)
{
    ddpl_tensor *start = lb_check(L, 1, "lerp");
    ddpl_tensor *end = lb_check(L, 2, "lerp");
    lb_check_operand(L, 3, "lerp");
    lb_check_no_more_args(L, 3, "lerp");
    lb_box *box = lb_newbox(L);
    bool owned;
    ddpl_tensor *w = lb_operand(L, 3, &owned);
    box->t = w ? ddpl_lerp(start, end, w) : NULL;
    if (owned) ddpl_tensor_release(w);
    return lb_finish_in(L, box, "lerp");
}

static const char *const value_opts[] = {"value", NULL};

/* x:addcmul(t1, t2 [, {value=1}]), x:addcdiv(...): value is keyword-only, as in PyTorch */
static int addc(lua_State *L, const char *fname,
                ddpl_tensor *(*fn)(ddpl_tensor *, ddpl_tensor *, ddpl_tensor *, double))
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    ddpl_tensor *a = lb_check(L, 2, fname);
    ddpl_tensor *b = lb_check(L, 3, fname);
    lb_args args = lb_parse_args(L);
    lb_check_opts(L, args.opts, fname, value_opts);
    lb_check_no_more_args(L, args.opts ? args.opts : 3, fname);
    double value = lb_num(L, args.opts ? lb_arg(L, &args, 0, "value") : 0, fname, "value", 1.0);
    lb_box *box = lb_newbox(L);
    box->t = fn(x, a, b, value);
    return lb_finish_in(L, box, fname);
}
static int m_addcmul(lua_State *L)
{
    return addc(L, "addcmul", ddpl_addcmul);
}
static int m_addcdiv(lua_State *L)
{
    return addc(L, "addcdiv", ddpl_addcdiv);
}

static const char *const close_opts[] = {"rtol", "atol", "equal_nan", NULL};

typedef struct {
    double rtol, atol;
    bool equal_nan;
} close_args;

/* (a, b [, {rtol=1e-5, atol=1e-8, equal_nan=false}]); rtol and atol also positional */
static close_args parse_close(lua_State *L, const char *fname)
{
    lb_check(L, 1, fname);
    lb_check(L, 2, fname);
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, close_opts);
    lb_check_no_more_args(L, a.opts ? a.opts : 4, fname);
    close_args c;
    c.rtol = lb_num(L, lb_arg(L, &a, 3, "rtol"), fname, "rtol", 1e-5);
    c.atol = lb_num(L, lb_arg(L, &a, 4, "atol"), fname, "atol", 1e-8);
    c.equal_nan = lb_bool(L, a.opts ? lb_arg(L, &a, 0, "equal_nan") : 0, fname, "equal_nan", false);
    return c;
}

static int m_isclose(lua_State *L)
{
    close_args c = parse_close(L, "isclose");
    lb_box *box = lb_newbox(L);
    box->t = ddpl_isclose(lb_check(L, 1, "isclose"), lb_check(L, 2, "isclose"), c.rtol, c.atol,
                          c.equal_nan);
    return lb_finish_in(L, box, "isclose");
}

/* a Lua boolean, as torch.allclose's Python bool */
static int m_allclose(lua_State *L)
{
    close_args c = parse_close(L, "allclose");
    bool r;
    if (ddpl_allclose(lb_check(L, 1, "allclose"), lb_check(L, 2, "allclose"), c.rtol, c.atol,
                      c.equal_nan, &r) < 0)
        lb_error_in(L, "allclose");
    lua_pushboolean(L, r);
    return 1;
}

static int m_equal(lua_State *L)
{
    ddpl_tensor *a = lb_check(L, 1, "equal"), *b = lb_check(L, 2, "equal");
    lb_check_no_more_args(L, 2, "equal");
    bool r;
    if (ddpl_equal(a, b, &r) < 0) lb_error_in(L, "equal");
    lua_pushboolean(L, r);
    return 1;
}

#define ENTRY(name)                                                                                \
    {                                                                                              \
#name, m_##name                                                                            \
    }
/* registered as tensor methods and as ddpl functions (bind_module.c) */
const luaL_Reg lb_math_fn_methods[] = {
    ENTRY(floor),
    ENTRY(ceil),
    ENTRY(round),
    ENTRY(trunc),
    ENTRY(frac),
    ENTRY(reciprocal),
    ENTRY(exp2),
    ENTRY(expm1),
    ENTRY(log2),
    ENTRY(log10),
    ENTRY(log1p),
    ENTRY(tan),
    ENTRY(asin),
    ENTRY(acos),
    ENTRY(atan),
    ENTRY(sinh),
    ENTRY(cosh),
    ENTRY(asinh),
    ENTRY(acosh),
    ENTRY(atanh),
    ENTRY(erf),
    ENTRY(erfc),
    ENTRY(erfinv),
    ENTRY(square),
    ENTRY(isnan),
    ENTRY(isinf),
    ENTRY(isfinite),
    ENTRY(nan_to_num),
    ENTRY(logical_not),
    ENTRY(bitwise_not),
    ENTRY(remainder),
    ENTRY(fmod),
    ENTRY(floor_divide),
    ENTRY(atan2),
    ENTRY(hypot),
    ENTRY(fmax),
    ENTRY(fmin),
    ENTRY(logaddexp),
    ENTRY(logaddexp2),
    ENTRY(xlogy),
    ENTRY(copysign),
    ENTRY(bitwise_and),
    ENTRY(bitwise_or),
    ENTRY(bitwise_xor),
    ENTRY(bitwise_left_shift),
    ENTRY(bitwise_right_shift),
    ENTRY(logical_and),
    ENTRY(logical_or),
    ENTRY(logical_xor),
    ENTRY(lerp),
    ENTRY(addcmul),
    ENTRY(addcdiv),
    ENTRY(isclose),
    ENTRY(allclose),
    ENTRY(equal),
    {NULL, NULL},
};
