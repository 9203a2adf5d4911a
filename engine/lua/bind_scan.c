/* lua/bind_scan.c: the scans and the reductions as tensor methods (and ddpl.*).
 * defines: lb_scan_methods (cumsum cumprod cummax cummin any all count_nonzero amax amin aminmax
 *          nansum nanmean).
 *
 * Arguments as PyTorch passes them (API.md): dim positionally, keywords in a trailing table.
 *   x:cumsum(dim [, {dtype=}]), x:cumprod(dim [, {dtype=}]), x:cummax(dim) -> values, indices;
 *   x:any([dim [, keepdim]]), all, amax, amin, nansum, nanmean: dim an integer or a list of
 *   integers ({} or none: every dim), also {dim=, keepdim=};
 *   x:count_nonzero([dim]) (no keepdim, as PyTorch);
 *   x:aminmax([{dim=, keepdim=}]) -> min, max (keyword-only in PyTorch, so positional
 *   arguments are refused).
 * Every unknown option is an error naming it. */
#include "binding.h"

typedef struct dims_arg {
    int ndims; /* 0: every dim */
    int dims[DDPL_MAX_DIMS];
} dims_arg;

/* An integer dim in the range any tensor could accept, else an error naming fname. */
static int dim_value(lua_State *L, int idx, const char *fname)
{
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, idx, &isint);
    if (!isint || lua_type(L, idx) != LUA_TNUMBER)
        luaL_error(L, "%s: expected an integer or a list of integers for 'dim', got %s", fname,
                   luaL_typename(L, idx));
    if (v < -DDPL_MAX_DIMS - 1 || v > DDPL_MAX_DIMS + 1)
        luaL_error(L, "%s: dimension %I out of range (tensors have at most %d dimensions)", fname,
                   v, DDPL_MAX_DIMS);
    return (int)v;
}

/* dim at stack index di (0: absent): an integer or a list of integers. */
static dims_arg parse_dims(lua_State *L, int di, const char *fname, bool allow_list)
{
    dims_arg r = {0, {0}};
    if (!di) return r;
    if (lua_type(L, di) == LUA_TTABLE && allow_list) {
        lua_Integer n = luaL_len(L, di);
        if (n < 0 || n > DDPL_MAX_DIMS)
            luaL_error(L, "%s: %I dims given, at most %d are supported", fname, n, DDPL_MAX_DIMS);
        for (int i = 0; i < (int)n; i++) {
            lua_rawgeti(L, di, i + 1);
            r.dims[i] = dim_value(L, -1, fname);
            lua_pop(L, 1);
        }
        r.ndims = (int)n;
        return r;
    }
    r.dims[0] = dim_value(L, di, fname);
    r.ndims = 1;
    return r;
}

/* Positional arguments (the tensor included) without trailing nils, for the count checks:
 * x:cumsum(d, nil) is x:cumsum(d). */
static int npos(lua_State *L, const lb_args *a)
{
    int n = a->n;
    while (n > 1 && lua_isnil(L, n)) n--;
    return n;
}

static const char *const scan_opts[] = {"dim", "dtype", NULL};
static const char *const dim_only_opts[] = {"dim", NULL};
static const char *const dim_keep_opts[] = {"dim", "keepdim", NULL};

/* The required dim of a scan (positional argument 2 or {dim=}). */
static int scan_dim(lua_State *L, const lb_args *a, const char *fname)
{
    int di = lb_arg(L, a, 2, "dim");
    if (!di) luaL_error(L, "%s: expected an integer dim as argument 2, got no value", fname);
    return dim_value(L, di, fname);
}

typedef ddpl_tensor *(*scan_fn)(ddpl_tensor *, int, ddpl_dtype);

static int scan_like(lua_State *L, const char *fname, scan_fn fn)
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, scan_opts);
    if (npos(L, &a) > 2)
        luaL_error(L, "%s: expected (dim [, {dtype=}]), got %d arguments", fname, npos(L, &a) - 1);
    int dim = scan_dim(L, &a, fname);
    int ti = lb_arg(L, &a, 0, "dtype");
    ddpl_dtype dt = ti ? lb_dtype(L, ti, fname) : DDPL_DTYPE_COUNT;
    lb_box *box = lb_newbox(L);
    box->t = fn(x, dim, dt);
    return lb_finish_in(L, box, fname);
}

static int m_cumsum(lua_State *L)
{
    return scan_like(L, "cumsum", ddpl_cumsum);
}
static int m_cumprod(lua_State *L)
{
    return scan_like(L, "cumprod", ddpl_cumprod);
}

typedef int (*pair_fn)(ddpl_tensor *, int, ddpl_tensor **, ddpl_tensor **);

/* Two results (values, indices or min, max) in boxes pushed before the call, so an error
 * leaves nothing unowned. */
static int push_pair(lua_State *L, const char *fname, int rc)
{
    if (rc < 0) lb_error_in(L, fname);
    lb_gc_account(L);
    return 2;
}

static int cum_extreme(lua_State *L, const char *fname, pair_fn fn)
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, dim_only_opts);
    if (npos(L, &a) > 2)
        luaL_error(L, "%s: expected (dim), got %d arguments", fname, npos(L, &a) - 1);
    int dim = scan_dim(L, &a, fname);
    lb_box *values = lb_newbox(L);
    lb_box *indices = lb_newbox(L);
    return push_pair(L, fname, fn(x, dim, &values->t, &indices->t));
}

static int m_cummax(lua_State *L)
{
    return cum_extreme(L, "cummax", ddpl_cummax);
}
static int m_cummin(lua_State *L)
{
    return cum_extreme(L, "cummin", ddpl_cummin);
}

typedef ddpl_tensor *(*dims_fn)(ddpl_tensor *, int, const int *, bool);

/* ([dim [, keepdim]]) or {dim=, keepdim=}: dim an integer or a list. */
static int dims_like(lua_State *L, const char *fname, dims_fn fn)
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, dim_keep_opts);
    if (npos(L, &a) > 3)
        luaL_error(L, "%s: expected ([dim [, keepdim]]), got %d arguments", fname, npos(L, &a) - 1);
    dims_arg d = parse_dims(L, lb_arg(L, &a, 2, "dim"), fname, true);
    bool keepdim = lb_bool(L, lb_arg(L, &a, 3, "keepdim"), fname, "keepdim", false);
    lb_box *box = lb_newbox(L);
    box->t = fn(x, d.ndims, d.dims, keepdim);
    return lb_finish_in(L, box, fname);
}

static int m_any(lua_State *L)
{
    return dims_like(L, "any", ddpl_any);
}
static int m_all(lua_State *L)
{
    return dims_like(L, "all", ddpl_all);
}
static int m_amax(lua_State *L)
{
    return dims_like(L, "amax", ddpl_amax);
}
static int m_amin(lua_State *L)
{
    return dims_like(L, "amin", ddpl_amin);
}
static int m_nansum(lua_State *L)
{
    return dims_like(L, "nansum", ddpl_nansum);
}
static int m_nanmean(lua_State *L)
{
    return dims_like(L, "nanmean", ddpl_nanmean);
}

static int m_count_nonzero(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "count_nonzero");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "count_nonzero", dim_only_opts);
    if (npos(L, &a) > 2)
        luaL_error(L, "count_nonzero: expected ([dim]), got %d arguments (there is no keepdim)",
                   npos(L, &a) - 1);
    dims_arg d = parse_dims(L, lb_arg(L, &a, 2, "dim"), "count_nonzero", true);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_count_nonzero(x, d.ndims, d.dims);
    return lb_finish_in(L, box, "count_nonzero");
}

static int m_aminmax(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "aminmax");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "aminmax", dim_keep_opts);
    if (npos(L, &a) > 1)
        luaL_error(L, "aminmax: dim and keepdim are keyword arguments: call aminmax({dim=, "
                      "keepdim=})");
    int di = lb_arg(L, &a, 0, "dim");
    int dim = di ? dim_value(L, di, "aminmax") : 0;
    bool keepdim = lb_bool(L, lb_arg(L, &a, 0, "keepdim"), "aminmax", "keepdim", false);
    lb_box *mn = lb_newbox(L);
    lb_box *mx = lb_newbox(L);
    return push_pair(L, "aminmax", ddpl_aminmax(x, di == 0, dim, keepdim, &mn->t, &mx->t));
}

const luaL_Reg lb_scan_methods[] = {
    {"cumsum", m_cumsum},
    {"cumprod", m_cumprod},
    {"cummax", m_cummax},
    {"cummin", m_cummin},
    {"any", m_any},
    {"all", m_all},
    {"count_nonzero", m_count_nonzero},
    {"amax", m_amax},
    {"amin", m_amin},
    {"aminmax", m_aminmax},
    {"nansum", m_nansum},
    {"nanmean", m_nanmean},
    {NULL, NULL},
};
