/* lua/bind_shape.c: PyTorch's shape functions (ops/shape_*.c).
 * defines: lb_shape_methods (x:NAME, also ddpl.NAME: repeat tile repeat_interleave flip fliplr
 *          flipud roll rot90 movedim moveaxis unflatten tensor_split tril triu tril_ triu_ diag
 *          diagonal diag_embed trace broadcast_to), lb_shape_functions (ddpl.tril_indices
 *          triu_indices broadcast_tensors broadcast_shapes block_diag cartesian_prod meshgrid).
 *
 * PyTorch's positional order, keyword names in the trailing options table (API.md). Sizes, dims
 * and shifts are integers or one Lua list of them; the variable-length results
 * (tensor_split, broadcast_tensors, broadcast_shapes, meshgrid) are Lua lists; functions of
 * several tensors take them as arguments or as one list. `repeat` is a Lua keyword: call it as
 * x['repeat'](x, ...). */
#include <string.h>

#include "binding.h"
#include "core/core.h"

/* An integer that must fit an int (dims), or dflt when absent (idx 0). */
static int int_arg(lua_State *L, int idx, const char *fname, const char *name, int dflt)
{
    int64_t v = lb_int(L, idx, fname, name, dflt);
    if (v < INT32_MIN || v > INT32_MAX)
        luaL_error(L, "%s: '%s' is out of range (%I)", fname, name, (lua_Integer)v);
    return (int)v;
}

/* An integer or a list of at most DDPL_MAX_DIMS integers at idx, into out; returns the count. */
static int int_list(lua_State *L, int idx, const char *fname, const char *name, int64_t *out)
{
    if (lua_type(L, idx) != LUA_TTABLE) {
        out[0] = lb_int(L, idx, fname, name, 0);
        return 1;
    }
    lua_Integer n = luaL_len(L, idx);
    if (n < 0 || n > DDPL_MAX_DIMS)
        luaL_error(L, "%s: '%s' has %I entries, at most %d are supported", fname, name, n,
                   DDPL_MAX_DIMS);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, idx, i + 1);
        out[i] = lb_int(L, lua_gettop(L), fname, name, 0);
        lua_pop(L, 1);
    }
    return (int)n;
}

/* As int_list, for dims (each must fit an int). */
static int dim_list(lua_State *L, int idx, const char *fname, const char *name, int *out)
{
    int64_t v[DDPL_MAX_DIMS];
    int n = int_list(L, idx, fname, name, v);
    for (int i = 0; i < n; i++) {
        if (v[i] < INT32_MIN || v[i] > INT32_MAX)
            luaL_error(L, "%s: dim %I in '%s' is out of range", fname, (lua_Integer)v[i], name);
        out[i] = (int)v[i];
    }
    return n;
}

static int m_repeat(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "repeat");
    int64_t r[DDPL_MAX_DIMS];
    int n = lb_sizes(L, 2, lua_gettop(L), "repeat", r);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_repeat(x, n, r);
    return lb_finish_in(L, box, "repeat");
}

static int m_tile(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "tile");
    int64_t r[DDPL_MAX_DIMS];
    int n = lb_sizes(L, 2, lua_gettop(L), "tile", r);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_tile(x, n, r);
    return lb_finish_in(L, box, "tile");
}

static const char *const interleave_opts[] = {"repeats", "dim", "output_size", NULL};

/* repeat_interleave(repeats [, dim [, {output_size}]]) with repeats an integer or an int64
 * tensor; ddpl.repeat_interleave(repeats_tensor) alone gives the repeated indices. */
static int m_repeat_interleave(lua_State *L)
{
    const char *fname = "repeat_interleave";
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, interleave_opts);
    int ri = lb_arg(L, &a, 2, "repeats");
    int di = lb_arg(L, &a, 3, "dim");
    int dim = int_arg(L, di, fname, "dim", 0);
    int oi = lb_arg(L, &a, 0, "output_size");
    int64_t output_size = lb_int(L, oi, fname, "output_size", -1);
    if (output_size < -1 || (oi && output_size < 0)) /* -1 is "not given" only when absent */
        return luaL_error(L, "%s: output_size must be non-negative, got %I", fname,
                          (lua_Integer)output_size);
    ddpl_tensor *rt = ri && lua_type(L, ri) != LUA_TNUMBER ? lb_check(L, ri, fname) : NULL;
    int64_t reps = ri && !rt ? lb_int(L, ri, fname, "repeats", 0) : 0;
    lb_box *box = lb_newbox(L);
    if (!ri && di) return luaL_error(L, "%s: dim needs an input and repeats", fname);
    if (!ri) /* x is the repeats */
        box->t = ddpl_repeat_interleave_tensor(NULL, x, false, 0, output_size);
    else if (rt)
        box->t = ddpl_repeat_interleave_tensor(x, rt, di != 0, dim, output_size);
    else
        box->t = ddpl_repeat_interleave(x, reps, di != 0, dim, output_size);
    return lb_finish_in(L, box, fname);
}

/* flip(dims...) / flip({dims}) */
static int m_flip(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "flip");
    int dims[DDPL_MAX_DIMS], n;
    int top = lua_gettop(L);
    if (top == 2 && lua_type(L, 2) == LUA_TTABLE) {
        n = dim_list(L, 2, "flip", "dims", dims);
    } else {
        if (top - 1 > DDPL_MAX_DIMS)
            return luaL_error(L, "flip: %d dims given, at most %d are supported", top - 1,
                              DDPL_MAX_DIMS);
        if (top < 2) return luaL_error(L, "flip: expected the dims to flip as argument 2");
        n = top - 1;
        for (int i = 0; i < n; i++) dims[i] = lb_dim(L, i + 2, "flip");
    }
    lb_box *box = lb_newbox(L);
    box->t = ddpl_flip(x, n, dims);
    return lb_finish_in(L, box, "flip");
}

static int m_fliplr(lua_State *L)
{
    return lb_unary(L, "fliplr", ddpl_fliplr);
}

static int m_flipud(lua_State *L)
{
    return lb_unary(L, "flipud", ddpl_flipud);
}

static const char *const roll_opts[] = {"shifts", "dims", NULL};

/* roll(shifts [, dims]): each an integer or a list; no dims rolls the flattened tensor */
static int m_roll(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "roll");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "roll", roll_opts);
    lb_check_no_more_args(L, a.opts ? 4 : 3, "roll");
    int si = lb_arg(L, &a, 2, "shifts");
    if (!si) return luaL_error(L, "roll: expected shifts (an integer or a list) as argument 2");
    int64_t shifts[DDPL_MAX_DIMS];
    int dims[DDPL_MAX_DIMS];
    int ns = int_list(L, si, "roll", "shifts", shifts);
    int di = lb_arg(L, &a, 3, "dims");
    int nd = di ? dim_list(L, di, "roll", "dims", dims) : 0;
    lb_box *box = lb_newbox(L);
    box->t = ddpl_roll(x, ns, shifts, nd, dims);
    return lb_finish_in(L, box, "roll");
}

static const char *const rot90_opts[] = {"k", "dims", NULL};

/* rot90([k=1 [, dims={0, 1}]]) */
static int m_rot90(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "rot90");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "rot90", rot90_opts);
    lb_check_no_more_args(L, a.opts ? 4 : 3, "rot90");
    int64_t k = lb_int(L, lb_arg(L, &a, 2, "k"), "rot90", "k", 1);
    int dims[DDPL_MAX_DIMS] = {0, 1};
    int di = lb_arg(L, &a, 3, "dims");
    int nd = di ? dim_list(L, di, "rot90", "dims", dims) : 2;
    if (nd != 2)
        return luaL_error(L, "rot90: expected total rotation dims == 2, but got dims = %d", nd);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_rot90(x, k, dims[0], dims[1]);
    return lb_finish_in(L, box, "rot90");
}

/* movedim(source, destination): integers or lists of the same length */
static int movedim(lua_State *L, const char *fname)
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_check_no_more_args(L, 3, fname);
    if (lua_isnoneornil(L, 2) || lua_isnoneornil(L, 3))
        return luaL_error(L, "%s: expected source and destination (integers or lists)", fname);
    int src[DDPL_MAX_DIMS], dst[DDPL_MAX_DIMS];
    int ns = dim_list(L, 2, fname, "source", src);
    int nd = dim_list(L, 3, fname, "destination", dst);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_movedim(x, ns, src, dst, nd);
    return lb_finish_in(L, box, fname);
}

static int m_movedim(lua_State *L)
{
    return movedim(L, "movedim");
}

static int m_moveaxis(lua_State *L)
{
    return movedim(L, "moveaxis");
}

/* unflatten(dim, sizes) */
static int m_unflatten(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "unflatten");
    lb_check_no_more_args(L, 3, "unflatten");
    int dim = lb_dim(L, 2, "unflatten");
    int64_t sizes[DDPL_MAX_DIMS];
    int n = lb_sizes_table(L, 3, "unflatten", "sizes", sizes);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_unflatten(x, dim, n, sizes);
    return lb_finish_in(L, box, "unflatten");
}

/* Pushes a list of n empty boxes and returns their tensor slots (owned by the list: the boxes
 * release whatever is put there, even if a later step raises). */
static lb_box **box_list(lua_State *L, int n)
{
    lb_box **slots = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *slots, 0);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        slots[i] = lb_newbox(L);
        lua_rawseti(L, -2, i + 1);
    }
    lua_remove(L, -2); /* the slots stay reachable through the list's boxes */
    return slots;
}

/* The results of a C call that fills outs (n of them, all or none) moved into the list's boxes
 * (the list is on top of the stack). */
static int fill_list(lua_State *L, lb_box **slots, ddpl_tensor **outs, int n, int rc,
                     const char *fname)
{
    if (rc < 0) lb_error_in(L, fname);
    for (int i = 0; i < n; i++) slots[i]->t = outs[i];
    lb_gc_account(L);
    return 1;
}

static const char *const split_opts[] = {"dim", NULL};

/* tensor_split(indices_or_sections [, dim=0]): an integer (sections), a list of indices, or an
 * int64 tensor (0-D: sections, 1-D: indices) */
static int m_tensor_split(lua_State *L)
{
    const char *fname = "tensor_split";
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, split_opts);
    lb_check_no_more_args(L, a.opts ? 4 : 3, fname);
    int dim = int_arg(L, lb_arg(L, &a, 3, "dim"), fname, "dim", 0);
    if (lua_isnoneornil(L, 2))
        return luaL_error(L, "%s: expected indices_or_sections as argument 2", fname);
    int64_t sections = 0, n = 0;
    int64_t *idx = NULL;
    if (lua_type(L, 2) == LUA_TNUMBER) {
        sections = lb_int(L, 2, fname, "sections", 0);
    } else if (lua_type(L, 2) == LUA_TTABLE && !lb_testbox(L, 2)) {
        n = luaL_len(L, 2);
        if (n < 0 || n > (1 << 24))
            return luaL_error(L, "%s: %I indices given, at most 2^24 are supported", fname,
                              (lua_Integer)n);
        idx = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *idx, 0);
        for (int64_t i = 0; i < n; i++) {
            lua_rawgeti(L, 2, i + 1);
            idx[i] = lb_int(L, lua_gettop(L), fname, "indices", 0);
            lua_pop(L, 1);
        }
    } else {
        ddpl_tensor *t = lb_check(L, 2, fname);
        if (t->dtype != DDPL_INT64 || t->ndim > 1)
            return luaL_error(L,
                              "%s: a tensor of indices_or_sections must be an int64 0-D or 1-D "
                              "tensor",
                              fname);
        n = ddpl_tensor_numel(t);
        if (n > (1 << 24))
            return luaL_error(L, "%s: %I indices given, at most 2^24 are supported", fname,
                              (lua_Integer)n);
        idx = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *idx, 0);
        double *v = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *v, 0);
        if (ddpl_tensor_to_doubles(t, v) < 0) lb_error_in(L, fname);
        for (int64_t i = 0; i < n; i++) idx[i] = (int64_t)v[i]; /* indices: exact below 2^53 */
        if (t->ndim == 0) sections = idx[0], idx = NULL;
    }
    if (!idx && (sections <= 0 || sections > (1 << 24)))
        return luaL_error(L,
                          "%s: number of sections must be larger than 0 (and at most 2^24), "
                          "got %I",
                          fname, (lua_Integer)sections);
    int nout = idx ? (int)n + 1 : (int)sections;
    ddpl_tensor **outs = lua_newuserdatauv(L, (size_t)nout * sizeof *outs, 0);
    lb_box **slots = box_list(L, nout);
    int rc = ddpl_tensor_split(x, sections, (int)n, idx, dim, outs);
    return fill_list(L, slots, outs, nout, rc, fname);
}

static const char *const diagonal_only[] = {"diagonal", NULL};

/* tril/triu([diagonal=0]), also in place */
static int triangle(lua_State *L, const char *fname, ddpl_tensor *(*fn)(ddpl_tensor *, int64_t),
                    int (*fn_)(ddpl_tensor *, int64_t))
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, diagonal_only);
    lb_check_no_more_args(L, a.opts ? 3 : 2, fname);
    int64_t k = lb_int(L, lb_arg(L, &a, 2, "diagonal"), fname, "diagonal", 0);
    if (fn_) {
        if (fn_(x, k) < 0) lb_error_in(L, fname);
        lua_settop(L, 1);
        return 1;
    }
    lb_box *box = lb_newbox(L);
    box->t = fn(x, k);
    return lb_finish_in(L, box, fname);
}

static int m_tril(lua_State *L)
{
    return triangle(L, "tril", ddpl_tril, NULL);
}
static int m_triu(lua_State *L)
{
    return triangle(L, "triu", ddpl_triu, NULL);
}
static int m_tril_(lua_State *L)
{
    return triangle(L, "tril_", NULL, ddpl_tril_);
}
static int m_triu_(lua_State *L)
{
    return triangle(L, "triu_", NULL, ddpl_triu_);
}

/* diag([diagonal=0]) */
static int m_diag(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "diag");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "diag", diagonal_only);
    lb_check_no_more_args(L, a.opts ? 3 : 2, "diag");
    int64_t k = lb_int(L, lb_arg(L, &a, 2, "diagonal"), "diag", "diagonal", 0);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_diag(x, k);
    return lb_finish_in(L, box, "diag");
}

static const char *const diagonal_opts[] = {"offset", "dim1", "dim2", NULL};

/* diagonal([offset=0 [, dim1 [, dim2]]]) and diag_embed: PyTorch's defaults differ */
static int diag_dims(lua_State *L, const char *fname, int dflt1, int dflt2,
                     ddpl_tensor *(*fn)(ddpl_tensor *, int64_t, int, int))
{
    ddpl_tensor *x = lb_check(L, 1, fname);
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, diagonal_opts);
    lb_check_no_more_args(L, a.opts ? 5 : 4, fname);
    int64_t k = lb_int(L, lb_arg(L, &a, 2, "offset"), fname, "offset", 0);
    int d1 = int_arg(L, lb_arg(L, &a, 3, "dim1"), fname, "dim1", dflt1);
    int d2 = int_arg(L, lb_arg(L, &a, 4, "dim2"), fname, "dim2", dflt2);
    lb_box *box = lb_newbox(L);
    box->t = fn(x, k, d1, d2);
    return lb_finish_in(L, box, fname);
}

static int m_diagonal(lua_State *L)
{
    return diag_dims(L, "diagonal", 0, 1, ddpl_diagonal);
}

static int m_diag_embed(lua_State *L)
{
    return diag_dims(L, "diag_embed", -2, -1, ddpl_diag_embed);
}

static int m_trace(lua_State *L)
{
    return lb_unary(L, "trace", ddpl_trace);
}

static int m_broadcast_to(lua_State *L)
{
    ddpl_tensor *x = lb_check(L, 1, "broadcast_to");
    int64_t sizes[DDPL_MAX_DIMS];
    int n = lb_sizes(L, 2, lua_gettop(L), "broadcast_to", sizes);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_expand(x, n, sizes);
    return lb_finish_in(L, box, "broadcast_to");
}

static const char *const indices_opts[] = {"offset", "dtype", "device", NULL};

/* ddpl.tril_indices(row, col [, offset=0] [, {dtype='int64', device}]) */
static int tri_indices(lua_State *L, const char *fname, bool upper)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, fname, indices_opts);
    lb_check_no_more_args(L, a.opts ? 4 : 3, fname);
    if (a.n < 2) return luaL_error(L, "%s: expected row and col (integers)", fname);
    int64_t row = lb_int(L, 1, fname, "row", 0), col = lb_int(L, 2, fname, "col", 0);
    int64_t offset = lb_int(L, lb_arg(L, &a, 3, "offset"), fname, "offset", 0);
    int dti = lb_arg(L, &a, 0, "dtype"), devi = lb_arg(L, &a, 0, "device");
    ddpl_dtype dt = dti ? lb_dtype(L, dti, fname) : DDPL_INT64;
    ddpl_device dev = devi ? lb_device(L, devi, fname) : ddpl_cpu();
    lb_box *box = lb_newbox(L);
    box->t = upper ? ddpl_triu_indices(row, col, offset, dt, dev)
                   : ddpl_tril_indices(row, col, offset, dt, dev);
    return lb_finish_in(L, box, fname);
}

static int f_tril_indices(lua_State *L)
{
    return tri_indices(L, "tril_indices", false);
}

static int f_triu_indices(lua_State *L)
{
    return tri_indices(L, "triu_indices", true);
}

/* Tensors given as arguments first..last or as one list there (borrowed, in memory the Lua
 * stack owns); returns the count. */
static int tensor_args(lua_State *L, int first, int last, const char *fname, ddpl_tensor ***out)
{
    while (last >= first && lua_isnil(L, last)) last--; /* f(a, b, nil): a trailing absent opts */
    if (last == first && lua_type(L, first) == LUA_TTABLE && !lb_testbox(L, first))
        return lb_tensor_list(L, first, fname, out);
    int n = last >= first ? last - first + 1 : 0;
    for (int i = 0; i < n; i++) lb_check(L, first + i, fname);
    ddpl_tensor **ts = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *ts, 0);
    for (int i = 0; i < n; i++) ts[i] = lb_testbox(L, first + i)->t;
    *out = ts;
    return n;
}

static int f_broadcast_tensors(lua_State *L)
{
    ddpl_tensor **xs;
    int n = tensor_args(L, 1, lua_gettop(L), "broadcast_tensors", &xs);
    ddpl_tensor **outs = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *outs, 0);
    lb_box **slots = box_list(L, n);
    int rc = ddpl_broadcast_tensors(n, xs, outs);
    return fill_list(L, slots, outs, n, rc, "broadcast_tensors");
}

static const char *const meshgrid_opts[] = {"indexing", NULL};

/* ddpl.meshgrid(t1, t2, ... [, {indexing='ij'|'xy'}]) or meshgrid({t1, t2, ...} [, opts]) */
static int f_meshgrid(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "meshgrid", meshgrid_opts);
    int ii = lb_arg(L, &a, 0, "indexing");
    bool xy = false;
    if (ii) {
        const char *s = lua_type(L, ii) == LUA_TSTRING ? lua_tostring(L, ii) : NULL;
        if (!s || (strcmp(s, "ij") != 0 && strcmp(s, "xy") != 0))
            return luaL_error(L, "meshgrid: indexing must be 'ij' or 'xy', got %s",
                              s ? s : luaL_typename(L, ii));
        xy = strcmp(s, "xy") == 0;
    }
    ddpl_tensor **xs;
    int n = tensor_args(L, 1, a.n, "meshgrid", &xs);
    ddpl_tensor **outs = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *outs, 0);
    lb_box **slots = box_list(L, n);
    int rc = ddpl_meshgrid(n, xs, xy, outs);
    return fill_list(L, slots, outs, n, rc, "meshgrid");
}

static int f_block_diag(lua_State *L)
{
    ddpl_tensor **xs;
    int n = tensor_args(L, 1, lua_gettop(L), "block_diag", &xs);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_block_diag(n, xs);
    return lb_finish_in(L, box, "block_diag");
}

static int f_cartesian_prod(lua_State *L)
{
    ddpl_tensor **xs;
    int n = tensor_args(L, 1, lua_gettop(L), "cartesian_prod", &xs);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_cartesian_prod(n, xs);
    return lb_finish_in(L, box, "cartesian_prod");
}

/* ddpl.broadcast_shapes(shape1, shape2, ...): each a list of sizes or one integer; the
 * broadcast shape as a Lua list */
static int f_broadcast_shapes(lua_State *L)
{
    int top = lua_gettop(L), nd = 0;
    int64_t out[DDPL_MAX_DIMS], s[DDPL_MAX_DIMS];
    for (int i = 1; i <= top; i++) {
        int n = lua_type(L, i) == LUA_TTABLE
                    ? lb_sizes_table(L, i, "broadcast_shapes", "shape", s)
                    : (s[0] = lb_int(L, i, "broadcast_shapes", "shape", 0), 1);
        for (int k = 0; k < n; k++)
            if (s[k] < 0)
                return luaL_error(L,
                                  "broadcast_shapes: trying to create tensor with negative "
                                  "dimension %I",
                                  (lua_Integer)s[k]);
        if (ddpl_broadcast_shape("broadcast_shapes", nd, out, n, s, &nd, out) < 0)
            lb_error_in(L, "broadcast_shapes");
    }
    lua_createtable(L, nd, 0);
    for (int k = 0; k < nd; k++) {
        lua_pushinteger(L, (lua_Integer)out[k]);
        lua_rawseti(L, -2, k + 1);
    }
    return 1;
}

const luaL_Reg lb_shape_methods[] = {
    {"repeat", m_repeat},
    {"tile", m_tile},
    {"repeat_interleave", m_repeat_interleave},
    {"flip", m_flip},
    {"fliplr", m_fliplr},
    {"flipud", m_flipud},
    {"roll", m_roll},
    {"rot90", m_rot90},
    {"movedim", m_movedim},
    {"moveaxis", m_moveaxis},
    {"unflatten", m_unflatten},
    {"tensor_split", m_tensor_split},
    {"tril", m_tril},
    {"triu", m_triu},
    {"tril_", m_tril_},
    {"triu_", m_triu_},
    {"diag", m_diag},
    {"diagonal", m_diagonal},
    {"diag_embed", m_diag_embed},
    {"trace", m_trace},
    {"broadcast_to", m_broadcast_to},
    {NULL, NULL},
};

const luaL_Reg lb_shape_functions[] = {
    {"tril_indices", f_tril_indices},
    {"triu_indices", f_triu_indices},
    {"broadcast_tensors", f_broadcast_tensors},
    {"broadcast_shapes", f_broadcast_shapes},
    {"meshgrid", f_meshgrid},
    {"block_diag", f_block_diag},
    {"cartesian_prod", f_cartesian_prod},
    {NULL, NULL},
};
