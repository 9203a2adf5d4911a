/* lua/bind_index.c: x[key] and x[key] = v for keys other than an integer or a field name:
 * PyTorch's indexing (API.md, "Advanced indexing").
 * defines: lb_index_get, lb_index_set (called by bind_tensor.c's __index and __newindex).
 *
 * A key is an index tensor (int64/int32: positions along dim 0; bool: a mask over the leading
 * dims, as many as it has), or a Lua list with one entry per leading dim (later dims are kept
 * whole):
 *   i                an integer: that position; the dim goes away (PyTorch's x[i])
 *   {}               the whole dim (PyTorch's :)
 *   {a [, b [, s]]}  a:b:s, half-open as Python's slices (b nil or absent: to the end;
 *                    negatives count from the end; s >= 1)
 *   t                an index or mask tensor; the tensors index together, broadcast
 * As PyTorch does, the integers and slices are applied first, as views; the tensors then index
 * that view (ddpl_index), which places their result dims where PyTorch does. x[key] = v (a
 * tensor, which broadcasts, or a number) fills or copies into the view when the key has no
 * tensor, else writes with index_put_ into it; these are in-place writes that autograd records
 * (ops/inplace.c), a view's included. */
#include <string.h>

#include "binding.h"
#include "core/core.h" /* ddpl_storage_released */

/* What a key selects: x with its integers and slices applied, and the index entries (NULL for
 * a kept dim) that remain for ddpl_index. */
typedef struct {
    ddpl_tensor *view; /* owned */
    ddpl_tensor *entries[DDPL_MAX_DIMS];
    int n;
    bool has_tensor;
} key_plan;

static void plan_free(key_plan *p)
{
    ddpl_tensor_release(p->view);
    p->view = NULL;
}

/* Replaces p->view by next (a new reference; NULL: the engine's error, raised). */
static void step_view(lua_State *L, key_plan *p, ddpl_tensor *next, const char *fname)
{
    if (!next) {
        plan_free(p);
        lb_error_in(L, fname);
    }
    ddpl_tensor_release(p->view);
    p->view = next;
}

static int64_t slice_int(lua_State *L, key_plan *p, int t, int k, const char *fname, int entry,
                         int64_t dflt)
{
    int type = lua_rawgeti(L, t, k);
    int isint = 0;
    int64_t v = (int64_t)lua_tointegerx(L, -1, &isint);
    lua_pop(L, 1);
    if (type == LUA_TNIL) return dflt;
    if (!isint) {
        plan_free(p);
        luaL_error(L, "%s: entry %d of the key: a slice {start, stop, step} takes integers, got %s",
                   fname, entry, lua_typename(L, type));
    }
    return v;
}

/* An index tensor (int64/int32) or mask (bool) entry; others are an error. */
static ddpl_tensor *index_tensor(lua_State *L, key_plan *p, int idx, const char *fname, int entry)
{
    lb_box *b = lb_testbox(L, idx);
    if (!b) return NULL;
    if (!b->t || ddpl_storage_released(b->t->storage)) {
        plan_free(p);
        lb_check_box(L, b, fname);
    }
    ddpl_dtype dt = ddpl_tensor_dtype(b->t);
    if (dt != DDPL_INT64 && dt != DDPL_INT32 && dt != DDPL_BOOL && dt != DDPL_UINT8) {
        plan_free(p);
        luaL_error(L,
                   "%s: entry %d of the key: tensors used as indices must be long, int, byte or "
                   "bool tensors, got %s",
                   fname, entry, ddpl_dtype_name(dt));
    }
    return b->t;
}

/* Adds an index tensor entry at the current dim. */
static void add_tensor(lua_State *L, key_plan *p, ddpl_tensor *t, int *cur, const char *fname)
{
    int covers = ddpl_tensor_dtype(t) == DDPL_BOOL || ddpl_tensor_dtype(t) == DDPL_UINT8
                     ? ddpl_tensor_ndim(t)
                     : 1;
    if (*cur + covers > ddpl_tensor_ndim(p->view) || p->n == DDPL_MAX_DIMS) {
        int nd = ddpl_tensor_ndim(p->view);
        plan_free(p);
        luaL_error(L, "%s: too many indices for tensor of dimension %d", fname, nd);
    }
    p->entries[p->n++] = t;
    p->has_tensor = true;
    *cur += covers;
}

/* Parses the key at index k against x into p (raises on a bad key). */
static void plan_key(lua_State *L, ddpl_tensor *x, int k, const char *fname, key_plan *p)
{
    memset(p, 0, sizeof *p);
    p->view = ddpl_tensor_retain(x);
    int cur = 0;
    ddpl_tensor *t = index_tensor(L, p, k, fname, 1);
    if (t) {
        add_tensor(L, p, t, &cur, fname);
        return;
    }
    if (!lua_istable(L, k)) {
        plan_free(p);
        luaL_error(L,
                   "%s: expected an integer, a field name, an index or mask tensor, or a list "
                   "of per-dim entries, got %s",
                   fname, luaL_typename(L, k));
    }
    int len = (int)lua_rawlen(L, k);
    for (int e = 1; e <= len; e++) {
        int type = lua_rawgeti(L, k, e);
        int top = lua_gettop(L);
        int isint = 0;
        lua_Integer i = lua_tointegerx(L, top, &isint);
        if (type == LUA_TNUMBER && isint) {
            lua_pop(L, 1);
            if (cur >= ddpl_tensor_ndim(p->view)) {
                int nd = ddpl_tensor_ndim(x);
                plan_free(p);
                luaL_error(L, "%s: too many indices for tensor of dimension %d", fname, nd);
            }
            step_view(L, p, ddpl_select(p->view, cur, (int64_t)i), fname);
        } else if (type == LUA_TTABLE && !lb_testbox(L, top)) {
            int64_t a = slice_int(L, p, top, 1, fname, e, 0);
            int64_t b = slice_int(L, p, top, 2, fname, e, INT64_MAX);
            int64_t s = slice_int(L, p, top, 3, fname, e, 1);
            lua_pop(L, 1);
            if (cur >= ddpl_tensor_ndim(p->view)) {
                int nd = ddpl_tensor_ndim(x);
                plan_free(p);
                luaL_error(L, "%s: too many indices for tensor of dimension %d", fname, nd);
            }
            step_view(L, p, ddpl_slice(p->view, cur, a, b, s), fname);
            if (p->n < DDPL_MAX_DIMS) p->entries[p->n++] = NULL;
            cur++;
        } else if ((t = index_tensor(L, p, top, fname, e))) {
            lua_pop(L, 1); /* the key table keeps the tensor alive */
            add_tensor(L, p, t, &cur, fname);
        } else {
            plan_free(p);
            luaL_error(L,
                       "%s: entry %d of the key: expected an integer, a slice table ({} or "
                       "{start, stop, step}) or an index tensor, got %s",
                       fname, e, lua_typename(L, type));
        }
    }
}

int lb_index_get(lua_State *L, ddpl_tensor *x)
{
    key_plan p;
    plan_key(L, x, 2, "index", &p);
    lb_box *b = lb_newbox(L);
    if (p.has_tensor) {
        b->t = ddpl_index(p.view, p.n, p.entries);
        plan_free(&p);
    } else {
        b->t = p.view; /* integers and slices only: a view */
    }
    return lb_finish_in(L, b, "index");
}

int lb_index_set(lua_State *L, ddpl_tensor *x)
{
    const char *fname = "setindex";
    lb_check_operand(L, 3, fname);
    lb_check_value_fits(L, 3, fname, ddpl_tensor_dtype(x));
    key_plan p;
    plan_key(L, x, 2, fname, &p);
    int rc;
    if (!p.has_tensor) {
        if (lua_type(L, 3) == LUA_TNUMBER)
            rc = ddpl_fill_(p.view, lua_tonumber(L, 3));
        else
            rc = ddpl_copy_(p.view, ((lb_box *)lua_touserdata(L, 3))->t);
    } else {
        ddpl_tensor *v = lua_type(L, 3) == LUA_TNUMBER
                             ? ddpl_full(0, NULL, lua_tonumber(L, 3), ddpl_tensor_dtype(x),
                                         ddpl_tensor_device(x))
                             : ddpl_tensor_retain(((lb_box *)lua_touserdata(L, 3))->t);
        /* a Lua number is a scalar, as Python's (x[mask] = 0 is masked_fill_ on every device) */
        if (v && lua_type(L, 3) == LUA_TNUMBER) v->wrapped_number = true;
        rc = v ? ddpl_index_put_(p.view, p.n, p.entries, v, false) : -1;
        ddpl_tensor_release(v);
    }
    plan_free(&p);
    if (rc < 0) lb_error_in(L, fname);
    return 0;
}
