/* distributed/reducer_ready.c: the DDP reducer's backward: each parameter's gradient-ready hook
 * puts its gradient in its bucket (or leaves it in .grad to be reduced there), launches the
 * buckets' collectives in order as they fill, and after the last one waits for all and writes the
 * averages back.
 * defines: reducer_on_grad_ready, reducer_mark_ready, reducer_finish, reducer_host_collective,
 *          reducer_shadow_backward (join: the same collectives with zero gradients).
 *
 * Threads: every function here runs on the thread that runs backward; the only concurrency is
 * the group's worker thread writing a launched bucket's flat buffer, which is not touched again
 * until that work is waited for. */
#include <stdlib.h>
#include <string.h>

#include "autograd/leaves.h"
#include "distributed/reducer_impl.h"

/* ---- launching and finishing collectives ---- */

static ddpl_dtype comm_dtype(ddpl_comm_kind k)
{
    return k == DDPL_COMM_FP16 ? DDPL_FLOAT16 : DDPL_BFLOAT16;
}

static int launch(ddpl_reducer *r, int b)
{
    reducer_bucket *k = &r->buckets[b];
    k->t_start = reducer_now();
    switch (r->comm) {
    case DDPL_COMM_ALLREDUCE: {
        /* the gradients left in .grad by reducer_mark_ready are reduced where they are */
        ddpl_tensor **values = ddpl_xcalloc((size_t)k->n, sizeof *values);
        int64_t *offsets = ddpl_xcalloc((size_t)k->n, sizeof *offsets);
        int nv = 0;
        for (int i = 0; i < k->n; i++) {
            if (!r->in_grad[k->params[i]]) continue;
            values[nv] = ddpl_tensor_grad(r->params[k->params[i]]);
            offsets[nv++] = k->offsets[i];
        }
        double inv = 1.0 / r->divisor;
        if (nv)
            k->work = ddpl_pg_allreduce_prescaled_into(r->pg, k->flat, inv, nv, values, offsets);
        else
            k->work = r->world > 1 ? ddpl_pg_allreduce_prescaled(r->pg, k->flat, inv)
                                   : ddpl_pg_allreduce(r->pg, k->flat, DDPL_REDUCE_SUM);
        free(values);
        free(offsets);
        break;
    }
    case DDPL_COMM_FP16:
    case DDPL_COMM_BF16: {
        /* The group reduces only float32/float64/int64, so the compressed bucket travels by
         * allgather (half the bytes of each rank's contribution) and is summed on arrival. */
        ddpl_tensor *c = ddpl_to(k->flat, comm_dtype(r->comm), k->flat->device);
        if (!c) return -1;
        int64_t total = ddpl_tensor_numel(k->flat) * r->world;
        if (!k->gathered) k->gathered = ddpl_empty(1, &total, comm_dtype(r->comm), c->device);
        if (!k->gathered) {
            ddpl_tensor_release(c);
            return -1;
        }
        k->work = ddpl_pg_allgather_into(r->pg, k->gathered, c);
        ddpl_tensor_release(c);
        break;
    }
    case DDPL_COMM_CUSTOM:
        if (r->comm_fn(k->flat, b, r->comm_ud) < 0) return -1;
        k->t_end = reducer_now();
        return 0;
    }
    if (!k->work) return ddpl_error("DistributedDataParallel: bucket %d: %s", b, ddpl_last_error());
    return 0;
}

int reducer_finish(ddpl_reducer *r, int b)
{
    reducer_bucket *k = &r->buckets[b];
    if (!k->work) return 0;
    int rc = ddpl_work_wait(k->work, -1);
    ddpl_work_release(k->work);
    k->work = NULL;
    if (!k->t_end) k->t_end = reducer_now();
    if (rc < 0) /* the hint on a line of its own: the first line stays the group's error */
        return ddpl_error("DistributedDataParallel: rank %d: allreduce of bucket %d failed: %s\n"
                          "(if the ranks run different numbers of iterations, run the training "
                          "loop in model:join)",
                          r->rank, b, ddpl_last_error());
    if (r->comm == DDPL_COMM_FP16 || r->comm == DDPL_COMM_BF16) {
        /* sum the ranks' rounded contributions, then round the sum as a reduction in the
         * compressed dtype would */
        int64_t numel = ddpl_tensor_numel(k->flat);
        if (ddpl_zero_(k->flat) < 0) return -1;
        for (int q = 0; q < r->world; q++) {
            ddpl_tensor *part = ddpl_narrow(k->gathered, 0, q * numel, numel);
            if (!part) return -1;
            rc = ddpl_add_(k->flat, part, 1.0);
            ddpl_tensor_release(part);
            if (rc < 0) return -1;
        }
        ddpl_tensor *c = ddpl_to(k->flat, comm_dtype(r->comm), k->flat->device);
        if (!c) return -1;
        rc = ddpl_copy_(k->flat, c);
        ddpl_tensor_release(c);
        if (rc < 0) return -1;
    }
    return 0;
}

/* Notes the end time of launched collectives that completed (for the timeline only). */
static void poll_done(ddpl_reducer *r)
{
    for (int b = 0; b < r->next_launch; b++) {
        reducer_bucket *k = &r->buckets[b];
        if (k->work && !k->t_end && ddpl_work_is_completed(k->work)) k->t_end = reducer_now();
    }
}

/* In place for gloo; for nccl (CUDA parameters) through a copy on the parameters' device, the
 * result copied back. */
ddpl_tensor *reducer_host_collective(ddpl_reducer *r, ddpl_tensor *host, bool broadcast)
{
    ddpl_device dev = r->params[0]->device;
    ddpl_tensor *d = ddpl_to(host, (ddpl_dtype)host->dtype, dev); /* host itself on the CPU */
    if (!d) return NULL;
    ddpl_work *w =
        broadcast ? ddpl_pg_broadcast(r->pg, d, ddpl_pg_global_rank(r->pg, 0)) /* src is global */
                  : ddpl_pg_allreduce(r->pg, d, DDPL_REDUCE_SUM);
    int rc = w ? ddpl_work_wait(w, -1) : -1;
    ddpl_work_release(w);
    ddpl_tensor *back = rc == 0 ? ddpl_to(d, (ddpl_dtype)d->dtype, ddpl_cpu()) : NULL;
    ddpl_tensor_release(d);
    return back;
}

/* find_unused: a parameter unused here but used on another rank still gets the average, one
 * unused everywhere keeps .grad untouched (nil), as PyTorch's local_used_map. */
static int global_used(ddpl_reducer *r)
{
    int64_t nn = r->n;
    ddpl_tensor *u = ddpl_empty(1, &nn, DDPL_FLOAT32, ddpl_cpu());
    if (!u) return -1;
    float *d = ddpl_tensor_data(u);
    for (int p = 0; p < r->n; p++) d[p] = r->used[p] ? 1.0f : 0.0f;
    ddpl_tensor *sum = reducer_host_collective(r, u, false);
    ddpl_tensor_release(u);
    if (!sum)
        return ddpl_error("DistributedDataParallel: rank %d: exchanging the used-parameter map "
                          "failed: %s",
                          r->rank, ddpl_last_error());
    const float *s = ddpl_tensor_data(sum);
    for (int p = 0; p < r->n; p++) r->used[p] = s[p] > 0.5f;
    ddpl_tensor_release(sum);
    return 0;
}

/* r->used becomes the global map: exchanged, or with static_graph after the first time the map
 * that exchange gave (kept with the local one, which prepare_backward reuses). */
static int settle_used(ddpl_reducer *r)
{
    size_t bytes = (size_t)r->n * sizeof(bool);
    if (r->static_known) {
        memcpy(r->used, r->static_global, bytes);
        return 0;
    }
    if (global_used(r) < 0) return -1;
    if (r->cfg.static_graph) {
        memcpy(r->static_global, r->used, bytes);
        r->static_known = true;
    }
    return 0;
}

/* End of a synchronised backward: wait for every bucket, write the averages into .grad. */
static int finalize(ddpl_reducer *r)
{
    r->t_final_start = reducer_now();
    int rc = 0;
    for (int b = 0; b < r->nb; b++)
        if (reducer_finish(r, b) < 0 && rc == 0) rc = -1;
    r->expect_hooks = false;
    if (rc < 0) return -1;
    if (reducer_detects_unused(r) && settle_used(r) < 0) return -1;
    if (!r->cfg.grad_as_bucket_view || reducer_detects_unused(r)) {
        for (int p = 0; p < r->n; p++) {
            ddpl_tensor *param = r->params[p], *v = reducer_slot(r, p);
            if (!r->used[p] && !ddpl_tensor_grad(param))
                continue;                /* unused here: PyTorch leaves it None */
            if (r->in_grad[p]) continue; /* the allreduce wrote the average there */
            if (r->cfg.grad_as_bucket_view) {
                if (!reducer_is_view_of(ddpl_tensor_grad(param), v) &&
                    ddpl_tensor_set_grad(param, v) < 0)
                    return -1;
            } else if (ddpl_tensor_grad(param)) {
                if (ddpl_copy_(ddpl_tensor_grad(param), v) < 0) return -1;
            } else {
                ddpl_tensor *g = ddpl_clone(v);
                if (!g) return -1;
                rc = ddpl_tensor_set_grad(param, g);
                ddpl_tensor_release(g);
                if (rc < 0) return -1;
            }
        }
    }
    r->finished_once = true;
    r->t_final_end = reducer_now();
    return 0;
}

/* Whether the plain allreduce of a shared bucket can take gradient g (for slot v) where it is
 * (ddpl_pg_allreduce_prescaled_into) instead of a copy in the bucket: only without
 * gradient_as_bucket_view, whose .grad must end up in the bucket. On 2 ranks this halves the
 * copies into and out of the bucket. */
static bool reducible_in_place(const ddpl_reducer *r, const reducer_bucket *k, const ddpl_tensor *g,
                               const ddpl_tensor *v)
{
    return k->shared && r->comm == DDPL_COMM_ALLREDUCE && r->world > 1 &&
           !r->cfg.grad_as_bucket_view && g->device.type == DDPL_CPU && g->dtype == v->dtype &&
           ddpl_tensor_is_contiguous(g) && ddpl_same_shape(g, v) && !ddpl_tensor_same_storage(g, v);
}

/* A gradient (or zeros, for a parameter this rank did not use) goes into its bucket slot, or
 * stays in .grad to be reduced there; buckets are launched strictly in order. */
int reducer_mark_ready(ddpl_reducer *r, int p)
{
    ddpl_tensor *param = r->params[p], *v = reducer_slot(r, p);
    if (r->ready[p])
        return ddpl_error("DistributedDataParallel: rank %d: parameter '%s' (index %d) was marked "
                          "ready twice in one backward pass (is it used by a second backward "
                          "without a forward in between, or with find_unused_parameters on a "
                          "parameter the graph does reach? with static_graph, one that the first "
                          "iteration did not use?)",
                          r->rank, r->names[p], p);
    /* a sole home's memory holds nothing but .grad before this rank's allreduce writes it */
    if (r->homes[p] && ddpl_grad_home_of(param) == r->homes[p] &&
        ddpl_grad_home_prepare_write(param) < 0)
        return -1;
    double t = reducer_now();
    if (!r->started) r->t_first = t;
    r->started = true;
    r->ready[p] = true;
    r->n_ready_params++;
    if (!r->finished_once && !r->rebuilt) r->order[r->n_order++] = p;
    /* Every gradient is divided by the world size before it is summed, as in PyTorch. For the
     * plain allreduce the group does it inside the reduction (ddpl_pg_allreduce_prescaled: no
     * pass of its own on shared buckets); the compression hooks get pre-divided values (so the
     * 16-bit sum does not overflow), here, while copying; a custom hook averages itself. */
    bool divide = (r->comm == DDPL_COMM_FP16 || r->comm == DDPL_COMM_BF16) && r->world > 1;
    ddpl_tensor *g = ddpl_tensor_grad(param);
    reducer_bucket *k = &r->buckets[r->bucket_of[p]];
    if (!g) {
        if (ddpl_zero_(v) < 0) return -1;
    } else if (reducible_in_place(r, k, g, v)) {
        r->in_grad[p] = true; /* no copy: the allreduce reads g and writes the average into it */
    } else if (!reducer_is_view_of(g, v)) {
        if ((divide ? ddpl_mul_out(v, g, r->inv_world) : ddpl_copy_(v, g)) < 0) return -1;
        k->copied_bytes += reducer_param_bytes(param);
        if (r->cfg.grad_as_bucket_view && ddpl_tensor_set_grad(param, v) < 0) return -1;
    } else if (divide && ddpl_mul_(v, r->inv_world) < 0) {
        return -1;
    }
    if (--k->pending == 0) k->t_ready = reducer_now();
    poll_done(r);
    while (r->next_launch < r->nb && r->buckets[r->next_launch].pending == 0) {
        /* finalize waits for the last bucket at once: run it on this thread */
        if (r->next_launch == r->nb - 1) ddpl_pg_wait_follows(r->pg);
        if (launch(r, r->next_launch) < 0) return -1;
        r->next_launch++;
    }
    if (r->next_launch == r->nb) return finalize(r);
    return 0;
}

int reducer_on_grad_ready(ddpl_tensor *leaf, void *userdata)
{
    (void)leaf;
    reducer_hook_ud *u = userdata;
    ddpl_reducer *r = u->r;
    if (!r->expect_hooks || !r->sync) return 0; /* no_sync, or a backward DDP did not prepare */
    return reducer_mark_ready(r, u->index);
}

/* A joined rank's turn in a synchronised backward (PyTorch's _match_all_reduce_for_bwd_pass and
 * _match_unused_params_allreduce): every bucket goes through the collective it would get after a
 * backward (launch: allreduce, compressed allgather or comm hook) holding zeros, in bucket order,
 * and the used-parameter exchange follows as in finalize. The buckets' contents (with
 * gradient_as_bucket_view or gradient homes, this rank's .grad) are saved and put back. */
int reducer_shadow_backward(ddpl_reducer *r)
{
    if (r->expect_hooks) { /* a synchronised backward that never ran: drop it */
        for (int b = 0; b < r->nb; b++) (void)reducer_finish(r, b);
        r->expect_hooks = false;
    }
    ddpl_tensor **saved = ddpl_xcalloc((size_t)r->nb, sizeof *saved);
    int rc = 0;
    for (int p = 0; p < r->n; p++) r->in_grad[p] = false; /* launch reads every bucket's flat */
    for (int b = 0; b < r->nb && rc == 0; b++) {
        saved[b] = ddpl_clone(r->buckets[b].flat);
        if (!saved[b] || ddpl_zero_(r->buckets[b].flat) < 0) rc = -1;
    }
    for (int b = 0; b < r->nb && rc == 0; b++) {
        rc = launch(r, b);
        r->next_launch = b + 1;
    }
    for (int b = 0; b < r->nb; b++) /* every launched one, even after a failure */
        if (reducer_finish(r, b) < 0 && rc == 0) rc = -1;
    for (int b = 0; b < r->nb; b++) {
        if (saved[b] && ddpl_copy_(r->buckets[b].flat, saved[b]) < 0 && rc == 0) rc = -1;
        ddpl_tensor_release(saved[b]);
    }
    free(saved);
    if (rc < 0) return -1;
    if (reducer_detects_unused(r)) {
        /* this rank used nothing (its own map, with static_graph, waits for its first walk) */
        memset(r->used, 0, (size_t)r->n * sizeof(bool));
        if (settle_used(r) < 0) return -1;
    }
    r->finished_once = true;
    return 0;
}
