/* lua/bind_tensor.c: the ddplua.Tensor userdata: boxes, GC pacing, fields and metamethods.
 * defines: lb_testbox, lb_check, lb_opt, lb_newbox, lb_finish, lb_finish_in, lb_push_borrowed,
 *          lb_gc_account, ddpl_lua_push_tensor, ddpl_lua_check_tensor, ddpl_lua_test_tensor,
 *          lb_tensor_meta (__gc __close __index __newindex __len __tostring, + - * / ^ and
 *          unary -).
 *
 * __eq is deliberately not overloaded: == stays identity (as for every Lua userdata) and
 * x:eq(y) is the elementwise comparison. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "core/core.h" /* ddpl_storage_released */

/* ---- GC pacing ----
 * Lua sees a tensor as a pointer-sized userdata, so without help it would let gigabytes of dead
 * tensors wait for a collection that its own small heap never triggers. The binding therefore
 * watches the memory that Lua cannot see: the engine's allocated bytes plus a fixed charge per
 * live box for the C header and storage records. Growth since the last look (freed memory is not
 * credited) is GC debt, and every MiB of it is paid with a GC step of that size. Steps are not
 * enough in generational mode (lua.c's default): a dead tensor still sitting in a stale stack
 * slot when a metamethod such as __mul runs is marked, ages, and becomes old garbage that minor
 * collections never revisit. So a full collection runs whenever that memory has grown by a
 * quarter since the last one (and by at least LB_GC_FULL_MIN_BYTES): not Lua's doubling pause,
 * since a training script keeps its data set live (240 MB for Fashion-MNIST as float32) and
 * doubling would let as much garbage pile up again. Per box
 * this costs one atomic load and a few additions; the counters are per thread, as each thread
 * runs its own lua_State. */
#define LB_GC_HEADER_BYTES   256
#define LB_GC_STEP_BYTES     (1 << 20)
#define LB_GC_FULL_MIN_BYTES ((int64_t)64 << 20)
static _Thread_local int64_t live_boxes, gc_seen, gc_debt, gc_full_limit = LB_GC_FULL_MIN_BYTES;

static int64_t hidden_bytes(void)
{
    return ddpl_memory_allocated(DDPL_CPU) + ddpl_memory_allocated(DDPL_CUDA) +
           live_boxes * LB_GC_HEADER_BYTES;
}

void *lb_owner(lua_State *L, size_t size, const char *mt, lua_CFunction gc)
{
    void *p = lua_newuserdatauv(L, size, 0);
    memset(p, 0, size);
    if (luaL_newmetatable(L, mt)) {
        lua_pushcfunction(L, gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    return p;
}

void lb_gc_account(lua_State *L)
{
    int64_t now = hidden_bytes();
    if (now > gc_seen) gc_debt += now - gc_seen;
    gc_seen = now;
    if (gc_debt < LB_GC_STEP_BYTES) return;
    int64_t kb = gc_debt >> 10;
    gc_debt = 0;
    if (!lua_gc(L, LUA_GCISRUNNING)) return; /* collectgarbage('stop') is the user's call */
    if (now > gc_full_limit) {
        lua_gc(L, LUA_GCCOLLECT);
        int64_t live = gc_seen = hidden_bytes();
        gc_full_limit = live + (live / 4 > LB_GC_FULL_MIN_BYTES ? live / 4 : LB_GC_FULL_MIN_BYTES);
    } else {
        lua_gc(L, LUA_GCSTEP, (int)(kb > INT_MAX ? INT_MAX : kb));
    }
}

/* ---- boxes ---- */

lb_box *lb_testbox(lua_State *L, int idx)
{
    lb_box *b = lua_touserdata(L, idx);
    if (!b || !lua_getmetatable(L, idx)) return NULL;
    int same = lua_rawequal(L, -1, LB_MT_UPV);
    lua_pop(L, 1);
    return same ? b : NULL;
}

void lb_check_box(lua_State *L, const lb_box *b, const char *fname)
{
    if (!b->t) luaL_error(L, "%s: attempt to use a closed tensor", fname);
    if (ddpl_storage_released(b->t->storage))
        luaL_error(L,
                   "%s: the tensor's memory was released (a full parameter of an FSDP unit, "
                   "used outside the unit's forward and backward; utils.checkpoint must call "
                   "the unit itself)",
                   fname);
}

ddpl_tensor *lb_check(lua_State *L, int idx, const char *fname)
{
    lb_box *b = lb_testbox(L, idx);
    if (!b) lb_argerror(L, idx, fname, "a tensor");
    lb_check_box(L, b, fname);
    return b->t;
}

ddpl_tensor *lb_opt(lua_State *L, int idx, const char *fname)
{
    return idx == 0 || lua_isnoneornil(L, idx) ? NULL : lb_check(L, idx, fname);
}

lb_box *lb_newbox(lua_State *L)
{
    lb_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->t = NULL;
    live_boxes++; /* until its __gc */
    lua_pushvalue(L, LB_MT_UPV);
    lua_setmetatable(L, -2);
    return b;
}

int lb_finish(lua_State *L, lb_box *box)
{
    if (!box->t) lb_error(L);
    lb_gc_account(L);
    return 1;
}

int lb_finish_in(lua_State *L, lb_box *box, const char *fname)
{
    if (!box->t) lb_error_in(L, fname);
    lb_gc_account(L);
    return 1;
}

void lb_push_borrowed(lua_State *L, ddpl_tensor *t)
{
    if (!t) {
        lua_pushnil(L);
        return;
    }
    lb_box *b = lb_newbox(L);
    b->t = ddpl_tensor_retain(t);
}

/* ---- the public face (ddpl/lua.h): usable from any C function, so looked up by name ---- */

void ddpl_lua_push_tensor(lua_State *L, ddpl_tensor *t)
{
    if (!t) {
        lua_pushnil(L);
        return;
    }
    /* C code may push a tensor before any Lua code has required the library */
    if (luaL_getmetatable(L, LB_TENSOR_MT) == LUA_TNIL) {
        lua_pop(L, 1);
        luaL_requiref(L, "ddplua.core", luaopen_ddplua_core, 0);
        lua_pop(L, 1);
        luaL_getmetatable(L, LB_TENSOR_MT);
    }
    lb_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->t = NULL;
    live_boxes++;
    lua_insert(L, -2);
    lua_setmetatable(L, -2);
    b->t = ddpl_tensor_retain(t);
}

ddpl_tensor *ddpl_lua_test_tensor(lua_State *L, int idx)
{
    lb_box *b = luaL_testudata(L, idx, LB_TENSOR_MT);
    if (b && !b->t) luaL_error(L, "attempt to use a closed tensor");
    if (b && ddpl_storage_released(b->t->storage))
        luaL_error(L, "the tensor's memory was released (a full parameter of an FSDP unit, used "
                      "outside the unit's forward and backward; utils.checkpoint must call the "
                      "unit itself)");
    return b ? b->t : NULL;
}

ddpl_tensor *ddpl_lua_check_tensor(lua_State *L, int idx)
{
    lb_box *b = luaL_testudata(L, idx, LB_TENSOR_MT);
    if (!b) luaL_typeerror(L, idx, "tensor");
    if (!b->t) luaL_error(L, "attempt to use a closed tensor");
    return b->t;
}

/* ---- lifecycle ---- */

/* __close (and __gc): release once; a second close, or the GC after a close, is a no-op. */
static int t_close(lua_State *L)
{
    lb_box *b = lb_testbox(L, 1);
    if (b && b->t) {
        ddpl_tensor *t = b->t;
        b->t = NULL;
        ddpl_tensor_release(t);
    }
    return 0;
}

static int t_gc(lua_State *L)
{
    if (lb_testbox(L, 1)) live_boxes--;
    return t_close(L);
}

static int t_tostring(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "tostring");
    char *s = ddpl_tensor_format(t);
    if (!s) lb_error_in(L, "tostring");
    lua_pushstring(L, s);
    free(s);
    return 1;
}

static int t_len(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "len");
    if (ddpl_tensor_ndim(t) == 0) return luaL_error(L, "len: # of a 0-d tensor");
    lua_pushinteger(L, ddpl_tensor_size(t, 0));
    return 1;
}

/* ---- fields ---- */

static int push_field(lua_State *L, ddpl_tensor *t, const char *key)
{
    char buf[32];
    switch (key[0]) {
    case 'd':
        if (strcmp(key, "dtype") == 0) {
            lua_pushstring(L, ddpl_dtype_name(ddpl_tensor_dtype(t)));
            return 1;
        }
        if (strcmp(key, "device") == 0) {
            ddpl_device_format(ddpl_tensor_device(t), buf, sizeof buf);
            lua_pushstring(L, buf);
            return 1;
        }
        if (strcmp(key, "data") == 0) { /* PyTorch's .data: same storage, no history */
            lb_box *b = lb_newbox(L);
            b->t = ddpl_detach(t);
            return lb_finish(L, b);
        }
        break;
    case 'r':
        if (strcmp(key, "requires_grad") == 0) {
            lua_pushboolean(L, ddpl_tensor_requires_grad(t));
            return 1;
        }
        break;
    case 'g':
        if (strcmp(key, "grad") == 0) {
            lb_push_borrowed(L, ddpl_tensor_grad(t));
            return 1;
        }
        if (strcmp(key, "grad_fn") == 0) {
            const char *name = ddpl_tensor_grad_fn_name(t);
            if (name)
                lua_pushstring(L, name);
            else
                lua_pushnil(L);
            return 1;
        }
        break;
    case '_':
        if (strcmp(key, "_version") == 0) {
            lua_pushinteger(L, (lua_Integer)ddpl_tensor_version(t));
            return 1;
        }
        break;
    case 'n':
        if (strcmp(key, "ndim") == 0) {
            lua_pushinteger(L, ddpl_tensor_ndim(t));
            return 1;
        }
        break;
    }
    lua_pushnil(L); /* unknown keys read as nil, as for any Lua object */
    return 1;
}

static int t_index(lua_State *L)
{
    if (lua_type(L, 2) == LUA_TSTRING) {
        lua_pushvalue(L, 2);
        if (lua_rawget(L, LB_METHODS_UPV) != LUA_TNIL) return 1; /* methods need no open check */
        lua_pop(L, 1);
        return push_field(L, lb_check(L, 1, "index"), lua_tostring(L, 2));
    }
    ddpl_tensor *t = lb_check(L, 1, "index");
    int isint = 0;
    lua_Integer i = lua_tointegerx(L, 2, &isint);
    if (lua_type(L, 2) == LUA_TNUMBER && !isint)
        return luaL_error(L, "index: expected an integer, got %s", lua_tostring(L, 2));
    if (!isint) return lb_index_get(L, t); /* a tensor or a list of per-dim entries */
    lb_box *b = lb_newbox(L);
    b->t = ddpl_select(t, 0, (int64_t)i);
    return lb_finish(L, b);
}

/* x[i] = v: copies a tensor or fills a number into row i (PyTorch's __setitem__). */
static int set_row(lua_State *L, ddpl_tensor *t, lua_Integer i)
{
    lb_check_operand(L, 3, "setindex");
    lb_check_value_fits(L, 3, "setindex", ddpl_tensor_dtype(t));
    ddpl_tensor *row = ddpl_select(t, 0, (int64_t)i);
    if (!row) lb_error_in(L, "setindex");
    int rc;
    if (lua_type(L, 3) == LUA_TNUMBER)
        rc = ddpl_fill_(row, lua_tonumber(L, 3));
    else
        rc = ddpl_copy_(row, ((lb_box *)lua_touserdata(L, 3))->t);
    ddpl_tensor_release(row);
    if (rc < 0) lb_error_in(L, "setindex");
    return 0;
}

static int t_newindex(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "setindex");
    int isint = 0;
    lua_Integer i = lua_tointegerx(L, 2, &isint);
    bool element_key = (isint && lua_type(L, 2) == LUA_TNUMBER) || lua_type(L, 2) == LUA_TTABLE ||
                       lua_type(L, 2) == LUA_TUSERDATA;
    if (element_key && lua_type(L, 3) == LUA_TBOOLEAN) { /* x[mask] = false: 0, as in Python */
        lua_pushinteger(L, lua_toboolean(L, 3));
        lua_replace(L, 3);
    }
    if (isint && lua_type(L, 2) == LUA_TNUMBER) return set_row(L, t, i);
    if (lua_type(L, 2) == LUA_TTABLE || lua_type(L, 2) == LUA_TUSERDATA)
        return lb_index_set(L, t); /* x[mask] = v, x[idx] = v, x[{...}] = v */
    const char *key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
    if (key && strcmp(key, "requires_grad") == 0) {
        if (lua_type(L, 3) != LUA_TBOOLEAN)
            return lb_opterror(L, 3, "requires_grad", "requires_grad", "a boolean");
        if (ddpl_tensor_set_requires_grad(t, lua_toboolean(L, 3)) < 0) lb_error_in(L, "setindex");
        return 0;
    }
    if (key && strcmp(key, "grad") == 0) {
        ddpl_tensor *g = NULL;
        if (!lua_isnil(L, 3)) {
            lb_box *b = lb_testbox(L, 3);
            if (!b) return lb_opterror(L, 3, "grad", "grad", "a tensor or nil");
            if (!(g = b->t)) return luaL_error(L, "grad: attempt to use a closed tensor");
        }
        if (ddpl_tensor_set_grad(t, g) < 0) lb_error_in(L, "setindex");
        return 0;
    }
    if (key && strcmp(key, "data") == 0) {
        /* p.data = v (PyTorch): this box now holds a new leaf sharing v's storage, keeping
         * p's requires_grad, so Lua code holding p (an optimizer, a module) sees the new
         * values, shape, dtype or device: nn.Module:to() relies on it. The old tensor's grad
         * and hooks stay with the old tensor, and other boxes of it do not change. */
        ddpl_tensor *v = lb_check(L, 3, "data");
        ddpl_tensor *d = ddpl_detach(v);
        if (!d) lb_error_in(L, "setindex");
        if (ddpl_tensor_requires_grad(t) && ddpl_tensor_set_requires_grad(d, true) < 0) {
            ddpl_tensor_release(d);
            lb_error_in(L, "setindex");
        }
        ((lb_box *)lua_touserdata(L, 1))->t = d;
        ddpl_tensor_release(t);
        return 0;
    }
    return luaL_error(L,
                      "setindex: cannot set field '%s' of a tensor (settable: requires_grad, "
                      "grad, data, integer indices, and index tensors or lists)",
                      key ? key : luaL_typename(L, 2));
}

/* ---- arithmetic operators: tensor or number on either side ---- */

/* binding.h: a op b with a tensor or a number on either side */
int lb_arith(lua_State *L, const char *fname, lb_binary_op fn)
{
    lb_check_operand(L, 1, fname);
    lb_check_operand(L, 2, fname);
    lb_box *box = lb_newbox(L);
    bool own_a, own_b = false;
    ddpl_tensor *a = lb_operand(L, 1, &own_a);
    ddpl_tensor *b = a ? lb_operand(L, 2, &own_b) : NULL;
    box->t = a && b ? fn(a, b) : NULL;
    if (own_a) ddpl_tensor_release(a);
    if (own_b) ddpl_tensor_release(b);
    return lb_finish_in(L, box, fname);
}

static int t_add(lua_State *L)
{
    return lb_arith(L, "add", ddpl_add);
}
static int t_sub(lua_State *L)
{
    return lb_arith(L, "sub", ddpl_sub);
}
static int t_mul(lua_State *L)
{
    return lb_arith(L, "mul", ddpl_mul);
}
static int t_div(lua_State *L)
{
    return lb_arith(L, "div", ddpl_div);
}
static int t_pow(lua_State *L)
{
    return lb_arith(L, "pow", ddpl_pow);
}

/* Lua 5.4's integer-division, modulo and bitwise operators: Python's // and % (floor_divide,
 * remainder), and the bitwise functions, as torch's operators */
static int t_idiv(lua_State *L)
{
    return lb_arith(L, "floor_divide", ddpl_floor_divide);
}
static int t_mod(lua_State *L)
{
    return lb_arith(L, "remainder", ddpl_remainder);
}
static int t_band(lua_State *L)
{
    return lb_arith(L, "bitwise_and", ddpl_bitwise_and);
}
static int t_bor(lua_State *L)
{
    return lb_arith(L, "bitwise_or", ddpl_bitwise_or);
}
static int t_bxor(lua_State *L)
{
    return lb_arith(L, "bitwise_xor", ddpl_bitwise_xor);
}
static int t_shl(lua_State *L)
{
    return lb_arith(L, "bitwise_left_shift", ddpl_bitwise_left_shift);
}
static int t_shr(lua_State *L)
{
    return lb_arith(L, "bitwise_right_shift", ddpl_bitwise_right_shift);
}
static int t_bnot(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "bitwise_not");
    lb_box *box = lb_newbox(L);
    box->t = ddpl_bitwise_not(t);
    return lb_finish_in(L, box, "bitwise_not");
}

static int t_unm(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "neg");
    lb_box *box = lb_newbox(L);
    box->t = ddpl_neg(t);
    return lb_finish_in(L, box, "neg");
}

const luaL_Reg lb_tensor_meta[] = {
    {"__gc", t_gc},       {"__close", t_close},
    {"__index", t_index}, {"__newindex", t_newindex},
    {"__len", t_len},     {"__tostring", t_tostring},
    {"__add", t_add},     {"__sub", t_sub},
    {"__mul", t_mul},     {"__div", t_div},
    {"__pow", t_pow},     {"__unm", t_unm},
    {"__idiv", t_idiv},   {"__mod", t_mod},
    {"__band", t_band},   {"__bor", t_bor},
    {"__bxor", t_bxor},   {"__shl", t_shl},
    {"__shr", t_shr},     {"__bnot", t_bnot},
    {NULL, NULL},
};
