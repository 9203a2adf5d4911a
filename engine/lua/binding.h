/* lua/binding.h: what the Lua binding files share (internal to engine/lua).
 * defines: lb_box, the upvalue convention, tensor checks and boxes, argument and option
 *          helpers, error helpers, GC pacing, the backward bracket for Lua hooks, the
 *          registration tables.
 *
 * Upvalue convention. Every C function of the library is registered with two upvalues:
 * 1 = the ddplua.Tensor metatable, 2 = the method table. Recognising a tensor is then a
 * pointer comparison of metatables (no registry lookup by name on the hot path), and boxing a
 * result needs no lookup either. Functions called from outside (ddpl_lua_push_tensor, hooks)
 * fall back to the registry by name.
 *
 * Boxes follow liolib.c: the userdata is created empty (t == NULL) with its metatable set before
 * anything can fail, then filled; __gc and __close release the tensor and leave t == NULL, which
 * every later use reports as "attempt to use a closed tensor". */
#ifndef DDPL_LUA_BINDING_H
#define DDPL_LUA_BINDING_H

#include <lauxlib.h>
#include <lua.h>

#include "ddpl/ddpl.h"
#include "ddpl/lua.h"

#define LB_TENSOR_MT   "ddplua.Tensor"
#define LB_MT_UPV      lua_upvalueindex(1)
#define LB_METHODS_UPV lua_upvalueindex(2)
#define LB_HIDDEN      __attribute__((visibility("hidden")))
/* raise a Lua error; typed int so that `return lb_error(L);` reads naturally */
#define LB_NORETURN __attribute__((noreturn)) int

typedef struct lb_box {
    ddpl_tensor *t; /* owned reference; NULL once closed */
} lb_box;

/* ---- tensors (bind_tensor.c) ---- */
/* The box at idx when it is a ddplua.Tensor (open or closed), else NULL. Needs the upvalues. */
LB_HIDDEN lb_box *lb_testbox(lua_State *L, int idx);
/* The open tensor at idx, or an error: "fname: expected a tensor as argument N, got T". */
LB_HIDDEN ddpl_tensor *lb_check(lua_State *L, int idx, const char *fname);
/* Raises naming fname when the box's tensor is closed, or its memory released (FSDP). */
LB_HIDDEN void lb_check_box(lua_State *L, const lb_box *b, const char *fname);
/* NULL for nil/none (or idx 0: an absent lb_arg), else as lb_check. */
LB_HIDDEN ddpl_tensor *lb_opt(lua_State *L, int idx, const char *fname);
/* Pushes an empty box (metatable set from the upvalue) to be filled by the caller. */
LB_HIDDEN lb_box *lb_newbox(lua_State *L);
/* Completes a box filled with the result of a C call: raises the engine's error when it is
 * NULL, otherwise paces the GC. Returns 1 (the box is on the stack). */
LB_HIDDEN int lb_finish(lua_State *L, lb_box *box);
/* As lb_finish, but an engine error that does not start with "fname:" is reported as
 * "fname: <error>" (the user called fname; the engine may name an inner op, or "tensor"). */
LB_HIDDEN int lb_finish_in(lua_State *L, lb_box *box, const char *fname);
/* Pushes a borrowed tensor (retained), or nil for NULL. */
LB_HIDDEN void lb_push_borrowed(lua_State *L, ddpl_tensor *t);
/* Tells the GC about tensor bytes allocated since the last call (DESIGN.md, Memory). */
LB_HIDDEN void lb_gc_account(lua_State *L);
/* Pushes a zeroed userdata of size bytes whose metatable mt (made on first use) has __gc = gc:
 * what it comes to own is freed even when a Lua error unwinds past the C code filling it. */
LB_HIDDEN void *lb_owner(lua_State *L, size_t size, const char *mt, lua_CFunction gc);

/* ---- errors and arguments (bind_args.c) ---- */
/* luaL_error(L, "%s", ddpl_last_error()) */
LB_HIDDEN LB_NORETURN lb_error(lua_State *L);
/* The engine's error named after fname, as lb_finish_in reports it. */
LB_HIDDEN LB_NORETURN lb_error_in(lua_State *L, const char *fname);
/* "fname: expected <expected> as argument N, got <type>" */
LB_HIDDEN LB_NORETURN lb_argerror(lua_State *L, int idx, const char *fname, const char *expected);
/* "fname: expected <expected> for '<name>', got <type>" (keyword-style parameters) */
LB_HIDDEN LB_NORETURN lb_opterror(lua_State *L, int idx, const char *fname, const char *name,
                                  const char *expected);

/* Tensor-or-number operands: check the type first (before anything is allocated), then make the
 * tensor (a Lua number becomes ddpl_wrapped_number: integers stay integral). */
LB_HIDDEN void lb_check_operand(lua_State *L, int idx, const char *fname);
/* Borrowed tensor or a new wrapped number (*owned set); NULL with the engine error set. */
LB_HIDDEN ddpl_tensor *lb_operand(lua_State *L, int idx, bool *owned);

/* Positional arguments with a trailing options table (a plain table without [1]); PyTorch's
 * keyword arguments are the option names. */
typedef struct lb_args {
    int n;    /* positional arguments (stack 1..n) */
    int opts; /* stack index of the options table, or 0 */
} lb_args;
LB_HIDDEN lb_args lb_parse_args(lua_State *L);
/* Stack index of parameter `name`: positional pos if present and not nil, else opts[name]
 * (pushed on the stack), else 0. */
LB_HIDDEN int lb_arg(lua_State *L, const lb_args *a, int pos, const char *name);
/* Raises "fname: unknown option 'x'" for a key of opts not in names (NULL-terminated). */
LB_HIDDEN void lb_check_opts(lua_State *L, int opts, const char *fname, const char *const *names);

/* Shared entry points of the elementwise methods: fn(x) for a tensor x and nothing more
 * (bind_pointwise_linalg.c), and a op b with a tensor or a number on either side, as the
 * arithmetic metamethods take them (bind_tensor.c). */
typedef ddpl_tensor *(*lb_unary_op)(ddpl_tensor *);
typedef ddpl_tensor *(*lb_binary_op)(ddpl_tensor *, ddpl_tensor *);
LB_HIDDEN int lb_unary(lua_State *L, const char *fname, lb_unary_op fn);
LB_HIDDEN int lb_arith(lua_State *L, const char *fname, lb_binary_op fn);

/* Raises "fname: expected N arguments, got M" when the stack holds more than `last` values
 * (bind_math.c): for functions whose every argument is accounted for. */
LB_HIDDEN void lb_check_no_more_args(lua_State *L, int last, const char *fname);

/* Typed getters of a parameter at stack index idx (0 = absent: the default is returned). */
LB_HIDDEN int64_t lb_int(lua_State *L, int idx, const char *fname, const char *name, int64_t dflt);
LB_HIDDEN double lb_num(lua_State *L, int idx, const char *fname, const char *name, double dflt);
/* Refuse a number that dtype dt cannot hold, as PyTorch does (ddpl_value_overflows):
 * "<fname>: value 300 cannot be converted to dtype int8 without overflow". lb_check_value_fits
 * reads the Lua number at idx (anything else passes); lb_check_number_fits takes the value. */
LB_HIDDEN void lb_check_value_fits(lua_State *L, int idx, const char *fname, ddpl_dtype dt);
LB_HIDDEN void lb_check_number_fits(lua_State *L, const char *fname, bool is_int, int64_t i,
                                    double d, ddpl_dtype dt);
LB_HIDDEN bool lb_bool(lua_State *L, int idx, const char *fname, const char *name, bool dflt);
/* An int or an {h, w} pair. */
LB_HIDDEN void lb_pair(lua_State *L, int idx, const char *fname, const char *name, int dflt,
                       int out[2]);
/* A dimension given positionally: integer, negative allowed (the engine wraps it). */
LB_HIDDEN int lb_dim(lua_State *L, int idx, const char *fname);
/* Sizes from integer arguments first..last or from a single table there; returns ndim. */
LB_HIDDEN int lb_sizes(lua_State *L, int first, int last, const char *fname, int64_t *sizes);
/* Sizes from the table at idx; returns ndim. */
LB_HIDDEN int lb_sizes_table(lua_State *L, int idx, const char *fname, const char *name,
                             int64_t *sizes);
LB_HIDDEN ddpl_dtype lb_dtype(lua_State *L, int idx, const char *fname);
LB_HIDDEN ddpl_device lb_device(lua_State *L, int idx, const char *fname);
/* A Lua list of tensors (borrowed) in memory owned by the Lua stack (a userdata pushed there),
 * so an error cannot leak it. Returns the count. */
LB_HIDDEN int lb_tensor_list(lua_State *L, int idx, const char *fname, ddpl_tensor ***out);

/* Creation options {dtype, device, requires_grad}. */
typedef struct lb_create_opts {
    ddpl_dtype dtype;
    bool has_dtype;
    ddpl_device device;
    bool requires_grad;
} lb_create_opts;
LB_HIDDEN lb_create_opts lb_parse_create_opts(lua_State *L, int opts, const char *fname,
                                              ddpl_dtype dflt);
/* Applies requires_grad to a finished box (raises on a non-floating dtype). */
LB_HIDDEN void lb_apply_requires_grad(lua_State *L, lb_box *box, const lb_create_opts *o);

/* ---- hooks and backward (bind_hooks.c) ----
 * Lua hook functions run inside a backward pass started from Lua. The binding that starts it
 * marks its lua_State active (the hooks run on it, so coroutines work); a hook's error is kept
 * and re-raised unchanged by that binding once the engine has unwound. */
typedef struct lb_active {
    lua_State *L;
    void *st;
} lb_active;
LB_HIDDEN lb_active lb_backward_begin(lua_State *L);
/* Ends the pass; on failure (rc < 0) raises the hook's error, or the engine's. */
LB_HIDDEN void lb_backward_end(lua_State *L, lb_active prev, int rc);
/* ddpl.autograd._queue_callback(fn): fn runs when the outermost running backward ends. */
LB_HIDDEN int lb_queue_callback(lua_State *L);
/* A Lua value (a function) kept for a C object that may die outside any Lua call (a hook, a
 * graph node): lb_ref_free only queues the registry slot, released on the next backward or
 * registration. lb_ref_new raises on failure. */
typedef struct lb_ref lb_ref;
LB_HIDDEN lb_ref *lb_ref_new(lua_State *L, int idx);
LB_HIDDEN void lb_ref_free(void *ref);
/* From C code the engine runs during backward: trampoline(fn, lightuserdata arg) under
 * lua_pcall on the state running the pass, fn being r's value; the trampoline reports through
 * arg. 0, or -1 with the error set ("what: message") and the error value kept, which
 * lb_backward_end re-raises unchanged. */
LB_HIDDEN int lb_backward_pcall(lb_ref *r, lua_CFunction trampoline, void *arg, const char *what);
/* Creates the per-state record and the hook handle metatable (at luaopen). */
LB_HIDDEN void lb_hooks_open(lua_State *L);

/* ---- registration: each file exports its tables (the comments name the file bind_<name>.c);
 * bind_module.c assembles the library ---- */
LB_HIDDEN extern const luaL_Reg lb_tensor_meta[];     /* tensor: metamethods */
LB_HIDDEN extern const luaL_Reg lb_value_methods[];   /* values: shape, values, conversion */
LB_HIDDEN extern const luaL_Reg lb_view_methods[];    /* views */
LB_HIDDEN extern const luaL_Reg lb_math_methods[];    /* pointwise_linalg: incl. in place, mm */
LB_HIDDEN extern const luaL_Reg lb_math_fn_methods[]; /* math: floor ... remainder (also ddpl.*) */
LB_HIDDEN extern const luaL_Reg lb_math_functions[];  /* pointwise_linalg: ddpl.where, ddpl.addmm */
LB_HIDDEN extern const luaL_Reg lb_reduce_methods[];  /* reduce: reductions, indexing */
LB_HIDDEN extern const luaL_Reg lb_reduce_functions[]; /* reduce: ddpl.cat, ddpl.stack */
LB_HIDDEN extern const luaL_Reg lb_sort_methods[];     /* sort: sort argsort unique ... */
/* x[key] / x[key] = v for tensor and list keys (bind_index.c) */
LB_HIDDEN int lb_index_get(lua_State *L, ddpl_tensor *x);
LB_HIDDEN int lb_index_set(lua_State *L, ddpl_tensor *x);
LB_HIDDEN extern const luaL_Reg lb_sort_functions[]; /* sort: searchsorted bucketize */
LB_HIDDEN extern const luaL_Reg lb_median_methods[]; /* median: median quantile (also ddpl.*) */
LB_HIDDEN extern const luaL_Reg lb_scan_methods[];   /* scan: cumsum, any, amax, nansum, ... */
LB_HIDDEN extern const luaL_Reg lb_shape_methods[];  /* shape: repeat flip tril ... (also ddpl.*) */
LB_HIDDEN extern const luaL_Reg lb_shape_functions[]; /* shape: ddpl.meshgrid, tril_indices, ... */
LB_HIDDEN extern const luaL_Reg lb_linalg_methods[];  /* linalg: outer dot kron ... (also ddpl.*) */
LB_HIDDEN extern const luaL_Reg lb_linalg_functions[]; /* linalg: ddpl.einsum, ddpl.cdist */
LB_HIDDEN extern const luaL_Reg lb_linalg_table[];     /* linalg: ddpl.linalg.* */
LB_HIDDEN extern const luaL_Reg lb_scatter_methods[];  /* scatter: scatter index_add nonzero
                                                          take index_put ... (also ddpl.*) */
/* ddpl.where(cond) with one argument: nonzero(cond, {as_tuple=true}) (bind_scatter.c) */
LB_HIDDEN int lb_where_nonzero(lua_State *L);
LB_HIDDEN extern const luaL_Reg lb_create_functions[];     /* create: factories */
LB_HIDDEN extern const luaL_Reg lb_hook_methods[];         /* hooks: register_hook */
LB_HIDDEN extern const luaL_Reg lb_autograd_methods[];     /* autograd: backward, ... */
LB_HIDDEN extern const luaL_Reg lb_autograd_functions[];   /* autograd: no_grad, ... */
LB_HIDDEN extern const luaL_Reg lb_autograd_table[];       /* autograd: ddpl.autograd.grad */
LB_HIDDEN extern const luaL_Reg lb_function_table[];       /* function: autograd._record_function */
LB_HIDDEN extern const luaL_Reg lb_functional[];           /* functional: F.* */
LB_HIDDEN extern const luaL_Reg lb_functional_methods[];   /* functional: x:softmax(dim), ... */
LB_HIDDEN extern const luaL_Reg lb_util_functions[];       /* util: time, threads, config, cuda */
LB_HIDDEN extern const luaL_Reg lb_rng_functions[];        /* rng: ddpl.* and ddpl.cuda.* */
LB_HIDDEN extern const luaL_Reg lb_cuda_functions[];       /* util: ddpl.cuda.* */
LB_HIDDEN extern const luaL_Reg lb_dist_functions[];       /* dist_pg: ddplua.core.dist */
LB_HIDDEN extern const luaL_Reg lb_serialize_functions[];  /* serialize: ddplua.core.serialize */
LB_HIDDEN extern const luaL_Reg lb_process_functions[];    /* process: ddplua.core.process */
LB_HIDDEN extern const luaL_Reg lb_worker_ipc_functions[]; /* worker_ipc: ddplua.core.worker_ipc */
LB_HIDDEN extern const luaL_Reg lb_json_functions[];       /* json: ddplua.core.json */
LB_HIDDEN extern const luaL_Reg lb_ddp_functions[];        /* ddp: ddplua.core.ddp */
LB_HIDDEN extern const luaL_Reg lb_data_functions[];       /* data: ddpl.read_idx */
LB_HIDDEN extern const luaL_Reg lb_io_functions[];         /* io: ddpl.save, ddpl.load */
LB_HIDDEN extern const luaL_Reg lb_optim_functions[];      /* optim: ddpl._fused_sgd_, _adam_ */
LB_HIDDEN extern const luaL_Reg lb_autocast_functions[];   /* autocast: ddpl.autocast, precision */

/* bind_json.c: pushes a userdata that owns tree (copied; the caller's copy must not be freed)
 * and frees it at collection, so a Lua error while the tree is turned into tables leaks
 * nothing. ddpl_json_free on the result frees it early (that is safe to repeat). */
struct ddpl_json;
LB_HIDDEN struct ddpl_json *lb_json_hold(lua_State *L, const struct ddpl_json *tree);
/* Pushes a JSON boolean, number (an integer when written as one) or string and returns true;
 * returns false, pushing nothing, for null, arrays and objects (each caller has its own rules). */
LB_HIDDEN bool lb_json_push_scalar(lua_State *L, const struct ddpl_json *j);

/* bind_dist_store.c: sets ddpl._store = {TCPStore = ...} on the table at index ddpl (at
 * luaopen). */
LB_HIDDEN void lb_store_open(lua_State *L, int ddpl);

/* bind_util.c: makes an out-of-memory on a device run a full GC of this state (idempotent; at
 * luaopen, so every way of reaching CUDA has it). */
LB_HIDDEN void lb_cuda_install_oom_hook(lua_State *L);

/* bind_autograd.c: creates the grad-mode restorers used by no_grad/enable_grad (at luaopen). */
LB_HIDDEN void lb_autograd_open(lua_State *L);

#endif
