/* autograd/graph.h: graph nodes, a tensor's autograd state and the recording interface ops use.
 * defines: ddpl_node, ddpl_edge, ddpl_hook, ddpl_autograd_meta, ddpl_requires_grad,
 *          ddpl_grad_fn, ddpl_autograd_meta_of, ddpl_backward_fn, ddpl_grad_needed,
 *          ddpl_node_new, ddpl_node_save, ddpl_node_save_output, ddpl_node_saved,
 *          ddpl_set_history, DDPL_NODE_CTX.
 *
 * Recording an op (after its output is computed; names are PyTorch's, with its suffix):
 *     ddpl_tensor *ins[2] = {a, b};
 *     if (ddpl_grad_needed(2, ins)) {
 *         ddpl_node *n = ddpl_node_new("MulBackward0", mul_backward, 2, ins);
 *         ddpl_node_save(n, a);   // saved 0
 *         ddpl_node_save(n, b);   // saved 1
 *         ddpl_set_history(out, n);
 *     }
 * A backward function gets the gradient of the node's (single) output and fills grad_inputs[i]
 * with a new reference for each input i whose edge has a node (ddpl_node_needs_grad); it may
 * leave others NULL. It runs with grad mode off and uses front-end ops, so it works on every
 * device; under create_graph grad mode is on, so those ops record (a formula running a native
 * kernel marks its results with ddpl_mark_not_differentiable, ops/op_util.h). Gradients may
 * come back in a wider dtype: the engine casts them to the input's. */
#ifndef DDPL_AUTOGRAD_GRAPH_H
#define DDPL_AUTOGRAD_GRAPH_H

#include "core/core.h"
#include "ddpl/autograd.h"

struct ddpl_node;

/* A hook list entry (tensor hooks and gradient-ready hooks share the shape). */
typedef struct ddpl_hook {
    struct ddpl_hook *next;
    void *fn;
    void *userdata;
    void (*free_userdata)(void *);
} ddpl_hook;

/* A tensor's autograd state (t->autograd), PyTorch's AutogradMeta: made by the first call that
 * needs it (requires_grad, a grad_fn, .grad, a hook, a gradient home) and kept until the tensor
 * dies. A tensor without it requires no grad and has no history. */
typedef struct ddpl_autograd_meta {
    /* Leaves: set by the user. Non-leaves: true iff grad_fn != NULL. */
    bool requires_grad;
    bool retains_grad;
    bool grad_home_sole;                /* grad_home was given with sole_owner */
    ddpl_tensor *grad;                  /* owned */
    struct ddpl_node *grad_fn;          /* owned; NULL for leaves */
    struct ddpl_node *grad_accumulator; /* weak; the leaf's AccumulateGrad node if alive */
    ddpl_hook *hooks;                   /* leaf tensor hooks (non-leaf ones live on grad_fn) */
    ddpl_hook *ready_hooks;             /* gradient-ready hooks (leaves) */
    ddpl_tensor *grad_home;             /* leaves: ddpl_tensor_set_grad_home's (owned) */
} ddpl_autograd_meta;

/* The checks every op makes: a NULL test for tensors outside autograd. */
static inline bool ddpl_requires_grad(const ddpl_tensor *t)
{
    return t->autograd && t->autograd->requires_grad;
}
static inline struct ddpl_node *ddpl_grad_fn(const ddpl_tensor *t)
{
    return t->autograd ? t->autograd->grad_fn : NULL;
}
/* t's autograd state, made (all false and NULL) if t has none yet. */
ddpl_autograd_meta *ddpl_autograd_meta_of(ddpl_tensor *t);
typedef int (*ddpl_backward_fn)(struct ddpl_node *n, ddpl_tensor *grad, ddpl_tensor **grad_inputs);

/* One forward input of a node: where its gradient goes and the input's geometry. */
typedef struct ddpl_edge {
    struct ddpl_node *node; /* owned; NULL when this input needs no gradient */
    /* The input was a view whose base autograd saw written in place after the view was taken
     * (core.h: view_writes): its history misses that write, so a gradient sent along this edge
     * would be wrong. PyTorch regenerates such a view's history; backward refuses instead. */
    bool stale_view;
    int8_t ndim;
    uint8_t dtype;
    ddpl_device device;
    int64_t sizes[DDPL_MAX_DIMS];
} ddpl_edge;

typedef struct ddpl_saved {
    ddpl_tensor *t;   /* owned */
    unsigned version; /* storage version when saved */
    bool is_output;   /* the node's own output, saved as a history-free alias */
    /* t's grad_fn when it was saved (owned; NULL for leaves and outputs): the version error
     * names it, as PyTorch's does, even after an in-place op gave t a new history */
    struct ddpl_node *producer;
    /* create_graph: the output handed to the running backward, with this node as its grad_fn
     * (owned; dropped by ddpl_node_drop_unpacked once the formula has run) */
    ddpl_tensor *unpacked;
} ddpl_saved;

#define DDPL_NODE_MAX_SAVED 6
#define DDPL_NODE_CTX_BYTES 128

typedef struct ddpl_node {
    atomic_long refcount;
    const char *name;
    ddpl_backward_fn backward;
    uint64_t seq; /* creation order; later nodes run first among those ready */
    int n_inputs;
    int n_saved;
    bool released; /* saved tensors freed by a backward without retain_graph */
    ddpl_edge *edges;
    ddpl_saved saved[DDPL_NODE_MAX_SAVED];
    _Alignas(16) unsigned char ctx[DDPL_NODE_CTX_BYTES]; /* op parameters (dims, eps, ...) */
    ddpl_hook *pre_hooks;                                /* hooks of this node's output tensor */
    ddpl_tensor *retain_grad_of; /* weak: the output tensor that asked for retain_grad */
    ddpl_tensor *variable;       /* AccumulateGrad only: the leaf (owned) */
    /* Called when the node dies, for nodes whose ctx owns something (a Lua function's
     * reference: engine/lua/bind_function.c); NULL for ops. */
    void (*free_ctx)(struct ddpl_node *n);
    /* Gradient homes (ddpl_tensor_set_grad_home). A node whose backward can write an input's
     * gradient into a given tensor sets that input's bit in dest_inputs and reads n->dest /
     * n->dest_input while it runs (ddpl_node_dest). A view node that can pass the request on to
     * the node producing its own gradient sets dest_through: given the tensor its input's
     * gradient should be, it returns what its output's gradient must be for that (a new
     * reference), or NULL. */
    uint8_t dest_inputs;
    ddpl_tensor *(*dest_through)(struct ddpl_node *n, ddpl_tensor *dest);
    /* scratch of the running backward pass */
    uint64_t visit_gen;
    int dependencies;
    ddpl_tensor *grad_buffer;
    struct ddpl_node *producer; /* a node whose edge producer_input leads here: the only one */
    int producer_input;         /* when dependencies is 1 */
    ddpl_tensor *dest;          /* dest_inputs nodes: input dest_input's gradient goes here */
    int dest_input;
} ddpl_node;

bool ddpl_grad_needed(int n, ddpl_tensor *const *inputs);
ddpl_node *ddpl_node_new(const char *name, ddpl_backward_fn fn, int n_inputs,
                         ddpl_tensor *const *inputs);
void ddpl_node_retain(ddpl_node *n);
void ddpl_node_release(ddpl_node *n);
/* Saves t (NULL allowed: keeps the slot) for backward; returns its slot. */
int ddpl_node_save(ddpl_node *n, ddpl_tensor *t);
/* Saves the node's own output without a reference cycle (a history-free alias). */
int ddpl_node_save_output(ddpl_node *n, ddpl_tensor *out);
/* Borrowed saved tensor; NULL with an error if it was freed or modified in place since. A slot
 * saved as NULL returns NULL with no error: check ddpl_node_saved_is_null first.
 * While grad mode is on (a backward with create_graph records itself), a saved output comes
 * back with this node as its grad_fn, so formulas written with ops that use it (exp's g * y)
 * are differentiated through it too, as PyTorch unpacks saved outputs. */
ddpl_tensor *ddpl_node_saved(ddpl_node *n, int slot);
/* Releases the outputs ddpl_node_saved handed to a create_graph backward (they hold the node:
 * kept past the formula they would be a reference cycle). The engine calls it after each node. */
void ddpl_node_drop_unpacked(ddpl_node *n);
/* Frees the node's saved tensors (a backward without retain_graph; the node's death). */
void ddpl_node_free_saved(ddpl_node *n);
/* Whether the node's saved tensors were freed by a backward without retain_graph; sets the
 * error ddpl_node_saved reports then ("... backward through the graph a second time"). */
bool ddpl_node_check_released(ddpl_node *n);
static inline bool ddpl_node_saved_is_null(const ddpl_node *n, int slot)
{
    return n->saved[slot].t == NULL;
}
static inline bool ddpl_node_needs_grad(const ddpl_node *n, int input)
{
    return n->edges[input].node != NULL;
}
/* The tensor input's gradient should be written into (dest_inputs nodes), or NULL. */
static inline ddpl_tensor *ddpl_node_dest(const ddpl_node *n, int input)
{
    return n->dest && n->dest_input == input ? n->dest : NULL;
}
/* The gradient summed so far, in the running backward, for the node behind input's edge (its
 * grad_buffer), when a backward may add its own part into it in place: nothing else holds it
 * or its memory, it is contiguous with the edge's shape and part's dtype and device (part: the
 * gradient the backward was given), and no graph is being recorded; else NULL. Borrowed. A
 * backward that adds its part into it in place leaves input's gradient NULL (narrow's
 * backward: the slices of a split add into one tensor instead of each zero-filling a whole one
 * that the engine then sums). */
ddpl_tensor *ddpl_node_partial_grad(const ddpl_node *n, int input, const ddpl_tensor *part);
/* out takes over the caller's reference to n and becomes a non-leaf requiring grad. */
void ddpl_set_history(ddpl_tensor *out, ddpl_node *n);
/* Typed view of the node's parameter block: T *p = DDPL_NODE_CTX(n, T); */
#define DDPL_NODE_CTX(n, T)                                                                        \
    ((T *)((n)->ctx + 0 * sizeof(char[sizeof(T) <= DDPL_NODE_CTX_BYTES ? 1 : -1])))

/* Grad mode switch for internal use (returns previous). */
bool ddpl_grad_mode_set(bool on);

#endif
