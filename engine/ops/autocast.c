/* ops/autocast.c: the autocast state (thread-local, per device type) and its two casting
 * policies.
 * defines: ddpl_autocast_* (autocast.h). */
#include "autocast.h"

#include <stdlib.h>

#include "autograd/graph.h"
#include "ddpl/autograd.h"
#include "op_util.h"

/* Off by default; bfloat16 is the default dtype on both device types, as in PyTorch. */
static _Thread_local ddpl_autocast_state autocast_state[DDPL_DEVICE_TYPE_COUNT] = {
    {false, DDPL_BFLOAT16},
    {false, DDPL_BFLOAT16},
};

static bool valid_type(ddpl_device_type type)
{
    return (unsigned)type < DDPL_DEVICE_TYPE_COUNT;
}

int ddpl_autocast_set(ddpl_device_type type, ddpl_autocast_state s, ddpl_autocast_state *prev)
{
    if (!valid_type(type)) return ddpl_error("autocast: invalid device type %d", (int)type);
    if (s.dtype != DDPL_BFLOAT16 && s.dtype != DDPL_FLOAT16)
        return ddpl_error("autocast: dtype must be bfloat16 or float16, got %s",
                          ddpl_dtype_name(s.dtype));
    if (prev) *prev = autocast_state[type];
    autocast_state[type] = s;
    return 0;
}

bool ddpl_autocast_enabled(ddpl_device_type type)
{
    return valid_type(type) && autocast_state[type].enabled;
}

ddpl_dtype ddpl_autocast_dtype(ddpl_device_type type)
{
    return valid_type(type) ? autocast_state[type].dtype : DDPL_BFLOAT16;
}

ddpl_autocast_state ddpl_autocast_suspend(ddpl_device_type type)
{
    if (!valid_type(type)) return (ddpl_autocast_state){false, DDPL_BFLOAT16};
    ddpl_autocast_state prev = autocast_state[type];
    autocast_state[type].enabled = false;
    return prev;
}

/* PyTorch's is_eligible: floating, and not float64 (double stays double under autocast). */
static bool eligible(const ddpl_tensor *x)
{
    return ddpl_dtype_is_floating((ddpl_dtype)x->dtype) && x->dtype != DDPL_FLOAT64;
}

/* ---- the cast cache ---- */
typedef struct {
    ddpl_tensor *src; /* retained: its address cannot be reused while the entry lives */
    unsigned version; /* src's storage version when it was cast */
    ddpl_tensor *cast;
} cast_entry;

static _Thread_local cast_entry *cache;
static _Thread_local int cache_len, cache_cap, region_depth;
static _Thread_local bool cache_on = true;

static void cache_clear(void)
{
    for (int i = 0; i < cache_len; i++) {
        ddpl_tensor_release(cache[i].cast);
        ddpl_tensor_release(cache[i].src);
    }
    free(cache);
    cache = NULL;
    cache_len = cache_cap = 0;
}

bool ddpl_autocast_enter(bool cache_enabled)
{
    bool prev = cache_on;
    cache_on = cache_enabled;
    region_depth++;
    return prev;
}

void ddpl_autocast_leave(bool prev_cache_enabled)
{
    cache_on = prev_cache_enabled;
    if (region_depth > 0 && --region_depth == 0) cache_clear();
}

int ddpl_autocast_cache_size(void)
{
    return cache_len;
}

/* PyTorch's can_try_cache: a float32 leaf parameter (not a view), grad mode on (a cast made
 * under no_grad has no history to reuse), inside a region with the cache on. */
static bool cacheable(const ddpl_tensor *x)
{
    return cache_on && region_depth > 0 && x->dtype == DDPL_FLOAT32 && !x->view_base &&
           ddpl_requires_grad(x) && ddpl_tensor_is_leaf(x) && ddpl_is_grad_enabled();
}

static ddpl_tensor *cached_cast(ddpl_tensor *x, ddpl_dtype dt)
{
    unsigned version = atomic_load(&x->storage->version);
    for (int i = 0; i < cache_len; i++) {
        cast_entry *e = &cache[i];
        if (e->src != x || e->cast->dtype != dt) continue;
        if (e->version == version) return ddpl_tensor_retain(e->cast);
        ddpl_tensor *fresh = ddpl_to_dtype(x, dt); /* written in place since: cast again */
        if (!fresh) return NULL;
        ddpl_tensor_release(e->cast);
        e->cast = ddpl_tensor_retain(fresh);
        e->version = version;
        return fresh;
    }
    ddpl_tensor *cast = ddpl_to_dtype(x, dt);
    if (!cast) return NULL;
    if (cache_len == cache_cap) {
        int cap = cache_cap ? 2 * cache_cap : 16;
        cast_entry *grown = realloc(cache, (size_t)cap * sizeof *grown);
        if (!grown) return cast; /* no room to remember it: still a correct cast */
        cache = grown;
        cache_cap = cap;
    }
    cache[cache_len++] = (cast_entry){ddpl_tensor_retain(x), version, ddpl_tensor_retain(cast)};
    return cast;
}

ddpl_tensor *ddpl_autocast_lower(ddpl_tensor *x)
{
    ddpl_device_type type = (ddpl_device_type)x->device.type;
    if (!ddpl_autocast_enabled(type) || !eligible(x)) return ddpl_tensor_retain(x);
    ddpl_dtype dt = autocast_state[type].dtype;
    if (x->dtype == dt) return ddpl_tensor_retain(x);
    return cacheable(x) ? cached_cast(x, dt) : ddpl_to_dtype(x, dt);
}

bool ddpl_autocast_upcasts_norms(ddpl_device_type type)
{
    return type == DDPL_CUDA && ddpl_autocast_enabled(type);
}

ddpl_tensor *ddpl_autocast_upcast(ddpl_tensor *x)
{
    bool half = x->dtype == DDPL_FLOAT16 || x->dtype == DDPL_BFLOAT16;
    if (!half || !ddpl_autocast_enabled((ddpl_device_type)x->device.type))
        return ddpl_tensor_retain(x);
    return ddpl_to_dtype(x, DDPL_FLOAT32);
}

void ddpl_autocast_release_n(int n, ddpl_tensor **t)
{
    for (int i = 0; i < n; i++) {
        ddpl_tensor_release(t[i]);
        t[i] = NULL;
    }
}

static int apply_n(int n, ddpl_tensor *const *in, ddpl_tensor **out,
                   ddpl_tensor *(*policy)(ddpl_tensor *))
{
    for (int i = 0; i < n; i++) out[i] = NULL;
    for (int i = 0; i < n; i++) {
        if (!in[i]) continue;
        if (!(out[i] = policy(in[i]))) {
            ddpl_autocast_release_n(n, out);
            return -1;
        }
    }
    return 0;
}

int ddpl_autocast_lower_n(int n, ddpl_tensor *const *in, ddpl_tensor **out)
{
    return apply_n(n, in, out, ddpl_autocast_lower);
}

int ddpl_autocast_upcast_n(int n, ddpl_tensor *const *in, ddpl_tensor **out)
{
    return apply_n(n, in, out, ddpl_autocast_upcast);
}
