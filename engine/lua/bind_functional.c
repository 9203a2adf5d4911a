/* lua/bind_functional.c: ddpl.nn.functional (F.*) over the C API's neural-network functions.
 * defines: lb_functional (linear conv2d conv_transpose2d max_pool2d avg_pool2d
 *          adaptive_avg_pool2d batch_norm layer_norm embedding dropout softmax log_softmax
 *          cross_entropy nll_loss mse_loss ctc_loss relu gelu silu sigmoid tanh
 *          scaled_dot_product_attention, _fused_lstm_cell, _fused_gru_cell, _lstm_layer,
 *          _gru_layer),
 *          lb_functional_methods
 *          (x:softmax, x:log_softmax).
 *
 * Arguments follow PyTorch: its positional parameters in its order, and any parameter by name
 * in a trailing options table, e.g. F.conv2d(x, w, b, {stride=2, padding=1}) or
 * F.cross_entropy(logits, target, {label_smoothing=0.1}). Sizes of 2-D ops accept an int or an
 * {h, w} pair. Options PyTorch has but the engine does not implement (dilation, padding_idx,
 * dropout_p in attention, ...) raise an error naming them rather than being ignored. Living in C
 * keeps a forward pass free of Lua-side option parsing. */
#include <string.h>

#include "binding.h"

/* Fills the box from the C call and returns it (the usual tail of every function here). */
#define RETURN_RESULT(L, fname, expr)                                                              \
    do {                                                                                           \
        lb_box *box_ = lb_newbox(L);                                                               \
        box_->t = (expr);                                                                          \
        return lb_finish_in(L, box_, fname);                                                       \
    } while (0)

/* Errors for PyTorch options that must keep their default here. */
static void unsupported(lua_State *L, int idx, const char *fname, const char *name, bool ok)
{
    if (idx && !ok) luaL_error(L, "%s: %s is not supported by this engine", fname, name);
}

/* "[2,3]", as the engine writes shapes */
static const char *sizes_str(int n, const int64_t *sizes, char *buf, size_t cap)
{
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, i ? ",%lld" : "%lld", (long long)sizes[i]);
    if (used < cap) snprintf(buf + used, cap - used, "]");
    return buf;
}

/* reduction='mean' | 'sum' | 'none'; another string is named in the error (PyTorch: "avg is not
 * a valid value for reduction"), another type by its type */
static ddpl_reduction reduction(lua_State *L, int idx, const char *fname)
{
    if (!idx) return DDPL_REDUCTION_MEAN;
    if (lua_type(L, idx) != LUA_TSTRING)
        lb_opterror(L, idx, fname, "reduction", "'mean', 'sum' or 'none'");
    const char *s = lua_tostring(L, idx);
    if (strcmp(s, "mean") == 0) return DDPL_REDUCTION_MEAN;
    if (strcmp(s, "sum") == 0) return DDPL_REDUCTION_SUM;
    if (strcmp(s, "none") == 0) return DDPL_REDUCTION_NONE;
    luaL_error(L, "%s: expected 'mean', 'sum' or 'none' for 'reduction', got '%s'", fname, s);
    __builtin_unreachable();
}

static const char *const linear_opts[] = {"input", "weight", "bias", NULL};

static int f_linear(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "linear", linear_opts);
    ddpl_tensor *x = lb_check(L, 1, "linear");
    ddpl_tensor *w = lb_check(L, 2, "linear");
    ddpl_tensor *b = lb_opt(L, lb_arg(L, &a, 3, "bias"), "linear");
    RETURN_RESULT(L, "linear", ddpl_linear(x, w, b));
}

/* groups: an int for the engine; a value past int is named, not truncated (2^63 - 1 gave -1) */
static int groups_arg(lua_State *L, int idx, const char *fname)
{
    int64_t g = lb_int(L, idx, fname, "groups", 1);
    if (g < 1 || g > INT32_MAX)
        luaL_error(L, "%s: groups must be >= 1 and at most 2147483647, got %I", fname,
                   (lua_Integer)g);
    return (int)g;
}

static const char *const conv_opts[] = {"bias", "stride", "padding", "dilation", "groups", NULL};

static int f_conv2d(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "conv2d", conv_opts);
    ddpl_tensor *x = lb_check(L, 1, "conv2d");
    ddpl_tensor *w = lb_check(L, 2, "conv2d");
    ddpl_tensor *b = lb_opt(L, lb_arg(L, &a, 3, "bias"), "conv2d");
    int stride[2], padding[2], dilation[2];
    lb_pair(L, lb_arg(L, &a, 4, "stride"), "conv2d", "stride", 1, stride);
    lb_pair(L, lb_arg(L, &a, 6, "dilation"), "conv2d", "dilation", 1, dilation);
    int groups = groups_arg(L, lb_arg(L, &a, 7, "groups"), "conv2d");
    int pi = lb_arg(L, &a, 5, "padding");
    if (pi && lua_type(L, pi) == LUA_TSTRING) {
        /* 'valid' is no padding; 'same' keeps the size at stride 1, when it can be symmetric */
        const char *mode = lua_tostring(L, pi);
        padding[0] = padding[1] = 0;
        if (strcmp(mode, "same") == 0) {
            if (stride[0] != 1 || stride[1] != 1)
                return luaL_error(L, "conv2d: padding='same' needs stride 1");
            if (ddpl_tensor_ndim(w) != 4) return luaL_error(L, "conv2d: weight must be 4-D");
            for (int i = 0; i < 2; i++) {
                int64_t total = dilation[i] * (ddpl_tensor_size(w, 2 + i) - 1);
                if (total % 2)
                    return luaL_error(L, "conv2d: padding='same' with an even kernel extent "
                                         "needs asymmetric padding, which is not supported");
                padding[i] = (int)(total / 2);
            }
        } else if (strcmp(mode, "valid") != 0) {
            return lb_opterror(L, pi, "conv2d", "padding", "an int, a pair, 'same' or 'valid'");
        }
    } else {
        lb_pair(L, pi, "conv2d", "padding", 0, padding);
    }
    RETURN_RESULT(L, "conv2d", ddpl_conv2d(x, w, b, stride, padding, dilation, groups));
}

static const char *const conv_transpose_opts[] = {"bias",   "stride",   "padding", "output_padding",
                                                  "groups", "dilation", NULL};

/* F.conv_transpose2d(x, w [, bias, stride, padding, output_padding, groups, dilation]):
 * PyTorch's positional order (groups before dilation, unlike conv2d) */
static int f_conv_transpose2d(lua_State *L)
{
    static const char *fname = "conv_transpose2d";
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, conv_transpose_opts);
    ddpl_tensor *x = lb_check(L, 1, fname);
    ddpl_tensor *w = lb_check(L, 2, fname);
    ddpl_tensor *b = lb_opt(L, lb_arg(L, &a, 3, "bias"), fname);
    int stride[2], padding[2], output_padding[2], dilation[2];
    lb_pair(L, lb_arg(L, &a, 4, "stride"), fname, "stride", 1, stride);
    lb_pair(L, lb_arg(L, &a, 5, "padding"), fname, "padding", 0, padding);
    lb_pair(L, lb_arg(L, &a, 6, "output_padding"), fname, "output_padding", 0, output_padding);
    int groups = groups_arg(L, lb_arg(L, &a, 7, "groups"), fname);
    lb_pair(L, lb_arg(L, &a, 8, "dilation"), fname, "dilation", 1, dilation);
    RETURN_RESULT(
        L, fname,
        ddpl_conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation));
}

static const char *const max_pool_opts[] = {"kernel_size", "stride",         "padding", "dilation",
                                            "ceil_mode",   "return_indices", NULL};

static int f_max_pool2d(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "max_pool2d", max_pool_opts);
    ddpl_tensor *x = lb_check(L, 1, "max_pool2d");
    int kernel[2], stride[2], padding[2], dilation[2];
    int ki = lb_arg(L, &a, 2, "kernel_size");
    if (!ki) return luaL_error(L, "max_pool2d: kernel_size is required");
    lb_pair(L, ki, "max_pool2d", "kernel_size", 1, kernel);
    lb_pair(L, lb_arg(L, &a, 3, "stride"), "max_pool2d", "stride", 0, stride);
    if (!lb_arg(L, &a, 3, "stride")) memcpy(stride, kernel, sizeof stride); /* PyTorch default */
    lb_pair(L, lb_arg(L, &a, 4, "padding"), "max_pool2d", "padding", 0, padding);
    lb_pair(L, lb_arg(L, &a, 5, "dilation"), "max_pool2d", "dilation", 1, dilation);
    unsupported(L, 1, "max_pool2d", "dilation other than 1", dilation[0] == 1 && dilation[1] == 1);
    bool ceil_mode = lb_bool(L, lb_arg(L, &a, 6, "ceil_mode"), "max_pool2d", "ceil_mode", false);
    int ri = lb_arg(L, &a, 7, "return_indices");
    unsupported(L, ri, "max_pool2d", "return_indices=true",
                !lb_bool(L, ri, "max_pool2d", "return_indices", false));
    RETURN_RESULT(L, "max_pool2d", ddpl_max_pool2d_ex(x, kernel, stride, padding, ceil_mode));
}

static const char *const avg_pool_opts[] = {
    "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override", NULL};

static int f_avg_pool2d(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "avg_pool2d", avg_pool_opts);
    ddpl_tensor *x = lb_check(L, 1, "avg_pool2d");
    int kernel[2], stride[2], padding[2];
    int ki = lb_arg(L, &a, 2, "kernel_size");
    if (!ki) return luaL_error(L, "avg_pool2d: kernel_size is required");
    lb_pair(L, ki, "avg_pool2d", "kernel_size", 1, kernel);
    int si = lb_arg(L, &a, 3, "stride");
    lb_pair(L, si, "avg_pool2d", "stride", 0, stride);
    if (!si) memcpy(stride, kernel, sizeof stride);
    lb_pair(L, lb_arg(L, &a, 4, "padding"), "avg_pool2d", "padding", 0, padding);
    bool ceil_mode = lb_bool(L, lb_arg(L, &a, 5, "ceil_mode"), "avg_pool2d", "ceil_mode", false);
    bool count_pad =
        lb_bool(L, lb_arg(L, &a, 6, "count_include_pad"), "avg_pool2d", "count_include_pad", true);
    /* divisor_override: PyTorch's None is absent (or nil); 0 is refused as PyTorch does */
    int di = lb_arg(L, &a, 7, "divisor_override");
    int64_t divisor = lb_int(L, di, "avg_pool2d", "divisor_override", 0);
    if (di && (divisor == 0 || divisor < INT32_MIN || divisor > INT32_MAX))
        return luaL_error(L, "avg_pool2d: divisor_override must be a non-zero int, got %I",
                          (lua_Integer)divisor);
    RETURN_RESULT(
        L, "avg_pool2d",
        ddpl_avg_pool2d_ex(x, kernel, stride, padding, ceil_mode, count_pad, (int)divisor));
}

static const char *const adaptive_opts[] = {"output_size", NULL};

static int f_adaptive_avg_pool2d(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "adaptive_avg_pool2d", adaptive_opts);
    ddpl_tensor *x = lb_check(L, 1, "adaptive_avg_pool2d");
    int oi = lb_arg(L, &a, 2, "output_size");
    if (!oi) return luaL_error(L, "adaptive_avg_pool2d: output_size is required");
    int out[2];
    lb_pair(L, oi, "adaptive_avg_pool2d", "output_size", 1, out);
    RETURN_RESULT(L, "adaptive_avg_pool2d", ddpl_adaptive_avg_pool2d(x, out[0], out[1]));
}

static const char *const bn_opts[] = {"running_mean", "running_var", "weight", "bias",
                                      "training",     "momentum",    "eps",    NULL};

/* F.batch_norm(x, running_mean, running_var [, weight, bias, training, momentum, eps]) */
static int f_batch_norm(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "batch_norm", bn_opts);
    ddpl_tensor *x = lb_check(L, 1, "batch_norm");
    ddpl_tensor *rm = lb_opt(L, lb_arg(L, &a, 2, "running_mean"), "batch_norm");
    ddpl_tensor *rv = lb_opt(L, lb_arg(L, &a, 3, "running_var"), "batch_norm");
    ddpl_tensor *w = lb_opt(L, lb_arg(L, &a, 4, "weight"), "batch_norm");
    ddpl_tensor *b = lb_opt(L, lb_arg(L, &a, 5, "bias"), "batch_norm");
    bool training = lb_bool(L, lb_arg(L, &a, 6, "training"), "batch_norm", "training", false);
    double momentum = lb_num(L, lb_arg(L, &a, 7, "momentum"), "batch_norm", "momentum", 0.1);
    double eps = lb_num(L, lb_arg(L, &a, 8, "eps"), "batch_norm", "eps", 1e-5);
    RETURN_RESULT(L, "batch_norm", ddpl_batch_norm(x, rm, rv, w, b, training, momentum, eps));
}

static const char *const ln_opts[] = {"normalized_shape", "weight", "bias", "eps", NULL};

/* F.layer_norm(x, normalized_shape [, weight, bias, eps]); normalized_shape an int or a list
 * that must equal x's trailing sizes */
static int f_layer_norm(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "layer_norm", ln_opts);
    ddpl_tensor *x = lb_check(L, 1, "layer_norm");
    int si = lb_arg(L, &a, 2, "normalized_shape");
    if (!si) return luaL_error(L, "layer_norm: normalized_shape is required");
    int64_t shape[DDPL_MAX_DIMS];
    int n = 1;
    if (lua_type(L, si) == LUA_TNUMBER)
        shape[0] = lb_int(L, si, "layer_norm", "normalized_shape", 0);
    else
        n = lb_sizes_table(L, si, "layer_norm", "normalized_shape", shape);
    int nd = ddpl_tensor_ndim(x);
    bool ok = n >= 1 && n <= nd;
    for (int i = 0; ok && i < n; i++) ok = ddpl_tensor_size(x, nd - n + i) == shape[i];
    if (!ok) {
        char want[160], have[160];
        return luaL_error(L,
                          "layer_norm: normalized_shape %s does not match the trailing sizes "
                          "of the input of shape %s",
                          sizes_str(n, shape, want, sizeof want),
                          sizes_str(nd, ddpl_tensor_sizes(x), have, sizeof have));
    }
    ddpl_tensor *w = lb_opt(L, lb_arg(L, &a, 3, "weight"), "layer_norm");
    ddpl_tensor *b = lb_opt(L, lb_arg(L, &a, 4, "bias"), "layer_norm");
    double eps = lb_num(L, lb_arg(L, &a, 5, "eps"), "layer_norm", "eps", 1e-5);
    RETURN_RESULT(L, "layer_norm", ddpl_layer_norm(x, n, w, b, eps));
}

static const char *const emb_opts[] = {"padding_idx",        "max_norm", "norm_type",
                                       "scale_grad_by_freq", "sparse",   NULL};

static int f_embedding(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "embedding", emb_opts);
    ddpl_tensor *idx = lb_check(L, 1, "embedding");
    ddpl_tensor *w = lb_check(L, 2, "embedding");
    unsupported(L, lb_arg(L, &a, 3, "padding_idx"), "embedding", "padding_idx", false);
    unsupported(L, lb_arg(L, &a, 4, "max_norm"), "embedding", "max_norm", false);
    int si = lb_arg(L, &a, 6, "scale_grad_by_freq");
    unsupported(L, si, "embedding", "scale_grad_by_freq",
                !lb_bool(L, si, "embedding", "scale_grad_by_freq", false));
    int spi = lb_arg(L, &a, 7, "sparse");
    unsupported(L, spi, "embedding", "sparse gradients",
                !lb_bool(L, spi, "embedding", "sparse", false));
    RETURN_RESULT(L, "embedding", ddpl_embedding(idx, w));
}

/* The in-place form's result: x itself (argument 1), as PyTorch returns it. */
static int inplace_result(lua_State *L, int rc, const char *fname)
{
    if (rc < 0) lb_error_in(L, fname);
    lua_pushvalue(L, 1);
    return 1;
}

static const char *const dropout_opts[] = {"p", "training", "inplace", NULL};

/* F.dropout(x [, p=0.5 [, training=true]]) */
static int f_dropout(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "dropout", dropout_opts);
    ddpl_tensor *x = lb_check(L, 1, "dropout");
    double p = lb_num(L, lb_arg(L, &a, 2, "p"), "dropout", "p", 0.5);
    bool training = lb_bool(L, lb_arg(L, &a, 3, "training"), "dropout", "training", true);
    if (lb_bool(L, lb_arg(L, &a, 4, "inplace"), "dropout", "inplace", false))
        return inplace_result(L, ddpl_dropout_(x, p, training), "dropout");
    RETURN_RESULT(L, "dropout", ddpl_dropout(x, p, training));
}

static const char *const softmax_opts[] = {"dim", "dtype", NULL};

/* F.softmax(x, dim [, {dtype=}]): the input is cast first when a dtype is given */
static int softmax_like(lua_State *L, const char *fname, ddpl_tensor *(*fn)(ddpl_tensor *, int))
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, softmax_opts);
    ddpl_tensor *x = lb_check(L, 1, fname);
    int di = lb_arg(L, &a, 2, "dim");
    if (!di) return luaL_error(L, "%s: dim is required", fname);
    int dim = (int)lb_int(L, di, fname, "dim", 0);
    int ti = lb_arg(L, &a, 3, "dtype");
    if (ti) {
        ddpl_dtype dt = lb_dtype(L, ti, fname);
        lb_box *cast = lb_newbox(L); /* holds the cast input until the result exists */
        cast->t = ddpl_to(x, dt, ddpl_tensor_device(x));
        lb_finish(L, cast);
        x = cast->t;
    }
    RETURN_RESULT(L, fname, fn(x, dim));
}

static int f_softmax(lua_State *L)
{
    return softmax_like(L, "softmax", ddpl_softmax);
}
static int f_log_softmax(lua_State *L)
{
    return softmax_like(L, "log_softmax", ddpl_log_softmax);
}

static const char *const ce_opts[] = {"weight", "ignore_index", "reduction", "label_smoothing",
                                      NULL};

/* F.cross_entropy(logits, target [, weight] [, {ignore_index=-100, reduction='mean',
 * label_smoothing=0}]) */
static int f_cross_entropy(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "cross_entropy", ce_opts);
    ddpl_tensor *x = lb_check(L, 1, "cross_entropy");
    ddpl_tensor *target = lb_check(L, 2, "cross_entropy");
    ddpl_tensor *w = lb_opt(L, lb_arg(L, &a, 3, "weight"), "cross_entropy");
    int64_t ignore =
        lb_int(L, lb_arg(L, &a, 0, "ignore_index"), "cross_entropy", "ignore_index", -100);
    ddpl_reduction red = reduction(L, lb_arg(L, &a, 0, "reduction"), "cross_entropy");
    double smoothing =
        lb_num(L, lb_arg(L, &a, 0, "label_smoothing"), "cross_entropy", "label_smoothing", 0.0);
    RETURN_RESULT(L, "cross_entropy", ddpl_cross_entropy(x, target, w, red, ignore, smoothing));
}

static const char *const nll_opts[] = {"weight", "ignore_index", "reduction", NULL};

static int f_nll_loss(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "nll_loss", nll_opts);
    ddpl_tensor *x = lb_check(L, 1, "nll_loss");
    ddpl_tensor *target = lb_check(L, 2, "nll_loss");
    ddpl_tensor *w = lb_opt(L, lb_arg(L, &a, 3, "weight"), "nll_loss");
    int64_t ignore = lb_int(L, lb_arg(L, &a, 0, "ignore_index"), "nll_loss", "ignore_index", -100);
    ddpl_reduction red = reduction(L, lb_arg(L, &a, 0, "reduction"), "nll_loss");
    RETURN_RESULT(L, "nll_loss", ddpl_nll_loss(x, target, w, red, ignore));
}

static const char *const mse_opts[] = {"reduction", NULL};

static int f_mse_loss(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "mse_loss", mse_opts);
    ddpl_tensor *x = lb_check(L, 1, "mse_loss");
    ddpl_tensor *target = lb_check(L, 2, "mse_loss");
    ddpl_reduction red = reduction(L, lb_arg(L, &a, 0, "reduction"), "mse_loss");
    RETURN_RESULT(L, "mse_loss", ddpl_mse_loss(x, target, red));
}

static const char *const ctc_opts[] = {"input_lengths", "target_lengths", "blank",
                                       "reduction",     "zero_infinity",  NULL};

/* ctc_loss's lengths at idx: an integer tensor, or a Lua list of integers (or one integer, for
 * an unbatched input) made a CPU int64 tensor (the op reads lengths on the host whatever their
 * device), owned by the box pushed on the stack. */
static ddpl_tensor *ctc_lengths(lua_State *L, int idx, const char *name)
{
    if (!idx) luaL_error(L, "ctc_loss: %s is required", name);
    if (lua_type(L, idx) == LUA_TUSERDATA) return lb_check(L, idx, "ctc_loss");
    if (lua_type(L, idx) != LUA_TTABLE && !lua_isinteger(L, idx))
        lb_opterror(L, idx, "ctc_loss", name, "a list of integers or an integer tensor");
    lua_Integer n = lua_type(L, idx) == LUA_TTABLE ? luaL_len(L, idx) : 1;
    if (n < 0 || n > (1 << 24)) luaL_error(L, "ctc_loss: %s has too many values", name);
    lb_box *box = lb_newbox(L);
    int64_t sizes[1] = {n};
    box->t = ddpl_empty(1, sizes, DDPL_INT64, (ddpl_device){DDPL_CPU, 0});
    if (!box->t) lb_error_in(L, "ctc_loss");
    int64_t *v = ddpl_tensor_data(box->t);
    for (lua_Integer i = 0; i < n; i++) {
        if (lua_type(L, idx) == LUA_TTABLE)
            lua_geti(L, idx, i + 1);
        else
            lua_pushvalue(L, idx);
        if (!lua_isinteger(L, -1))
            luaL_error(L, "ctc_loss: %s[%d] must be an integer, got %s", name, (int)i + 1,
                       luaL_typename(L, -1));
        v[i] = (int64_t)lua_tointeger(L, -1);
        lua_pop(L, 1);
    }
    return box->t;
}

/* F.ctc_loss(log_probs, targets, input_lengths, target_lengths [, blank=0, reduction='mean',
 * zero_infinity=false]): lengths as Lua lists or integer tensors */
static int f_ctc_loss(lua_State *L)
{
    static const char *fname = "ctc_loss";
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, ctc_opts);
    ddpl_tensor *lp = lb_check(L, 1, fname);
    ddpl_tensor *targets = lb_check(L, 2, fname);
    int ii = lb_arg(L, &a, 3, "input_lengths"), ti = lb_arg(L, &a, 4, "target_lengths");
    int64_t blank = lb_int(L, lb_arg(L, &a, 5, "blank"), fname, "blank", 0);
    ddpl_reduction red = reduction(L, lb_arg(L, &a, 6, "reduction"), fname);
    bool zi = lb_bool(L, lb_arg(L, &a, 7, "zero_infinity"), fname, "zero_infinity", false);
    ddpl_tensor *il = ctc_lengths(L, ii, "input_lengths");
    ddpl_tensor *tl = ctc_lengths(L, ti, "target_lengths");
    RETURN_RESULT(L, fname, ddpl_ctc_loss(lp, targets, il, tl, blank, red, zi));
}

static const char *const act_opts[] = {"inplace", NULL};

/* relu/silu/sigmoid/tanh(x [, {inplace=false}]) */
static int activation(lua_State *L, const char *fname, ddpl_tensor *(*fn)(ddpl_tensor *),
                      int (*fn_)(ddpl_tensor *))
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, act_opts);
    ddpl_tensor *x = lb_check(L, 1, fname);
    if (lb_bool(L, lb_arg(L, &a, 2, "inplace"), fname, "inplace", false))
        return inplace_result(L, fn_(x), fname);
    RETURN_RESULT(L, fname, fn(x));
}

static int f_relu(lua_State *L)
{
    return activation(L, "relu", ddpl_relu, ddpl_relu_);
}
static int f_silu(lua_State *L)
{
    return activation(L, "silu", ddpl_silu, ddpl_silu_);
}
static int f_sigmoid(lua_State *L)
{
    return activation(L, "sigmoid", ddpl_sigmoid, ddpl_sigmoid_);
}
static int f_tanh(lua_State *L)
{
    return activation(L, "tanh", ddpl_tanh, ddpl_tanh_);
}

static const char *const gelu_opts[] = {"approximate", NULL};

static int f_gelu(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "gelu", gelu_opts);
    ddpl_tensor *x = lb_check(L, 1, "gelu");
    int i = lb_arg(L, &a, 2, "approximate");
    const char *mode = i && lua_type(L, i) == LUA_TSTRING ? lua_tostring(L, i) : i ? "" : "none";
    if (strcmp(mode, "none") != 0 && strcmp(mode, "tanh") != 0)
        return lb_opterror(L, i, "gelu", "approximate", "'none' or 'tanh'");
    RETURN_RESULT(L, "gelu", ddpl_gelu(x, strcmp(mode, "tanh") == 0));
}

static const char *const sdpa_opts[] = {"attn_mask", "dropout_p", "is_causal", "scale", NULL};

/* F.scaled_dot_product_attention(q, k, v [, attn_mask, dropout_p, is_causal, scale]) */
static int f_sdpa(lua_State *L)
{
    static const char *fname = "scaled_dot_product_attention";
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, sdpa_opts);
    ddpl_tensor *q = lb_check(L, 1, fname);
    ddpl_tensor *k = lb_check(L, 2, fname);
    ddpl_tensor *v = lb_check(L, 3, fname);
    ddpl_tensor *mask = lb_opt(L, lb_arg(L, &a, 4, "attn_mask"), fname);
    double p = lb_num(L, lb_arg(L, &a, 5, "dropout_p"), fname, "dropout_p", 0.0);
    unsupported(L, 1, fname, "dropout_p other than 0", p == 0.0);
    bool causal = lb_bool(L, lb_arg(L, &a, 6, "is_causal"), fname, "is_causal", false);
    double scale = lb_num(L, lb_arg(L, &a, 7, "scale"), fname, "scale", 0.0);
    if (lb_arg(L, &a, 7, "scale") && !(scale > 0))
        return luaL_error(L, "%s: scale must be positive, got %f", fname, scale);
    RETURN_RESULT(L, fname, ddpl_scaled_dot_product_attention(q, k, v, mask, causal, scale));
}

/* F._fused_lstm_cell(input_gates, hidden_gates, c_prev) -> h, c: one LSTM step's gate
 * nonlinearities (ops/nn_rnn_cell.c), as PyTorch's _thnn_fused_lstm_cell */
static int f_fused_lstm_cell(lua_State *L)
{
    static const char *fname = "lstm_cell";
    ddpl_tensor *ig = lb_check(L, 1, fname), *hg = lb_check(L, 2, fname);
    ddpl_tensor *cx = lb_check(L, 3, fname);
    lb_box *h = lb_newbox(L), *c = lb_newbox(L); /* boxes first: nothing leaks if Lua fails */
    ddpl_tensor *hc = ddpl_lstm_cell_fused(ig, hg, cx);
    if (!hc) lb_error_in(L, fname);
    h->t = ddpl_select(hc, 0, 0);
    c->t = ddpl_select(hc, 0, 1);
    ddpl_tensor_release(hc);
    if (!h->t || !c->t) lb_error_in(L, fname);
    lb_gc_account(L);
    return 2;
}

/* F._fused_gru_cell(input_gates, hidden_gates, h_prev) -> h (ops/nn_rnn_cell.c) */
static int f_fused_gru_cell(lua_State *L)
{
    static const char *fname = "gru_cell";
    ddpl_tensor *ig = lb_check(L, 1, fname), *hg = lb_check(L, 2, fname);
    ddpl_tensor *hx = lb_check(L, 3, fname);
    RETURN_RESULT(L, fname, ddpl_gru_cell_fused(ig, hg, hx));
}

/* F._lstm_layer(gates, weight_hh, h_0, c_0 [, reverse]) -> hc (2,T,B,H) and
 * F._gru_layer(gates, weight_hh, bias_hh, h_0 [, reverse]) -> outputs (T,B,H): the recurrence
 * of one direction of one layer (ops/nn_rnn_layer.c), nn.LSTM's and nn.GRU's building block */
static int f_lstm_layer(lua_State *L)
{
    static const char *fname = "LSTM";
    ddpl_tensor *g = lb_check(L, 1, fname), *w = lb_check(L, 2, fname);
    ddpl_tensor *h0 = lb_check(L, 3, fname), *c0 = lb_check(L, 4, fname);
    RETURN_RESULT(L, fname, ddpl_lstm_layer(g, w, h0, c0, lua_toboolean(L, 5)));
}

static int f_gru_layer(lua_State *L)
{
    static const char *fname = "GRU";
    ddpl_tensor *g = lb_check(L, 1, fname), *w = lb_check(L, 2, fname);
    ddpl_tensor *b = lb_opt(L, 3, fname), *h0 = lb_check(L, 4, fname);
    RETURN_RESULT(L, fname, ddpl_gru_layer(g, w, b, h0, lua_toboolean(L, 5)));
}

const luaL_Reg lb_functional[] = {
    {"linear", f_linear},
    {"conv2d", f_conv2d},
    {"conv_transpose2d", f_conv_transpose2d},
    {"max_pool2d", f_max_pool2d},
    {"avg_pool2d", f_avg_pool2d},
    {"adaptive_avg_pool2d", f_adaptive_avg_pool2d},
    {"batch_norm", f_batch_norm},
    {"layer_norm", f_layer_norm},
    {"embedding", f_embedding},
    {"dropout", f_dropout},
    {"softmax", f_softmax},
    {"log_softmax", f_log_softmax},
    {"cross_entropy", f_cross_entropy},
    {"nll_loss", f_nll_loss},
    {"mse_loss", f_mse_loss},
    {"ctc_loss", f_ctc_loss},
    {"relu", f_relu},
    {"gelu", f_gelu},
    {"silu", f_silu},
    {"sigmoid", f_sigmoid},
    {"tanh", f_tanh},
    {"scaled_dot_product_attention", f_sdpa},
    {"_fused_lstm_cell", f_fused_lstm_cell},
    {"_fused_gru_cell", f_fused_gru_cell},
    {"_lstm_layer", f_lstm_layer},
    {"_gru_layer", f_gru_layer},
    {NULL, NULL},
};

const luaL_Reg lb_functional_methods[] = {
    {"softmax", f_softmax},
    {"log_softmax", f_log_softmax},
    {NULL, NULL},
};
