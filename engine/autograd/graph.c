/* autograd/graph.c: nodes, saved tensors, leaf accumulators, a tensor's autograd state, hooks
 * and grad mode.
 * defines: ddpl_node_new/retain/release/save/saved, ddpl_set_history, ddpl_grad_needed,
 *          ddpl_autograd_meta_of, ddpl_node_partial_grad, grad mode, requires_grad/grad
 *          accessors, hook registration. */
#include "graph.h"

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
        if (inputs[i] && ddpl_requires_grad(inputs[i])) return true;
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
    if (n->free_ctx) n->free_ctx(n);
    ddpl_node_drop_unpacked(n);
    ddpl_node_free_saved(n);
    free_hooks(n->pre_hooks);
    if (n->retain_grad_of) n->retain_grad_of->autograd->retains_grad = false;
    if (n->variable) {
        n->variable->autograd->grad_accumulator = NULL;
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
    ddpl_autograd_meta *m = leaf->autograd; /* a leaf that requires grad has one */
    if (m->grad_accumulator) {
        ddpl_node_retain(m->grad_accumulator);
        return m->grad_accumulator;
    }
    ddpl_node *n = node_alloc("AccumulateGrad", NULL, 0);
    n->seq = UINT64_MAX;
    n->variable = ddpl_tensor_retain(leaf);
    m->grad_accumulator = n;
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
        if (!ddpl_requires_grad(t)) continue;
        if (t->autograd->grad_fn) {
            ddpl_node_retain(t->autograd->grad_fn);
            e->node = t->autograd->grad_fn;
            e->stale_view =
                t->view_base && t->view_writes != atomic_load(&t->storage->recorded_writes);
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
    ddpl_node *p = t ? ddpl_grad_fn(t) : NULL;
    if (p) ddpl_node_retain(p);
    n->saved[slot].producer = p;
    return slot;
}

int ddpl_node_save_output(ddpl_node *n, ddpl_tensor *out)
{
    ddpl_tensor *alias = ddpl_tensor_alias(out, out->ndim, out->sizes, out->strides, out->offset);
    int slot = ddpl_node_save(n, alias);
    ddpl_tensor_release(alias);
    n->saved[slot].is_output = true;
    return slot;
}

ddpl_tensor *ddpl_node_partial_grad(const ddpl_node *n, int input, const ddpl_tensor *part)
{
    const ddpl_edge *e = &n->edges[input];
    ddpl_tensor *b = e->node ? e->node->grad_buffer : NULL;
    if (!b || ddpl_is_grad_enabled() || ddpl_requires_grad(b)) return NULL;
    bool alone = atomic_load(&b->refcount) == 1 && atomic_load(&b->storage->refcount) == 1;
    bool fits = b->dtype == part->dtype && ddpl_same_device(b->device, part->device) &&
                b->ndim == e->ndim &&
                memcmp(b->sizes, e->sizes, (size_t)e->ndim * sizeof *e->sizes) == 0;
    return alone && fits && ddpl_tensor_is_contiguous(b) ? b : NULL;
}

void ddpl_node_free_saved(ddpl_node *n)
{
    for (int i = 0; i < n->n_saved; i++) {
        ddpl_tensor_release(n->saved[i].t);
        n->saved[i].t = NULL;
        ddpl_node_release(n->saved[i].producer);
        n->saved[i].producer = NULL;
    }
}

/* PyTorch's name of a tensor type in messages: torch.FloatTensor, torch.cuda.LongTensor. */
static const char *torch_type_name(const ddpl_tensor *t, char *buf, size_t n)
{
    static const char *const names[DDPL_DTYPE_COUNT] = {
        [DDPL_FLOAT32] = "Float",     [DDPL_FLOAT64] = "Double", [DDPL_FLOAT16] = "Half",
        [DDPL_BFLOAT16] = "BFloat16", [DDPL_INT64] = "Long",     [DDPL_INT32] = "Int",
        [DDPL_INT16] = "Short",       [DDPL_INT8] = "Char",      [DDPL_UINT8] = "Byte",
        [DDPL_BOOL] = "Bool"};
    const char *name = t->dtype < DDPL_DTYPE_COUNT && names[t->dtype] ? names[t->dtype] : "?";
    snprintf(buf, n, "torch.%s%sTensor", t->device.type == DDPL_CUDA ? "cuda." : "", name);
    return buf;
}

/* A saved tensor's storage moved past the version it was saved at: PyTorch's message. */
static void modified_error(const ddpl_node *n, const ddpl_saved *s)
{
    char type[48], shape[128], which[160] = "";
    const ddpl_node *producer = s->is_output ? n : s->producer;
    if (producer) snprintf(which, sizeof which, ", which is output 0 of %s,", producer->name);
    ddpl_error("one of the variables needed for gradient computation has been modified by an "
               "inplace operation: [%s %s]%s is at version %u; expected version %u instead "
               "(needed by %s)",
               torch_type_name(s->t, type, sizeof type), ddpl_shape_str(s->t, shape, sizeof shape),
               which, atomic_load(&s->t->storage->version), s->version, n->name);
}

bool ddpl_node_check_released(ddpl_node *n)
{
    if (!n->released) return false;
    ddpl_error("%s: trying to backward through the graph a second time (its saved tensors "
               "were freed); pass retain_graph=true to the first backward",
               n->name);
    return true;
}

ddpl_tensor *ddpl_node_saved(ddpl_node *n, int slot)
{
    if (ddpl_node_check_released(n)) return NULL;
    ddpl_saved *s = &n->saved[slot];
    if (s->t && atomic_load(&s->t->storage->version) != s->version) {
        modified_error(n, s);
        return NULL;
    }
    if (s->t && ddpl_storage_released(s->t->storage)) {
        ddpl_error("%s: a tensor saved for backward has had its memory released (a parameter "
                   "of a FULL_SHARD or SHARD_GRAD_OP FSDP unit whose backward already ran, or "
                   "was not gathered again)",
                   n->name);
        return NULL;
    }
    if (!s->t || !s->is_output || grad_disabled) return s->t;
    if (!s->unpacked) {
        ddpl_tensor *t = s->t;
        s->unpacked = ddpl_tensor_alias(t, t->ndim, t->sizes, t->strides, t->offset);
        ddpl_node_retain(n);
        ddpl_set_history(s->unpacked, n);
    }
    return s->unpacked;
}

void ddpl_node_drop_unpacked(ddpl_node *n)
{
    for (int i = 0; i < n->n_saved; i++) {
        ddpl_tensor *u = n->saved[i].unpacked;
        n->saved[i].unpacked = NULL;
        ddpl_tensor_release(u);
    }
}

void ddpl_set_history(ddpl_tensor *out, ddpl_node *n)
{
    ddpl_autograd_meta *m = ddpl_autograd_meta_of(out);
    ddpl_node_release(m->grad_fn);
    m->grad_fn = n;
    m->requires_grad = true;
}

/* ---- a tensor's autograd state ---- */

/* core's free hook (ddpl_set_autograd_free): t dies with autograd state. */
static void autograd_meta_free(ddpl_tensor *t)
{
    ddpl_autograd_meta *m = t->autograd;
    ddpl_tensor_release(m->grad);
    if (m->grad_fn) {
        if (m->grad_fn->retain_grad_of == t) m->grad_fn->retain_grad_of = NULL;
        ddpl_node_release(m->grad_fn);
    }
    free_hooks(m->hooks);
    free_hooks(m->ready_hooks);
    ddpl_tensor_release(m->grad_home);
    free(m);
    t->autograd = NULL;
}

ddpl_autograd_meta *ddpl_autograd_meta_of(ddpl_tensor *t)
{
    static atomic_bool free_registered;
    if (t->autograd) return t->autograd;
    if (!atomic_load_explicit(&free_registered, memory_order_acquire)) {
        ddpl_set_autograd_free(autograd_meta_free);
        atomic_store(&free_registered, true);
    }
    t->autograd = ddpl_xcalloc(1, sizeof *t->autograd);
    return t->autograd;
}

bool ddpl_tensor_requires_grad(const ddpl_tensor *t)
{
    return ddpl_requires_grad(t);
}
bool ddpl_tensor_is_leaf(const ddpl_tensor *t)
{
    return ddpl_grad_fn(t) == NULL;
}
ddpl_tensor *ddpl_tensor_grad(const ddpl_tensor *t)
{
    return t->autograd ? t->autograd->grad : NULL;
}
const char *ddpl_tensor_grad_fn_name(const ddpl_tensor *t)
{
    ddpl_node *fn = ddpl_grad_fn(t);
    return fn ? fn->name : NULL;
}

int ddpl_tensor_set_requires_grad(ddpl_tensor *t, bool requires_grad)
{
    if (ddpl_grad_fn(t)) {
        if (requires_grad) return 0;
        return ddpl_error("requires_grad: can only change it on leaf tensors; use detach() to "
                          "get a tensor without history");
    }
    if (requires_grad && !ddpl_dtype_is_floating((ddpl_dtype)t->dtype))
        return ddpl_error("requires_grad: only floating-point tensors can require gradients, "
                          "got %s",
                          ddpl_dtype_name((ddpl_dtype)t->dtype));
    if (requires_grad || t->autograd) ddpl_autograd_meta_of(t)->requires_grad = requires_grad;
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
    if (!grad && !t->autograd) return 0;
    ddpl_autograd_meta *m = ddpl_autograd_meta_of(t);
    ddpl_tensor_retain(grad);
    ddpl_tensor_release(m->grad);
    m->grad = grad;
    return 0;
}

int ddpl_tensor_retain_grad(ddpl_tensor *t)
{
    if (!ddpl_requires_grad(t)) return ddpl_error("retain_grad: the tensor does not require grad");
    ddpl_autograd_meta *m = t->autograd;
    if (!m->grad_fn) return 0; /* leaves keep their gradient anyway */
    m->retains_grad = true;
    m->grad_fn->retain_grad_of = t;
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
    if (!ddpl_requires_grad(t))
        return ddpl_error("register_hook: cannot register a hook on a tensor that does not "
                          "require grad");
    ddpl_autograd_meta *m = t->autograd;
    append_hook(m->grad_fn ? &m->grad_fn->pre_hooks : &m->hooks, (void *)fn, userdata,
                free_userdata);
    return 0;
}

int ddpl_tensor_register_grad_ready_hook(ddpl_tensor *leaf, ddpl_grad_ready_fn fn, void *userdata,
                                         void (*free_userdata)(void *))
{
    if (ddpl_grad_fn(leaf) || !ddpl_requires_grad(leaf))
        return ddpl_error("register_grad_ready_hook: only leaf tensors that require grad have "
                          "a gradient-ready signal");
    append_hook(&leaf->autograd->ready_hooks, (void *)fn, userdata, free_userdata);
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
    ddpl_autograd_meta *m = t->autograd;
    if (!m) return 0;
    int n = remove_from(&m->hooks, userdata) + remove_from(&m->ready_hooks, userdata);
    if (m->grad_fn) n += remove_from(&m->grad_fn->pre_hooks, userdata);
    return n;
}
