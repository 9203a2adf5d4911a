/* lua/bind_median.c: medians and quantiles (ops/reduce_median.c), as x:NAME and ddpl.NAME.
 * defines: lb_median_methods (median nanmedian quantile nanquantile).
 *
 * PyTorch's forms (API.md): median() gives the 0-dim median of every element; median(dim
 * [, keepdim]) gives values and indices; quantile(q [, dim [, keepdim]]) with q a number or a
 * 0-/1-D tensor of the input's dtype, and {interpolation=} ('linear', 'lower', 'higher',
 * 'midpoint' or 'nearest'); any parameter may also come by name in the trailing options
 * table. */
#include <string.h>

#include "binding.h"

static void check_positional(lua_State *L, const lb_args *a, int most, const char *fname)
{
    if (a->n > most)
        luaL_error(L, "%s: expected at most %d positional arguments, got %d", fname, most, a->n);
}

/* A dim that must fit an int. */
static int dim_arg(lua_State *L, int idx, const char *fname)
{
    int64_t v = lb_int(L, idx, fname, "dim", 0);
    if (v < INT32_MIN || v > INT32_MAX)
        luaL_error(L, "%s: 'dim' is out of range (%I)", fname, (lua_Integer)v);
    return (int)v;
}

static const char *const median_opts[] = {"dim", "keepdim", NULL};

static int median_common(lua_State *L, const char *fname, bool ignore_nan)
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, median_opts);
    check_positional(L, &a, 3, fname);
    int di = lb_arg(L, &a, 2, "dim");
    int ki = lb_arg(L, &a, 3, "keepdim");
    bool keepdim = lb_bool(L, ki, fname, "keepdim", false);
    if (!di) {
        if (ki) return luaL_error(L, "%s: keepdim needs a dim", fname);
        lb_box *box = lb_newbox(L);
        box->t = ignore_nan ? ddpl_nanmedian(x) : ddpl_median(x);
        return lb_finish_in(L, box, fname);
    }
    int dim = dim_arg(L, di, fname);
    lb_box *values = lb_newbox(L);
    lb_box *indices = lb_newbox(L);
    int rc = ignore_nan ? ddpl_nanmedian_dim(x, dim, keepdim, &values->t, &indices->t)
                        : ddpl_median_dim(x, dim, keepdim, &values->t, &indices->t);
    if (rc < 0) lb_error_in(L, fname);
    lb_gc_account(L);
    return 2;
}

/* x:median([dim [, keepdim=false]]) */
static int m_median(lua_State *L)
{
    return median_common(L, "median", false);
}

static int m_nanmedian(lua_State *L)
{
    return median_common(L, "nanmedian", true);
}

static const char *const quantile_opts[] = {"q", "dim", "keepdim", "interpolation", NULL};

static int quantile_common(lua_State *L, const char *fname, bool ignore_nan)
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, quantile_opts);
    check_positional(L, &a, 4, fname);
    int qi = lb_arg(L, &a, 2, "q");
    if (!qi) return luaL_error(L, "%s: expected q (a number or a tensor) as argument 2", fname);
    ddpl_tensor *q = NULL;
    double qn = 0;
    if (lua_type(L, qi) == LUA_TNUMBER)
        qn = lua_tonumber(L, qi);
    else
        q = lb_check(L, qi, fname);
    int di = lb_arg(L, &a, 3, "dim");
    int dim = di ? dim_arg(L, di, fname) : 0;
    bool keepdim = lb_bool(L, lb_arg(L, &a, 4, "keepdim"), fname, "keepdim", false);
    int ii = lb_arg(L, &a, 0, "interpolation");
    const char *interp = "linear";
    if (ii) {
        if (lua_type(L, ii) != LUA_TSTRING)
            lb_opterror(L, ii, fname, "interpolation",
                        "'linear', 'lower', 'higher', 'midpoint' or 'nearest'");
        interp = lua_tostring(L, ii);
    }
    lb_box *box = lb_newbox(L);
    box->t = ddpl_quantile(x, q, qn, di != 0, dim, keepdim, interp, ignore_nan);
    return lb_finish_in(L, box, fname);
}

/* x:quantile(q [, dim [, keepdim=false]] [, {interpolation='linear'}]) */
static int m_quantile(lua_State *L)
{
    return quantile_common(L, "quantile", false);
}

static int m_nanquantile(lua_State *L)
{
    return quantile_common(L, "nanquantile", true);
}

const luaL_Reg lb_median_methods[] = {
    {"median", m_median},
    {"nanmedian", m_nanmedian},
    {"quantile", m_quantile},
    {"nanquantile", m_nanquantile},
    {NULL, NULL},
};
