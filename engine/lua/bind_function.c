/* lua/bind_function.c: the graph nodes of ddpl.autograd.Function
 * (lua/ddplua/autograd_function.lua), nodes whose backward calls a Lua function. defines:
 * lb_function_table (ddpl.autograd._record_function).
 *
 * The engine cannot call Lua (docs/internals/architecture.md, Layers): a node's backward is a C
 * function pointer, and ours, registered here, calls the Lua closure the node keeps (an lb_ref,
 * released when the node dies) through lb_backward_pcall, so a Lua error comes out of backward() as
 * it was raised, after the engine has cleaned up.
 *
 * A Function with several differentiable outputs is recorded by the Lua side as one node with
 * the input edges, whose only output is a hidden 0-dim token, and one small node per output
 * with an edge to the token: these hand their gradients to the Lua side and wake the main node
 * (autograd_function.lua), which then calls backward once with all of them, as PyTorch does.
 *
 * Saved outputs (ctx:save_for_backward of a tensor forward returned) live in the nodes' saved
 * slots as history-free aliases, so the output -> node -> closure -> output cycle a Lua
 * reference would make never forms; a node's own output comes back with the node as grad_fn
 * under create_graph (ddpl_node_saved), which is what double backward through it needs. */
#include <string.h>

#include "autograd/graph.h"
#include "binding.h"

typedef struct {
    lb_ref *fn;    /* fn(output_index, grad, saved_outputs) -> list of gradients, one per input */
    int output;    /* the 1-based output of the Function this node is the grad_fn of */
    char name[96]; /* "<Class>Backward", the node's name */
} function_ctx;

typedef struct {
    ddpl_node *n;
    ddpl_tensor *grad; /* borrowed */
    ddpl_tensor **gi;  /* the engine's gradient slots, one per input */
} function_call;

static void free_function_ctx(ddpl_node *n)
{
    lb_ref_free(DDPL_NODE_CTX(n, function_ctx)->fn);
}

/* Runs inside lua_pcall (lb_backward_pcall): (closure, call) -> fills call->gi. */
static int function_trampoline(lua_State *L)
{
    function_call *call = lua_touserdata(L, 2);
    ddpl_node *n = call->n;
    function_ctx *c = DDPL_NODE_CTX(n, function_ctx);
    lua_settop(L, 1);
    lua_pushinteger(L, c->output);
    ddpl_lua_push_tensor(L, call->grad);
    lua_createtable(L, n->n_saved, 0);
    for (int i = 0; i < n->n_saved; i++) {
        ddpl_tensor *t = ddpl_node_saved(n, i);
        if (!t) return luaL_error(L, "%s", ddpl_last_error());
        ddpl_lua_push_tensor(L, t);
        lua_rawseti(L, -2, i + 1);
    }
    lua_call(L, 3, 1);
    /* the Lua side checked count, shapes and dtypes and naming the class; here only types */
    if (!lua_istable(L, -1))
        return luaL_error(L, "%s: expected a list of gradients from the Lua side, got %s", c->name,
                          luaL_typename(L, -1));
    int list = lua_gettop(L);
    for (int i = 0; i < n->n_inputs; i++) {
        lua_rawgeti(L, list, i + 1);
        if (!lua_isnil(L, -1) && !ddpl_lua_test_tensor(L, -1))
            return luaL_error(L, "%s: gradient %d is a %s, expected a tensor or nil", c->name,
                              i + 1, luaL_typename(L, -1));
        lua_pop(L, 1);
    }
    for (int i = 0; i < n->n_inputs; i++) { /* nothing raises from here on */
        lua_rawgeti(L, list, i + 1);
        ddpl_tensor *g = lua_isnil(L, -1) ? NULL : ddpl_lua_test_tensor(L, -1);
        if (g && ddpl_node_needs_grad(n, i)) call->gi[i] = ddpl_tensor_retain(g);
        lua_pop(L, 1);
    }
    return 0;
}

static int function_backward(ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **gi)
{
    function_ctx *c = DDPL_NODE_CTX(n, function_ctx);
    if (ddpl_node_check_released(n)) return -1;
    function_call call = {n, grad, gi};
    return lb_backward_pcall(c->fn, function_trampoline, &call, c->name);
}

/* A dense Lua list of tensors at idx (borrowed, in stack-owned memory); raises naming what. */
static int tensor_list(lua_State *L, int idx, const char *what, ddpl_tensor ***out)
{
    luaL_checktype(L, idx, LUA_TTABLE);
    int n = (int)lua_rawlen(L, idx);
    ddpl_tensor **ts = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *ts, 0);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, idx, i + 1);
        ts[i] = ddpl_lua_test_tensor(L, -1);
        if (!ts[i])
            luaL_error(L, "autograd.Function: %s %d is a %s, expected a tensor", what, i + 1,
                       luaL_typename(L, -1));
        lua_pop(L, 1);
    }
    *out = ts;
    return n;
}

/* ddpl.autograd._record_function(name, closure, inputs, outputs, differentiable, saved [, kept]):
 * gives each outputs[k] with differentiable[k] a node "<name>Backward" with an edge per tensor of
 * inputs; saved lists the 1-based outputs saved for backward; kept, other tensors each node
 * saves as history-free aliases after them (the outputs of a Function with several, saved in
 * the one node that runs its backward). Internal to autograd_function.lua, which has checked
 * everything a user could get wrong; the outputs have no history yet. */
static int f_record_function(lua_State *L)
{
    lua_settop(L, 7); /* tensor_list's buffers go above the arguments */
    size_t name_len;
    const char *name = luaL_checklstring(L, 1, &name_len);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    ddpl_tensor **ins, **outs;
    int n_in = tensor_list(L, 3, "input", &ins);
    int n_out = tensor_list(L, 4, "output", &outs);
    luaL_checktype(L, 5, LUA_TTABLE);
    luaL_checktype(L, 6, LUA_TTABLE);
    int n_saved = (int)lua_rawlen(L, 6);
    ddpl_tensor **kept = NULL;
    int n_kept = lua_isnoneornil(L, 7) ? 0 : tensor_list(L, 7, "kept tensor", &kept);
    if (n_saved + n_kept > DDPL_NODE_MAX_SAVED)
        return luaL_error(L, "%s: save_for_backward keeps at most %d of the outputs, got %d", name,
                          DDPL_NODE_MAX_SAVED, n_saved + n_kept);
    int saved[DDPL_NODE_MAX_SAVED];
    for (int j = 0; j < n_saved; j++) {
        lua_rawgeti(L, 6, j + 1);
        lua_Integer k = luaL_checkinteger(L, -1);
        lua_pop(L, 1);
        if (k < 1 || k > n_out) return luaL_error(L, "%s: saved output %d out of range", name, k);
        saved[j] = (int)k - 1;
    }
    for (int k = 0; k < n_out; k++) /* checked before any node exists: no half-recorded call */
        if (ddpl_tensor_requires_grad(outs[k]))
            return luaL_error(L, "%s: output %d already has history", name, k + 1);
    for (int k = 0; k < n_out; k++) {
        lua_rawgeti(L, 5, k + 1);
        bool differentiable = lua_toboolean(L, -1);
        lua_pop(L, 1);
        if (!differentiable) continue;
        lb_ref *fn = lb_ref_new(L, 2); /* raises before the node exists */
        ddpl_node *n = ddpl_node_new(NULL, function_backward, n_in, ins);
        function_ctx *c = DDPL_NODE_CTX(n, function_ctx);
        c->fn = fn;
        c->output = k + 1;
        snprintf(c->name, sizeof c->name, "%.*sBackward", (int)(sizeof c->name - 9), name);
        n->name = c->name;
        n->free_ctx = free_function_ctx;
        for (int j = 0; j < n_saved; j++) {
            ddpl_tensor *o = outs[saved[j]];
            if (saved[j] == k) {
                ddpl_node_save_output(n, o);
            } else { /* another output: an alias without history, never a cycle */
                ddpl_tensor *alias = ddpl_tensor_alias(o, o->ndim, o->sizes, o->strides, o->offset);
                ddpl_node_save(n, alias);
                ddpl_tensor_release(alias);
            }
        }
        for (int j = 0; j < n_kept; j++) {
            ddpl_tensor *o = kept[j];
            ddpl_tensor *alias = ddpl_tensor_alias(o, o->ndim, o->sizes, o->strides, o->offset);
            ddpl_node_save(n, alias);
            ddpl_tensor_release(alias);
        }
        ddpl_set_history(outs[k], n);
    }
    return 0;
}

const luaL_Reg lb_function_table[] = {
    {"_record_function", f_record_function},
    {NULL, NULL},
};
