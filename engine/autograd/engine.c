/* autograd/engine.c: the backward pass, and the graph walk it starts with.
 * defines: ddpl_backward, ddpl_backward_ex, ddpl_autograd_grad, ddpl_autograd_grad_ex,
 *          ddpl_leaves_reached.
 *
 * 1. Walk the graph from the roots, counting for every node how many edges lead into it.
 * 2. Run ready nodes (all their incoming gradients summed) highest sequence number first, so
 *    later operations are differentiated first and AccumulateGrad nodes run as soon as their
 *    leaf's gradient is complete.
 * 3. Without retain_graph, each node frees its saved tensors once it has run.
 * With create_graph the pass runs in grad mode, so the formulas' ops (written with front-end
 * ops) record a graph of their own: gradients come back with a grad_fn and can be
 * differentiated again. Leaves then get .grad out of place (a copy, then a + b), keeping it.
 * Before step 2, leaves with a gradient home (ddpl_tensor_set_grad_home) and no .grad ask the
 * node that makes their gradient to write it there (plan_homes). */
#include "ddpl/ops.h"
#include "graph.h"
#include "leaves.h"

typedef struct {
    ddpl_node **items;
    size_t n, cap;
} node_vec;

static void vec_push(node_vec *v, ddpl_node *n)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 64;
        v->items = realloc(v->items, v->cap * sizeof *v->items);
        if (!v->items) abort();
    }
    v->items[v->n++] = n;
}

/* ---- ready queue: binary max-heap on seq ---- */
static void heap_push(node_vec *h, ddpl_node *n)
{
    vec_push(h, n);
    size_t i = h->n - 1;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h->items[p]->seq >= h->items[i]->seq) break;
        ddpl_node *tmp = h->items[p];
        h->items[p] = h->items[i];
        h->items[i] = tmp;
        i = p;
    }
}

static ddpl_node *heap_pop(node_vec *h)
{
    ddpl_node *top = h->items[0];
    h->items[0] = h->items[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && h->items[l]->seq > h->items[m]->seq) m = l;
        if (r < h->n && h->items[r]->seq > h->items[m]->seq) m = r;
        if (m == i) break;
        ddpl_node *tmp = h->items[m];
        h->items[m] = h->items[i];
        h->items[i] = tmp;
        i = m;
    }
    return top;
}

static atomic_ullong visit_generation = 1;

/* Passes running on this thread, innermost first. A backward may start another from inside a
 * node (a Lua Function's backward that recomputes a checkpointed segment and runs backward
 * through it: PyTorch's reentrant checkpoint). The inner pass's graph is new except for the
 * leaves' AccumulateGrad nodes it shares with the outer one, whose scratch (dependency count,
 * pending gradient) the outer pass still needs: the inner walk sets it aside and execute puts
 * it back when the inner pass ends. */
typedef struct pass_frame {
    uint64_t gen;
    struct pass_frame *outer;
} pass_frame;
static _Thread_local pass_frame *running_pass;

/* A node's scratch of an outer pass, kept while an inner pass uses the node. */
typedef struct {
    ddpl_node *node;
    uint64_t visit_gen;
    int dependencies;
    ddpl_tensor *grad_buffer;
    ddpl_node *producer;
    int producer_input;
    ddpl_tensor *dest;
    int dest_input;
} scratch_saved;

typedef struct {
    scratch_saved *items;
    size_t n, cap;
} scratch_vec;

static bool in_running_pass(const ddpl_node *n)
{
    for (const pass_frame *f = running_pass; f; f = f->outer)
        if (f->gen == n->visit_gen) return true;
    return false;
}

/* Sets n's scratch aside when an outer pass is using it, leaving it empty. */
static void set_aside(ddpl_node *n, scratch_vec *kept)
{
    if (!kept || !in_running_pass(n)) return;
    if (kept->n == kept->cap) {
        kept->cap = kept->cap ? 2 * kept->cap : 16;
        kept->items = realloc(kept->items, kept->cap * sizeof *kept->items);
        if (!kept->items) abort();
    }
    kept->items[kept->n++] = (scratch_saved){n,           n->visit_gen,    n->dependencies,
                                             n->grad_buffer, n->producer, n->producer_input,
                                             n->dest,     n->dest_input};
    n->grad_buffer = NULL;
    n->dest = NULL;
}

/* Puts back what set_aside kept (after the inner pass released its own buffers). */
static void put_back(scratch_vec *kept)
{
    for (size_t i = kept->n; i-- > 0;) {
        scratch_saved *k = &kept->items[i];
        ddpl_node *n = k->node;
        n->visit_gen = k->visit_gen;
        n->dependencies = k->dependencies;
        n->grad_buffer = k->grad_buffer;
        n->producer = k->producer;
        n->producer_input = k->producer_input;
        n->dest = k->dest;
        n->dest_input = k->dest_input;
    }
    free(kept->items);
    *kept = (scratch_vec){0};
}

/* Adds grad into the node's buffer (takes the reference). */
static int buffer_add(ddpl_node *n, ddpl_tensor *grad)
{
    if (!n->grad_buffer) {
        n->grad_buffer = grad;
        return 0;
    }
    ddpl_tensor *sum = ddpl_add(n->grad_buffer, grad);
    ddpl_tensor_release(grad);
    if (!sum) return -1;
    ddpl_tensor_release(n->grad_buffer);
    n->grad_buffer = sum;
    return 0;
}

/* Runs the hooks of list on *grad; each may replace it. */
static int run_tensor_hooks(ddpl_hook *h, ddpl_tensor **grad)
{
    for (; h; h = h->next) {
        bool failed = false;
        ddpl_tensor *r = ((ddpl_tensor_hook_fn)h->fn)(*grad, h->userdata, &failed);
        if (failed) return -1;
        if (r) {
            ddpl_tensor_release(*grad);
            *grad = r;
        }
    }
    return 0;
}

/* Makes grad match the forward input's dtype (a float32 input multiplied by a float64 one gets
 * a float64 gradient from the formula) and checks the shape, which only a buggy formula gets
 * wrong. Takes and returns a reference. */
static ddpl_tensor *validate_grad(ddpl_node *n, int i, ddpl_tensor *g)
{
    ddpl_edge *e = &n->edges[i];
    if (g->ndim != e->ndim || memcmp(g->sizes, e->sizes, e->ndim * sizeof(int64_t)) != 0) {
        char a[128], b[128];
        ddpl_error("internal error: %s returned a gradient of shape %s for input %d of shape %s",
                   n->name, ddpl_shape_str(g, a, sizeof a), i,
                   ddpl_sizes_str(e->ndim, e->sizes, b, sizeof b));
        ddpl_tensor_release(g);
        return NULL;
    }
    if (g->dtype != e->dtype) {
        ddpl_tensor *c = ddpl_to(g, (ddpl_dtype)e->dtype, g->device);
        ddpl_tensor_release(g);
        return c;
    }
    return g;
}

/* Whether g lies exactly over the leaf's gradient home (it was computed into it). */
static bool in_home(const ddpl_tensor *leaf, const ddpl_tensor *g)
{
    const ddpl_tensor *h = leaf->autograd->grad_home;
    return h && g->storage == h->storage && g->offset == h->offset &&
           ddpl_tensor_is_contiguous(g) && ddpl_same_shape(g, h);
}

static int accumulate_into_leaf(ddpl_node *n, ddpl_tensor *grad)
{
    ddpl_tensor *leaf = n->variable;
    ddpl_autograd_meta *m = leaf->autograd;
    if (ddpl_is_grad_enabled()) {
        /* create_graph: .grad keeps the graph (PyTorch: a recorded clone, then out-of-place
         * sums, since the previous .grad may be part of someone's graph) */
        ddpl_tensor *next = m->grad ? ddpl_add(m->grad, grad) : ddpl_clone(grad);
        ddpl_tensor_release(grad);
        if (!next) return -1;
        ddpl_tensor_release(m->grad);
        m->grad = next;
    } else if (!m->grad) {
        /* Keep the gradient itself when nothing else can see its memory, or when it was made
         * in the leaf's home; otherwise copy, since later accumulation writes into .grad in
         * place. */
        bool exclusive = atomic_load(&grad->refcount) == 1 &&
                         atomic_load(&grad->storage->refcount) == 1 &&
                         ddpl_tensor_is_contiguous(grad) && !ddpl_requires_grad(grad);
        if (exclusive || in_home(leaf, grad)) {
            /* .grad stands on its own: a view made by the formula keeps no base alive (an old
             * gradient home kept so would count as a holder of the memory, grad_home.c) */
            ddpl_tensor_release(grad->view_base);
            grad->view_base = NULL;
            m->grad = grad;
        } else {
            m->grad = ddpl_clone(grad);
            ddpl_tensor_release(grad);
            if (!m->grad) return -1;
        }
    } else {
        int rc = ddpl_add_(m->grad, grad, 1.0);
        ddpl_tensor_release(grad);
        if (rc < 0) return -1;
    }
    for (ddpl_hook *h = m->ready_hooks; h; h = h->next)
        if (((ddpl_grad_ready_fn)h->fn)(leaf, h->userdata) < 0) return -1;
    return 0;
}

typedef struct {
    /* autograd.grad: capture the gradients flowing into these nodes instead of accumulating */
    int n_capture;
    ddpl_node **capture_nodes;
    ddpl_tensor **captured;
} capture_set;

static int capture_index(const capture_set *c, ddpl_node *n)
{
    for (int i = 0; c && i < c->n_capture; i++)
        if (c->capture_nodes[i] == n) return i;
    return -1;
}

/* Runs one node with its summed incoming gradient (reference taken). */
static int run_node(ddpl_node *n, ddpl_tensor *grad, const capture_set *cap, bool retain_graph,
                    node_vec *ready)
{
    if (run_tensor_hooks(n->pre_hooks, &grad) < 0) goto fail;
    /* a leaf's own hooks see its gradient both in backward and in autograd.grad */
    if (n->variable && run_tensor_hooks(n->variable->autograd->hooks, &grad) < 0) goto fail;
    if (n->retain_grad_of) {
        ddpl_autograd_meta *m = n->retain_grad_of->autograd;
        ddpl_tensor *copy = ddpl_clone(grad);
        if (!copy) goto fail;
        if (m->grad) {
            ddpl_tensor *sum = ddpl_add(m->grad, copy);
            ddpl_tensor_release(copy);
            if (!sum) goto fail;
            copy = sum;
        }
        ddpl_tensor_release(m->grad);
        m->grad = copy;
    }
    int ci = capture_index(cap, n);
    if (ci >= 0) {
        cap->captured[ci] = ddpl_tensor_retain(grad);
        if (n->variable) { /* a leaf: autograd.grad does not touch .grad */
            ddpl_tensor_release(grad);
            return 0;
        }
    }
    if (n->variable) {
        if (cap) { /* autograd.grad never accumulates into leaves it was not asked about */
            ddpl_tensor_release(grad);
            return 0;
        }
        return accumulate_into_leaf(n, grad);
    }

    ddpl_tensor *stack_grads[8];
    ddpl_tensor **grads =
        n->n_inputs <= 8 ? stack_grads : ddpl_xcalloc((size_t)n->n_inputs, sizeof *grads);
    for (int i = 0; i < n->n_inputs; i++) grads[i] = NULL;
    int rc = n->backward(n, grad, grads);
    ddpl_node_drop_unpacked(n);
    ddpl_tensor_release(grad);
    grad = NULL;
    ddpl_tensor_release(n->dest);
    n->dest = NULL;
    for (int i = 0; i < n->n_inputs; i++) {
        ddpl_node *next = n->edges[i].node;
        if (!next) {
            ddpl_tensor_release(grads[i]);
            continue;
        }
        if (rc == 0 && grads[i] && n->edges[i].stale_view) {
            ddpl_error("%s: input %d is a view whose base was modified by an in-place operation "
                       "after the view was taken, so its history misses that write; take the "
                       "view again after the in-place operation (or clone() the base first)",
                       n->name, i);
            rc = -1;
        }
        if (rc == 0 && grads[i]) {
            grads[i] = validate_grad(n, i, grads[i]);
            if (!grads[i] || buffer_add(next, grads[i]) < 0) rc = -1;
        } else {
            ddpl_tensor_release(grads[i]);
        }
        if (--next->dependencies == 0) heap_push(ready, next);
    }
    if (grads != stack_grads) free(grads);
    if (rc < 0) return -1;
    if (!retain_graph) {
        ddpl_node_free_saved(n);
        n->released = true;
    }
    return 0;
fail:
    ddpl_tensor_release(grad);
    return -1;
}

/* Counts dependencies of every node reachable from roots; fills all. Returns the visit
 * generation: a node is reachable iff its visit_gen equals it. Nodes a running pass uses have
 * their scratch set aside into kept (put_back restores it). */
static uint64_t collect(ddpl_node **roots, int n_roots, node_vec *all, scratch_vec *kept)
{
    uint64_t gen = atomic_fetch_add(&visit_generation, 1);
    node_vec stack = {0};
    for (int i = 0; i < n_roots; i++) {
        if (!roots[i] || roots[i]->visit_gen == gen) continue;
        set_aside(roots[i], kept);
        roots[i]->visit_gen = gen;
        roots[i]->dependencies = 0;
        roots[i]->producer = NULL;
        vec_push(&stack, roots[i]);
        vec_push(all, roots[i]);
    }
    while (stack.n) {
        ddpl_node *n = stack.items[--stack.n];
        for (int i = 0; i < n->n_inputs; i++) {
            ddpl_node *next = n->edges[i].node;
            if (!next) continue;
            if (next->visit_gen != gen) {
                set_aside(next, kept);
                next->visit_gen = gen;
                next->dependencies = 0;
                next->producer = NULL;
                vec_push(&stack, next);
                vec_push(all, next);
            }
            next->dependencies++;
            next->producer = n;
            next->producer_input = i;
        }
    }
    free(stack.items);
    return gen;
}

/* For every leaf in the graph with a gradient home, no .grad, no tensor hooks and one node
 * feeding its gradient: follows that gradient's way back through view nodes that can pass
 * the request on (a Linear weight's transpose) to a node that can compute into a given tensor
 * (a matrix product), and hands it the home, reshaped as that node's input. */
static void plan_homes(const node_vec *all)
{
    for (size_t i = 0; i < all->n; i++) {
        ddpl_node *acc = all->items[i];
        ddpl_autograd_meta *m = acc->variable ? acc->variable->autograd : NULL;
        if (!m || !m->grad_home || m->grad || m->hooks || acc->pre_hooks || acc->dependencies != 1)
            continue;
        /* a sole-owner home is the gradient's alone: tensors kept from earlier steps move out */
        if (m->grad_home_sole && ddpl_tensor_take_memory(m->grad_home) < 0) continue;
        ddpl_node *p = acc->producer;
        int input = acc->producer_input;
        ddpl_tensor *dest = ddpl_tensor_retain(m->grad_home);
        while (p && dest) {
            if (p->dest_inputs & (1u << input)) {
                if (!p->dest) { /* one home per node; a second asker gets new memory */
                    p->dest = dest;
                    p->dest_input = input;
                    dest = NULL;
                }
                break;
            }
            if (!p->dest_through || p->dependencies != 1) break;
            ddpl_tensor *up = p->dest_through(p, dest);
            ddpl_tensor_release(dest);
            dest = up;
            input = p->producer_input;
            p = p->producer;
        }
        ddpl_tensor_release(dest);
    }
}

static ddpl_node *root_node(ddpl_tensor *t)
{
    return t->autograd->grad_fn ? t->autograd->grad_fn : t->autograd->grad_accumulator;
}

/* The node a backward from t starts at (a new reference): its grad_fn, or for a leaf its
 * accumulator, made if it has none yet; NULL when t does not require grad. */
static ddpl_node *start_node(ddpl_tensor *t)
{
    if (!ddpl_requires_grad(t)) return NULL;
    ddpl_node *n = ddpl_grad_fn(t);
    if (!n) { /* a leaf: a node with t as its input has t's accumulator on its edge */
        ddpl_node *root = ddpl_node_new("root", NULL, 1, &t);
        n = root->edges[0].node;
        ddpl_node_retain(n);
        ddpl_node_release(root);
        return n;
    }
    ddpl_node_retain(n);
    return n;
}

void ddpl_leaves_reached(int n_roots, ddpl_tensor *const *roots, int n_leaves,
                         ddpl_tensor *const *leaves, bool *reached)
{
    ddpl_node **nodes = ddpl_xcalloc((size_t)n_roots + 1, sizeof *nodes);
    node_vec all = {0};
    scratch_vec kept = {0};
    for (int i = 0; i < n_roots; i++) nodes[i] = start_node(roots[i]);
    uint64_t gen = collect(nodes, n_roots, &all, &kept);
    for (int i = 0; i < n_leaves; i++) {
        ddpl_node *acc = leaves[i]->autograd ? leaves[i]->autograd->grad_accumulator : NULL;
        reached[i] = acc && acc->visit_gen == gen;
    }
    put_back(&kept);
    for (int i = 0; i < n_roots; i++) ddpl_node_release(nodes[i]);
    free(nodes);
    free(all.items);
}

static int execute(int n_roots, ddpl_tensor *const *roots, ddpl_tensor *const *root_grads,
                   const capture_set *cap, bool retain_graph, bool create_graph)
{
    ddpl_node *stack_nodes[8];
    ddpl_node **nodes = n_roots <= 8 ? stack_nodes : ddpl_xcalloc((size_t)n_roots, sizeof *nodes);
    int rc = 0;
    node_vec all = {0}, ready = {0};
    bool prev_mode = ddpl_grad_mode_set(create_graph);
    retain_graph = retain_graph || create_graph; /* the new graph refers to the old one */

    scratch_vec kept = {0};
    pass_frame frame = {0, running_pass};
    bool nested = running_pass != NULL;
    for (int i = 0; i < n_roots; i++) nodes[i] = NULL;
    for (int i = 0; i < n_roots; i++) {
        /* a leaf root: its gradient goes straight into its accumulator */
        nodes[i] = start_node(roots[i]);
        if (!nodes[i]) {
            rc = ddpl_error("backward: element %d of the outputs does not require grad and has "
                            "no grad_fn",
                            i);
            goto done;
        }
    }
    frame.gen = collect(nodes, n_roots, &all, &kept);
    running_pass = &frame;

    for (int i = 0; i < n_roots; i++) {
        ddpl_tensor *r = roots[i], *g = root_grads ? root_grads[i] : NULL;
        char a[128], b[128];
        if (g) {
            if (!ddpl_same_shape(g, r)) {
                rc = ddpl_error("backward: gradient has shape %s but the output has shape %s",
                                ddpl_shape_str(g, a, sizeof a), ddpl_shape_str(r, b, sizeof b));
                goto done;
            }
            g = ddpl_tensor_retain(g);
        } else {
            if (ddpl_tensor_numel(r) != 1) {
                rc = ddpl_error("backward: grad can be implicitly created only for outputs with "
                                "one element, got shape %s; pass a gradient",
                                ddpl_shape_str(r, a, sizeof a));
                goto done;
            }
            g = ddpl_ones(r->ndim, r->sizes, (ddpl_dtype)r->dtype, r->device);
            if (!g) {
                rc = -1;
                goto done;
            }
        }
        if (buffer_add(nodes[i], g) < 0) {
            rc = -1;
            goto done;
        }
    }
    /* autograd.grad leaves .grad alone; create_graph's gradients are new tensors with history;
     * an inner pass leaves the homes to the outer one, which may have planned them already */
    if (!cap && !create_graph && !nested) plan_homes(&all);
    for (size_t i = 0; i < all.n; i++)
        if (all.items[i]->dependencies == 0) heap_push(&ready, all.items[i]);

    while (ready.n) {
        ddpl_node *n = heap_pop(&ready);
        ddpl_tensor *grad = n->grad_buffer;
        n->grad_buffer = NULL;
        if (!grad) { /* no gradient reached this node: pass the news on */
            for (int i = 0; i < n->n_inputs; i++) {
                ddpl_node *next = n->edges[i].node;
                if (next && --next->dependencies == 0) heap_push(&ready, next);
            }
            continue;
        }
        if (run_node(n, grad, cap, retain_graph, &ready) < 0) {
            rc = -1;
            break;
        }
    }

done:
    /* after a failure, drop the gradients still waiting in buffers */
    for (size_t i = 0; i < all.n; i++) {
        ddpl_tensor_release(all.items[i]->grad_buffer);
        all.items[i]->grad_buffer = NULL;
        ddpl_tensor_release(all.items[i]->dest); /* nodes that never ran */
        all.items[i]->dest = NULL;
    }
    if (frame.gen) running_pass = frame.outer;
    put_back(&kept);
    for (int i = 0; i < n_roots; i++) ddpl_node_release(nodes[i]);
    if (nodes != stack_nodes) free(nodes);
    free(all.items);
    free(ready.items);
    ddpl_grad_mode_set(prev_mode);
    return rc;
}

int ddpl_backward(ddpl_tensor *root, ddpl_tensor *grad, bool retain_graph)
{
    return ddpl_backward_ex(root, grad, retain_graph, false);
}

int ddpl_backward_ex(ddpl_tensor *root, ddpl_tensor *grad, bool retain_graph, bool create_graph)
{
    ddpl_tensor *grads[1] = {grad};
    return execute(1, &root, grad ? grads : NULL, NULL, retain_graph, create_graph);
}

int ddpl_autograd_grad(int n_outputs, ddpl_tensor *const *outputs, ddpl_tensor *const *grad_outputs,
                       int n_inputs, ddpl_tensor *const *inputs, ddpl_tensor **grads_out,
                       bool retain_graph, bool allow_unused)
{
    return ddpl_autograd_grad_ex(n_outputs, outputs, grad_outputs, n_inputs, inputs, grads_out,
                                 retain_graph, false, allow_unused);
}

int ddpl_autograd_grad_ex(int n_outputs, ddpl_tensor *const *outputs,
                          ddpl_tensor *const *grad_outputs, int n_inputs,
                          ddpl_tensor *const *inputs, ddpl_tensor **grads_out, bool retain_graph,
                          bool create_graph, bool allow_unused)
{
    capture_set cap = {n_inputs, ddpl_xcalloc((size_t)n_inputs, sizeof(ddpl_node *)), grads_out};
    int rc = 0;
    for (int i = 0; i < n_inputs; i++) {
        grads_out[i] = NULL;
        if (!ddpl_requires_grad(inputs[i])) {
            rc = ddpl_error("autograd.grad: input %d does not require grad", i);
            goto done;
        }
        /* a leaf needs its accumulator node to exist for the capture to see it */
        if (!root_node(inputs[i])) {
            /* nothing in the graph can reach a leaf without an accumulator */
            continue;
        }
        cap.capture_nodes[i] = root_node(inputs[i]);
    }
    rc = execute(n_outputs, outputs, grad_outputs, &cap, retain_graph, create_graph);
    if (rc == 0 && !allow_unused) {
        for (int i = 0; i < n_inputs; i++)
            if (!grads_out[i]) {
                rc = ddpl_error("autograd.grad: input %d was not used in the graph of the "
                                "outputs; pass allow_unused=true if this is intended",
                                i);
                break;
            }
    }
    if (rc < 0)
        for (int i = 0; i < n_inputs; i++) {
            ddpl_tensor_release(grads_out[i]);
            grads_out[i] = NULL;
        }
done:
    free(cap.capture_nodes);
    return rc;
}
