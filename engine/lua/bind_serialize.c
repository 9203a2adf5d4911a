/* lua/bind_serialize.c: Lua values and tensors to bytes and back, the wire format of the object
 * collectives (dist.all_gather_object, broadcast_object_list, gather_object).
 * defines: lb_serialize_functions (package.loaded['ddplua.core.serialize']):
 *          dumps(value [, fname [, root]]) -> uint8 tensor, loads(bytes [, fname]) -> value.
 *
 * Format version 1 (docs/internals/object-collectives.md has the same table). Integers are
 * little-endian.
 *   header  'D' 'L' 'O' 0x01                    magic "DLO", then the version byte
 *   value   0x00 nil | 0x01 false | 0x02 true
 *           0x03 integer: i64                   (Lua 5.4's integer subtype, kept apart from...)
 *           0x04 float: the f64's IEEE 754 bits (...the float subtype: 1 and 1.0 stay distinct)
 *           0x05 string: u64 length, the bytes  (embedded zeros are fine)
 *           0x06 table: u64 narr, u64 nhash, narr values (keys 1..narr), nhash key/value pairs
 *           0x07 reference: u64 id              the id-th table (0-based, counted where each
 *                                               0x06 starts): shared subtables and cycles
 *           0x08 tensor: u8 dtype (float32 float64 float16 bfloat16 int64 int32 uint8 bool =
 *                0..7), u8 device type (0 cpu, 1 cuda), u16 device index, u8 flags (bit 0:
 *                requires_grad), u8 ndim (<= 8), ndim i64 sizes, then the elements row-major
 *                in the host's (little-endian) byte order
 * The whole input is one header and one value; anything after it is an error.
 *
 * dumps rejects what cannot travel with the path to it: "all_gather_object: cannot send a
 * function (at value.opt.step)". Functions, threads, userdata other than tensors, closed
 * tensors, tables with a metatable (their methods would not come along) and table or tensor keys
 * are refused; nesting is limited to SER_MAX_DEPTH tables. A table seen twice is sent once and
 * referenced after, so shared subtables stay shared and cycles come back as cycles.
 *
 * loads treats its input as hostile (it comes from another process): every length is checked
 * against the bytes that remain before anything is allocated or read, sizes cannot overflow,
 * nesting is limited as in dumps, and every defect is a Lua error "loads: malformed object data:
 * <what> at byte <offset>", never a crash. A CUDA tensor comes back on the device of the same
 * index when there is one, else the current one; without CUDA it is an error naming it. */
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "ddpl/cuda.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "bind_serialize.c writes tensor elements in host byte order, assumed little-endian"
#endif

#define SER_VERSION   1
#define SER_MAX_DEPTH 200
#define SER_BUF_MT    "ddplua.SerializeBuffer"

enum {
    TAG_NIL,
    TAG_FALSE,
    TAG_TRUE,
    TAG_INT,
    TAG_FLOAT,
    TAG_STRING,
    TAG_TABLE,
    TAG_REF,
    TAG_TENSOR,
};

/* wire code -> dtype name; the code is the index (independent of the enum's order) */
static const char *const wire_dtypes[] = {"float32", "float64", "float16", "bfloat16", "int64",
                                          "int32",   "uint8",   "bool",    "int8",     "int16"};
#define N_WIRE_DTYPES ((int)(sizeof wire_dtypes / sizeof *wire_dtypes))

/* ---- output buffer: a userdata on the stack, so a Lua error cannot leak it ---- */
typedef struct ser_buf {
    unsigned char *p;
    size_t n, cap;
} ser_buf;

static int buf_gc(lua_State *L)
{
    ser_buf *b = luaL_checkudata(L, 1, SER_BUF_MT);
    free(b->p);
    b->p = NULL;
    return 0;
}

static ser_buf *buf_new(lua_State *L)
{
    ser_buf *b = lua_newuserdatauv(L, sizeof *b, 0);
    *b = (ser_buf){0};
    if (luaL_newmetatable(L, SER_BUF_MT)) {
        lua_pushcfunction(L, buf_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    return b;
}

/* Makes room for n more bytes and returns where they go. */
static unsigned char *buf_reserve(lua_State *L, ser_buf *b, size_t n, const char *fname)
{
    if (n > SIZE_MAX / 2 - b->n) luaL_error(L, "%s: the value is too large to send", fname);
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) luaL_error(L, "%s: out of memory serialising %zu bytes", fname, b->n + n);
        b->p = p;
        b->cap = cap;
    }
    unsigned char *at = b->p + b->n;
    b->n += n;
    return at;
}

static void put_u64_at(unsigned char *at, uint64_t v)
{
    for (int i = 0; i < 8; i++) at[i] = (unsigned char)(v >> (8 * i));
}

/* ---- dumps ---- */
typedef struct encoder {
    lua_State *L;
    ser_buf *buf;
    const char *fname, *root;
    int seen;                    /* stack index of {table = id} */
    int64_t ntables;             /* ids handed out */
    int keys[SER_MAX_DEPTH + 1]; /* stack index of the key taken at each depth, for the path */
} encoder;

static void put_byte(encoder *e, int v)
{
    *buf_reserve(e->L, e->buf, 1, e->fname) = (unsigned char)v;
}

static void put_u64(encoder *e, uint64_t v)
{
    put_u64_at(buf_reserve(e->L, e->buf, 8, e->fname), v);
}

static bool is_letter(char c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_identifier(const char *s, size_t n)
{
    if (n == 0 || n > 64 || !is_letter(s[0])) return false;
    for (size_t i = 1; i < n; i++)
        if (!is_letter(s[i]) && !(s[i] >= '0' && s[i] <= '9')) return false;
    return true;
}

/* Raises "<fname>: cannot send <what> (at value.a[2].b)" for the value reached through the keys
 * of depths 0..depth-1. */
static LB_NORETURN fail_at(encoder *e, int depth, const char *what)
{
    lua_State *L = e->L;
    luaL_checkstack(L, depth + 4, "serialise path");
    lua_pushstring(L, e->root);
    for (int d = 0; d < depth; d++) {
        int k = e->keys[d];
        size_t n;
        if (lua_type(L, k) == LUA_TSTRING) {
            const char *s = lua_tolstring(L, k, &n);
            if (is_identifier(s, n))
                lua_pushfstring(L, ".%s", s);
            else
                lua_pushfstring(L, "[\"%s\"]", n > 40 ? "..." : s);
        } else {
            lua_pushfstring(L, "[%s]", luaL_tolstring(L, k, NULL));
            lua_remove(L, -2);
        }
    }
    lua_concat(L, depth + 1);
    luaL_error(L, "%s: cannot send %s (at %s)", e->fname, what, lua_tostring(L, -1));
    __builtin_unreachable();
}

static void encode_value(encoder *e, int idx, int depth);

static void encode_tensor(encoder *e, int idx, int depth)
{
    lua_State *L = e->L;
    lb_box *box = lb_testbox(L, idx);
    if (!box->t) fail_at(e, depth, "a closed tensor");
    ddpl_tensor *t = box->t;
    ddpl_dtype dt = ddpl_tensor_dtype(t);
    ddpl_device dev = ddpl_tensor_device(t);
    int code = 0;
    while (code < N_WIRE_DTYPES && strcmp(wire_dtypes[code], ddpl_dtype_name(dt)) != 0) code++;
    if (code == N_WIRE_DTYPES) fail_at(e, depth, "a tensor of this dtype");
    int ndim = ddpl_tensor_ndim(t);
    size_t nbytes = ddpl_tensor_nbytes(t);
    /* reserve first: a failure to grow raises, and must not leak the host copy below */
    unsigned char *at = buf_reserve(L, e->buf, 6 + 8 * (size_t)ndim + nbytes, e->fname);
    at[0] = (unsigned char)code;
    at[1] = (unsigned char)dev.type;
    at[2] = (unsigned char)(dev.index & 0xff);
    at[3] = (unsigned char)((dev.index >> 8) & 0xff);
    at[4] = ddpl_tensor_requires_grad(t) ? 1 : 0;
    at[5] = (unsigned char)ndim;
    for (int d = 0; d < ndim; d++) put_u64_at(at + 6 + 8 * d, (uint64_t)ddpl_tensor_size(t, d));
    if (nbytes == 0) return;
    /* the elements, row-major, on the host: a contiguous detached view or a copy */
    ddpl_tensor *plain = ddpl_detach(t);
    ddpl_tensor *host = NULL;
    if (plain)
        host = dev.type == DDPL_CPU ? ddpl_contiguous(plain) : ddpl_to(plain, dt, ddpl_cpu());
    ddpl_tensor_release(plain);
    if (!host) lb_error_in(L, e->fname);
    memcpy(at + 6 + 8 * ndim, ddpl_tensor_data(host), nbytes);
    ddpl_tensor_release(host);
}

static void encode_table(encoder *e, int idx, int depth)
{
    lua_State *L = e->L;
    if (depth >= SER_MAX_DEPTH) fail_at(e, depth, "tables nested deeper than 200 levels");
    luaL_checkstack(L, 6, "serialise");
    lua_pushvalue(L, idx);
    if (lua_rawget(L, e->seen) == LUA_TNUMBER) { /* seen before: a reference */
        put_byte(e, TAG_REF);
        put_u64(e, (uint64_t)lua_tointeger(L, -1));
        lua_pop(L, 1);
        return;
    }
    lua_pop(L, 1);
    if (lua_getmetatable(L, idx)) fail_at(e, depth, "a table with a metatable");
    lua_pushvalue(L, idx);
    lua_pushinteger(L, e->ntables++);
    lua_rawset(L, e->seen);

    lua_Unsigned narr = lua_rawlen(L, idx);
    put_byte(e, TAG_TABLE);
    put_u64(e, narr);
    size_t nhash_at = e->buf->n;
    put_u64(e, 0); /* patched below */
    for (lua_Unsigned i = 1; i <= narr; i++) {
        lua_pushinteger(L, (lua_Integer)i);
        e->keys[depth] = lua_gettop(L);
        lua_rawgeti(L, idx, (lua_Integer)i);
        encode_value(e, lua_gettop(L), depth + 1);
        lua_pop(L, 2);
    }
    uint64_t nhash = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        int k = lua_gettop(L) - 1;
        e->keys[depth] = k;
        if (lua_isinteger(L, k) && lua_tointeger(L, k) >= 1 &&
            (lua_Unsigned)lua_tointeger(L, k) <= narr) {
            lua_pop(L, 1);
            continue;
        }
        int kt = lua_type(L, k);
        if (kt != LUA_TSTRING && kt != LUA_TNUMBER && kt != LUA_TBOOLEAN) {
            lua_pushfstring(L, "a %s as a table key", luaL_typename(L, k));
            fail_at(e, depth, lua_tostring(L, -1));
        }
        encode_value(e, k, depth + 1);
        encode_value(e, k + 1, depth + 1);
        nhash++;
        lua_pop(L, 1);
    }
    put_u64_at(e->buf->p + nhash_at, nhash);
}

static void encode_value(encoder *e, int idx, int depth)
{
    lua_State *L = e->L;
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        put_byte(e, TAG_NIL);
        return;
    case LUA_TBOOLEAN:
        put_byte(e, lua_toboolean(L, idx) ? TAG_TRUE : TAG_FALSE);
        return;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            put_byte(e, TAG_INT);
            put_u64(e, (uint64_t)lua_tointeger(L, idx));
        } else {
            double v = lua_tonumber(L, idx);
            uint64_t bits;
            memcpy(&bits, &v, sizeof bits);
            put_byte(e, TAG_FLOAT);
            put_u64(e, bits);
        }
        return;
    case LUA_TSTRING: {
        size_t n;
        const char *s = lua_tolstring(L, idx, &n);
        put_byte(e, TAG_STRING);
        put_u64(e, n);
        memcpy(buf_reserve(L, e->buf, n, e->fname), s, n);
        return;
    }
    case LUA_TTABLE:
        encode_table(e, idx, depth);
        return;
    case LUA_TUSERDATA:
        if (lb_testbox(L, idx)) {
            put_byte(e, TAG_TENSOR);
            encode_tensor(e, idx, depth);
            return;
        }
        fail_at(e, depth, "a userdata");
    default: {
        const char *what = lua_type(L, idx) == LUA_TFUNCTION ? "a function"
                           : lua_type(L, idx) == LUA_TTHREAD ? "a thread (coroutine)"
                                                             : "a light userdata";
        fail_at(e, depth, what);
    }
    }
}

/* dumps(value [, fname [, root]]) -> 1-D uint8 CPU tensor. fname names the caller in errors,
 * root the value in paths ("value" by default). */
static int s_dumps(lua_State *L)
{
    luaL_checkany(L, 1);
    encoder e = {.L = L};
    e.fname = luaL_optstring(L, 2, "dumps");
    e.root = luaL_optstring(L, 3, "value");
    lua_settop(L, 3);
    e.buf = buf_new(L); /* 4 */
    lua_newtable(L);    /* 5: seen */
    e.seen = 5;
    memcpy(buf_reserve(L, e.buf, 4, e.fname), "DLO\x01", 4);
    encode_value(&e, 1, 0);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_from_data(1, (int64_t[]){(int64_t)e.buf->n}, DDPL_UINT8, e.buf->p, ddpl_cpu());
    return lb_finish_in(L, box, e.fname);
}

/* ---- loads ---- */
typedef struct decoder {
    lua_State *L;
    const unsigned char *p;
    size_t n, pos;
    const char *fname;
    int tables;      /* stack index of {[id + 1] = table} */
    int64_t ntables; /* tables made so far */
} decoder;

static LB_NORETURN malformed(decoder *d, const char *what)
{
    luaL_error(d->L, "%s: malformed object data: %s at byte %I", d->fname, what,
               (lua_Integer)d->pos);
    __builtin_unreachable();
}

/* The next n bytes, after checking that they exist. */
static const unsigned char *take(decoder *d, size_t n)
{
    if (n > d->n - d->pos) {
        lua_pushfstring(d->L, "truncated (%I more bytes needed, %I left)",
                        (lua_Integer)(n > INT64_MAX ? INT64_MAX : n), (lua_Integer)(d->n - d->pos));
        malformed(d, lua_tostring(d->L, -1));
    }
    const unsigned char *at = d->p + d->pos;
    d->pos += n;
    return at;
}

static uint64_t get_u64(decoder *d)
{
    const unsigned char *at = take(d, 8);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)at[i] << (8 * i);
    return v;
}

static void decode_value(decoder *d, int depth);

static void decode_tensor(decoder *d)
{
    lua_State *L = d->L;
    const unsigned char *h = take(d, 6);
    if (h[0] >= N_WIRE_DTYPES) malformed(d, "unknown tensor dtype code");
    ddpl_dtype dt = (ddpl_dtype)ddpl_dtype_from_name(wire_dtypes[h[0]]);
    if (h[1] != DDPL_CPU && h[1] != DDPL_CUDA) malformed(d, "unknown tensor device type");
    int dev_index = h[2] | h[3] << 8;
    if (h[4] & ~1u) malformed(d, "unknown tensor flags");
    bool requires_grad = h[4] & 1;
    if (requires_grad && !ddpl_dtype_is_floating(dt))
        malformed(d, "requires_grad on a tensor of a non-floating dtype");
    int ndim = h[5];
    if (ndim > DDPL_MAX_DIMS) malformed(d, "tensor with more than 8 dimensions");
    int64_t sizes[DDPL_MAX_DIMS];
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        uint64_t s = get_u64(d);
        if (s > INT64_MAX) malformed(d, "negative tensor size");
        sizes[i] = (int64_t)s;
        if (__builtin_mul_overflow(numel, s, &numel)) malformed(d, "tensor size overflows");
    }
    uint64_t nbytes;
    if (__builtin_mul_overflow(numel, (uint64_t)ddpl_dtype_size(dt), &nbytes) ||
        nbytes > d->n - d->pos)
        malformed(d, "tensor data truncated");
    const unsigned char *data = take(d, (size_t)nbytes);
    if (h[1] == DDPL_CUDA && !ddpl_cuda_is_available())
        luaL_error(L,
                   "%s: the data holds a CUDA tensor (cuda:%d) but CUDA is not available in "
                   "this process",
                   d->fname, dev_index);
    lb_box *box = lb_newbox(L);
    ddpl_tensor *t = ddpl_from_data(ndim, sizes, dt, data, ddpl_cpu());
    if (t && h[1] == DDPL_CUDA) {
        int index = dev_index < ddpl_cuda_device_count() ? dev_index : ddpl_cuda_current_device();
        ddpl_tensor *moved =
            index < 0 ? NULL : ddpl_to(t, dt, (ddpl_device){DDPL_CUDA, (int16_t)index});
        ddpl_tensor_release(t);
        t = moved;
    }
    if (t && requires_grad && ddpl_tensor_set_requires_grad(t, true) < 0) {
        ddpl_tensor_release(t);
        t = NULL;
    }
    box->t = t;
    lb_finish_in(L, box, d->fname);
}

static void decode_table(decoder *d, int depth)
{
    lua_State *L = d->L;
    if (depth >= SER_MAX_DEPTH) malformed(d, "tables nested deeper than 200 levels");
    luaL_checkstack(L, 6, "deserialise");
    uint64_t narr = get_u64(d);
    uint64_t nhash = get_u64(d);
    /* every array value takes at least a byte and every pair two: bounds the preallocation */
    if (narr > d->n - d->pos) malformed(d, "table array size exceeds the data");
    if (nhash > (d->n - d->pos) / 2) malformed(d, "table hash size exceeds the data");
    lua_createtable(L, narr > INT32_MAX ? INT32_MAX : (int)narr,
                    nhash > INT32_MAX ? INT32_MAX : (int)nhash);
    int t = lua_gettop(L);
    lua_pushvalue(L, t);
    lua_rawseti(L, d->tables, ++d->ntables);
    for (uint64_t i = 1; i <= narr; i++) {
        decode_value(d, depth + 1);
        lua_rawseti(L, t, (lua_Integer)i);
    }
    for (uint64_t i = 0; i < nhash; i++) {
        decode_value(d, depth + 1);
        int kt = lua_type(L, -1);
        if (kt != LUA_TSTRING && kt != LUA_TNUMBER && kt != LUA_TBOOLEAN)
            malformed(d, "table key that is not a boolean, number or string");
        if (kt == LUA_TNUMBER && lua_tonumber(L, -1) != lua_tonumber(L, -1))
            malformed(d, "NaN table key");
        decode_value(d, depth + 1);
        lua_rawset(L, t);
    }
}

static void decode_value(decoder *d, int depth)
{
    lua_State *L = d->L;
    luaL_checkstack(L, 4, "deserialise");
    int tag = *take(d, 1);
    switch (tag) {
    case TAG_NIL:
        lua_pushnil(L);
        return;
    case TAG_FALSE:
        lua_pushboolean(L, 0);
        return;
    case TAG_TRUE:
        lua_pushboolean(L, 1);
        return;
    case TAG_INT:
        lua_pushinteger(L, (lua_Integer)get_u64(d));
        return;
    case TAG_FLOAT: {
        uint64_t bits = get_u64(d);
        double v;
        memcpy(&v, &bits, sizeof v);
        lua_pushnumber(L, v);
        return;
    }
    case TAG_STRING: {
        uint64_t n = get_u64(d);
        if (n > d->n - d->pos) malformed(d, "string longer than the data");
        lua_pushlstring(L, (const char *)take(d, (size_t)n), (size_t)n);
        return;
    }
    case TAG_TABLE:
        decode_table(d, depth);
        return;
    case TAG_REF: {
        uint64_t id = get_u64(d);
        if (id >= (uint64_t)d->ntables) malformed(d, "reference to a table not seen yet");
        lua_rawgeti(L, d->tables, (lua_Integer)id + 1);
        return;
    }
    case TAG_TENSOR:
        decode_tensor(d);
        return;
    default:
        d->pos--;
        malformed(d, "unknown value tag");
    }
}

/* loads(bytes [, fname]) -> value. bytes: a 1-D contiguous uint8 CPU tensor or a string. */
static int s_loads(lua_State *L)
{
    decoder d = {.L = L};
    d.fname = luaL_optstring(L, 2, "loads");
    if (lua_type(L, 1) == LUA_TSTRING) {
        d.p = (const unsigned char *)lua_tolstring(L, 1, &d.n);
    } else {
        ddpl_tensor *t = lb_check(L, 1, d.fname);
        if (ddpl_tensor_dtype(t) != DDPL_UINT8 || ddpl_tensor_ndim(t) != 1 ||
            ddpl_tensor_device(t).type != DDPL_CPU || !ddpl_tensor_is_contiguous(t))
            return luaL_error(L, "%s: expected a 1-D contiguous uint8 CPU tensor of object data",
                              d.fname);
        d.p = ddpl_tensor_data(t);
        d.n = ddpl_tensor_nbytes(t);
    }
    lua_settop(L, 2);
    lua_newtable(L); /* 3: tables by id */
    d.tables = 3;
    const unsigned char *magic = take(&d, 4);
    if (memcmp(magic, "DLO", 3) != 0) {
        d.pos = 0;
        malformed(&d, "not ddplua object data (bad magic)");
    }
    if (magic[3] != SER_VERSION)
        return luaL_error(L, "%s: object data of format version %d (this build reads version %d)",
                          d.fname, magic[3], SER_VERSION);
    decode_value(&d, 0);
    if (d.pos != d.n) {
        lua_pushfstring(L, "%I trailing bytes", (lua_Integer)(d.n - d.pos));
        malformed(&d, lua_tostring(L, -1));
    }
    return 1;
}

const luaL_Reg lb_serialize_functions[] = {
    {"dumps", s_dumps},
    {"loads", s_loads},
    {NULL, NULL},
};
