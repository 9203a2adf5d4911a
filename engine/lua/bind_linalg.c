/* lua/bind_linalg.c: products (outer, dot, inner, kron, tensordot, cross, einsum, cdist,
 * baddbmm, addbmm, addmv, addr) and ddpl.linalg.
 * defines: lb_linalg_methods (x:outer(y), ...; also ddpl.outer, ...), lb_linalg_functions
 *          (ddpl.einsum, ddpl.tensordot, ddpl.cdist), lb_linalg_table (ddpl.linalg.*).
 *
 * PyTorch's positional order and keyword names (API.md); several results (qr, svd, eigh,
 * slogdet) are several Lua values in PyTorch's named-tuple order; a sequence of dims is a Lua
 * list; ord may be a number (math.huge for inf) or 'fro' / 'nuc'. */
#include <math.h>
#include <string.h>

#include "binding.h"

/* An integer dim (any sign; the engine wraps and checks it). */
static int dim_value(lua_State *L, int idx, const char *fname, const char *name)
{
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, idx, &isint);
    if (!isint || lua_type(L, idx) != LUA_TNUMBER)
        luaL_error(L, "%s: expected an integer or a list of integers for '%s', got %s", fname, name,
                   luaL_typename(L, idx));
    if (v < -DDPL_MAX_DIMS - 1 || v > DDPL_MAX_DIMS + 1)
        luaL_error(L, "%s: dimension %I out of range (tensors have at most %d dimensions)", fname,
                   v, DDPL_MAX_DIMS);
    return (int)v;
}

/* A list of integer dims at idx into dims; returns the count. */
static int dim_list(lua_State *L, int idx, const char *fname, const char *name, int *dims)
{
    if (lua_type(L, idx) != LUA_TTABLE) return dims[0] = dim_value(L, idx, fname, name), 1;
    lua_Integer n = luaL_len(L, idx);
    if (n < 0 || n > DDPL_MAX_DIMS)
        luaL_error(L, "%s: %I dims given for '%s', at most %d are supported", fname, n, name,
                   DDPL_MAX_DIMS);
    for (int i = 0; i < (int)n; i++) {
        lua_rawgeti(L, idx, i + 1);
        dims[i] = dim_value(L, -1, fname, name);
        lua_pop(L, 1);
    }
    return (int)n;
}

typedef ddpl_tensor *(*binary_fn)(ddpl_tensor *, ddpl_tensor *);

static int binary(lua_State *L, const char *fname, binary_fn fn)
{
    ddpl_tensor *a = lb_check(L, 1, fname), *b = lb_check(L, 2, fname);
    lb_check_no_more_args(L, 2, fname);
    lb_box *box = lb_newbox(L);
    box->t = fn(a, b);
    return lb_finish_in(L, box, fname);
}

static int m_outer(lua_State *L)
{
    return binary(L, "outer", ddpl_outer);
}
static int m_ger(lua_State *L)
{
    return binary(L, "ger", ddpl_outer);
}
static int m_dot(lua_State *L)
{
    return binary(L, "dot", ddpl_dot);
}
static int m_vdot(lua_State *L)
{
    return binary(L, "vdot", ddpl_dot);
} /* real: dot */
static int m_inner(lua_State *L)
{
    return binary(L, "inner", ddpl_inner);
}
static int m_kron(lua_State *L)
{
    return binary(L, "kron", ddpl_kron);
}

static const char *const dim_opts[] = {"dim", NULL};

/* cross(a, b [, dim]): torch.cross (default: the first dim of size 3); linalg.cross: dim=-1 */
static int cross_common(lua_State *L, const char *fname, bool linalg)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, dim_opts);
    ddpl_tensor *x = lb_check(L, 1, fname), *y = lb_check(L, 2, fname);
    if (a.n > 3) lb_check_no_more_args(L, 3, fname);
    int di = lb_arg(L, &a, 3, "dim");
    int dim = di ? dim_value(L, di, fname, "dim") : -1;
    lb_box *box = lb_newbox(L);
    box->t = ddpl_cross(x, y, di || linalg, dim, linalg);
    return lb_finish_in(L, box, fname);
}

static int m_cross(lua_State *L)
{
    return cross_common(L, "cross", false);
}
static int l_cross(lua_State *L)
{
    return cross_common(L, "linalg.cross", true);
}

static const char *const scale_opts[] = {"beta", "alpha", NULL};

typedef ddpl_tensor *(*addprod_fn)(ddpl_tensor *, ddpl_tensor *, ddpl_tensor *, double, double);

/* fn(input, p, q [, {beta=1, alpha=1}]) */
static int addprod(lua_State *L, const char *fname, addprod_fn fn)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, scale_opts);
    ddpl_tensor *in = lb_check(L, 1, fname), *p = lb_check(L, 2, fname), *q = lb_check(L, 3, fname);
    if (a.n > 3) lb_check_no_more_args(L, 3, fname);
    double beta = lb_num(L, lb_arg(L, &a, 0, "beta"), fname, "beta", 1.0);
    double alpha = lb_num(L, lb_arg(L, &a, 0, "alpha"), fname, "alpha", 1.0);
    lb_box *box = lb_newbox(L);
    box->t = fn(in, p, q, beta, alpha);
    return lb_finish_in(L, box, fname);
}

static int m_baddbmm(lua_State *L)
{
    return addprod(L, "baddbmm", ddpl_baddbmm);
}
static int m_addbmm(lua_State *L)
{
    return addprod(L, "addbmm", ddpl_addbmm);
}
static int m_addmv(lua_State *L)
{
    return addprod(L, "addmv", ddpl_addmv);
}
static int m_addr(lua_State *L)
{
    return addprod(L, "addr", ddpl_addr);
}

static const char *const tensordot_opts[] = {"dims", NULL};

/* tensordot(a, b [, dims=2]): dims an integer (a's last dims with b's first) or {{a dims},
 * {b dims}} */
static int f_tensordot(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "tensordot", tensordot_opts);
    ddpl_tensor *x = lb_check(L, 1, "tensordot"), *y = lb_check(L, 2, "tensordot");
    if (a.n > 3) lb_check_no_more_args(L, 3, "tensordot");
    int di = lb_arg(L, &a, 3, "dims"), n, da[DDPL_MAX_DIMS], db[DDPL_MAX_DIMS];
    if (!di || lua_type(L, di) == LUA_TNUMBER) {
        int64_t k = lb_int(L, di, "tensordot", "dims", 2);
        if (k < 0)
            return luaL_error(L, "tensordot: expects dims >= 0, but got dims=%I", (lua_Integer)k);
        if (k > ddpl_tensor_ndim(x) || k > ddpl_tensor_ndim(y))
            return luaL_error(L,
                              "tensordot: expects dims <= the number of dims of both tensors "
                              "(%d and %d), but got dims=%I",
                              ddpl_tensor_ndim(x), ddpl_tensor_ndim(y), (lua_Integer)k);
        n = (int)k;
        for (int i = 0; i < n; i++) da[i] = ddpl_tensor_ndim(x) - n + i, db[i] = i;
    } else {
        if (lua_type(L, di) != LUA_TTABLE || luaL_len(L, di) != 2)
            return lb_opterror(L, di, "tensordot", "dims", "an integer or a pair of dim lists");
        lua_rawgeti(L, di, 1);
        lua_rawgeti(L, di, 2);
        int top = lua_gettop(L);
        n = dim_list(L, top - 1, "tensordot", "dims", da);
        int nb = dim_list(L, top, "tensordot", "dims", db);
        if (n != nb)
            return luaL_error(L,
                              "tensordot: both dimension lists should have same length, got %d "
                              "and %d",
                              n, nb);
    }
    lb_box *box = lb_newbox(L);
    box->t = ddpl_tensordot(x, y, n, da, db);
    return lb_finish_in(L, box, "tensordot");
}

/* einsum(equation, op1, op2, ...) or einsum(equation, {op1, op2, ...}) */
static int f_einsum(lua_State *L)
{
    const char *eq = luaL_checkstring(L, 1);
    ddpl_tensor **ops;
    int n;
    if (lua_gettop(L) == 2 && lua_type(L, 2) == LUA_TTABLE && !lb_testbox(L, 2)) {
        n = lb_tensor_list(L, 2, "einsum", &ops);
    } else {
        n = lua_gettop(L) - 1;
        ops = lua_newuserdatauv(L, sizeof *ops * (size_t)(n ? n : 1), 0);
        for (int i = 0; i < n; i++) ops[i] = lb_check(L, i + 2, "einsum");
    }
    lb_box *box = lb_newbox(L);
    box->t = ddpl_einsum(eq, n, ops);
    return lb_finish_in(L, box, "einsum");
}

static const char *const cdist_opts[] = {"p", "compute_mode", NULL};

/* cdist(x1, x2 [, p=2]) */
static int f_cdist(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "cdist", cdist_opts);
    ddpl_tensor *x = lb_check(L, 1, "cdist"), *y = lb_check(L, 2, "cdist");
    if (a.n > 3) lb_check_no_more_args(L, 3, "cdist");
    double p = lb_num(L, lb_arg(L, &a, 3, "p"), "cdist", "p", 2.0);
    int cm = lb_arg(L, &a, 0, "compute_mode");
    if (cm && !lua_isnil(L, cm)) {
        const char *m = lua_tostring(L, cm);
        if (!m || (strcmp(m, "use_mm_for_euclid_dist_if_necessary") != 0))
            return luaL_error(L, "cdist: only compute_mode 'use_mm_for_euclid_dist_if_necessary' "
                                 "(the default) is supported");
    }
    lb_box *box = lb_newbox(L);
    box->t = ddpl_cdist(x, y, p);
    return lb_finish_in(L, box, "cdist");
}

/* ---- ddpl.linalg ---- */

/* ord at idx: a number, or a string (sord set) among the allowed ones */
static double ord_value(lua_State *L, int idx, const char *fname, const char **sord)
{
    *sord = NULL;
    if (lua_type(L, idx) == LUA_TSTRING) {
        *sord = lua_tostring(L, idx);
        return 0.0;
    }
    if (lua_type(L, idx) != LUA_TNUMBER)
        lb_opterror(L, idx, fname, "ord", "a number or 'fro' / 'nuc'");
    return lua_tonumber(L, idx);
}

static const char *const vnorm_opts[] = {"ord", "dim", "keepdim", "dtype", NULL};

/* vector_norm(x [, ord=2 [, dim [, keepdim]]] [, {dtype=}]) */
static int l_vector_norm(lua_State *L)
{
    const char *f = "linalg.vector_norm";
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, f, vnorm_opts);
    ddpl_tensor *x = lb_check(L, 1, f);
    if (a.n > 4) lb_check_no_more_args(L, 4, f);
    int oi = lb_arg(L, &a, 2, "ord");
    double ord = oi ? lua_tonumber(L, oi) : 2.0;
    if (oi && lua_type(L, oi) != LUA_TNUMBER) return lb_opterror(L, oi, f, "ord", "a number");
    int dims[DDPL_MAX_DIMS], di = lb_arg(L, &a, 3, "dim");
    int nd = di ? dim_list(L, di, f, "dim", dims) : 0;
    bool keepdim = lb_bool(L, lb_arg(L, &a, 4, "keepdim"), f, "keepdim", false);
    int ti = lb_arg(L, &a, 0, "dtype");
    ddpl_dtype dt = ti ? lb_dtype(L, ti, f) : DDPL_DTYPE_COUNT;
    if (di && nd == 0) nd = 0; /* an empty list: every dim, as PyTorch 1.13 */
    lb_box *box = lb_newbox(L);
    box->t = ddpl_linalg_vector_norm(x, ord, nd, dims, keepdim, dt);
    return lb_finish_in(L, box, f);
}

static const char *const mnorm_opts[] = {"ord", "dim", "keepdim", NULL};

/* the (dim0, dim1) pair at idx (0: the default {-2, -1}) */
static void dim_pair(lua_State *L, int idx, const char *fname, int *d)
{
    d[0] = -2, d[1] = -1;
    if (!idx) return;
    int n = dim_list(L, idx, fname, "dim", d);
    if (n != 2) luaL_error(L, "%s: dim must be a 2-tuple. Got %d dims", fname, n);
}

/* matrix_norm(x [, ord='fro' [, dim={-2,-1} [, keepdim]]]) */
static int l_matrix_norm(lua_State *L)
{
    const char *f = "linalg.matrix_norm";
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, f, mnorm_opts);
    ddpl_tensor *x = lb_check(L, 1, f);
    if (a.n > 4) lb_check_no_more_args(L, 4, f);
    int oi = lb_arg(L, &a, 2, "ord");
    const char *sord = "fro";
    double ord = oi ? ord_value(L, oi, f, &sord) : 0.0;
    int d[2];
    dim_pair(L, lb_arg(L, &a, 3, "dim"), f, d);
    bool keepdim = lb_bool(L, lb_arg(L, &a, 4, "keepdim"), f, "keepdim", false);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_linalg_matrix_norm(x, sord, ord, d[0], d[1], keepdim);
    return lb_finish_in(L, box, f);
}

static const char *const norm_opts[] = {"ord", "dim", "keepdim", "dtype", NULL};

/* norm(x [, ord [, dim [, keepdim]]]): PyTorch's linalg.norm dispatch. A string ord or two dims
 * make a matrix norm (two dims without ord: 'fro'); one dim, or none without ord, a vector
 * norm (ord 2; no dims: of the flattened x); an ord without dims: x must be 1-D or 2-D. */
static int l_norm(lua_State *L)
{
    const char *f = "linalg.norm";
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, f, norm_opts);
    ddpl_tensor *x = lb_check(L, 1, f);
    if (a.n > 4) lb_check_no_more_args(L, 4, f);
    int oi = lb_arg(L, &a, 2, "ord");
    const char *sord = NULL;
    double ord = oi ? ord_value(L, oi, f, &sord) : 2.0;
    int dims[DDPL_MAX_DIMS], di = lb_arg(L, &a, 3, "dim");
    int nd = di ? dim_list(L, di, f, "dim", dims) : 0;
    bool keepdim = lb_bool(L, lb_arg(L, &a, 4, "keepdim"), f, "keepdim", false);
    int ti = lb_arg(L, &a, 0, "dtype");
    ddpl_dtype dt = ti ? lb_dtype(L, ti, f) : DDPL_DTYPE_COUNT;
    bool matrix;
    if (di && nd != 1 && nd != 2)
        return luaL_error(L, "%s: If dim is specified, it must be of length 1 or 2. Got %d", f, nd);
    if (di)
        matrix = nd == 2;
    else if (oi) {
        if (ddpl_tensor_ndim(x) != 1 && ddpl_tensor_ndim(x) != 2)
            return luaL_error(L,
                              "%s: If dim is not specified but ord is, the input must be 1D "
                              "or 2D. Got %dD.",
                              f, ddpl_tensor_ndim(x));
        matrix = ddpl_tensor_ndim(x) == 2;
        dims[0] = -2, dims[1] = -1;
    } else
        matrix = false;
    if (sord && !matrix)
        return luaL_error(L,
                          "%s: If ord is a string ('%s'), the norm is a matrix norm: give 2 "
                          "dims or a 2-D input",
                          f, sord);
    lb_box *box = lb_newbox(L);
    if (matrix && !oi) sord = "fro";
    if (matrix && dt != DDPL_DTYPE_COUNT)
        return luaL_error(L, "%s: dtype is only supported for vector norms here", f);
    box->t = matrix ? ddpl_linalg_matrix_norm(x, sord, ord, dims[0], dims[1], keepdim)
                    : ddpl_linalg_vector_norm(x, ord, nd, dims, keepdim, dt);
    return lb_finish_in(L, box, f);
}

typedef ddpl_tensor *(*unary_fn)(ddpl_tensor *);

static int unary(lua_State *L, const char *fname, unary_fn fn)
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_check_no_more_args(L, 1, fname);
    lb_box *box = lb_newbox(L);
    box->t = fn(x);
    return lb_finish_in(L, box, fname);
}

static int l_inv(lua_State *L)
{
    return unary(L, "linalg.inv", ddpl_linalg_inv);
}
static int l_det(lua_State *L)
{
    return unary(L, "linalg.det", ddpl_linalg_det);
}
static int l_svdvals(lua_State *L)
{
    return unary(L, "linalg.svdvals", ddpl_linalg_svdvals);
}

static const char *const solve_opts[] = {"left", NULL};

/* B for left=false is a vector as PyTorch decides it (1-D, or A's shape without its last dim):
 * XA = B has no solution shape for one, and PyTorch says so */
static bool solve_vector_case(ddpl_tensor *a, ddpl_tensor *b)
{
    int an = ddpl_tensor_ndim(a), bn = ddpl_tensor_ndim(b);
    if (bn == 1) return true;
    if (bn != an - 1) return false;
    for (int d = 0; d < bn; d++)
        if (ddpl_tensor_size(b, d) != ddpl_tensor_size(a, d)) return false;
    return true;
}

/* solve(A, B [, {left=true}]): AX = B, or with left=false XA = B, solved as A^T X^T = B^T */
static int l_solve(lua_State *L)
{
    const char *f = "linalg.solve";
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, f, solve_opts);
    ddpl_tensor *x = lb_check(L, 1, f), *y = lb_check(L, 2, f);
    if (a.n > 2) lb_check_no_more_args(L, 2, f);
    bool left = lb_bool(L, lb_arg(L, &a, 0, "left"), f, "left", true);
    lb_box *box = lb_newbox(L);
    if (left) {
        box->t = ddpl_linalg_solve(x, y);
        return lb_finish_in(L, box, f);
    }
    if (ddpl_tensor_ndim(x) >= 2 && solve_vector_case(x, y)) {
        int64_t n = ddpl_tensor_size(x, ddpl_tensor_ndim(x) - 1);
        return luaL_error(L,
                          "%s: Incompatible shapes of A and B for the equation XA = B (%Ix%I and "
                          "%Ix1)",
                          f, (lua_Integer)ddpl_tensor_size(x, ddpl_tensor_ndim(x) - 2),
                          (lua_Integer)n, (lua_Integer)ddpl_tensor_size(y, ddpl_tensor_ndim(y) - 1));
    }
    if (ddpl_tensor_ndim(x) < 2) { /* the plain solve's message for such an A */
        box->t = ddpl_linalg_solve(x, y);
        return lb_finish_in(L, box, f);
    }
    ddpl_tensor *at = ddpl_transpose(x, -2, -1), *bt = ddpl_transpose(y, -2, -1);
    ddpl_tensor *xt = at && bt ? ddpl_linalg_solve(at, bt) : NULL;
    box->t = xt ? ddpl_transpose(xt, -2, -1) : NULL;
    ddpl_tensor_release(at);
    ddpl_tensor_release(bt);
    ddpl_tensor_release(xt);
    return lb_finish_in(L, box, f);
}

static int l_slogdet(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "linalg.slogdet");
    lb_check_no_more_args(L, 1, "linalg.slogdet");
    lb_box *s = lb_newbox(L), *l = lb_newbox(L);
    if (ddpl_linalg_slogdet(x, &s->t, &l->t) < 0) lb_error_in(L, "linalg.slogdet");
    lb_gc_account(L);
    return 2;
}

static const char *const chol_opts[] = {"upper", NULL};

static int l_cholesky(lua_State *L)
{
    const char *f = "linalg.cholesky";
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, f, chol_opts);
    ddpl_tensor *x = lb_check(L, 1, f);
    if (a.n > 1) lb_check_no_more_args(L, 1, f);
    bool upper = lb_bool(L, lb_arg(L, &a, 0, "upper"), f, "upper", false);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_linalg_cholesky(x, upper);
    return lb_finish_in(L, box, f);
}

/* a string option at idx (0: dflt) */
static const char *str_opt(lua_State *L, int idx, const char *fname, const char *name,
                           const char *dflt)
{
    if (!idx) return dflt;
    if (lua_type(L, idx) != LUA_TSTRING) lb_opterror(L, idx, fname, name, "a string");
    return lua_tostring(L, idx);
}

static const char *const qr_opts[] = {"mode", NULL};

/* qr(A [, mode='reduced']) -> Q, R */
static int l_qr(lua_State *L)
{
    const char *f = "linalg.qr";
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, f, qr_opts);
    ddpl_tensor *x = lb_check(L, 1, f);
    if (a.n > 2) lb_check_no_more_args(L, 2, f);
    const char *mode = str_opt(L, lb_arg(L, &a, 2, "mode"), f, "mode", "reduced");
    lb_box *q = lb_newbox(L), *r = lb_newbox(L);
    if (ddpl_linalg_qr(x, mode, &q->t, &r->t) < 0) lb_error_in(L, f);
    lb_gc_account(L);
    return 2;
}

static const char *const svd_opts[] = {"full_matrices", NULL};

/* svd(A [, full_matrices=true]) -> U, S, Vh */
static int l_svd(lua_State *L)
{
    const char *f = "linalg.svd";
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, f, svd_opts);
    ddpl_tensor *x = lb_check(L, 1, f);
    if (a.n > 2) lb_check_no_more_args(L, 2, f);
    bool full = lb_bool(L, lb_arg(L, &a, 2, "full_matrices"), f, "full_matrices", true);
    lb_box *u = lb_newbox(L), *s = lb_newbox(L), *vh = lb_newbox(L);
    if (ddpl_linalg_svd(x, full, &u->t, &s->t, &vh->t) < 0) lb_error_in(L, f);
    lb_gc_account(L);
    return 3;
}

static const char *const uplo_opts[] = {"UPLO", NULL};

/* eigh(A [, UPLO='L']) -> eigenvalues, eigenvectors */
static int l_eigh(lua_State *L)
{
    const char *f = "linalg.eigh";
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, f, uplo_opts);
    ddpl_tensor *x = lb_check(L, 1, f);
    if (a.n > 2) lb_check_no_more_args(L, 2, f);
    const char *uplo = str_opt(L, lb_arg(L, &a, 2, "UPLO"), f, "UPLO", "L");
    lb_box *w = lb_newbox(L), *v = lb_newbox(L);
    if (ddpl_linalg_eigh(x, uplo, &w->t, &v->t) < 0) lb_error_in(L, f);
    lb_gc_account(L);
    return 2;
}

static int l_eigvalsh(lua_State *L)
{
    const char *f = "linalg.eigvalsh";
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, f, uplo_opts);
    ddpl_tensor *x = lb_check(L, 1, f);
    if (a.n > 2) lb_check_no_more_args(L, 2, f);
    const char *uplo = str_opt(L, lb_arg(L, &a, 2, "UPLO"), f, "UPLO", "L");
    lb_box *box = lb_newbox(L);
    box->t = ddpl_linalg_eigvalsh(x, uplo);
    return lb_finish_in(L, box, f);
}

static const char *const pinv_opts[] = {"atol", "rtol", "hermitian", NULL};

typedef ddpl_tensor *(*tol_fn)(ddpl_tensor *, double, double, bool, bool, bool);

/* pinv / matrix_rank(A [, rtol] [, {atol=, rtol=, hermitian=}]); a positional rtol is PyTorch's
 * rcond */
static int with_tol(lua_State *L, const char *f, tol_fn fn)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, f, pinv_opts);
    ddpl_tensor *x = lb_check(L, 1, f);
    if (a.n > 2) lb_check_no_more_args(L, 2, f);
    int ai = lb_arg(L, &a, 0, "atol"), ri = lb_arg(L, &a, 2, "rtol");
    if (ai && lua_isnil(L, ai)) ai = 0;
    if (ri && lua_isnil(L, ri)) ri = 0;
    double atol = lb_num(L, ai, f, "atol", 0.0), rtol = lb_num(L, ri, f, "rtol", 0.0);
    bool herm = lb_bool(L, lb_arg(L, &a, 0, "hermitian"), f, "hermitian", false);
    lb_box *box = lb_newbox(L);
    box->t = fn(x, atol, rtol, ai != 0, ri != 0, herm);
    return lb_finish_in(L, box, f);
}

static int l_pinv(lua_State *L)
{
    return with_tol(L, "linalg.pinv", ddpl_linalg_pinv);
}
static int l_matrix_rank(lua_State *L)
{
    return with_tol(L, "linalg.matrix_rank", ddpl_linalg_matrix_rank);
}

/* x:det(), x:inverse(), x:slogdet() as torch.Tensor's */
static int m_det(lua_State *L)
{
    return unary(L, "det", ddpl_linalg_det);
}
static int m_inverse(lua_State *L)
{
    return unary(L, "inverse", ddpl_linalg_inv);
}

const luaL_Reg lb_linalg_methods[] = {
    {"outer", m_outer},     {"ger", m_ger},         {"dot", m_dot},
    {"vdot", m_vdot},       {"inner", m_inner},     {"kron", m_kron},
    {"cross", m_cross},     {"baddbmm", m_baddbmm}, {"addbmm", m_addbmm},
    {"addmv", m_addmv},     {"addr", m_addr},       {"det", m_det},
    {"inverse", m_inverse}, {"slogdet", l_slogdet}, {"tensordot", f_tensordot},
    {NULL, NULL},
};

const luaL_Reg lb_linalg_functions[] = {
    {"einsum", f_einsum},
    {"cdist", f_cdist},
    {NULL, NULL},
};

const luaL_Reg lb_linalg_table[] = {
    {"norm", l_norm},
    {"vector_norm", l_vector_norm},
    {"matrix_norm", l_matrix_norm},
    {"inv", l_inv},
    {"solve", l_solve},
    {"det", l_det},
    {"slogdet", l_slogdet},
    {"cholesky", l_cholesky},
    {"qr", l_qr},
    {"svd", l_svd},
    {"svdvals", l_svdvals},
    {"eigh", l_eigh},
    {"eigvalsh", l_eigvalsh},
    {"pinv", l_pinv},
    {"matrix_rank", l_matrix_rank},
    {"cross", l_cross},
    {NULL, NULL},
};
