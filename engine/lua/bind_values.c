/* lua/bind_values.c: tensor methods about shape, values and conversion.
 * defines: lb_value_methods: size shape dim numel nelement stride is_contiguous element_size
 *          is_floating_point item tolist to float double half bfloat16 long int bool byte
 *          short char type cuda cpu clone detach contiguous type_as pin_memory is_pinned. */
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "core/core.h" /* ddpl_from_blob, the storage's deleter */

/* ---- shape ---- */

static int push_dim_value(lua_State *L, ddpl_tensor *t, int idx, const char *fname,
                          const int64_t *values)
{
    int nd = ddpl_tensor_ndim(t), d = lb_dim(L, idx, fname);
    int n = nd > 0 ? nd : 1;
    if (d < -n || d >= n || nd == 0)
        return luaL_error(L, "%s: dimension %d out of range for a tensor of %d dimensions", fname,
                          d, nd);
    lua_pushinteger(L, values[d < 0 ? d + nd : d]);
    return 1;
}

static int push_list(lua_State *L, int n, const int64_t *values)
{
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, values[i]);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* x:size() is the shape table, x:size(dim) a number (dim 0-based, negative from the end) */
static int m_size(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "size");
    if (!lua_isnoneornil(L, 2)) return push_dim_value(L, t, 2, "size", ddpl_tensor_sizes(t));
    return push_list(L, ddpl_tensor_ndim(t), ddpl_tensor_sizes(t));
}

static int m_shape(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "shape");
    return push_list(L, ddpl_tensor_ndim(t), ddpl_tensor_sizes(t));
}

static int m_stride(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "stride");
    if (!lua_isnoneornil(L, 2)) return push_dim_value(L, t, 2, "stride", ddpl_tensor_strides(t));
    return push_list(L, ddpl_tensor_ndim(t), ddpl_tensor_strides(t));
}

static int m_dim(lua_State *L)
{
    lua_pushinteger(L, ddpl_tensor_ndim(lb_check(L, 1, "dim")));
    return 1;
}

static int m_numel(lua_State *L)
{
    lua_pushinteger(L, ddpl_tensor_numel(lb_check(L, 1, "numel")));
    return 1;
}

static int m_is_contiguous(lua_State *L)
{
    lua_pushboolean(L, ddpl_tensor_is_contiguous(lb_check(L, 1, "is_contiguous")));
    return 1;
}

static int m_element_size(lua_State *L)
{
    lua_pushinteger(
        L, (lua_Integer)ddpl_dtype_size(ddpl_tensor_dtype(lb_check(L, 1, "element_size"))));
    return 1;
}

static int m_is_floating_point(lua_State *L)
{
    lua_pushboolean(L,
                    ddpl_dtype_is_floating(ddpl_tensor_dtype(lb_check(L, 1, "is_floating_point"))));
    return 1;
}

/* ---- values ---- */

static void push_value(lua_State *L, ddpl_dtype dt, const char *p)
{
    switch (dt) {
    case DDPL_FLOAT32:
        lua_pushnumber(L, *(const float *)p);
        break;
    case DDPL_FLOAT64:
        lua_pushnumber(L, *(const double *)p);
        break;
    case DDPL_INT64:
        lua_pushinteger(L, *(const int64_t *)p);
        break;
    case DDPL_INT32:
        lua_pushinteger(L, *(const int32_t *)p);
        break;
    case DDPL_INT16:
        lua_pushinteger(L, *(const int16_t *)p);
        break;
    case DDPL_INT8:
        lua_pushinteger(L, *(const int8_t *)p);
        break;
    case DDPL_UINT8:
        lua_pushinteger(L, *(const uint8_t *)p);
        break;
    case DDPL_BOOL:
        lua_pushboolean(L, *(const uint8_t *)p != 0);
        break;
    default:
        lua_pushnil(L);
        break; /* half types were converted to float32 before */
    }
}

/* A contiguous CPU copy that push_value can read (half types become float32), boxed on the
 * stack so that an error while building tables cannot leak it. No autograd is recorded. */
static ddpl_tensor *host_readable(lua_State *L, ddpl_tensor *t)
{
    ddpl_dtype dt = ddpl_tensor_dtype(t);
    if (dt == DDPL_FLOAT16 || dt == DDPL_BFLOAT16) dt = DDPL_FLOAT32;
    bool prev = ddpl_set_grad_enabled(false);
    lb_box *box = lb_newbox(L);
    ddpl_tensor *moved = ddpl_to(t, dt, ddpl_cpu());
    box->t = moved ? ddpl_contiguous(moved) : NULL;
    ddpl_tensor_release(moved);
    ddpl_set_grad_enabled(prev);
    if (!box->t) lb_error(L);
    return box->t;
}

static int m_item(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "item");
    ddpl_dtype dt = ddpl_tensor_dtype(t);
    if (dt == DDPL_FLOAT32 || dt == DDPL_FLOAT64 || dt == DDPL_FLOAT16 || dt == DDPL_BFLOAT16) {
        double v;
        if (ddpl_tensor_item(t, &v) < 0) lb_error_in(L, "item");
        lua_pushnumber(L, v);
    } else {
        int64_t v;
        if (ddpl_tensor_item_int64(t, &v) < 0) lb_error_in(L, "item");
        if (dt == DDPL_BOOL)
            lua_pushboolean(L, v != 0);
        else
            lua_pushinteger(L, v);
    }
    return 1;
}

/* Nested 1-based tables, row-major, from contiguous data. */
static const char *build_list(lua_State *L, ddpl_tensor *c, int d, const char *p)
{
    ddpl_dtype dt = ddpl_tensor_dtype(c);
    size_t esz = ddpl_dtype_size(dt);
    int64_t n = ddpl_tensor_size(c, d);
    luaL_checkstack(L, 4, "tolist: tensor too deep");
    lua_createtable(L, n > INT32_MAX ? 0 : (int)n, 0);
    for (int64_t i = 0; i < n; i++) {
        if (d == ddpl_tensor_ndim(c) - 1) {
            push_value(L, dt, p);
            p += esz;
        } else {
            p = build_list(L, c, d + 1, p);
        }
        lua_rawseti(L, -2, i + 1);
    }
    return p;
}

static int m_tolist(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "tolist");
    ddpl_tensor *c = host_readable(L, t);
    const char *p = ddpl_tensor_data(c);
    if (ddpl_tensor_ndim(c) == 0)
        push_value(L, ddpl_tensor_dtype(c), p);
    else
        build_list(L, c, 0, p);
    return 1;
}

/* ---- conversion ---- */

static int convert(lua_State *L, const char *fname, ddpl_tensor *t, ddpl_dtype dt, ddpl_device dev,
                   bool copy)
{
    lb_box *box = lb_newbox(L);
    box->t = ddpl_to(t, dt, dev);
    if (box->t == t && copy) {
        ddpl_tensor_release(box->t);
        box->t = ddpl_clone(t);
    }
    return lb_finish_in(L, box, fname);
}

static const char *const to_opts[] = {"dtype", "device", "copy", "non_blocking", NULL};

/* x:to('float64'), x:to('cuda'), x:to('cuda', 'float16'), x:to(other), x:to({dtype=, device=}) */
static int m_to(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "to");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "to", to_opts);
    ddpl_dtype dt = ddpl_tensor_dtype(t);
    ddpl_device dev = ddpl_tensor_device(t);
    for (int i = 2; i <= a.n; i++) {
        if (lb_testbox(L, i)) {
            ddpl_tensor *other = lb_check(L, i, "to");
            dt = ddpl_tensor_dtype(other);
            dev = ddpl_tensor_device(other);
        } else if (lua_type(L, i) == LUA_TSTRING) {
            int d = ddpl_dtype_from_name(lua_tostring(L, i));
            if (d >= 0)
                dt = (ddpl_dtype)d;
            else if (ddpl_device_parse(lua_tostring(L, i), &dev) < 0)
                return luaL_error(L, "to: '%s' is neither a dtype nor a device",
                                  lua_tostring(L, i));
        } else if (!lua_isnil(L, i)) {
            return lb_argerror(L, i, "to", "a dtype, a device or a tensor");
        }
    }
    int idx = lb_arg(L, &a, 0, "dtype");
    if (idx) dt = lb_dtype(L, idx, "to");
    if ((idx = lb_arg(L, &a, 0, "device"))) dev = lb_device(L, idx, "to");
    bool copy = lb_bool(L, lb_arg(L, &a, 0, "copy"), "to", "copy", false);
    return convert(L, "to", t, dt, dev, copy);
}

static int cast(lua_State *L, const char *fname, ddpl_dtype dt)
{
    ddpl_tensor *t = lb_check(L, 1, fname);
    return convert(L, fname, t, dt, ddpl_tensor_device(t), false);
}

static int m_float(lua_State *L)
{
    return cast(L, "float", DDPL_FLOAT32);
}
static int m_double(lua_State *L)
{
    return cast(L, "double", DDPL_FLOAT64);
}
static int m_half(lua_State *L)
{
    return cast(L, "half", DDPL_FLOAT16);
}
static int m_bfloat16(lua_State *L)
{
    return cast(L, "bfloat16", DDPL_BFLOAT16);
}
static int m_long(lua_State *L)
{
    return cast(L, "long", DDPL_INT64);
}
static int m_int(lua_State *L)
{
    return cast(L, "int", DDPL_INT32);
}
static int m_bool(lua_State *L)
{
    return cast(L, "bool", DDPL_BOOL);
}
static int m_byte(lua_State *L)
{
    return cast(L, "byte", DDPL_UINT8);
}
static int m_short(lua_State *L)
{
    return cast(L, "short", DDPL_INT16);
}
static int m_char(lua_State *L)
{
    return cast(L, "char", DDPL_INT8);
}

/* PyTorch's legacy tensor type names, by dtype (x.type() in PyTorch). */
static const char *const type_names[DDPL_DTYPE_COUNT] = {
    [DDPL_FLOAT32] = "FloatTensor", [DDPL_FLOAT64] = "DoubleTensor",
    [DDPL_FLOAT16] = "HalfTensor",  [DDPL_BFLOAT16] = "BFloat16Tensor",
    [DDPL_INT64] = "LongTensor",    [DDPL_INT32] = "IntTensor",
    [DDPL_INT16] = "ShortTensor",   [DDPL_INT8] = "CharTensor",
    [DDPL_UINT8] = "ByteTensor",    [DDPL_BOOL] = "BoolTensor",
};

/* x:type(): 'torch.FloatTensor' ('torch.cuda.FloatTensor' on a GPU). x:type(name): x converted
 * to a dtype ('int8') or to a type name ('torch.CharTensor'; a 'torch.cuda.' name moves x to
 * the current GPU, a CPU one to the CPU, as in PyTorch). */
static int m_type(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "type");
    ddpl_device dev = ddpl_tensor_device(t);
    if (lua_isnoneornil(L, 2)) {
        lua_pushfstring(L, "torch.%s%s", dev.type == DDPL_CUDA ? "cuda." : "",
                        type_names[ddpl_tensor_dtype(t)]);
        return 1;
    }
    if (lua_type(L, 2) != LUA_TSTRING)
        return lb_argerror(L, 2, "type", "a dtype or a tensor type name");
    const char *name = lua_tostring(L, 2);
    int dt = ddpl_dtype_from_name(name);
    if (dt < 0) {
        const char *rest = strncmp(name, "torch.", 6) == 0 ? name + 6 : name;
        bool cuda = strncmp(rest, "cuda.", 5) == 0;
        if (cuda) rest += 5;
        for (int i = 0; i < DDPL_DTYPE_COUNT; i++)
            if (strcmp(rest, type_names[i]) == 0) dt = i;
        if (dt < 0)
            return luaL_error(L,
                              "type: unknown type '%s' (expected a dtype such as 'int8' or a "
                              "tensor type such as 'torch.CharTensor')",
                              name);
        if (!cuda)
            dev = ddpl_cpu();
        else if (ddpl_device_parse("cuda", &dev) < 0)
            return luaL_error(L, "type: %s", ddpl_last_error());
    }
    return convert(L, "type", t, (ddpl_dtype)dt, dev, false);
}

static int m_type_as(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "type_as");
    ddpl_tensor *o = lb_check(L, 2, "type_as");
    return convert(L, "type_as", t, ddpl_tensor_dtype(o), ddpl_tensor_device(t), false);
}

/* x:cuda([n]): without n, the current device (ddpl.cuda.set_device) */
static int m_cuda(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "cuda");
    ddpl_device dev;
    if (lua_isnoneornil(L, 2)) {
        if (ddpl_device_parse("cuda", &dev) < 0)
            return luaL_error(L, "cuda: %s", ddpl_last_error());
    } else {
        int64_t n = lb_int(L, 2, "cuda", "device", 0);
        if (n < 0 || n > 255) return luaL_error(L, "cuda: invalid device index %d", (int)n);
        dev = (ddpl_device){DDPL_CUDA, (int16_t)n};
    }
    return convert(L, "cuda", t, ddpl_tensor_dtype(t), dev, false);
}

static int m_cpu(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "cpu");
    return convert(L, "cpu", t, ddpl_tensor_dtype(t), ddpl_cpu(), false);
}

typedef ddpl_tensor *(*unary_fn)(ddpl_tensor *);

static int unary(lua_State *L, const char *fname, unary_fn fn)
{
    ddpl_tensor *t = lb_check(L, 1, fname);
    lb_box *box = lb_newbox(L);
    box->t = fn(t);
    return lb_finish_in(L, box, fname);
}

static int m_clone(lua_State *L)
{
    return unary(L, "clone", ddpl_clone);
}
static int m_detach(lua_State *L)
{
    return unary(L, "detach", ddpl_detach);
}
static int m_contiguous(lua_State *L)
{
    return unary(L, "contiguous", ddpl_contiguous);
}

/* ---- page-locked host memory (PyTorch's pin_memory) ---- */

/* The deleter of pin_memory's storages: unregistered before the memory goes back. */
static void pinned_free(void *data, void *ctx)
{
    (void)ctx;
    ddpl_cuda_host_unregister(data);
    free(data);
}

/* x:pin_memory(): a contiguous copy of a CPU tensor in page-locked memory (cudaHostRegister on
 * a page-aligned block of its own), which a GPU reads by DMA without the staging copy of pageable
 * memory (cuda_copy.c). Outside the host allocator: DDPLUA_MEMORY_LIMIT_MB does not count it. */
static int m_pin_memory(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "pin_memory");
    if (ddpl_tensor_device(t).type != DDPL_CPU)
        return luaL_error(L, "pin_memory: expected a CPU tensor, got one on %s",
                          ddpl_tensor_device(t).type == DDPL_CUDA ? "cuda" : "another device");
    if (!ddpl_cuda_is_available())
        return luaL_error(L, "pin_memory: CUDA is not available (page-locked memory is for "
                             "copies to a GPU)");
    size_t nbytes = (size_t)ddpl_tensor_numel(t) * ddpl_dtype_size(ddpl_tensor_dtype(t));
    size_t page = 4096, cap = nbytes ? (nbytes + page - 1) / page * page : page;
    lb_box *box = lb_newbox(L);
    void *p = aligned_alloc(page, cap);
    if (!p) return luaL_error(L, "pin_memory: out of host memory (%zu bytes)", cap);
    if (ddpl_cuda_host_register(p, cap) <= 0) {
        free(p);
        lb_error_in(L, "pin_memory");
    }
    box->t = ddpl_from_blob(p, ddpl_tensor_ndim(t), ddpl_tensor_sizes(t), ddpl_tensor_dtype(t),
                            pinned_free, NULL);
    if (!box->t) {
        pinned_free(p, NULL);
        lb_error_in(L, "pin_memory");
    }
    if (ddpl_copy_(box->t, t) < 0) lb_error_in(L, "pin_memory");
    return lb_finish_in(L, box, "pin_memory");
}

/* x:is_pinned(): whether x's memory came from pin_memory (views of it included). */
static int m_is_pinned(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "is_pinned");
    lua_pushboolean(L, t->storage->deleter == pinned_free);
    return 1;
}

const luaL_Reg lb_value_methods[] = {
    {"size", m_size},
    {"shape", m_shape},
    {"stride", m_stride},
    {"dim", m_dim},
    {"ndimension", m_dim},
    {"numel", m_numel},
    {"nelement", m_numel},
    {"is_contiguous", m_is_contiguous},
    {"element_size", m_element_size},
    {"is_floating_point", m_is_floating_point},
    {"item", m_item},
    {"tolist", m_tolist},
    {"to", m_to},
    {"float", m_float},
    {"double", m_double},
    {"half", m_half},
    {"bfloat16", m_bfloat16},
    {"long", m_long},
    {"int", m_int},
    {"bool", m_bool},
    {"byte", m_byte},
    {"short", m_short},
    {"char", m_char},
    {"type", m_type},
    {"type_as", m_type_as},
    {"cuda", m_cuda},
    {"cpu", m_cpu},
    {"clone", m_clone},
    {"detach", m_detach},
    {"contiguous", m_contiguous},
    {"pin_memory", m_pin_memory},
    {"is_pinned", m_is_pinned},
    {NULL, NULL},
};
