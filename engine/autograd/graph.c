/* autograd/graph.c: nodes, saved tensors, leaf accumulators, hooks and grad mode.
 * defines: ddpl_node_new/retain/release/save/saved, ddpl_set_history, ddpl_grad_needed,
 *          grad mode, requires_grad/grad accessors, hook registration,
 *          ddpl_autograd_tensor_dying, ddpl_grad_accumulator. */
#include "autograd.h"

static _Thread_local bool grad_disabled; /* default: recording on */
static atomic_ullong next_seq = 1;

bool ddpl_grad_mode_set(bool on)
{
    bool prev = !grad_disabled;
    grad_disabled = !on;
    return prev;
}
bool ddpl_set_grad_enabled(bool enabled)
{
    return ddpl_grad_mode_set(enabled);
}
bool ddpl_is_grad_enabled(void)
{
    return !grad_disabled;
}

bool ddpl_grad_needed(int n, ddpl_tensor *const *inputs)
{
    if (grad_disabled) return false;
    for (int i = 0; i < n; i++)
        if (inputs[i] && inputs[i]->requires_grad) return true;
    return false;
}

/* ---- node lifetime ----
 * Releasing a node can release its inputs' nodes, and so on down a graph that may be 100k nodes
 * deep (a long unrolled loop). Nodes whose count drops to zero are queued and destroyed by the
 * outermost release, so the C stack never grows with graph depth. */
static _Thread_local ddpl_node **dying;
static _Thread_local size_t n_dying, cap_dying;
static _Thread_local bool draining;

static void free_hooks(ddpl_hook *h)
{
    while (h) {
        ddpl_hook *next = h->next;
        if (h->free_userdata) h->free_userdata(h->userdata);
        free(h);
        h = next;
    }
}

static void node_destroy(ddpl_node *n)
{
    for (int i = 0; i < n->n_inputs; i++) ddpl_node_release(n->edges[i].node);
    free(n->edges);
    for (int i = 0; i < n->n_saved; i++) ddpl_tensor_release(n->saved[i].t);
    free_hooks(n->pre_hooks);
    if (n->retain_grad_of) n->retain_grad_of->retains_grad = false;
    if (n->variable) {
        n->variable->grad_accumulator = NULL;
        ddpl_tensor_release(n->variable);
    }
    ddpl_tensor_release(n->grad_buffer);
    free(n);
}

void ddpl_node_retain(ddpl_node *n)
{
    if (n) atomic_fetch_add(&n->refcount, 1);
}

void ddpl_node_release(ddpl_node *n)
{
    if (!n || atomic_fetch_sub(&n->refcount, 1) != 1) return;
    if (n_dying == cap_dying) {
        cap_dying = cap_dying ? 2 * cap_dying : 64;
        dying = realloc(dying, cap_dying * sizeof *dying);
        if (!dying) abort();
    }
    dying[n_dying++] = n;
    if (draining) return;
    draining = true;
    while (n_dying) node_destroy(dying[--n_dying]);
    draining = false;
}

static ddpl_node *node_alloc(const char *name, ddpl_backward_fn fn, int n_inputs)
{
    ddpl_node *n = ddpl_xcalloc(1, sizeof *n);
    atomic_init(&n->refcount, 1);
    n->name = name;
    n->backward = fn;
    n->seq = atomic_fetch_add(&next_seq, 1);
    n->n_inputs = n_inputs;
    n->edges = n_inputs ? ddpl_xcalloc((size_t)n_inputs, sizeof *n->edges) : NULL;
    return n;
}

/* AccumulateGrad runs as soon as it is ready (highest priority), so a leaf's gradient is final,
 * and its gradient-ready hooks fire, as early in backward as possible: the DDP reducer overlaps
 * communication with the rest of backward thanks to this. */
static ddpl_node *grad_accumulator(ddpl_tensor *leaf)
{
    if (leaf->grad_accumulator) {
        ddpl_node_retain(leaf->grad_accumulator);
        return leaf->grad_accumulator;
    }
    ddpl_node *n = node_alloc("AccumulateGrad", NULL, 0);
    n->seq = UINT64_MAX;
    n->variable = ddpl_tensor_retain(leaf);
    leaf->grad_accumulator = n;
    return n;
}

ddpl_node *ddpl_node_new(const char *name, ddpl_backward_fn fn, int n_inputs,
                         ddpl_tensor *const *inputs)
{
    ddpl_node *n = node_alloc(name, fn, n_inputs);
    for (int i = 0; i < n_inputs; i++) {
        ddpl_tensor *t = inputs[i];
        ddpl_edge *e = &n->edges[i];
        if (!t) continue;
        e->ndim = t->ndim;
        e->dtype = t->dtype;
        e->device = t->device;
        memcpy(e->sizes, t->sizes, sizeof e->sizes);
        if (!t->requires_grad) continue;
        if (t->grad_fn) {
            ddpl_node_retain(t->grad_fn);
            e->node = t->grad_fn;
        } else {
            e->node = grad_accumulator(t);
        }
    }
    return n;
}

int ddpl_node_save(ddpl_node *n, ddpl_tensor *t)
{
    if (n->n_saved >= DDPL_NODE_MAX_SAVED) abort(); /* an op saving too much is a bug */
    int slot = n->n_saved++;
    n->saved[slot].t = ddpl_tensor_retain(t);
    n->saved[slot].version = t ? atomic_load(&t->storage->version) : 0;
    return slot;
}

int ddpl_node_save_output(ddpl_node *n, ddpl_tensor *out)
{
    ddpl_tensor *alias = ddpl_tensor_alias(out, out->ndim, out->sizes, out->strides, out->offset);
    int slot = ddpl_node_save(n, alias);
    ddpl_tensor_release(alias);
    return slot;
}

ddpl_tensor *ddpl_node_saved(ddpl_node *n, int slot)
{
    if (n->released) {
        ddpl_error("%s: trying to backward through the graph a second time (its saved tensors "
                   "were freed); pass retain_graph=true to the first backward",
                   n->name);
        return NULL;
    }
    ddpl_saved *s = &n->saved[slot];
    if (s->t && atomic_load(&s->t->storage->version) != s->version) {
        ddpl_error("%s: a tensor saved for backward was modified by an in-place operation "
                   "(version %u, saved at %u)",
                   n->name, atomic_load(&s->t->storage->version), s->version);
        return NULL;
    }
    return s->t;
}

void ddpl_set_history(ddpl_tensor *out, ddpl_node *n)
{
    ddpl_node_release(out->grad_fn);
    out->grad_fn = n;
    out->requires_grad = true;
}

/* ---- tensor-side state ---- */
void ddpl_autograd_tensor_dying(ddpl_tensor *t)
{
    ddpl_tensor_release(t->grad);
    if (t->grad_fn) {
        if (t->grad_fn->retain_grad_of == t) t->grad_fn->retain_grad_of = NULL;
        ddpl_node_release(t->grad_fn);
    }
    free_hooks(t->hooks);
    free_hooks(t->ready_hooks);
    ddpl_tensor_release(t->grad_home);
}

bool ddpl_tensor_requires_grad(const ddpl_tensor *t)
{
    return t->requires_grad;
}
bool ddpl_tensor_is_leaf(const ddpl_tensor *t)
{
    return t->grad_fn == NULL;
}
ddpl_tensor *ddpl_tensor_grad(const ddpl_tensor *t)
{
    return t->grad;
}
const char *ddpl_tensor_grad_fn_name(const ddpl_tensor *t)
{
    return t->grad_fn ? t->grad_fn->name : NULL;
}

int ddpl_tensor_set_requires_grad(ddpl_tensor *t, bool requires_grad)
{
    if (t->grad_fn) {
        if (requires_grad) return 0;
        return ddpl_error("requires_grad: can only change it on leaf tensors; use detach() to "
                          "get a tensor without history");
    }
    if (requires_grad && !ddpl_dtype_is_floating((ddpl_dtype)t->dtype))
        return ddpl_error("requires_grad: only floating-point tensors can require gradients, "
                          "got %s",
                          ddpl_dtype_name((ddpl_dtype)t->dtype));
    t->requires_grad = requires_grad;
    return 0;
}

int ddpl_tensor_set_grad(ddpl_tensor *t, ddpl_tensor *grad)
{
    if (grad) {
        char a[128], b[128];
        if (!ddpl_same_shape(t, grad))
            return ddpl_error("grad: assigned gradient has shape %s but the tensor has shape %s",
                              ddpl_shape_str(grad, a, sizeof a), ddpl_shape_str(t, b, sizeof b));
        if (grad->dtype != t->dtype)
            return ddpl_error("grad: assigned gradient has dtype %s but the tensor has dtype %s",
                              ddpl_dtype_name((ddpl_dtype)grad->dtype),
                              ddpl_dtype_name((ddpl_dtype)t->dtype));
        if (!ddpl_same_device(grad->device, t->device))
            return ddpl_error("grad: assigned gradient is on %s but the tensor is on %s",
                              ddpl_device_str(grad->device, a, sizeof a),
                              ddpl_device_str(t->device, b, sizeof b));
    }
    ddpl_tensor_retain(grad);
    ddpl_tensor_release(t->grad);
    t->grad = grad;
    return 0;
}

int ddpl_tensor_set_grad_home(ddpl_tensor *leaf, ddpl_tensor *home, bool sole_owner)
{
    if (home) {
        char a[128], b[128];
        if (leaf->grad_fn) return ddpl_error("set_grad_home: the tensor is not a leaf");
        if (!ddpl_same_shape(leaf, home) || home->dtype != leaf->dtype ||
            !ddpl_same_device(home->device, leaf->device) || !ddpl_tensor_is_contiguous(home))
            return ddpl_error(
                "set_grad_home: the home must be contiguous with the leaf's shape "
                "%s, dtype %s and device; got shape %s, dtype %s%s",
                ddpl_shape_str(leaf, a, sizeof a), ddpl_dtype_name((ddpl_dtype)leaf->dtype),
                ddpl_shape_str(home, b, sizeof b), ddpl_dtype_name((ddpl_dtype)home->dtype),
                ddpl_same_device(home->device, leaf->device)
                    ? (ddpl_tensor_is_contiguous(home) ? "" : ", not contiguous")
                    : ", another device");
    }
    if (home && sole_owner &&
        (home->device.type != DDPL_CPU || home->offset != 0 ||
         (size_t)ddpl_tensor_numel(home) * ddpl_dtype_size((ddpl_dtype)home->dtype) !=
             home->storage->nbytes))
        return ddpl_error("set_grad_home: a sole-owner home must be a CPU tensor over its whole "
                          "storage");
    ddpl_tensor_retain(home);
    ddpl_tensor_release(leaf->grad_home);
    leaf->grad_home = home;
    leaf->grad_home_sole = home && sole_owner;
    return 0;
}

int ddpl_tensor_retain_grad(ddpl_tensor *t)
{
    if (!t->requires_grad) return ddpl_error("retain_grad: the tensor does not require grad");
    if (!t->grad_fn) return 0; /* leaves keep their gradient anyway */
    t->retains_grad = true;
    t->grad_fn->retain_grad_of = t;
    return 0;
}

static void append_hook(ddpl_hook **list, void *fn, void *ud, void (*free_ud)(void *))
{
    ddpl_hook *h = ddpl_xmalloc(sizeof *h);
    h->next = NULL;
    h->fn = fn;
    h->userdata = ud;
    h->free_userdata = free_ud;
    while (*list) list = &(*list)->next;
    *list = h;
}

int ddpl_tensor_register_hook(ddpl_tensor *t, ddpl_tensor_hook_fn fn, void *userdata,
                              void (*free_userdata)(void *))
{
    if (!t->requires_grad)
        return ddpl_error("register_hook: cannot register a hook on a tensor that does not "
                          "require grad");
    append_hook(t->grad_fn ? &t->grad_fn->pre_hooks : &t->hooks, (void *)fn, userdata,
                free_userdata);
    return 0;
}

int ddpl_tensor_register_grad_ready_hook(ddpl_tensor *leaf, ddpl_grad_ready_fn fn, void *userdata,
                                         void (*free_userdata)(void *))
{
    if (leaf->grad_fn || !leaf->requires_grad)
        return ddpl_error("register_grad_ready_hook: only leaf tensors that require grad have "
                          "a gradient-ready signal");
    append_hook(&leaf->ready_hooks, (void *)fn, userdata, free_userdata);
    return 0;
}

static int remove_from(ddpl_hook **list, void *userdata)
{
    int removed = 0;
    while (*list) {
        ddpl_hook *h = *list;
        if (h->userdata == userdata) {
            *list = h->next;
            if (h->free_userdata) h->free_userdata(h->userdata);
            free(h);
            removed++;
        } else {
            list = &h->next;
        }
    }
    return removed;
}

int ddpl_tensor_remove_hooks(ddpl_tensor *t, void *userdata)
{
    int n = remove_from(&t->hooks, userdata) + remove_from(&t->ready_hooks, userdata);
    if (t->grad_fn) n += remove_from(&t->grad_fn->pre_hooks, userdata);
    return n;
}
