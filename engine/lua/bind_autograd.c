/* lua/bind_autograd.c: backward, gradient mode and ddpl.autograd.grad from Lua.
 * defines: lb_autograd_open, lb_autograd_methods (backward retain_grad requires_grad_
 *          is_leaf), lb_autograd_functions (no_grad enable_grad set_grad_enabled
 *          is_grad_enabled), lb_autograd_table (grad).
 *
 * no_grad(fn, ...) restores the previous mode even when fn raises: the restorer sits in a
 * to-be-closed slot of the C frame, so Lua closes it while unwinding, after the message handler
 * has seen the error (tracebacks stay complete). */
#include "binding.h"

static char restore_on_key, restore_off_key;

static const char *const backward_opts[] = {"gradient", "retain_graph", "create_graph", "inputs",
                                            NULL};

/* y:backward([gradient] [, {retain_graph=create_graph, create_graph=false}]) */
static int m_backward(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "backward");
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "backward", backward_opts);
    int gi = lb_arg(L, &a, 2, "gradient");
    ddpl_tensor *g = gi ? lb_check(L, gi, "backward") : NULL;
    bool create = lb_bool(L, lb_arg(L, &a, 4, "create_graph"), "backward", "create_graph", false);
    bool retain = lb_bool(L, lb_arg(L, &a, 3, "retain_graph"), "backward", "retain_graph", create);
    if (lb_arg(L, &a, 0, "inputs"))
        return luaL_error(L, "backward: 'inputs' is not supported; use ddpl.autograd.grad");
    lb_active prev = lb_backward_begin(L);
    int rc = ddpl_backward_ex(t, g, retain, create);
    lb_backward_end(L, prev, rc);
    return 0;
}

static int m_retain_grad(lua_State *L)
{
    if (ddpl_tensor_retain_grad(lb_check(L, 1, "retain_grad")) < 0) lb_error_in(L, "retain_grad");
    return 0;
}

/* x:requires_grad_([flag=true]) -> x */
static int m_requires_grad_(lua_State *L)
{
    ddpl_tensor *t = lb_check(L, 1, "requires_grad_");
    bool on = lb_bool(L, lua_isnoneornil(L, 2) ? 0 : 2, "requires_grad_", "requires_grad", true);
    if (ddpl_tensor_set_requires_grad(t, on) < 0) lb_error_in(L, "requires_grad_");
    lua_settop(L, 1);
    return 1;
}

static int m_is_leaf(lua_State *L)
{
    lua_pushboolean(L, ddpl_tensor_is_leaf(lb_check(L, 1, "is_leaf")));
    return 1;
}

static int m_is_view(lua_State *L)
{
    lua_pushboolean(L, ddpl_tensor_is_view(lb_check(L, 1, "_is_view")));
    return 1;
}

/* ---- grad mode ---- */

static int restore_mode(lua_State *L)
{
    ddpl_set_grad_enabled(lua_toboolean(L, lua_upvalueindex(1)));
    return 0;
}

/* fn(...) with recording switched to `on`; returns fn's results. */
static int call_with_mode(lua_State *L, const char *fname, bool on)
{
    if (lua_type(L, 1) != LUA_TFUNCTION) {
        if (luaL_getmetafield(L, 1, "__call") == LUA_TNIL)
            return lb_argerror(L, 1, fname, "a function");
        lua_pop(L, 1);
    }
    int nargs = lua_gettop(L) - 1;
    bool prev = ddpl_is_grad_enabled();
    lua_rawgetp(L, LUA_REGISTRYINDEX, prev ? &restore_on_key : &restore_off_key);
    lua_insert(L, 1);
    lua_toclose(L, 1);
    ddpl_set_grad_enabled(on);
    lua_call(L, nargs, LUA_MULTRET);
    return lua_gettop(L) - 1;
}

static int f_no_grad(lua_State *L)
{
    return call_with_mode(L, "no_grad", false);
}
static int f_enable_grad(lua_State *L)
{
    return call_with_mode(L, "enable_grad", true);
}

static int f_is_grad_enabled(lua_State *L)
{
    lua_pushboolean(L, ddpl_is_grad_enabled());
    return 1;
}

/* ddpl.set_grad_enabled(flag) -> previous flag */
static int f_set_grad_enabled(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TBOOLEAN) return lb_argerror(L, 1, "set_grad_enabled", "a boolean");
    lua_pushboolean(L, ddpl_set_grad_enabled(lua_toboolean(L, 1)));
    return 1;
}

/* ---- ddpl.autograd.grad ---- */

/* A tensor or a list of tensors at idx; a single tensor is boxed into a one-element array. */
static int tensors_arg(lua_State *L, int idx, const char *what, ddpl_tensor ***out)
{
    if (lb_testbox(L, idx)) {
        ddpl_tensor **one = lua_newuserdatauv(L, sizeof *one, 0);
        one[0] = lb_check(L, idx, "autograd.grad");
        *out = one;
        return 1;
    }
    if (lua_type(L, idx) != LUA_TTABLE)
        luaL_error(L, "autograd.grad: expected a tensor or a list of tensors for %s, got %s", what,
                   luaL_typename(L, idx));
    return lb_tensor_list(L, idx, "autograd.grad", out);
}

static const char *const grad_opts[] = {"grad_outputs", "retain_graph", "create_graph",
                                        "allow_unused", NULL};

/* ddpl.autograd.grad(outputs, inputs [, {grad_outputs, retain_graph=create_graph,
 * create_graph=false, allow_unused}]) -> list of gradients, one per input (nil for an unused
 * input with allow_unused) */
static int f_grad(lua_State *L)
{
    lb_args a = lb_parse_args(L);
    lb_check_opts(L, a.opts, "autograd.grad", grad_opts);
    ddpl_tensor **outs, **ins, **gouts = NULL;
    int n_out = tensors_arg(L, 1, "outputs", &outs);
    int n_in = tensors_arg(L, 2, "inputs", &ins);
    int gi = lb_arg(L, &a, 3, "grad_outputs");
    if (gi) {
        /* entries may be nil (implicit ones for scalar outputs): collect by position */
        gouts = lua_newuserdatauv(L, (size_t)n_out * sizeof *gouts, 0);
        if (lb_testbox(L, gi)) {
            if (n_out != 1)
                return luaL_error(L, "autograd.grad: one grad_output for %d outputs", n_out);
            gouts[0] = lb_check(L, gi, "autograd.grad");
        } else if (lua_type(L, gi) == LUA_TTABLE) {
            for (int i = 0; i < n_out; i++) {
                lua_rawgeti(L, gi, i + 1);
                gouts[i] = lb_opt(L, lua_gettop(L), "autograd.grad");
                lua_pop(L, 1);
            }
        } else {
            return lb_opterror(L, gi, "autograd.grad", "grad_outputs", "a tensor or a list");
        }
    }
    bool create =
        lb_bool(L, lb_arg(L, &a, 0, "create_graph"), "autograd.grad", "create_graph", false);
    bool retain =
        lb_bool(L, lb_arg(L, &a, 0, "retain_graph"), "autograd.grad", "retain_graph", create);
    bool allow_unused =
        lb_bool(L, lb_arg(L, &a, 0, "allow_unused"), "autograd.grad", "allow_unused", false);
    /* result boxes exist before the call, so nothing can fail between it and their filling */
    lua_createtable(L, n_in, 0);
    int list = lua_gettop(L);
    lb_box **boxes = lua_newuserdatauv(L, (size_t)(n_in ? n_in : 1) * sizeof *boxes, 0);
    ddpl_tensor **grads = lua_newuserdatauv(L, (size_t)(n_in ? n_in : 1) * sizeof *grads, 0);
    for (int i = 0; i < n_in; i++) {
        boxes[i] = lb_newbox(L);
        lua_rawseti(L, list, i + 1);
    }
    lb_active prev = lb_backward_begin(L);
    int rc =
        ddpl_autograd_grad_ex(n_out, outs, gouts, n_in, ins, grads, retain, create, allow_unused);
    lb_backward_end(L, prev, rc);
    for (int i = 0; i < n_in; i++) {
        boxes[i]->t = grads[i];
        if (!grads[i]) {
            lua_pushnil(L);
            lua_rawseti(L, list, i + 1);
        }
    }
    lb_gc_account(L);
    lua_pushvalue(L, list);
    return 1;
}

void lb_autograd_open(lua_State *L)
{
    /* two restorers, so that entering no_grad allocates nothing */
    for (int on = 0; on < 2; on++) {
        lua_newtable(L);
        lua_createtable(L, 0, 1);
        lua_pushboolean(L, on);
        lua_pushcclosure(L, restore_mode, 1);
        lua_setfield(L, -2, "__close");
        lua_setmetatable(L, -2);
        lua_rawsetp(L, LUA_REGISTRYINDEX, on ? &restore_on_key : &restore_off_key);
    }
}

const luaL_Reg lb_autograd_methods[] = {
    {"backward", m_backward}, {"retain_grad", m_retain_grad}, {"requires_grad_", m_requires_grad_},
    {"is_leaf", m_is_leaf},   {"_is_view", m_is_view},        {NULL, NULL},
};

const luaL_Reg lb_autograd_functions[] = {
    {"no_grad", f_no_grad},
    {"enable_grad", f_enable_grad},
    {"is_grad_enabled", f_is_grad_enabled},
    {"set_grad_enabled", f_set_grad_enabled},
    {NULL, NULL},
};

const luaL_Reg lb_autograd_table[] = {
    {"grad", f_grad},
    {"_queue_callback", lb_queue_callback},
    {NULL, NULL},
};
