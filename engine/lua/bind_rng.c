/* lua/bind_rng.c: the random generator from Lua: seeding, and its state for checkpoints.
 * defines: lb_rng_functions: manual_seed get_rng_state set_rng_state (in ddpl and ddpl.cuda).
 *
 * The state is a uint8 tensor of 16 bytes, PyTorch's ByteTensor form: the seed, then the next
 * Philox counter block, each a little-endian uint64. It can be saved with the model
 * (ddpl.save) and given back to set_rng_state after a restart. One generator serves the CPU and
 * CUDA kernels, so ddpl.cuda's functions are the same ones. */
#include "binding.h"

#define STATE_BYTES 16

static int f_manual_seed(lua_State *L)
{
    int isint = 0;
    lua_Integer s = lua_tointegerx(L, 1, &isint);
    if (!isint) return lb_argerror(L, 1, "manual_seed", "an integer");
    ddpl_manual_seed((uint64_t)s);
    return 0;
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* ddpl.get_rng_state() -> uint8 tensor [16] */
static int f_get_rng_state(lua_State *L)
{
    uint64_t seed, offset;
    ddpl_get_rng_state(&seed, &offset);
    int64_t n = STATE_BYTES;
    lb_box *box = lb_newbox(L);
    box->t = ddpl_empty(1, &n, DDPL_UINT8, ddpl_cpu());
    if (box->t) {
        uint8_t *p = ddpl_tensor_data(box->t);
        put_u64(p, seed);
        put_u64(p + 8, offset);
    }
    return lb_finish_in(L, box, "get_rng_state");
}

/* ddpl.set_rng_state(state): a state from get_rng_state, checked before anything changes */
static int f_set_rng_state(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "set_rng_state");
    ddpl_device dev = ddpl_tensor_device(t);
    if (ddpl_tensor_dtype(t) != DDPL_UINT8 || ddpl_tensor_ndim(t) != 1 ||
        ddpl_tensor_numel(t) != STATE_BYTES || dev.type != DDPL_CPU) {
        return luaL_error(L,
                          "set_rng_state: expected the uint8 cpu tensor of %d elements that "
                          "get_rng_state returns, got a %s tensor of %d dims, %I elements, on %s",
                          STATE_BYTES, ddpl_dtype_name(ddpl_tensor_dtype(t)), ddpl_tensor_ndim(t),
                          (lua_Integer)ddpl_tensor_numel(t),
                          dev.type == DDPL_CPU ? "the cpu" : "a cuda device");
    }
    uint8_t bytes[STATE_BYTES];
    const uint8_t *p = ddpl_tensor_data(t);
    int64_t stride = ddpl_tensor_stride(t, 0); /* a view of a longer byte tensor may be strided */
    for (int i = 0; i < STATE_BYTES; i++) bytes[i] = p[i * stride];
    ddpl_set_rng_state(get_u64(bytes), get_u64(bytes + 8));
    return 0;
}

const luaL_Reg lb_rng_functions[] = {
    {"manual_seed", f_manual_seed},
    {"get_rng_state", f_get_rng_state},
    {"set_rng_state", f_set_rng_state},
    {NULL, NULL},
};
