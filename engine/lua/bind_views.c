/* lua/bind_views.c: tensor methods that return views sharing the tensor's storage.
 * defines: lb_view_methods: view reshape view_as reshape_as flatten unsqueeze squeeze t
 *          transpose permute narrow select expand expand_as as_strided chunk split unbind.
 *
 * Sizes are given as integers (x:view(2, 3)) or one table (x:view({2, 3})), as in PyTorch;
 * chunk, split and unbind return 1-based Lua lists of views. */
#include <limits.h>

#include "binding.h"
#include "core/checked.h"

typedef ddpl_tensor *(*sized_fn)(ddpl_tensor *, int, const int64_t *);

static int sized(lua_State *L, const char *fname, sized_fn fn)
{
    ddpl_tensor *t = lb_check(L, 1, fname);
    int64_t sizes[DDPL_MAX_DIMS];
    int n = lb_sizes(L, 2, lua_gettop(L), fname, sizes);
    lb_box *box = lb_newbox(L);
    box->t = fn(t, n, sizes);
    return lb_finish_in(L, box, fname);
}

static int m_view(lua_State *L)
{
    return sized(L, "view", ddpl_view);
}
static int m_reshape(lua_State *L)
{
    return sized(L, "reshape", ddpl_reshape);
}
static int m_expand(lua_State *L)
{
    return sized(L, "expand", ddpl_expand);
}

/* x:view_as(y) and friends: the shape of another tensor. */
static int like(lua_State *L, const char *fname, sized_fn fn)
{
    ddpl_tensor *t = lb_check(L, 1, fname);
    ddpl_tensor *o = lb_check(L, 2, fname);
    lb_box *box = lb_newbox(L);
    box->t = fn(t, ddpl_tensor_ndim(o), ddpl_tensor_sizes(o));
    return lb_finish_in(L, box, fname);
}

static int m_view_as(lua_State *L)
{
    return like(L, "view_as", ddpl_view);
}
static int m_reshape_as(lua_State *L)
{
    return like(L, "reshape_as", ddpl_reshape);
}
static int m_expand_as(lua_State *L)
{
    return like(L, "expand_as", ddpl_expand);
}

static int m_flatten(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "flatten");
    int start = lua_isnoneornil(L, 2) ? 0 : lb_dim(L, 2, "flatten");
    int end = lua_isnoneornil(L, 3) ? -1 : lb_dim(L, 3, "flatten");
    lb_box *box = lb_newbox(L);
    box->t = ddpl_flatten(t, start, end);
    return lb_finish_in(L, box, "flatten");
}

static int m_unsqueeze(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "unsqueeze");
    int d = lb_dim(L, 2, "unsqueeze");
    lb_box *box = lb_newbox(L);
    box->t = ddpl_unsqueeze(t, d);
    return lb_finish_in(L, box, "unsqueeze");
}

static int m_squeeze(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "squeeze");
    bool all = lua_isnoneornil(L, 2);
    int d = all ? 0 : lb_dim(L, 2, "squeeze");
    lb_box *box = lb_newbox(L);
    box->t = all ? ddpl_squeeze_all(t) : ddpl_squeeze(t, d);
    return lb_finish_in(L, box, "squeeze");
}

static int m_t(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "t");
    lb_box *box = lb_newbox(L);
    box->t = ddpl_t(t);
    return lb_finish_in(L, box, "t");
}

static int m_transpose(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "transpose");
    int d0 = lb_dim(L, 2, "transpose"), d1 = lb_dim(L, 3, "transpose");
    lb_box *box = lb_newbox(L);
    box->t = ddpl_transpose(t, d0, d1);
    return lb_finish_in(L, box, "transpose");
}

static int m_permute(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "permute");
    int64_t dims64[DDPL_MAX_DIMS];
    int n = lb_sizes(L, 2, lua_gettop(L), "permute", dims64);
    int dims[DDPL_MAX_DIMS];
    for (int i = 0; i < n; i++) dims[i] = (int)dims64[i];
    lb_box *box = lb_newbox(L);
    box->t = ddpl_permute(t, n, dims);
    return lb_finish_in(L, box, "permute");
}

static int m_narrow(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "narrow");
    int d = lb_dim(L, 2, "narrow");
    int64_t start = lb_int(L, 3, "narrow", "start", 0);
    int64_t len = lb_int(L, 4, "narrow", "length", 0);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_narrow(t, d, start, len);
    return lb_finish_in(L, box, "narrow");
}

static int m_select(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "select");
    int d = lb_dim(L, 2, "select");
    int64_t i = lb_int(L, 3, "select", "index", 0);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_select(t, d, i);
    return lb_finish_in(L, box, "select");
}

static int m_as_strided(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "as_strided");
    int64_t sizes[DDPL_MAX_DIMS], strides[DDPL_MAX_DIMS];
    int n = lb_sizes_table(L, 2, "as_strided", "size", sizes);
    int ns = lb_sizes_table(L, 3, "as_strided", "stride", strides);
    if (n != ns) return luaL_error(L, "as_strided: %d sizes but %d strides given", n, ns);
    int64_t offset = lua_isnoneornil(L, 4) ? 0 : lb_int(L, 4, "as_strided", "storage_offset", 0);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_as_strided(t, n, sizes, strides, offset);
    return lb_finish_in(L, box, "as_strided");
}

/* Size of dim d (wrapped) or an error naming fname. */
static int64_t dim_size(lua_State *L, ddpl_tensor *t, int *d, const char *fname)
{
    int nd = ddpl_tensor_ndim(t);
    if (nd == 0) luaL_error(L, "%s: expected a tensor with at least one dimension", fname);
    if (*d < -nd || *d >= nd)
        luaL_error(L, "%s: dimension %d out of range for a tensor of %d dimensions", fname, *d, nd);
    if (*d < 0) *d += nd;
    return ddpl_tensor_size(t, *d);
}

/* Appends narrow(t, d, start, len) to the list on top of the stack. */
static void append_narrow(lua_State *L, ddpl_tensor *t, int d, int64_t start, int64_t len, int pos)
{
    lb_box *box = lb_newbox(L);
    box->t = ddpl_narrow(t, d, start, len);
    lb_finish(L, box);
    lua_rawseti(L, -2, pos);
}

static int m_chunk(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "chunk");
    int64_t chunks = lb_int(L, 2, "chunk", "chunks", 0);
    int d = lua_isnoneornil(L, 3) ? 0 : lb_dim(L, 3, "chunk");
    if (chunks <= 0)
        return luaL_error(L, "chunk: expected a positive number of chunks, got %I",
                          (lua_Integer)chunks);
    int64_t size = dim_size(L, t, &d, "chunk");
    /* PyTorch: ceil(size / chunks), which may give fewer chunks; no size + chunks overflow */
    int64_t step = size / chunks + (size % chunks != 0);
    if (step == 0) step = 1;
    lua_newtable(L);
    int pos = 1;
    for (int64_t s = 0; s < size; s += step)
        append_narrow(L, t, d, s, s + step <= size ? step : size - s, pos++);
    if (size == 0) append_narrow(L, t, d, 0, 0, pos);
    return 1;
}

static int m_split(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "split");
    int d = lua_isnoneornil(L, 3) ? 0 : lb_dim(L, 3, "split");
    int64_t size = dim_size(L, t, &d, "split");
    if (lua_type(L, 2) == LUA_TTABLE) { /* explicit section sizes that must add up */
        lua_Integer n = luaL_len(L, 2);
        int64_t total = 0;
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, 2, i);
            int64_t s = lb_int(L, lua_gettop(L), "split", "split_size_or_sections", 0);
            lua_pop(L, 1);
            if (s < 0) return luaL_error(L, "split: section sizes must be non-negative");
            if (ddpl_add_overflow(total, s, &total))
                return luaL_error(L, "split: section sizes add up past 2^63");
        }
        if (total != size)
            return luaL_error(L, "split: section sizes add up to %I but dimension %d has size %I",
                              (lua_Integer)total, d, (lua_Integer)size);
        lua_createtable(L, (int)n, 0);
        int64_t start = 0;
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, 2, i);
            int64_t s = lua_tointeger(L, -1);
            lua_pop(L, 1);
            append_narrow(L, t, d, start, s, (int)i);
            start += s;
        }
        return 1;
    }
    int64_t step = lb_int(L, 2, "split", "split_size", 0);
    if (step <= 0)
        return luaL_error(L, "split: expected a positive split size, got %I", (lua_Integer)step);
    lua_newtable(L);
    int pos = 1;
    for (int64_t s = 0; s < size; s += step)
        append_narrow(L, t, d, s, s + step <= size ? step : size - s, pos++);
    if (size == 0) append_narrow(L, t, d, 0, 0, pos);
    return 1;
}

static int m_unbind(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "unbind");
    int d = lua_isnoneornil(L, 2) ? 0 : lb_dim(L, 2, "unbind");
    int64_t size = dim_size(L, t, &d, "unbind");
    if (size > INT_MAX) /* a Lua list cannot hold it (an expanded dimension can be 2^62) */
        return luaL_error(L, "unbind: dimension %d has size %I, more than a Lua list holds", d,
                          (lua_Integer)size);
    lua_createtable(L, (int)size, 0);
    for (int64_t i = 0; i < size; i++) {
        lb_box *box = lb_newbox(L);
        box->t = ddpl_select(t, d, i);
        lb_finish_in(L, box, "unbind");
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

const luaL_Reg lb_view_methods[] = {
    {"view", m_view},
    {"reshape", m_reshape},
    {"view_as", m_view_as},
    {"reshape_as", m_reshape_as},
    {"expand", m_expand},
    {"expand_as", m_expand_as},
    {"flatten", m_flatten},
    {"unsqueeze", m_unsqueeze},
    {"squeeze", m_squeeze},
    {"t", m_t},
    {"transpose", m_transpose},
    {"permute", m_permute},
    {"narrow", m_narrow},
    {"select", m_select},
    {"as_strided", m_as_strided},
    {"chunk", m_chunk},
    {"split", m_split},
    {"unbind", m_unbind},
    {NULL, NULL},
};
