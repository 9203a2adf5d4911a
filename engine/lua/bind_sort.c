/* lua/bind_sort.c: sorting, searching and counting.
 * defines: lb_sort_methods (sort argsort kthvalue unique bincount histc), lb_sort_functions
 *          (searchsorted bucketize).
 *
 * PyTorch's positional order and keyword names (API.md): x:sort([dim=-1 [, descending]]) with
 * {dim=, descending=, stable=} returns values and indices; kthvalue(k [, dim [, keepdim]]) with k
 * 1-based as in PyTorch; unique returns the output, then the inverse and the counts when asked
 * for, as separate Lua values in PyTorch's order. */
#include <string.h>

#include "binding.h"

/* An integer option that must fit an int (dims). */
static int int_arg(lua_State *L, int idx, const char *fname, const char *name, int dflt)
{
    int64_t v = lb_int(L, idx, fname, name, dflt);
    if (v < INT32_MIN || v > INT32_MAX)
        luaL_error(L, "%s: '%s' is out of range (%I)", fname, name, (lua_Integer)v);
    return (int)v;
}

static const char *const sort_opts[] = {"dim", "descending", "stable", NULL};

/* (x [, dim=-1 [, descending=false]] [, {dim, descending, stable}]); stable is accepted either
 * way: the sort is always stable. */
static void parse_sort(lua_State *L, const char *fname, int *dim, bool *descending)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, sort_opts);
    *dim = int_arg(L, lb_arg(L, &a, 2, "dim"), fname, "dim", -1);
    *descending = lb_bool(L, lb_arg(L, &a, 3, "descending"), fname, "descending", false);
    lb_bool(L, lb_arg(L, &a, 0, "stable"), fname, "stable", false); /* checked; always stable */
}

static int m_sort(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "sort");
    int dim;
    bool descending;
    parse_sort(L, "sort", &dim, &descending);
    lb_box *values = lb_newbox(L);
    lb_box *indices = lb_newbox(L);
    if (ddpl_sort(x, dim, descending, &values->t, &indices->t) < 0) lb_error_in(L, "sort");
    lb_gc_account(L);
    return 2;
}

static int m_argsort(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "argsort");
    int dim;
    bool descending;
    parse_sort(L, "argsort", &dim, &descending);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_argsort(x, dim, descending);
    return lb_finish_in(L, box, "argsort");
}

static const char *const kth_opts[] = {"k", "dim", "keepdim", NULL};

/* kthvalue(k [, dim=-1 [, keepdim=false]]) -> values, indices; k = 1 is the smallest */
static int m_kthvalue(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "kthvalue");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "kthvalue", kth_opts);
    int ki = lb_arg(L, &a, 2, "k");
    if (!ki) return luaL_error(L, "kthvalue: expected k (an integer, 1-based) as argument 2");
    int64_t k = lb_int(L, ki, "kthvalue", "k", 1);
    int dim = int_arg(L, lb_arg(L, &a, 3, "dim"), "kthvalue", "dim", -1);
    bool keepdim = lb_bool(L, lb_arg(L, &a, 4, "keepdim"), "kthvalue", "keepdim", false);
    lb_box *values = lb_newbox(L);
    lb_box *indices = lb_newbox(L);
    if (ddpl_kthvalue(x, k, dim, keepdim, &values->t, &indices->t) < 0) lb_error_in(L, "kthvalue");
    lb_gc_account(L);
    return 2;
}

static const char *const unique_opts[] = {"sorted", "return_inverse", "return_counts", "dim", NULL};

/* unique([sorted=true [, return_inverse=false [, return_counts=false [, dim]]]]) -> output
 * [, inverse] [, counts]. The output is always sorted (allowed for sorted=false). */
static int m_unique(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "unique");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "unique", unique_opts);
    lb_bool(L, lb_arg(L, &a, 2, "sorted"), "unique", "sorted", true);
    bool inverse =
        lb_bool(L, lb_arg(L, &a, 3, "return_inverse"), "unique", "return_inverse", false);
    bool counts = lb_bool(L, lb_arg(L, &a, 4, "return_counts"), "unique", "return_counts", false);
    int di = lb_arg(L, &a, 5, "dim");
    int dim = int_arg(L, di, "unique", "dim", 0);
    lb_box *out = lb_newbox(L);
    int first = lua_gettop(L);
    lb_box *inv = lb_newbox(L);
    lb_box *cnt = lb_newbox(L);
    if (ddpl_unique(x, di != 0, dim, &out->t, inverse ? &inv->t : NULL, counts ? &cnt->t : NULL) <
        0)
        lb_error_in(L, "unique");
    lb_gc_account(L);
    /* keep the asked-for results, in PyTorch's order (output, inverse, counts) */
    if (!counts) lua_pop(L, 1);
    if (!inverse) lua_remove(L, first + 1);
    return 1 + inverse + counts;
}

static const char *const bincount_opts[] = {"weights", "minlength", NULL};

/* bincount([weights [, minlength=0]]) */
static int m_bincount(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "bincount");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "bincount", bincount_opts);
    int wi = lb_arg(L, &a, 2, "weights");
    ddpl_tensor *w = wi ? lb_check(L, wi, "bincount") : NULL;
    int64_t minlength = lb_int(L, lb_arg(L, &a, 3, "minlength"), "bincount", "minlength", 0);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_bincount(x, w, minlength);
    return lb_finish_in(L, box, "bincount");
}

static const char *const histc_opts[] = {"bins", "min", "max", NULL};

/* histc([bins=100 [, min=0 [, max=0]]]) */
static int m_histc(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "histc");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "histc", histc_opts);
    int64_t bins = lb_int(L, lb_arg(L, &a, 2, "bins"), "histc", "bins", 100);
    double min = lb_num(L, lb_arg(L, &a, 3, "min"), "histc", "min", 0);
    double max = lb_num(L, lb_arg(L, &a, 4, "max"), "histc", "max", 0);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_histc(x, bins, min, max);
    return lb_finish_in(L, box, "histc");
}

static const char *const searchsorted_opts[] = {"right", "side", "out_int32", NULL};
static const char *const bucketize_opts[] = {"right", "out_int32", NULL};

/* The searched values at idx: a tensor, or a number (a 0-dim result, as PyTorch's Scalar). */
static ddpl_tensor *search_values(lua_State *L, int idx, const char *fname, bool *owned)
{
    if (lua_type(L, idx) != LUA_TNUMBER) lb_check(L, idx, fname);
    ddpl_tensor *v = lb_operand(L, idx, owned);
    if (!v) lb_error_in(L, fname);
    return v;
}

/* A number given as the values is a 0-dim tensor on the sequence's device (PyTorch's Scalar
 * overload): on the CPU it met a CUDA sequence as a device mismatch. */
static ddpl_tensor *on_device_of(lua_State *L, ddpl_tensor *v, bool *owned, ddpl_tensor *seq,
                                 const char *fname)
{
    ddpl_device d = ddpl_tensor_device(seq);
    if (!*owned || ddpl_tensor_device(v).type == d.type) return v;
    ddpl_tensor *m = ddpl_to(v, ddpl_tensor_dtype(v), d);
    ddpl_tensor_release(v);
    if (!m) lb_error_in(L, fname);
    return m;
}

/* ddpl.searchsorted(sorted_sequence, values [, {right, side, out_int32}]),
 * ddpl.bucketize(input, boundaries [, {right, out_int32}]) */
static int search(lua_State *L, const char *fname, bool is_bucketize)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, is_bucketize ? bucketize_opts : searchsorted_opts);
    int si = is_bucketize ? 2 : 1, vi = is_bucketize ? 1 : 2;
    ddpl_tensor *seq = lb_check(L, si, fname);
    if (lua_type(L, vi) != LUA_TNUMBER) lb_check(L, vi, fname);
    /* keyword-only, as in PyTorch (pos 0: no positional form) */
    bool right = lb_bool(L, lb_arg(L, &a, 0, "right"), fname, "right", false);
    bool out_int32 = lb_bool(L, lb_arg(L, &a, 0, "out_int32"), fname, "out_int32", false);
    int side = is_bucketize ? 0 : lb_arg(L, &a, 0, "side");
    if (side) {
        const char *s = lua_type(L, side) == LUA_TSTRING ? lua_tostring(L, side) : NULL;
        if (!s || (strcmp(s, "left") != 0 && strcmp(s, "right") != 0))
            return luaL_error(L, "%s: side must be 'left' or 'right', got %s", fname,
                              s ? s : luaL_typename(L, side));
        bool is_right = strcmp(s, "right") == 0;
        if (right && !is_right)
            return luaL_error(L,
                              "%s: side and right can't be set to opposites (side 'left' "
                              "with right=true)",
                              fname);
        right = is_right;
    }
    bool owned;
    ddpl_tensor *v = on_device_of(L, search_values(L, vi, fname, &owned), &owned, seq, fname);
    lb_box *box = lb_newbox(L);
    box->t = is_bucketize ? ddpl_bucketize(v, seq, right, out_int32)
                          : ddpl_searchsorted(seq, v, right, out_int32);
    if (owned) ddpl_tensor_release(v);
    return lb_finish_in(L, box, fname);
}

static int f_searchsorted(lua_State *L)
{
    return search(L, "searchsorted", false);
}

static int f_bucketize(lua_State *L)
{
    return search(L, "bucketize", true);
}

const luaL_Reg lb_sort_methods[] = {
    {"sort", m_sort},     {"argsort", m_argsort},   {"kthvalue", m_kthvalue},
    {"unique", m_unique}, {"bincount", m_bincount}, {"histc", m_histc},
    {NULL, NULL},
};

const luaL_Reg lb_sort_functions[] = {
    {"searchsorted", f_searchsorted},
    {"bucketize", f_bucketize},
    {NULL, NULL},
};
