/* lua/bind_scatter.c: scatter, index_add/copy/fill, masks, take and index_put (issue 29).
 * defines: lb_scatter_methods (x:NAME, also ddpl.NAME: scatter scatter_ scatter_add
 *          scatter_add_ scatter_reduce scatter_reduce_ index_add index_add_ index_copy
 *          index_copy_ index_fill index_fill_ masked_select masked_scatter masked_scatter_
 *          masked_fill_ nonzero argwhere take take_along_dim index_put index_put_, and the
 *          private _index),
 *          lb_where_nonzero (ddpl.where(cond) with one argument, bind_pointwise_linalg.c).
 *
 * PyTorch's positional order and keyword names (API.md): dims and indices 0-based; keyword
 * arguments (reduce, include_self, alpha, as_tuple, accumulate) in a trailing options table,
 * unknown options refused. nonzero({as_tuple=true}), one-argument where and the index lists of
 * index_put are Lua lists. The in-place forms return x. */
#include <string.h>

#include "binding.h"

/* An integer argument that must fit an int (dims). */
static int dim_arg(lua_State *L, int idx, const char *fname, const char *name)
{
    if (!idx) luaL_error(L, "%s: expected '%s' (an integer)", fname, name);
    int64_t v = lb_int(L, idx, fname, name, 0);
    if (v < INT32_MIN || v > INT32_MAX)
        luaL_error(L, "%s: '%s' is out of range (%I)", fname, name, (lua_Integer)v);
    return (int)v;
}

/* A tensor argument at idx (0: missing). */
static ddpl_tensor *tensor_arg(lua_State *L, int idx, const char *fname, const char *name)
{
    if (!idx) luaL_error(L, "%s: expected '%s' (a tensor)", fname, name);
    return lb_check(L, idx, fname);
}

/* A number argument for x's dtype: a Lua number (checked to fit) or a 0-dim tensor's value. */
static double value_arg(lua_State *L, int idx, const char *fname, ddpl_tensor *x)
{
    if (!idx) luaL_error(L, "%s: expected 'value' (a number)", fname);
    if (lua_type(L, idx) == LUA_TNUMBER) {
        lb_check_value_fits(L, idx, fname, ddpl_tensor_dtype(x));
        return lua_tonumber(L, idx);
    }
    if (lua_type(L, idx) == LUA_TBOOLEAN) return lua_toboolean(L, idx);
    ddpl_tensor *t = lb_check(L, idx, fname);
    if (ddpl_tensor_ndim(t) != 0)
        luaL_error(L,
                   "%s: value should be a 0-dimensional tensor or a number, got a %d-dim "
                   "tensor",
                   fname, ddpl_tensor_ndim(t));
    double v;
    if (ddpl_tensor_item(t, &v) < 0) lb_error_in(L, fname);
    return v;
}

static int done_inplace(lua_State *L, int rc, const char *fname)
{
    if (rc < 0) lb_error_in(L, fname);
    lua_settop(L, 1);
    return 1;
}

/* ---- scatter family ---- */
static const char *const scatter_opts[] = {"reduce", NULL};

/* scatter(dim, index, src_or_value [, {reduce='add'|'multiply'}]) */
static int scatter(lua_State *L, const char *fname, bool in_place)
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, scatter_opts);
    lb_check_no_more_args(L, a.opts ? a.opts : 4, fname);
    int dim = dim_arg(L, lb_arg(L, &a, 2, "dim"), fname, "dim");
    ddpl_tensor *index = tensor_arg(L, lb_arg(L, &a, 3, "index"), fname, "index");
    int si = lb_arg(L, &a, 4, "src");
    int ri = lb_arg(L, &a, 0, "reduce");
    const char *reduce = NULL;
    if (ri && !(reduce = lua_type(L, ri) == LUA_TSTRING ? lua_tostring(L, ri) : NULL))
        lb_opterror(L, ri, fname, "reduce", "a string");
    if (!si) return luaL_error(L, "%s: expected 'src' (a tensor or a number) as argument 4", fname);
    bool is_tensor = lb_testbox(L, si) != NULL;
    if (!is_tensor && lua_type(L, si) != LUA_TNUMBER && lua_type(L, si) != LUA_TBOOLEAN)
        lb_argerror(L, si, fname, "a tensor or a number");
    if (is_tensor) {
        ddpl_tensor *src = lb_check(L, si, fname);
        if (in_place) return done_inplace(L, ddpl_scatter_(x, dim, index, src, reduce), fname);
        lb_box *box = lb_newbox(L);
        box->t = ddpl_scatter(x, dim, index, src, reduce);
        return lb_finish_in(L, box, fname);
    }
    double v = value_arg(L, si, fname, x);
    if (in_place) return done_inplace(L, ddpl_scatter_value_(x, dim, index, v, reduce), fname);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_scatter_value(x, dim, index, v, reduce);
    return lb_finish_in(L, box, fname);
}

static int m_scatter(lua_State *L)
{
    return scatter(L, "scatter", false);
}
static int m_scatter_(lua_State *L)
{
    return scatter(L, "scatter_", true);
}

/* scatter_add(dim, index, src) */
static int scatter_add(lua_State *L, const char *fname, bool in_place)
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_check_no_more_args(L, 4, fname);
    int dim = dim_arg(L, lua_isnoneornil(L, 2) ? 0 : 2, fname, "dim");
    ddpl_tensor *index = tensor_arg(L, lua_isnoneornil(L, 3) ? 0 : 3, fname, "index");
    ddpl_tensor *src = tensor_arg(L, lua_isnoneornil(L, 4) ? 0 : 4, fname, "src");
    if (in_place) return done_inplace(L, ddpl_scatter_add_(x, dim, index, src), fname);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_scatter_add(x, dim, index, src);
    return lb_finish_in(L, box, fname);
}

static int m_scatter_add(lua_State *L)
{
    return scatter_add(L, "scatter_add", false);
}
static int m_scatter_add_(lua_State *L)
{
    return scatter_add(L, "scatter_add_", true);
}

static const char *const reduce_opts[] = {"include_self", NULL};

/* scatter_reduce(dim, index, src, reduce [, {include_self=true}]) */
static int scatter_reduce(lua_State *L, const char *fname, bool in_place)
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, reduce_opts);
    lb_check_no_more_args(L, a.opts ? a.opts : 5, fname);
    int dim = dim_arg(L, lb_arg(L, &a, 2, "dim"), fname, "dim");
    ddpl_tensor *index = tensor_arg(L, lb_arg(L, &a, 3, "index"), fname, "index");
    ddpl_tensor *src = tensor_arg(L, lb_arg(L, &a, 4, "src"), fname, "src");
    int ri = lb_arg(L, &a, 5, "reduce");
    if (!ri || lua_type(L, ri) != LUA_TSTRING)
        return luaL_error(L,
                          "%s: expected 'reduce' ('sum', 'prod', 'mean', 'amax' or 'amin') "
                          "as argument 5",
                          fname);
    const char *reduce = lua_tostring(L, ri);
    bool include_self = lb_bool(L, lb_arg(L, &a, 0, "include_self"), fname, "include_self", true);
    if (in_place)
        return done_inplace(L, ddpl_scatter_reduce_(x, dim, index, src, reduce, include_self),
                            fname);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_scatter_reduce(x, dim, index, src, reduce, include_self);
    return lb_finish_in(L, box, fname);
}

static int m_scatter_reduce(lua_State *L)
{
    return scatter_reduce(L, "scatter_reduce", false);
}
static int m_scatter_reduce_(lua_State *L)
{
    return scatter_reduce(L, "scatter_reduce_", true);
}

/* ---- index_add / index_copy / index_fill ---- */
static const char *const alpha_opts[] = {"alpha", NULL};

/* index_add(dim, index, source [, {alpha=1}]) */
static int index_add(lua_State *L, const char *fname, bool in_place)
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, alpha_opts);
    lb_check_no_more_args(L, a.opts ? a.opts : 4, fname);
    int dim = dim_arg(L, lb_arg(L, &a, 2, "dim"), fname, "dim");
    ddpl_tensor *index = tensor_arg(L, lb_arg(L, &a, 3, "index"), fname, "index");
    ddpl_tensor *source = tensor_arg(L, lb_arg(L, &a, 4, "source"), fname, "source");
    double alpha = lb_num(L, lb_arg(L, &a, 0, "alpha"), fname, "alpha", 1.0);
    if (in_place) return done_inplace(L, ddpl_index_add_(x, dim, index, source, alpha), fname);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_index_add(x, dim, index, source, alpha);
    return lb_finish_in(L, box, fname);
}

static int m_index_add(lua_State *L)
{
    return index_add(L, "index_add", false);
}
static int m_index_add_(lua_State *L)
{
    return index_add(L, "index_add_", true);
}

/* index_copy(dim, index, source); index_fill(dim, index, value) */
static int index_copy_fill(lua_State *L, const char *fname, bool fill, bool in_place)
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_check_no_more_args(L, 4, fname);
    int dim = dim_arg(L, lua_isnoneornil(L, 2) ? 0 : 2, fname, "dim");
    ddpl_tensor *index = tensor_arg(L, lua_isnoneornil(L, 3) ? 0 : 3, fname, "index");
    int rc;
    lb_box *box = NULL;
    if (fill) {
        double v = value_arg(L, lua_isnoneornil(L, 4) ? 0 : 4, fname, x);
        if (in_place) return done_inplace(L, ddpl_index_fill_(x, dim, index, v), fname);
        box = lb_newbox(L);
        box->t = ddpl_index_fill(x, dim, index, v);
    } else {
        ddpl_tensor *source = tensor_arg(L, lua_isnoneornil(L, 4) ? 0 : 4, fname, "source");
        if (in_place) {
            rc = ddpl_index_copy_(x, dim, index, source);
            return done_inplace(L, rc, fname);
        }
        box = lb_newbox(L);
        box->t = ddpl_index_copy(x, dim, index, source);
    }
    return lb_finish_in(L, box, fname);
}

static int m_index_copy(lua_State *L)
{
    return index_copy_fill(L, "index_copy", false, false);
}
static int m_index_copy_(lua_State *L)
{
    return index_copy_fill(L, "index_copy_", false, true);
}
static int m_index_fill(lua_State *L)
{
    return index_copy_fill(L, "index_fill", true, false);
}
static int m_index_fill_(lua_State *L)
{
    return index_copy_fill(L, "index_fill_", true, true);
}

/* ---- masks ---- */
static int m_masked_select(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "masked_select");
    ddpl_tensor *mask = lb_check(L, 2, "masked_select");
    lb_check_no_more_args(L, 2, "masked_select");
    lb_box *box = lb_newbox(L);
    box->t = ddpl_masked_select(x, mask);
    return lb_finish_in(L, box, "masked_select");
}

static int masked_scatter(lua_State *L, const char *fname, bool in_place)
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    ddpl_tensor *mask = lb_check(L, 2, fname);
    ddpl_tensor *source = lb_check(L, 3, fname);
    lb_check_no_more_args(L, 3, fname);
    if (in_place) return done_inplace(L, ddpl_masked_scatter_(x, mask, source), fname);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_masked_scatter(x, mask, source);
    return lb_finish_in(L, box, fname);
}

static int m_masked_scatter(lua_State *L)
{
    return masked_scatter(L, "masked_scatter", false);
}
static int m_masked_scatter_(lua_State *L)
{
    return masked_scatter(L, "masked_scatter_", true);
}

static int m_masked_fill_(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "masked_fill_");
    ddpl_tensor *mask = lb_check(L, 2, "masked_fill_");
    lb_check_no_more_args(L, 3, "masked_fill_");
    double v = value_arg(L, lua_isnoneornil(L, 3) ? 0 : 3, "masked_fill_", x);
    return done_inplace(L, ddpl_masked_fill_(x, mask, v), "masked_fill_");
}

/* Pushes the 1-D index tensors of x's non-zero elements as a Lua list. */
static int push_nonzero_list(lua_State *L, ddpl_tensor *x, const char *fname)
{
    ddpl_tensor *cols[DDPL_MAX_DIMS];
    lua_newtable(L);
    int list = lua_gettop(L);
    int n = ddpl_nonzero_tuple(x, cols);
    if (n < 0) lb_error_in(L, fname);
    for (int i = 0; i < n; i++) { /* boxed one by one: an error later cannot leak them */
        lb_box *b = lb_newbox(L);
        b->t = cols[i];
        lua_rawseti(L, list, i + 1);
    }
    lb_gc_account(L);
    return 1;
}

static const char *const nonzero_opts[] = {"as_tuple", NULL};

/* nonzero([{as_tuple=false}]) */
static int m_nonzero(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "nonzero");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "nonzero", nonzero_opts);
    lb_check_no_more_args(L, a.opts ? a.opts : 1, "nonzero");
    if (lb_bool(L, lb_arg(L, &a, 0, "as_tuple"), "nonzero", "as_tuple", false))
        return push_nonzero_list(L, x, "nonzero");
    lb_box *box = lb_newbox(L);
    box->t = ddpl_nonzero(x);
    return lb_finish_in(L, box, "nonzero");
}

static int m_argwhere(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "argwhere");
    lb_check_no_more_args(L, 1, "argwhere");
    lb_box *box = lb_newbox(L);
    box->t = ddpl_nonzero(x);
    return lb_finish_in(L, box, "argwhere");
}

int lb_where_nonzero(lua_State *L)
{
    ddpl_tensor *cond = lb_check(L, 1, "where");
    return push_nonzero_list(L, cond, "where");
}

/* ---- take / take_along_dim ---- */
static int m_take(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "take");
    ddpl_tensor *index = lb_check(L, 2, "take");
    lb_check_no_more_args(L, 2, "take");
    lb_box *box = lb_newbox(L);
    box->t = ddpl_take(x, index);
    return lb_finish_in(L, box, "take");
}

static const char *const tad_opts[] = {"dim", NULL};

/* take_along_dim(indices [, dim]) */
static int m_take_along_dim(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "take_along_dim");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "take_along_dim", tad_opts);
    lb_check_no_more_args(L, a.opts ? a.opts : 3, "take_along_dim");
    ddpl_tensor *ix = tensor_arg(L, lb_arg(L, &a, 2, "indices"), "take_along_dim", "indices");
    int di = lb_arg(L, &a, 3, "dim");
    int dim = di ? dim_arg(L, di, "take_along_dim", "dim") : 0;
    lb_box *box = lb_newbox(L);
    box->t = ddpl_take_along_dim(x, ix, di != 0, dim);
    return lb_finish_in(L, box, "take_along_dim");
}

/* ---- index_put ---- */
static const char *const put_opts[] = {"accumulate", NULL};

/* The Lua list at idx of index tensors (bool masks included), false standing for a full slice
 * ':'; borrowed (the list keeps them alive). Returns the count. */
static int index_list(lua_State *L, int idx, const char *fname, ddpl_tensor **ix)
{
    if (lua_type(L, idx) != LUA_TTABLE) lb_argerror(L, idx, fname, "a list of index tensors");
    lua_Integer n = luaL_len(L, idx);
    if (n < 0 || n > DDPL_MAX_DIMS)
        luaL_error(L, "%s: expected at most %d indices, got %I", fname, DDPL_MAX_DIMS, n);
    for (lua_Integer i = 0; i < n; i++) {
        lua_rawgeti(L, idx, i + 1);
        if (lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1))
            ix[i] = NULL;
        else if (lb_testbox(L, -1))
            ix[i] = lb_check(L, lua_gettop(L), fname);
        else
            luaL_error(L,
                       "%s: expected a tensor or false (a full slice) at position %I of the "
                       "indices, got %s",
                       fname, i + 1, luaL_typename(L, -1));
        lua_pop(L, 1);
    }
    return (int)n;
}

/* index_put(indices (a Lua list of index tensors, false for ':'), values (a tensor or a
 * number) [, {accumulate=false}]) */
static int index_put(lua_State *L, const char *fname, bool in_place)
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, put_opts);
    lb_check_no_more_args(L, a.opts ? a.opts : 3, fname);
    int li = lb_arg(L, &a, 2, "indices");
    if (!li)
        return luaL_error(L, "%s: expected 'indices' (a list of tensors) as argument 2", fname);
    ddpl_tensor *ix[DDPL_MAX_DIMS];
    int n = index_list(L, li, fname, ix);
    int vi = lb_arg(L, &a, 3, "values");
    if (!vi)
        return luaL_error(L, "%s: expected 'values' (a tensor or a number) as argument 3", fname);
    bool accumulate = lb_bool(L, lb_arg(L, &a, 0, "accumulate"), fname, "accumulate", false);
    ddpl_tensor *values;
    bool owned = false;
    if (lb_testbox(L, vi)) {
        values = lb_check(L, vi, fname);
    } else {
        double v = value_arg(L, vi, fname, x);
        values = ddpl_scalar(v, ddpl_tensor_dtype(x), ddpl_tensor_device(x));
        if (!values) lb_error_in(L, fname);
        owned = true;
    }
    int rc = 0;
    lb_box *box = NULL;
    if (in_place) {
        rc = ddpl_index_put_(x, n, ix, values, accumulate);
    } else {
        box = lb_newbox(L);
        box->t = ddpl_index_put(x, n, ix, values, accumulate);
    }
    if (owned) ddpl_tensor_release(values);
    if (in_place) return done_inplace(L, rc, fname);
    return lb_finish_in(L, box, fname);
}

static int m_index_put(lua_State *L)
{
    return index_put(L, "index_put", false);
}
static int m_index_put_(lua_State *L)
{
    return index_put(L, "index_put_", true);
}

/* x:_index(list): x[i0, i1, ...] of advanced indexing (ddpl_index), each entry an index
 * tensor or bool mask, or false for a full slice ':'. Private: the specs reach the C core of
 * x[...] through it until the indexing syntax binds it. */
static int m_index_private(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "_index");
    lb_check_no_more_args(L, 2, "_index");
    ddpl_tensor *ix[DDPL_MAX_DIMS];
    int n = index_list(L, 2, "_index", ix);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_index(x, n, ix);
    return lb_finish_in(L, box, "_index");
}

const luaL_Reg lb_scatter_methods[] = {
    {"scatter", m_scatter},
    {"scatter_", m_scatter_},
    {"scatter_add", m_scatter_add},
    {"scatter_add_", m_scatter_add_},
    {"scatter_reduce", m_scatter_reduce},
    {"scatter_reduce_", m_scatter_reduce_},
    {"index_add", m_index_add},
    {"index_add_", m_index_add_},
    {"index_copy", m_index_copy},
    {"index_copy_", m_index_copy_},
    {"index_fill", m_index_fill},
    {"index_fill_", m_index_fill_},
    {"masked_select", m_masked_select},
    {"masked_scatter", m_masked_scatter},
    {"masked_scatter_", m_masked_scatter_},
    {"masked_fill_", m_masked_fill_},
    {"nonzero", m_nonzero},
    {"argwhere", m_argwhere},
    {"take", m_take},
    {"take_along_dim", m_take_along_dim},
    {"index_put", m_index_put},
    {"index_put_", m_index_put_},
    {"_index", m_index_private},
    {NULL, NULL},
};
