/* ops/autocast.c: the autocast state (thread-local, per device type) and its two casting
 * policies.
 * defines: ddpl_autocast_* (autocast.h). */
#include "autocast.h"

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

/* PyTorch's is_eligible: floating, and not float64 (double stays double under autocast). */
static bool eligible(const ddpl_tensor *x)
{
    return ddpl_dtype_is_floating((ddpl_dtype)x->dtype) && x->dtype != DDPL_FLOAT64;
}

ddpl_tensor *ddpl_autocast_lower(ddpl_tensor *x)
{
    ddpl_device_type type = (ddpl_device_type)x->device.type;
    if (!ddpl_autocast_enabled(type) || !eligible(x)) return ddpl_tensor_retain(x);
    return ddpl_to_dtype(x, autocast_state[type].dtype);
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
