/* lua/bind_reduce.c: reductions, joining and indexing.
 * defines: lb_reduce_methods (sum mean prod var std max min argmax argmin logsumexp norm
 *          index_select gather topk), lb_reduce_functions (cat concat stack).
 *
 * Reductions take ([dim [, keepdim]]) positionally or {dim=, keepdim=} (API.md); sum and mean
 * also take a table of dims; norm is PyTorch's norm([p [, dim [, keepdim]]]). max/min with a dim
 * return two values (values, int64 indices), and with a tensor argument are the elementwise
 * maximum/minimum, as in PyTorch. */
#include <string.h>

#include "binding.h"

static const char *const dim_opts[] = {"dim", "keepdim", NULL};

typedef struct reduce_args {
    bool has_dim;
    int ndims;
    int dims[DDPL_MAX_DIMS];
    bool keepdim;
} reduce_args;

/* dim at position pos (integer or table of integers, or {dim=}), keepdim at pos + 1. */
static reduce_args parse_reduce(lua_State *L, const lb_args *a, int pos, const char *fname,
                                bool allow_list)
{
    reduce_args r = {false, 0, {0}, false};
    int di = lb_arg(L, a, pos, "dim");
    if (di && lua_type(L, di) == LUA_TTABLE && allow_list) {
        int64_t dims[DDPL_MAX_DIMS];
        r.ndims = lb_sizes_table(L, di, fname, "dim", dims);
        for (int i = 0; i < r.ndims; i++) r.dims[i] = (int)dims[i];
        r.has_dim = true;
    } else if (di) {
        r.dims[0] = (int)lb_int(L, di, fname, "dim", 0);
        r.ndims = 1;
        r.has_dim = true;
    }
    r.keepdim = lb_bool(L, lb_arg(L, a, pos + 1, "keepdim"), fname, "keepdim", false);
    return r;
}

typedef ddpl_tensor *(*all_fn)(ddpl_tensor *);
typedef ddpl_tensor *(*dims_fn)(ddpl_tensor *, int, const int *, bool);

static int sum_like(lua_State *L, const char *fname, all_fn all, dims_fn dims)
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, dim_opts);
    reduce_args r = parse_reduce(L, &a, 2, fname, true);
    lb_box *box = lb_newbox(L);
    box->t = r.has_dim ? dims(x, r.ndims, r.dims, r.keepdim) : all(x);
    return lb_finish_in(L, box, fname);
}

static int m_sum(lua_State *L)
{
    return sum_like(L, "sum", ddpl_sum, ddpl_sum_dims);
}
static int m_mean(lua_State *L)
{
    return sum_like(L, "mean", ddpl_mean, ddpl_mean_dims);
}

static int m_prod(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "prod");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "prod", dim_opts);
    reduce_args r = parse_reduce(L, &a, 2, "prod", false);
    lb_box *box = lb_newbox(L);
    box->t = r.has_dim ? ddpl_prod_dim(x, r.dims[0], r.keepdim) : ddpl_prod(x);
    return lb_finish_in(L, box, "prod");
}

static const char *const var_opts[] = {"dim", "keepdim", "unbiased", "correction", NULL};

/* var/std([dim [, keepdim]] [, {unbiased=true, correction=1}]) */
static int var_like(lua_State *L, const char *fname, bool is_std)
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, var_opts);
    reduce_args r = parse_reduce(L, &a, 2, fname, false);
    int correction = lb_bool(L, lb_arg(L, &a, 0, "unbiased"), fname, "unbiased", true) ? 1 : 0;
    correction = (int)lb_int(L, lb_arg(L, &a, 0, "correction"), fname, "correction", correction);
    lb_box *box = lb_newbox(L);
    if (r.has_dim)
        box->t = is_std ? ddpl_std_dim(x, r.dims[0], correction, r.keepdim)
                        : ddpl_var_dim(x, r.dims[0], correction, r.keepdim);
    else
        box->t = is_std ? ddpl_std(x, correction) : ddpl_var(x, correction);
    return lb_finish_in(L, box, fname);
}

static int m_var(lua_State *L)
{
    return var_like(L, "var", false);
}
static int m_std(lua_State *L)
{
    return var_like(L, "std", true);
}

typedef int (*dim_pair_fn)(ddpl_tensor *, int, bool, ddpl_tensor **, ddpl_tensor **);

/* max/min: () -> 0-dim; (dim [, keepdim]) -> values, indices; (tensor) -> elementwise */
static int max_like(lua_State *L, const char *fname, all_fn all, dim_pair_fn by_dim,
                    ddpl_tensor *(*elementwise)(ddpl_tensor *, ddpl_tensor *))
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_box *other = lb_testbox(L, 2);
    if (other) {
        ddpl_tensor *y = lb_check(L, 2, fname);
        lb_box *box = lb_newbox(L);
        box->t = elementwise(x, y);
        return lb_finish_in(L, box, fname);
    }
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, dim_opts);
    reduce_args r = parse_reduce(L, &a, 2, fname, false);
    if (!r.has_dim) {
        lb_box *box = lb_newbox(L);
        box->t = all(x);
        return lb_finish_in(L, box, fname);
    }
    lb_box *values = lb_newbox(L);
    lb_box *indices = lb_newbox(L);
    if (by_dim(x, r.dims[0], r.keepdim, &values->t, &indices->t) < 0) lb_error_in(L, fname);
    lb_gc_account(L);
    return 2;
}

static int m_max(lua_State *L)
{
    return max_like(L, "max", ddpl_max, ddpl_max_dim, ddpl_maximum);
}
static int m_min(lua_State *L)
{
    return max_like(L, "min", ddpl_min, ddpl_min_dim, ddpl_minimum);
}

static int arg_like(lua_State *L, const char *fname,
                    ddpl_tensor *(*fn)(ddpl_tensor *, bool, int, bool))
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, dim_opts);
    reduce_args r = parse_reduce(L, &a, 2, fname, false);
    lb_box *box = lb_newbox(L);
    box->t = fn(x, !r.has_dim, r.dims[0], r.keepdim);
    return lb_finish_in(L, box, fname);
}

static int m_argmax(lua_State *L)
{
    return arg_like(L, "argmax", ddpl_argmax);
}
static int m_argmin(lua_State *L)
{
    return arg_like(L, "argmin", ddpl_argmin);
}

static int m_logsumexp(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "logsumexp");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "logsumexp", dim_opts);
    reduce_args r = parse_reduce(L, &a, 2, "logsumexp", false);
    if (!r.has_dim) return luaL_error(L, "logsumexp: a dim is required");
    lb_box *box = lb_newbox(L);
    box->t = ddpl_logsumexp(x, r.dims[0], r.keepdim);
    return lb_finish_in(L, box, "logsumexp");
}

static const char *const norm_opts[] = {"p", "dim", "keepdim", NULL};

/* norm([p [, dim [, keepdim]]]) or {p=, dim=, keepdim=}, as PyTorch's Tensor.norm: a first
 * number is the order p (2 by default; 'fro' is 2, math.huge the max norm), not a dim. */
static int m_norm(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "norm");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "norm", norm_opts);
    lb_check_no_more_args(L, a.opts ? a.opts : 4, "norm");
    int pi = lb_arg(L, &a, 2, "p");
    double p = 2.0;
    if (pi && lua_type(L, pi) == LUA_TSTRING) {
        if (strcmp(lua_tostring(L, pi), "fro") != 0)
            return lb_opterror(L, pi, "norm", "p", "a number or 'fro'");
    } else {
        p = lb_num(L, pi, "norm", "p", 2.0);
    }
    reduce_args r = parse_reduce(L, &a, 3, "norm", false);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_norm(x, p, !r.has_dim, r.dims[0], r.keepdim);
    return lb_finish_in(L, box, "norm");
}

/* ---- indexing and joining ---- */

static int m_index_select(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "index_select");
    int d = lb_dim(L, 2, "index_select");
    ddpl_tensor *idx = lb_check(L, 3, "index_select");
    lb_box *box = lb_newbox(L);
    box->t = ddpl_index_select(x, d, idx);
    return lb_finish_in(L, box, "index_select");
}

static int m_gather(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "gather");
    int d = lb_dim(L, 2, "gather");
    ddpl_tensor *idx = lb_check(L, 3, "gather");
    lb_box *box = lb_newbox(L);
    box->t = ddpl_gather(x, d, idx);
    return lb_finish_in(L, box, "gather");
}

static const char *const topk_opts[] = {"dim", "largest", "sorted", NULL};

/* topk(k [, dim=-1 [, largest=true [, sorted=true]]]) -> values, indices */
static int m_topk(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "topk");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "topk", topk_opts);
    int64_t k = lb_int(L, lb_arg(L, &a, 2, "k"), "topk", "k", -1);
    if (k < 0) return luaL_error(L, "topk: expected a non-negative k as argument 2");
    int d = (int)lb_int(L, lb_arg(L, &a, 3, "dim"), "topk", "dim", -1);
    bool largest = lb_bool(L, lb_arg(L, &a, 4, "largest"), "topk", "largest", true);
    bool sorted = lb_bool(L, lb_arg(L, &a, 5, "sorted"), "topk", "sorted", true);
    lb_box *values = lb_newbox(L);
    lb_box *indices = lb_newbox(L);
    if (ddpl_topk(x, k, d, largest, sorted, &values->t, &indices->t) < 0) lb_error_in(L, "topk");
    lb_gc_account(L);
    return 2;
}

typedef ddpl_tensor *(*join_fn)(int, ddpl_tensor *const *, int);

/* ddpl.cat(list [, dim=0]), ddpl.stack(list [, dim=0]) */
static int join(lua_State *L, const char *fname, join_fn fn)
{
    int d = lua_isnoneornil(L, 2) ? 0 : lb_dim(L, 2, fname);
    ddpl_tensor **ts;
    int n = lb_tensor_list(L, 1, fname, &ts); /* pushes its array: read the arguments first */
    lb_box *box = lb_newbox(L);
    box->t = fn(n, ts, d);
    return lb_finish_in(L, box, fname);
}

static int f_cat(lua_State *L)
{
    return join(L, "cat", ddpl_cat);
}
static int f_stack(lua_State *L)
{
    return join(L, "stack", ddpl_stack);
}

const luaL_Reg lb_reduce_methods[] = {
    {"sum", m_sum},       {"mean", m_mean},
    {"prod", m_prod},     {"var", m_var},
    {"std", m_std},       {"max", m_max},
    {"min", m_min},       {"argmax", m_argmax},
    {"argmin", m_argmin}, {"logsumexp", m_logsumexp},
    {"norm", m_norm},     {"index_select", m_index_select},
    {"gather", m_gather}, {"topk", m_topk},
    {NULL, NULL},
};

const luaL_Reg lb_reduce_functions[] = {
    {"cat", f_cat},
    {"concat", f_cat},
    {"stack", f_stack},
    {NULL, NULL},
};
