/* distributed/reducer.c: the DDP reducer's public face (see reducer.h): creation and checks, the
 * per-iteration calls (prepare_forward with its unfinished-reduction error, prepare_backward with
 * unused-parameter detection), comm hooks, bucket queries and the timeline.
 * defines: ddpl_reducer_new, ddpl_reducer_free, ddpl_reducer_prepare_forward,
 *          ddpl_reducer_prepare_backward, ddpl_reducer_set_comm_hook, ddpl_reducer_num_buckets,
 *          ddpl_reducer_bucket_params, ddpl_reducer_bucket_bytes, ddpl_reducer_bucket_tensor,
 *          ddpl_reducer_rebuilt, ddpl_reducer_timeline, ddpl_reducer_shadow_backward,
 *          ddpl_reducer_set_divisor, ddpl_reducer_graph_walks.
 *
 * Buckets and their slots as gradient homes: reducer_buckets.c; the backward (gradient-ready
 * hooks, launching and finishing collectives): reducer_ready.c. The reducer reaches autograd
 * only through the public API and autograd/leaves.h.
 *
 * CUDA parameters (backend nccl): buckets live on the parameters' device and every access to
 * them is a device op (copy_, mul_, zero_, add_) on the compute stream; the group's work orders
 * its communication stream after those, and waiting for it makes the compute stream wait, so
 * nothing here blocks the host. The only host data are the small rebuild and used-parameter
 * exchanges (reducer_host_collective), which copy through the device. */
#include <stdlib.h>
#include <string.h>

#include "autograd/leaves.h"
#include "distributed/reducer_impl.h"

ddpl_reducer *ddpl_reducer_new(ddpl_pg *pg, int n, ddpl_tensor *const *params,
                               const char *const *names, const ddpl_reducer_config *cfg)
{
    if (n <= 0) {
        ddpl_error("DistributedDataParallel: the module has no parameter that requires grad");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!ddpl_tensor_is_leaf(params[i]) || !ddpl_tensor_requires_grad(params[i])) {
            ddpl_error("DistributedDataParallel: parameter '%s' is not a leaf that requires grad",
                       names[i]);
            return NULL;
        }
        if (params[i]->dtype != DDPL_FLOAT32 && params[i]->dtype != DDPL_FLOAT64) {
            ddpl_error("DistributedDataParallel: parameter '%s' has dtype %s; the reducer "
                       "averages float32 and float64 parameters",
                       names[i], ddpl_dtype_name((ddpl_dtype)params[i]->dtype));
            return NULL;
        }
        /* one device: the buckets and the group's collectives live there */
        if (!ddpl_same_device(params[i]->device, params[0]->device)) {
            char a[32], b[32];
            ddpl_error("DistributedDataParallel: parameter '%s' is on %s but '%s' is on %s; "
                       "all parameters must be on one device",
                       names[i] ? names[i] : "?", ddpl_device_str(params[i]->device, a, sizeof a),
                       names[0] ? names[0] : "?", ddpl_device_str(params[0]->device, b, sizeof b));
            return NULL;
        }
    }
    ddpl_device_type takes = ddpl_pg_device_type(pg);
    if (params[0]->device.type != (int)takes) {
        char a[32];
        ddpl_error("DistributedDataParallel: the parameters are on %s, but the process group's "
                   "backend is %s, which takes %s tensors (move the module with :to('cuda') "
                   "after ddpl.cuda.set_device(LOCAL_RANK) for nccl; use gloo for CPU modules)",
                   ddpl_device_str(params[0]->device, a, sizeof a), ddpl_pg_backend(pg),
                   takes == DDPL_CUDA ? "CUDA" : "CPU");
        return NULL;
    }
    ddpl_reducer *r = ddpl_xcalloc(1, sizeof *r);
    r->pg = pg;
    r->rank = ddpl_pg_rank(pg);
    r->world = ddpl_pg_size(pg);
    r->n = n;
    r->cfg = *cfg;
    r->params = ddpl_xcalloc((size_t)n, sizeof *r->params);
    r->names = ddpl_xcalloc((size_t)n, sizeof *r->names);
    r->uds = ddpl_xcalloc((size_t)n, sizeof *r->uds);
    r->bucket_of = ddpl_xcalloc((size_t)n, sizeof(int));
    r->slot_of = ddpl_xcalloc((size_t)n, sizeof(int));
    r->ready = ddpl_xcalloc((size_t)n, sizeof(bool));
    r->used = ddpl_xcalloc((size_t)n, sizeof(bool));
    r->in_grad = ddpl_xcalloc((size_t)n, sizeof(bool));
    r->homes = ddpl_xcalloc((size_t)n, sizeof *r->homes);
    r->order = ddpl_xcalloc((size_t)n, sizeof(int));
    r->static_local = ddpl_xcalloc((size_t)n, sizeof(bool));
    r->static_global = ddpl_xcalloc((size_t)n, sizeof(bool));
    r->divisor = r->world;
    r->inv_world = ddpl_scalar(1.0 / r->world, DDPL_FLOAT64, params[0]->device);
    for (int i = 0; i < n; i++) {
        r->params[i] = ddpl_tensor_retain(params[i]);
        r->names[i] = strdup(names[i] ? names[i] : "?");
        r->uds[i] = (reducer_hook_ud){r, i};
    }
    int *rev = ddpl_xcalloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++) rev[i] = n - 1 - i; /* reverse registration: backward's order */
    int rc = r->inv_world ? reducer_buckets_build(r, rev) : -1;
    free(rev);
    if (rc == 0) rc = reducer_grads_to_views(r);
    if (rc == 0) rc = reducer_set_homes(r);
    for (int i = 0; rc == 0 && i < n; i++)
        rc = ddpl_tensor_register_grad_ready_hook(r->params[i], reducer_on_grad_ready, &r->uds[i],
                                                  NULL);
    if (rc < 0) {
        ddpl_reducer_free(r);
        return NULL;
    }
    return r;
}

void ddpl_reducer_free(ddpl_reducer *r)
{
    if (!r) return;
    reducer_drop_homes(r);
    for (int i = 0; i < r->n; i++) {
        ddpl_tensor_remove_hooks(r->params[i], &r->uds[i]);
        ddpl_tensor_release(r->params[i]);
        free(r->names[i]);
    }
    reducer_buckets_free(r);
    ddpl_tensor_release(r->inv_world);
    free(r->params);
    free(r->names);
    free(r->uds);
    free(r->bucket_of);
    free(r->slot_of);
    free(r->ready);
    free(r->used);
    free(r->in_grad);
    free(r->homes);
    free(r->order);
    free(r->static_local);
    free(r->static_global);
    free(r);
}

int ddpl_reducer_prepare_forward(ddpl_reducer *r)
{
    if (r->expect_hooks && r->started) {
        /* PyTorch's message, with the names of what did not get a gradient */
        size_t cap = 1024, len = 0;
        char *names = ddpl_xmalloc(cap), *idx = ddpl_xmalloc(cap);
        names[0] = idx[0] = '\0';
        size_t ilen = 0;
        for (int p = 0; p < r->n; p++) {
            if (r->ready[p]) continue;
            if (len + strlen(r->names[p]) + 3 < cap)
                len +=
                    (size_t)snprintf(names + len, cap - len, "%s%s", len ? ", " : "", r->names[p]);
            if (ilen + 16 < cap)
                ilen += (size_t)snprintf(idx + ilen, cap - ilen, "%s%d", ilen ? " " : "", p);
        }
        ddpl_error("Expected to have finished reduction in the prior iteration before starting "
                   "a new one. This error indicates that your module has parameters that were "
                   "not used in producing loss. You can enable unused parameter detection by "
                   "passing the keyword argument `find_unused_parameters=true` to "
                   "`DistributedDataParallel`, and by making sure all `forward` function outputs "
                   "participate in calculating loss.\nParameters which did not receive grad for "
                   "rank %d: %s\nParameter indices which did not receive grad for rank %d: %s",
                   r->rank, names, r->rank, idx);
        free(names);
        free(idx);
        /* drop the unfinished iteration, so that the caller may go on after handling this */
        for (int b = 0; b < r->nb; b++) (void)reducer_finish(r, b);
        r->expect_hooks = false;
        return -1;
    }
    if (r->finished_once && !r->rebuilt) return reducer_rebuild(r);
    return 0;
}

int ddpl_reducer_prepare_backward(ddpl_reducer *r, int n_outputs, ddpl_tensor *const *outputs,
                                  bool sync)
{
    r->sync = sync;
    if (!sync) return 0;
    r->expect_hooks = true;
    r->started = false;
    r->next_launch = 0;
    r->n_ready_params = 0;
    r->t_begin = reducer_now();
    r->t_first = r->t_final_start = r->t_final_end = 0;
    if (!r->finished_once && !r->rebuilt) r->n_order = 0;
    for (int p = 0; p < r->n; p++) {
        r->ready[p] = false;
        r->in_grad[p] = false;
        r->used[p] = !reducer_detects_unused(r);
    }
    for (int b = 0; b < r->nb; b++) {
        reducer_bucket *k = &r->buckets[b];
        k->pending = k->n;
        k->t_ready = k->t_start = k->t_end = 0;
        k->copied_bytes = 0;
    }
    if (!reducer_detects_unused(r)) return 0;
    if (r->static_walked) {
        /* static_graph: this iteration's graph is the first one's, no walk */
        memcpy(r->used, r->static_local, (size_t)r->n * sizeof(bool));
    } else {
        ddpl_leaves_reached(n_outputs, outputs, r->n, r->params, r->used);
        r->graph_walks++;
        if (r->cfg.static_graph) {
            memcpy(r->static_local, r->used, (size_t)r->n * sizeof(bool));
            r->static_walked = true;
        }
    }
    /* unused parameters are ready now: their buckets may be launched before backward starts */
    for (int p = 0; p < r->n; p++) {
        if (r->used[p]) continue;
        bool started = r->started;
        if (reducer_mark_ready(r, p) < 0) return -1;
        r->started = started; /* only a real gradient counts as a started reduction */
    }
    return 0;
}

void ddpl_reducer_set_comm_hook(ddpl_reducer *r, ddpl_comm_kind kind, ddpl_comm_hook_fn fn,
                                void *userdata)
{
    r->comm = kind;
    r->comm_fn = fn;
    r->comm_ud = userdata;
    reducer_set_homes(
        r); /* sole-owner homes only serve the plain allreduce; cannot fail but on OOM */
}

int ddpl_reducer_shadow_backward(ddpl_reducer *r)
{
    return reducer_shadow_backward(r);
}

int ddpl_reducer_set_divisor(ddpl_reducer *r, int divisor)
{
    if (divisor < 1 || divisor > r->world)
        return ddpl_error("DistributedDataParallel: the gradient divisor must be between 1 and "
                          "the world size %d, got %d",
                          r->world, divisor);
    if (divisor == r->divisor) return 0;
    ddpl_tensor *inv = ddpl_scalar(1.0 / divisor, DDPL_FLOAT64, r->params[0]->device);
    if (!inv) return -1;
    ddpl_tensor_release(r->inv_world);
    r->inv_world = inv;
    r->divisor = divisor;
    return 0;
}

int ddpl_reducer_graph_walks(const ddpl_reducer *r)
{
    return r->graph_walks;
}

int ddpl_reducer_num_buckets(const ddpl_reducer *r)
{
    return r->nb;
}

int ddpl_reducer_bucket_params(const ddpl_reducer *r, int b, int *out, int cap)
{
    if (b < 0 || b >= r->nb) return 0;
    const reducer_bucket *k = &r->buckets[b];
    for (int i = 0; i < k->n && i < cap; i++) out[i] = k->params[i];
    return k->n;
}

int64_t ddpl_reducer_bucket_bytes(const ddpl_reducer *r, int b)
{
    if (b < 0 || b >= r->nb) return 0;
    return reducer_param_bytes(r->buckets[b].flat);
}

ddpl_tensor *ddpl_reducer_bucket_tensor(const ddpl_reducer *r, int b)
{
    return b >= 0 && b < r->nb ? r->buckets[b].flat : NULL;
}

bool ddpl_reducer_rebuilt(const ddpl_reducer *r)
{
    return r->rebuilt;
}

int ddpl_reducer_timeline(const ddpl_reducer *r, ddpl_reducer_event *out, int cap)
{
    int k = 0;
    if (k < cap)
        out[k] = (ddpl_reducer_event){"backward", -1, r->t_begin, r->t_first, r->t_final_start, 0};
    k++;
    for (int b = 0; b < r->nb; b++, k++) {
        const reducer_bucket *bk = &r->buckets[b];
        if (k < cap)
            out[k] = (ddpl_reducer_event){.name = "bucket",
                                          .bucket = b,
                                          .ready = bk->t_ready,
                                          .start = bk->t_start,
                                          .end = bk->t_end,
                                          .copied_bytes = bk->copied_bytes};
    }
    if (k < cap)
        out[k] =
            (ddpl_reducer_event){"wait", -1, r->t_final_start, r->t_final_start, r->t_final_end, 0};
    return k + 1;
}
