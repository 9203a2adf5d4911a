/* cuda/cuda_pointwise_ops.c: the ddpl_kernel glue of the elementwise CUDA kernels
 * (cuda_pointwise.cu, cuda_unary.cu, cuda_random.cu): reads tensor fields, builds the collapsed
 * operand geometry (cuda_pointwise.h) and the op scalars as the CPU kernels compute them, and
 * launches. Empty outputs launch nothing.
 * defines: cuda_register_pointwise. */
#include <math.h>
#include <string.h>

#include "cuda_pointwise.h"
#include "cuda_registry.h"
#include "kernel_abi/kernel_params.h"
#include "kernel_abi/nn_params.h"

/* g over ts[0] (the output) and its nops - 1 inputs, each right-aligned to the output. */
static void geom_of(cuda_pw_geom *g, int nops, ddpl_tensor *const *ts)
{
    int nd[CUDA_PW_MAX_OPS];
    const int64_t *sz[CUDA_PW_MAX_OPS], *st[CUDA_PW_MAX_OPS];
    for (int k = 0; k < nops; k++) {
        nd[k] = ts[k]->ndim;
        sz[k] = ts[k]->sizes;
        st[k] = ts[k]->strides;
    }
    cuda_pw_geom_init(g, nops, ts[0]->ndim, ts[0]->sizes, nd, sz, st);
}

/* ---- memory and creation ---- */
static int cuda_fill(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    DDPL_UNUSED(in);
    ddpl_tensor *o = out[0];
    if (ddpl_tensor_numel(o) == 0) return 0;
    /* the element's bytes exactly as the CPU writes them (rounding, clamping, bool) */
    unsigned char bytes[8] = {0};
    ddpl_store_f64(bytes, (ddpl_dtype)o->dtype, ((const ddpl_fill_params *)params)->value);
    uint64_t pattern = 0;
    size_t esz = ddpl_dtype_size((ddpl_dtype)o->dtype);
    for (size_t j = 0; j < esz; j++) pattern |= (uint64_t)bytes[j] << (8 * j);
    cuda_pw_geom g;
    geom_of(&g, 1, out);
    return cuda_pw_fill((int)esz, pattern, ddpl_data_ptr(o), &g);
}

static int cuda_copy(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    DDPL_UNUSED(params);
    ddpl_tensor *ops[2] = {out[0], in[0]};
    if (ddpl_tensor_numel(out[0]) == 0) return 0;
    cuda_pw_geom g;
    geom_of(&g, 2, ops);
    return cuda_pw_copy(out[0]->dtype, ddpl_data_ptr(out[0]), in[0]->dtype, ddpl_data_ptr(in[0]),
                        &g);
}

static int random_fill(ddpl_tensor **out, const void *params, int normal)
{
    const ddpl_random_params *p = params;
    ddpl_tensor *o = out[0];
    int64_t n = ddpl_tensor_numel(o);
    if (n == 0) return 0;
    if (!ddpl_tensor_is_contiguous(o)) /* the ops go through a contiguous temporary */
        return ddpl_error("%s: cuda kernel expects a contiguous output",
                          normal ? "normal_" : "uniform_");
    return cuda_pw_random(normal, o->dtype, ddpl_data_ptr(o), n, p->seed, p->offset, p->a, p->b);
}
static int cuda_uniform(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    DDPL_UNUSED(in);
    return random_fill(out, params, 0);
}
static int cuda_normal(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    DDPL_UNUSED(in);
    return random_fill(out, params, 1);
}

static int cuda_arange(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    DDPL_UNUSED(in);
    const ddpl_arange_params *p = params;
    ddpl_tensor *o = out[0];
    int64_t n = ddpl_tensor_numel(o);
    if (n == 0) return 0;
    return cuda_pw_arange(o->dtype, ddpl_data_ptr(o), n, o->ndim ? o->strides[0] : 1, p->start,
                          p->step);
}

/* ---- binary ---- */
static int binary(const char *name, cuda_pw_binop op, ddpl_tensor **out, ddpl_tensor **in,
                  double alpha)
{
    ddpl_tensor *o = out[0], *ops[3] = {out[0], in[0], in[1]};
    ddpl_dtype dt = (ddpl_dtype)in[0]->dtype;
    if (in[1]->dtype != dt)
        return ddpl_error("%s: cuda kernel expects inputs of one dtype, got %s and %s", name,
                          ddpl_dtype_name(dt), ddpl_dtype_name((ddpl_dtype)in[1]->dtype));
    if (op == CUDA_PW_DIV && ddpl_dtype_is_integral(dt)) /* as the CPU kernel */
        return ddpl_error("%s: not implemented for dtype %s", name, ddpl_dtype_name(dt));
    if (ddpl_tensor_numel(o) == 0) return 0;
    cuda_pw_geom g;
    geom_of(&g, 3, ops);
    cuda_pw_scalars s = {.d0 = alpha, .f0 = (float)alpha, .i0 = (int64_t)alpha};
    return cuda_pw_binary(name, op, dt, o->dtype, ddpl_data_ptr(o), ddpl_data_ptr(in[0]),
                          ddpl_data_ptr(in[1]), &g, &s);
}

static double alpha_of(const void *params)
{
    return params ? ((const ddpl_alpha_params *)params)->alpha : 1.0;
}

#define BINARY_ENTRY(fn, name, OP, ALPHA)                                                          \
    static int fn(ddpl_tensor **o, ddpl_tensor **i, const void *p)                                 \
    {                                                                                              \
        DDPL_UNUSED(p);                                                                            \
        return binary(name, OP, o, i, ALPHA);                                                      \
    }
BINARY_ENTRY(cuda_add, "add", CUDA_PW_ADD, alpha_of(p))
BINARY_ENTRY(cuda_sub, "sub", CUDA_PW_SUB, alpha_of(p))
BINARY_ENTRY(cuda_mul, "mul", CUDA_PW_MUL, 1.0)
BINARY_ENTRY(cuda_div, "div", CUDA_PW_DIV, 1.0)
BINARY_ENTRY(cuda_pow, "pow", CUDA_PW_POW, 1.0)
BINARY_ENTRY(cuda_maximum, "maximum", CUDA_PW_MAXIMUM, 1.0)
BINARY_ENTRY(cuda_minimum, "minimum", CUDA_PW_MINIMUM, 1.0)
BINARY_ENTRY(cuda_eq, "eq", CUDA_PW_EQ, 1.0)
BINARY_ENTRY(cuda_ne, "ne", CUDA_PW_NE, 1.0)
BINARY_ENTRY(cuda_lt, "lt", CUDA_PW_LT, 1.0)
BINARY_ENTRY(cuda_le, "le", CUDA_PW_LE, 1.0)
BINARY_ENTRY(cuda_gt, "gt", CUDA_PW_GT, 1.0)
BINARY_ENTRY(cuda_ge, "ge", CUDA_PW_GE, 1.0)

/* out <- cond ? x : y; a byte-wise select, so only the element size matters */
static int cuda_where(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    DDPL_UNUSED(params);
    ddpl_tensor *o = out[0], *ops[4] = {out[0], in[0], in[1], in[2]};
    if (ddpl_dtype_size((ddpl_dtype)in[0]->dtype) != 1 ||
        ddpl_dtype_size((ddpl_dtype)in[1]->dtype) != ddpl_dtype_size((ddpl_dtype)o->dtype) ||
        ddpl_dtype_size((ddpl_dtype)in[2]->dtype) != ddpl_dtype_size((ddpl_dtype)o->dtype))
        return ddpl_error(
            "where: cuda kernel expects a bool condition and values of the output "
            "dtype %s, got %s, %s and %s",
            ddpl_dtype_name((ddpl_dtype)o->dtype), ddpl_dtype_name((ddpl_dtype)in[0]->dtype),
            ddpl_dtype_name((ddpl_dtype)in[1]->dtype), ddpl_dtype_name((ddpl_dtype)in[2]->dtype));
    if (ddpl_tensor_numel(o) == 0) return 0;
    cuda_pw_geom g;
    geom_of(&g, 4, ops);
    return cuda_pw_where((int)ddpl_dtype_size((ddpl_dtype)o->dtype), ddpl_data_ptr(o),
                         ddpl_data_ptr(in[0]), ddpl_data_ptr(in[1]), ddpl_data_ptr(in[2]), &g);
}

/* ---- unary ---- */
static int unary(const char *name, cuda_pw_unop op, ddpl_tensor **out, ddpl_tensor **in,
                 const cuda_pw_scalars *s)
{
    ddpl_tensor *o = out[0], *ops[2] = {out[0], in[0]};
    ddpl_dtype dt = (ddpl_dtype)in[0]->dtype;
    bool any_dtype = op == CUDA_PW_NEG || op == CUDA_PW_ABS || op == CUDA_PW_SIGN ||
                     op == CUDA_PW_RELU || op == CUDA_PW_CLAMP;
    if (!any_dtype && ddpl_dtype_is_integral(dt)) /* as the CPU kernel */
        return ddpl_error("%s: not implemented for dtype %s", name, ddpl_dtype_name(dt));
    if (o->dtype != dt)
        return ddpl_error("%s: cuda kernel expects a %s output, got %s", name, ddpl_dtype_name(dt),
                          ddpl_dtype_name((ddpl_dtype)o->dtype));
    if (ddpl_tensor_numel(o) == 0) return 0;
    cuda_pw_geom g;
    geom_of(&g, 2, ops);
    return cuda_pw_unary(name, op, dt, ddpl_data_ptr(o), ddpl_data_ptr(in[0]), &g, s);
}

#define UNARY_ENTRY(fn, name, OP)                                                                  \
    static int fn(ddpl_tensor **o, ddpl_tensor **i, const void *p)                                 \
    {                                                                                              \
        DDPL_UNUSED(p);                                                                            \
        cuda_pw_scalars s = {0};                                                                   \
        return unary(name, OP, o, i, &s);                                                          \
    }
UNARY_ENTRY(cuda_neg, "neg", CUDA_PW_NEG)
UNARY_ENTRY(cuda_exp, "exp", CUDA_PW_EXP)
UNARY_ENTRY(cuda_log, "log", CUDA_PW_LOG)
UNARY_ENTRY(cuda_sqrt, "sqrt", CUDA_PW_SQRT)
UNARY_ENTRY(cuda_rsqrt, "rsqrt", CUDA_PW_RSQRT)
UNARY_ENTRY(cuda_abs, "abs", CUDA_PW_ABS)
UNARY_ENTRY(cuda_sign, "sign", CUDA_PW_SIGN)
UNARY_ENTRY(cuda_sin, "sin", CUDA_PW_SIN)
UNARY_ENTRY(cuda_cos, "cos", CUDA_PW_COS)
UNARY_ENTRY(cuda_tanh, "tanh", CUDA_PW_TANH)
UNARY_ENTRY(cuda_sigmoid, "sigmoid", CUDA_PW_SIGMOID)
UNARY_ENTRY(cuda_relu, "relu", CUDA_PW_RELU)
UNARY_ENTRY(cuda_silu, "silu", CUDA_PW_SILU)

static bool gelu_tanh(const void *params)
{
    return params && ((const ddpl_gelu_params *)params)->tanh_approximation;
}

static int cuda_gelu(ddpl_tensor **o, ddpl_tensor **i, const void *p)
{
    cuda_pw_scalars s = {0};
    return unary("gelu", gelu_tanh(p) ? CUDA_PW_GELU_TANH : CUDA_PW_GELU_ERF, o, i, &s);
}

/* bounds as cpu_clamp: absent ones are +-inf (the int64 extremes for integers); the ops layer
 * only passes integral bounds for integer dtypes */
static int cuda_clamp(ddpl_tensor **o, ddpl_tensor **i, const void *params)
{
    const ddpl_clamp_params *p = params;
    cuda_pw_scalars s;
    s.d0 = p->has_min ? p->min : -INFINITY;
    s.d1 = p->has_max ? p->max : INFINITY;
    s.f0 = (float)s.d0;
    s.f1 = (float)s.d1;
    /* saturating, as cpu_clamp: a float tensor's bound may be +-inf or NaN (min = inf) */
    s.i0 = p->has_min ? ddpl_f64_to_i64(p->min) : INT64_MIN;
    s.i1 = p->has_max ? ddpl_f64_to_i64(p->max) : INT64_MAX;
    return unary("clamp", CUDA_PW_CLAMP, o, i, &s);
}

/* ---- the functions of math_fns.def ---- */
static int cuda_unary_fn(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_unary_fn_params *p = params;
    ddpl_tensor *o = out[0], *ops[2] = {out[0], in[0]};
    if (o->dtype != in[0]->dtype)
        return ddpl_error("unary_fn: cuda kernel expects a %s output, got %s",
                          ddpl_dtype_name((ddpl_dtype)in[0]->dtype),
                          ddpl_dtype_name((ddpl_dtype)o->dtype));
    if (ddpl_tensor_numel(o) == 0) return 0;
    cuda_pw_geom g;
    geom_of(&g, 2, ops);
    cuda_pw_scalars s = {.d0 = p->p0, .d1 = p->p1, .f0 = (float)p->p0, .f1 = (float)p->p1};
    return cuda_pw_unary_fn(ddpl_unary_fn_name(p->fn), p->fn, o->dtype, ddpl_data_ptr(o),
                            ddpl_data_ptr(in[0]), &g, &s);
}

static int cuda_binary_fn(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_binary_fn_params *p = params;
    ddpl_tensor *o = out[0], *ops[3] = {out[0], in[0], in[1]};
    const char *name = ddpl_binary_fn_name(p->fn);
    if (in[1]->dtype != in[0]->dtype || o->dtype != in[0]->dtype)
        return ddpl_error("%s: cuda kernel expects one dtype, got %s, %s and output %s", name,
                          ddpl_dtype_name((ddpl_dtype)in[0]->dtype),
                          ddpl_dtype_name((ddpl_dtype)in[1]->dtype),
                          ddpl_dtype_name((ddpl_dtype)o->dtype));
    if (ddpl_tensor_numel(o) == 0) return 0;
    cuda_pw_geom g;
    geom_of(&g, 3, ops);
    return cuda_pw_binary_fn(name, p->fn, o->dtype, ddpl_data_ptr(o), ddpl_data_ptr(in[0]),
                             ddpl_data_ptr(in[1]), &g);
}

/* ---- fused activation backward: in[0] = grad, in[1] = saved ---- */
static int backward(const char *name, cuda_pw_bwop op, ddpl_tensor **out, ddpl_tensor **in)
{
    ddpl_tensor *o = out[0], *ops[3] = {out[0], in[0], in[1]};
    ddpl_dtype dt = (ddpl_dtype)in[0]->dtype;
    if (!ddpl_dtype_is_floating(dt)) /* as the CPU kernel */
        return ddpl_error("%s: not implemented for dtype %s", name, ddpl_dtype_name(dt));
    if (in[1]->dtype != dt || o->dtype != dt)
        return ddpl_error("%s: cuda kernel expects one dtype, got grad %s, saved %s, output %s",
                          name, ddpl_dtype_name(dt), ddpl_dtype_name((ddpl_dtype)in[1]->dtype),
                          ddpl_dtype_name((ddpl_dtype)o->dtype));
    if (ddpl_tensor_numel(o) == 0) return 0;
    cuda_pw_geom g;
    geom_of(&g, 3, ops);
    return cuda_pw_backward(name, op, dt, ddpl_data_ptr(o), ddpl_data_ptr(in[0]),
                            ddpl_data_ptr(in[1]), &g);
}

#define BACKWARD_ENTRY(fn, name, OP)                                                               \
    static int fn(ddpl_tensor **o, ddpl_tensor **i, const void *p)                                 \
    {                                                                                              \
        DDPL_UNUSED(p);                                                                            \
        return backward(name, OP, o, i);                                                           \
    }
BACKWARD_ENTRY(cuda_relu_backward, "relu_backward", CUDA_PW_RELU_BW)
BACKWARD_ENTRY(cuda_sigmoid_backward, "sigmoid_backward", CUDA_PW_SIGMOID_BW)
BACKWARD_ENTRY(cuda_tanh_backward, "tanh_backward", CUDA_PW_TANH_BW)
BACKWARD_ENTRY(cuda_silu_backward, "silu_backward", CUDA_PW_SILU_BW)

static int cuda_gelu_backward(ddpl_tensor **o, ddpl_tensor **i, const void *p)
{
    return backward("gelu_backward", gelu_tanh(p) ? CUDA_PW_GELU_TANH_BW : CUDA_PW_GELU_ERF_BW, o,
                    i);
}

void cuda_register_pointwise(ddpl_kernel *k)
{
    k[DDPL_OP_FILL] = cuda_fill;
    k[DDPL_OP_COPY] = cuda_copy;
    k[DDPL_OP_UNIFORM] = cuda_uniform;
    k[DDPL_OP_NORMAL] = cuda_normal;
    k[DDPL_OP_ARANGE] = cuda_arange;
    k[DDPL_OP_ADD] = cuda_add;
    k[DDPL_OP_UNARY_FN] = cuda_unary_fn;
    k[DDPL_OP_BINARY_FN] = cuda_binary_fn;
    k[DDPL_OP_SUB] = cuda_sub;
    k[DDPL_OP_MUL] = cuda_mul;
    k[DDPL_OP_DIV] = cuda_div;
    k[DDPL_OP_POW] = cuda_pow;
    k[DDPL_OP_MAXIMUM] = cuda_maximum;
    k[DDPL_OP_MINIMUM] = cuda_minimum;
    k[DDPL_OP_EQ] = cuda_eq;
    k[DDPL_OP_NE] = cuda_ne;
    k[DDPL_OP_LT] = cuda_lt;
    k[DDPL_OP_LE] = cuda_le;
    k[DDPL_OP_GT] = cuda_gt;
    k[DDPL_OP_GE] = cuda_ge;
    k[DDPL_OP_WHERE] = cuda_where;
    k[DDPL_OP_NEG] = cuda_neg;
    k[DDPL_OP_EXP] = cuda_exp;
    k[DDPL_OP_LOG] = cuda_log;
    k[DDPL_OP_SQRT] = cuda_sqrt;
    k[DDPL_OP_RSQRT] = cuda_rsqrt;
    k[DDPL_OP_ABS] = cuda_abs;
    k[DDPL_OP_SIGN] = cuda_sign;
    k[DDPL_OP_SIN] = cuda_sin;
    k[DDPL_OP_COS] = cuda_cos;
    k[DDPL_OP_TANH] = cuda_tanh;
    k[DDPL_OP_SIGMOID] = cuda_sigmoid;
    k[DDPL_OP_RELU] = cuda_relu;
    k[DDPL_OP_GELU] = cuda_gelu;
    k[DDPL_OP_SILU] = cuda_silu;
    k[DDPL_OP_CLAMP] = cuda_clamp;
    k[DDPL_OP_RELU_BACKWARD] = cuda_relu_backward;
    k[DDPL_OP_GELU_BACKWARD] = cuda_gelu_backward;
    k[DDPL_OP_SILU_BACKWARD] = cuda_silu_backward;
    k[DDPL_OP_SIGMOID_BACKWARD] = cuda_sigmoid_backward;
    k[DDPL_OP_TANH_BACKWARD] = cuda_tanh_backward;
}
