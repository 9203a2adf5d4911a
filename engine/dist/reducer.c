/* dist/reducer.c: the DDP reducer (see reducer.h): buckets, gradient-ready hooks, ordered
 * asynchronous allreduce, write-back, rebuild, unused-parameter detection, comm hooks.
 * defines: ddpl_reducer_new, ddpl_reducer_free, ddpl_reducer_prepare_forward,
 *          ddpl_reducer_prepare_backward, ddpl_reducer_set_comm_hook, ddpl_reducer_num_buckets,
 *          ddpl_reducer_bucket_params, ddpl_reducer_bucket_bytes, ddpl_reducer_bucket_tensor,
 *          ddpl_reducer_rebuilt, ddpl_reducer_timeline.
 *
 * Threads: every function here and every hook runs on the thread that runs backward; the only
 * concurrency is the group's worker thread writing a launched bucket's flat buffer, which this
 * file does not touch again until that work is waited for.
 *
 * CUDA parameters (backend nccl): buckets live on the parameters' device and every access to
 * them is a device op (copy_, mul_, zero_, add_) on the compute stream; the group's work orders
 * its communication stream after those, and waiting for it makes the compute stream wait, so
 * nothing here blocks the host. The only host data are the small rebuild and used-parameter
 * exchanges (host_collective), which copy through the device. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autograd/autograd.h"
#include "core/core.h"
#include "dist/reducer.h"

typedef struct bucket {
    ddpl_tensor *flat;     /* 1-D, the bucket's dtype, numel = sum of its parameters' numels */
    int n;                 /* parameters in it */
    int *params;           /* their indices, in bucket order */
    int64_t *offsets;      /* element offset of each parameter in flat */
    ddpl_tensor **views;   /* views[i]: flat[offsets[i] : +numel] shaped as parameter params[i] */
    int pending;           /* parameters not ready yet in this backward */
    ddpl_work *work;       /* the launched collective, until waited for */
    ddpl_tensor *gathered; /* fp16/bf16: world * numel compressed values (allgather) */
    bool shared;           /* flat is a shared buffer of the group (ddpl_pg_is_shared) */
    double t_ready, t_start, t_end;
    int64_t copied_bytes; /* gradients copied into flat in this backward (timeline) */
} bucket;

typedef struct hook_ud {
    ddpl_reducer *r;
    int index;
} hook_ud;

struct ddpl_reducer {
    ddpl_pg *pg;
    int rank, world;
    int n;                /* parameters */
    ddpl_tensor **params; /* retained */
    char **names;
    hook_ud *uds;             /* one per parameter: the hook's userdata */
    int *bucket_of, *slot_of; /* parameter -> bucket, position in it */
    ddpl_reducer_config cfg;
    int nb;
    bucket *buckets;
    ddpl_comm_kind comm;
    ddpl_comm_hook_fn comm_fn;
    void *comm_ud;
    /* per backward */
    bool sync;           /* the coming backward reduces */
    bool expect_hooks;   /* prepare_backward(sync) ran, finalize has not */
    bool started;        /* a hook fired since prepare_backward */
    bool *ready;         /* per parameter */
    bool *used;          /* per parameter: reached by this forward's graph */
    bool *in_grad;       /* per parameter: the allreduce reads and writes .grad itself */
    ddpl_tensor **homes; /* per parameter: the gradient home set_homes gave it (borrowed) */
    int next_launch;     /* buckets 0..next_launch-1 are launched */
    int n_ready_params;
    double t_begin, t_first, t_final_start, t_final_end;
    /* rebuild */
    int *order; /* parameter indices in the order they became ready (first iteration) */
    int n_order;
    bool finished_once, rebuilt;
    ddpl_tensor *inv_world; /* 0-dim scalar 1/world (float64: the kernels convert) */
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- buckets ---- */

static void buckets_free(ddpl_reducer *r)
{
    for (int b = 0; b < r->nb; b++) {
        bucket *k = &r->buckets[b];
        if (k->work) {
            (void)ddpl_work_wait(k->work, -1);
            ddpl_work_release(k->work);
        }
        for (int i = 0; i < k->n; i++) ddpl_tensor_release(k->views[i]);
        ddpl_tensor_release(k->flat);
        ddpl_tensor_release(k->gathered);
        free(k->params);
        free(k->offsets);
        free(k->views);
    }
    free(r->buckets);
    r->buckets = NULL;
    r->nb = 0;
}

static int64_t param_bytes(const ddpl_tensor *p)
{
    return ddpl_tensor_numel(p) * (int64_t)ddpl_dtype_size((ddpl_dtype)p->dtype);
}

/* Groups the parameters, taken in `order`, into buckets: one open bucket per dtype, closed when
 * it reaches the current size limit (first_bucket_mb for the first one closed, then
 * bucket_cap_mb), as PyTorch's compute_bucket_assignment_by_size. Buckets are then sorted by
 * the position of their first parameter in `order`, so bucket 0 fills first. */
static int buckets_build(ddpl_reducer *r, const int *order)
{
    int ndt = DDPL_DTYPE_COUNT;
    int *open = ddpl_xcalloc((size_t)ndt, sizeof *open); /* bucket index + 1 per dtype */
    bucket *bs = ddpl_xcalloc((size_t)r->n, sizeof *bs);
    int64_t *first_pos = ddpl_xcalloc((size_t)r->n, sizeof *first_pos);
    int64_t *bytes = ddpl_xcalloc((size_t)r->n, sizeof *bytes);
    int nb = 0, closed = 0;
    double first = (r->cfg.first_bucket_mb > 0 ? r->cfg.first_bucket_mb : 1.0) * 1024 * 1024;
    double cap = (r->cfg.bucket_cap_mb > 0 ? r->cfg.bucket_cap_mb : 25.0) * 1024 * 1024;
    if (first > cap) first = cap; /* a cap below 1 MB applies to the first bucket too */
    for (int k = 0; k < r->n; k++) {
        int p = order[k];
        int dt = r->params[p]->dtype;
        if (!open[dt]) {
            open[dt] = ++nb;
            bs[nb - 1].params = ddpl_xcalloc((size_t)r->n, sizeof(int));
            first_pos[nb - 1] = k;
        }
        bucket *bk = &bs[open[dt] - 1];
        bk->params[bk->n++] = p;
        bytes[open[dt] - 1] += param_bytes(r->params[p]);
        if ((double)bytes[open[dt] - 1] >= (closed == 0 ? first : cap)) {
            open[dt] = 0;
            closed++;
        }
    }
    /* sort by first position (insertion sort: a handful of buckets) */
    for (int i = 1; i < nb; i++) {
        for (int j = i; j > 0 && first_pos[j - 1] > first_pos[j]; j--) {
            bucket tb = bs[j];
            bs[j] = bs[j - 1];
            bs[j - 1] = tb;
            int64_t tp = first_pos[j];
            first_pos[j] = first_pos[j - 1];
            first_pos[j - 1] = tp;
        }
    }
    free(open);
    free(first_pos);
    free(bytes);
    r->buckets = bs;
    r->nb = nb;
    for (int b = 0; b < nb; b++) {
        bucket *bk = &bs[b];
        ddpl_tensor *p0 = r->params[bk->params[0]];
        int64_t total = 0;
        bk->offsets = ddpl_xcalloc((size_t)bk->n, sizeof *bk->offsets);
        bk->views = ddpl_xcalloc((size_t)bk->n, sizeof *bk->views);
        for (int i = 0; i < bk->n; i++) {
            bk->offsets[i] = total;
            total += ddpl_tensor_numel(r->params[bk->params[i]]);
        }
        /* CPU buckets in memory the other ranks on this machine map: allreduce runs in place */
        bk->flat = p0->device.type == DDPL_CPU
                       ? ddpl_pg_shared_zeros(r->pg, total, (ddpl_dtype)p0->dtype)
                       : ddpl_zeros(1, &total, (ddpl_dtype)p0->dtype, p0->device);
        if (!bk->flat) return -1;
        bk->shared = ddpl_pg_is_shared(r->pg, bk->flat);
        for (int i = 0; i < bk->n; i++) {
            ddpl_tensor *p = r->params[bk->params[i]];
            ddpl_tensor *slice = ddpl_narrow(bk->flat, 0, bk->offsets[i], ddpl_tensor_numel(p));
            if (!slice) return -1;
            bk->views[i] = ddpl_view(slice, p->ndim, p->sizes);
            ddpl_tensor_release(slice);
            if (!bk->views[i]) return -1;
            r->bucket_of[bk->params[i]] = b;
            r->slot_of[bk->params[i]] = i;
        }
    }
    return 0;
}

static ddpl_tensor *view_of(ddpl_reducer *r, int p)
{
    return r->buckets[r->bucket_of[p]].views[r->slot_of[p]];
}

static bool is_view_of(const ddpl_tensor *g, const ddpl_tensor *v)
{
    return g && g->storage == v->storage && g->offset == v->offset;
}

/* gradient_as_bucket_view: point every existing .grad at its bucket slot (contents kept). */
static int grads_to_views(ddpl_reducer *r)
{
    if (!r->cfg.grad_as_bucket_view) return 0;
    for (int p = 0; p < r->n; p++) {
        ddpl_tensor *g = r->params[p]->grad, *v = view_of(r, p);
        if (!g || is_view_of(g, v)) continue;
        if (ddpl_copy_(v, g) < 0 || ddpl_tensor_set_grad(r->params[p], v) < 0) return -1;
    }
    return 0;
}

/* ---- gradient homes ----
 * Every parameter's bucket slot is its gradient home (ddpl_tensor_set_grad_home), so backward
 * computes the gradients it can (Linear weights) in the slot when .grad is empty, as after
 * zero_grad() (set to nil), and nothing copies them into the bucket or back:
 * - gradient_as_bucket_view: the home is the slot view itself (.grad aliasing the bucket is the
 *   contract);
 * - default mode, on a shared bucket with the plain allreduce: the home is a tensor over the
 *   slot's memory with a storage of its own, given as sole owner: a .grad kept from an earlier
 *   step moves to a copy of its own before anything writes the slot (backward, or this rank's
 *   allreduce: evict_kept), so it keeps its values as in PyTorch, where each step's gradient is
 *   new memory. The allreduce then finds the gradient already in the shared part and moves
 *   nothing (shm_coll.c's walk_range).
 * CPU buckets only for now: the CUDA path has not run on a GPU yet. */

/* Deleter of a default-mode home's storage: the slot's memory belongs to the bucket. */
static void release_bucket(void *data, void *flat)
{
    (void)data;
    ddpl_tensor_release(flat);
}

static int set_homes(ddpl_reducer *r)
{
    for (int b = 0; b < r->nb; b++) {
        bucket *k = &r->buckets[b];
        bool sole = !r->cfg.grad_as_bucket_view && k->shared && r->comm == DDPL_COMM_ALLREDUCE &&
                    r->world > 1;
        for (int i = 0; i < k->n; i++) {
            int p = k->params[i];
            ddpl_tensor *param = r->params[p], *v = k->views[i], *home = NULL;
            if (v->device.type == DDPL_CPU && r->cfg.grad_as_bucket_view)
                home = ddpl_tensor_retain(v);
            else if (v->device.type == DDPL_CPU && sole)
                home = ddpl_from_blob(ddpl_tensor_data(v), param->ndim, param->sizes,
                                      (ddpl_dtype)param->dtype, release_bucket,
                                      ddpl_tensor_retain(k->flat));
            /* a sole home given up (a comm hook now: the slot will be written by copies) takes
             * its memory back first, so nothing over it is overwritten */
            ddpl_tensor *old = r->homes[p];
            if (old && param->grad_home == old && param->grad_home_sole && old != home &&
                ddpl_tensor_take_memory(old) < 0) {
                ddpl_tensor_release(home);
                return -1;
            }
            int rc = ddpl_tensor_set_grad_home(param, home, sole);
            r->homes[p] = rc == 0 ? home : NULL; /* borrowed: the parameter holds it */
            ddpl_tensor_release(home);
            if (rc < 0) return -1;
        }
    }
    return 0;
}

/* Rebuild, default mode: the storages of gradients that live in their (old) slot, to move
 * into the new slots once they exist (move_kept_grads); NULL where there is none. */
static ddpl_storage **kept_grads(ddpl_reducer *r)
{
    ddpl_storage **kept = ddpl_xcalloc((size_t)r->n, sizeof *kept);
    for (int p = 0; p < r->n; p++) {
        ddpl_tensor *g = r->params[p]->grad, *home = r->homes[p];
        if (home && r->params[p]->grad_home == home && r->params[p]->grad_home_sole && g &&
            g->storage == home->storage) {
            kept[p] = g->storage;
            ddpl_storage_retain(kept[p]);
        }
    }
    return kept;
}

/* ... and moves them: each such .grad (and whatever views it) now lies in its new slot, over the
 * storage its new home shares, so the old bucket can go and nothing is copied per step. */
static void move_kept_grads(ddpl_reducer *r, ddpl_storage **kept)
{
    for (int p = 0; p < r->n; p++) {
        ddpl_tensor *home = r->homes[p];
        if (kept[p] && home && home->storage->nbytes == kept[p]->nbytes) {
            ddpl_storage *fresh = home->storage;
            memcpy(fresh->data, kept[p]->data, kept[p]->nbytes);
            ddpl_storage_swap_memory(kept[p], fresh); /* kept: the new slot; fresh: the old */
            ddpl_storage_retain(kept[p]);
            home->storage = kept[p];
            ddpl_storage_release(fresh); /* lets go of the old slot (and its bucket) */
        }
        ddpl_storage_release(kept[p]);
    }
    free(kept);
}

/* Takes back the gradient homes set_homes gave (those still in place). */
static void drop_homes(ddpl_reducer *r)
{
    for (int p = 0; p < r->n; p++) {
        if (r->homes[p] && r->params[p]->grad_home == r->homes[p])
            ddpl_tensor_set_grad_home(r->params[p], NULL, false);
        r->homes[p] = NULL;
    }
}

/* Before this rank writes parameter p's slot: a default-mode home's memory must hold nothing
 * but .grad (see above), so anything else over it moves to a copy of its own. */
static int evict_kept(ddpl_reducer *r, int p)
{
    ddpl_tensor *home = r->homes[p], *g = r->params[p]->grad;
    if (!home || r->params[p]->grad_home != home || !r->params[p]->grad_home_sole) return 0;
    long expected = 1 + (g && g->storage == home->storage);
    if (atomic_load(&home->storage->refcount) <= expected) return 0;
    return ddpl_tensor_take_memory(home);
}

/* ---- launching and finishing collectives ---- */

static ddpl_dtype comm_dtype(ddpl_comm_kind k)
{
    return k == DDPL_COMM_FP16 ? DDPL_FLOAT16 : DDPL_BFLOAT16;
}

static int launch(ddpl_reducer *r, int b)
{
    bucket *k = &r->buckets[b];
    k->t_start = now();
    switch (r->comm) {
    case DDPL_COMM_ALLREDUCE: {
        /* the gradients left in .grad by mark_ready are reduced where they are */
        ddpl_tensor **values = ddpl_xcalloc((size_t)k->n, sizeof *values);
        int64_t *offsets = ddpl_xcalloc((size_t)k->n, sizeof *offsets);
        int nv = 0;
        for (int i = 0; i < k->n; i++) {
            if (!r->in_grad[k->params[i]]) continue;
            values[nv] = r->params[k->params[i]]->grad;
            offsets[nv++] = k->offsets[i];
        }
        double inv = 1.0 / r->world;
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
        k->t_end = now();
        return 0;
    }
    if (!k->work) return ddpl_error("DistributedDataParallel: bucket %d: %s", b, ddpl_last_error());
    return 0;
}

/* Waits for bucket b's collective and leaves the averaged gradients in its flat buffer. */
static int finish(ddpl_reducer *r, int b)
{
    bucket *k = &r->buckets[b];
    if (!k->work) return 0;
    int rc = ddpl_work_wait(k->work, -1);
    ddpl_work_release(k->work);
    k->work = NULL;
    if (!k->t_end) k->t_end = now();
    if (rc < 0)
        return ddpl_error("DistributedDataParallel: rank %d: allreduce of bucket %d failed: %s",
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
        bucket *k = &r->buckets[b];
        if (k->work && !k->t_end && ddpl_work_is_completed(k->work)) k->t_end = now();
    }
}

/* A small blocking collective on a host array (CPU tensor `host`), as the group needs it: in
 * place for gloo; for nccl (CUDA parameters) through a copy on the parameters' device, the
 * result copied back. Returns the CPU tensor holding the result (a new reference) or NULL. */
static ddpl_tensor *host_collective(ddpl_reducer *r, ddpl_tensor *host, bool broadcast)
{
    ddpl_device dev = r->params[0]->device;
    ddpl_tensor *d = ddpl_to(host, (ddpl_dtype)host->dtype, dev); /* host itself on the CPU */
    if (!d) return NULL;
    ddpl_work *w =
        broadcast ? ddpl_pg_broadcast(r->pg, d, 0) : ddpl_pg_allreduce(r->pg, d, DDPL_REDUCE_SUM);
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
    ddpl_tensor *sum = host_collective(r, u, false);
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

/* End of a synchronised backward: wait for every bucket, write the averages into .grad. */
static int finalize(ddpl_reducer *r)
{
    r->t_final_start = now();
    int rc = 0;
    for (int b = 0; b < r->nb; b++)
        if (finish(r, b) < 0 && rc == 0) rc = -1;
    r->expect_hooks = false;
    if (rc < 0) return -1;
    if (r->cfg.find_unused && global_used(r) < 0) return -1;
    if (!r->cfg.grad_as_bucket_view || r->cfg.find_unused) {
        for (int p = 0; p < r->n; p++) {
            ddpl_tensor *param = r->params[p], *v = view_of(r, p);
            if (!r->used[p] && !param->grad) continue; /* unused here: PyTorch leaves it None */
            if (r->in_grad[p]) continue;               /* the allreduce wrote the average there */
            if (r->cfg.grad_as_bucket_view) {
                if (!is_view_of(param->grad, v) && ddpl_tensor_set_grad(param, v) < 0) return -1;
            } else if (param->grad) {
                if (ddpl_copy_(param->grad, v) < 0) return -1;
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
    r->t_final_end = now();
    return 0;
}

/* Whether the plain allreduce of a shared bucket can take gradient g (for slot v) where it is
 * (ddpl_pg_allreduce_prescaled_into) instead of a copy in the bucket: only without
 * gradient_as_bucket_view, whose .grad must end up in the bucket. On 2 ranks this halves the
 * copies into and out of the bucket. */
static bool reducible_in_place(const ddpl_reducer *r, const bucket *k, const ddpl_tensor *g,
                               const ddpl_tensor *v)
{
    return k->shared && r->comm == DDPL_COMM_ALLREDUCE && r->world > 1 &&
           !r->cfg.grad_as_bucket_view && g->device.type == DDPL_CPU && g->dtype == v->dtype &&
           ddpl_tensor_is_contiguous(g) && ddpl_same_shape(g, v) && g->storage != v->storage;
}

/* Marks parameter p ready: its gradient (or zeros, for a parameter this rank did not use) goes
 * into its bucket slot, or stays in .grad to be reduced there; launches every bucket that can
 * go, in order. */
static int mark_ready(ddpl_reducer *r, int p)
{
    ddpl_tensor *param = r->params[p], *v = view_of(r, p);
    if (r->ready[p])
        return ddpl_error("DistributedDataParallel: rank %d: parameter '%s' (index %d) was marked "
                          "ready twice in one backward pass (is it used by a second backward "
                          "without a forward in between, or with find_unused_parameters on a "
                          "parameter the graph does reach?)",
                          r->rank, r->names[p], p);
    if (evict_kept(r, p) < 0) return -1;
    double t = now();
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
    ddpl_tensor *g = param->grad;
    bucket *k = &r->buckets[r->bucket_of[p]];
    if (!g) {
        if (ddpl_zero_(v) < 0) return -1;
    } else if (reducible_in_place(r, k, g, v)) {
        r->in_grad[p] = true; /* no copy: the allreduce reads g and writes the average into it */
    } else if (!is_view_of(g, v)) {
        if ((divide ? ddpl_mul_out(v, g, r->inv_world) : ddpl_copy_(v, g)) < 0) return -1;
        k->copied_bytes += param_bytes(param);
        if (r->cfg.grad_as_bucket_view && ddpl_tensor_set_grad(param, v) < 0) return -1;
    } else if (divide && ddpl_mul_(v, r->inv_world) < 0) {
        return -1;
    }
    if (--k->pending == 0) k->t_ready = now();
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

/* The gradient-ready hook (ddpl_grad_ready_fn) of every parameter. */
static int on_grad_ready(ddpl_tensor *leaf, void *userdata)
{
    (void)leaf;
    hook_ud *u = userdata;
    ddpl_reducer *r = u->r;
    if (!r->expect_hooks || !r->sync) return 0; /* no_sync, or a backward DDP did not prepare */
    return mark_ready(r, u->index);
}

/* ---- public ---- */

ddpl_reducer *ddpl_reducer_new(ddpl_pg *pg, int n, ddpl_tensor *const *params,
                               const char *const *names, const ddpl_reducer_config *cfg)
{
    if (n <= 0) {
        ddpl_error("DistributedDataParallel: the module has no parameter that requires grad");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!ddpl_tensor_is_leaf(params[i]) || !params[i]->requires_grad) {
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
    bool nccl = strcmp(ddpl_pg_backend(pg), "nccl") == 0;
    if (nccl != (params[0]->device.type == DDPL_CUDA)) {
        char a[32];
        ddpl_error("DistributedDataParallel: the parameters are on %s, but the process group's "
                   "backend is %s, which takes %s tensors (move the module with :to('cuda') "
                   "after ddpl.cuda.set_device(LOCAL_RANK) for nccl; use gloo for CPU modules)",
                   ddpl_device_str(params[0]->device, a, sizeof a), ddpl_pg_backend(pg),
                   nccl ? "CUDA" : "CPU");
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
    r->inv_world = ddpl_scalar(1.0 / r->world, DDPL_FLOAT64, params[0]->device);
    for (int i = 0; i < n; i++) {
        r->params[i] = ddpl_tensor_retain(params[i]);
        r->names[i] = strdup(names[i] ? names[i] : "?");
        r->uds[i] = (hook_ud){r, i};
    }
    int *rev = ddpl_xcalloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++) rev[i] = n - 1 - i; /* reverse registration: backward's order */
    int rc = r->inv_world ? buckets_build(r, rev) : -1;
    free(rev);
    if (rc == 0) rc = grads_to_views(r);
    if (rc == 0) rc = set_homes(r);
    for (int i = 0; rc == 0 && i < n; i++)
        rc = ddpl_tensor_register_grad_ready_hook(r->params[i], on_grad_ready, &r->uds[i], NULL);
    if (rc < 0) {
        ddpl_reducer_free(r);
        return NULL;
    }
    return r;
}

void ddpl_reducer_free(ddpl_reducer *r)
{
    if (!r) return;
    drop_homes(r);
    for (int i = 0; i < r->n; i++) {
        ddpl_tensor_remove_hooks(r->params[i], &r->uds[i]);
        ddpl_tensor_release(r->params[i]);
        free(r->names[i]);
    }
    buckets_free(r);
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
    free(r);
}

/* Rank 0's ready order, broadcast, becomes everyone's bucket order. */
static int rebuild(ddpl_reducer *r)
{
    bool *seen = ddpl_xcalloc((size_t)r->n, sizeof(bool));
    int64_t nn = r->n;
    ddpl_tensor *ord = ddpl_empty(1, &nn, DDPL_INT64, ddpl_cpu());
    if (!ord) {
        free(seen);
        return -1;
    }
    int64_t *o = ddpl_tensor_data(ord);
    int k = 0;
    for (int i = 0; i < r->n_order; i++) {
        o[k++] = r->order[i];
        seen[r->order[i]] = true;
    }
    for (int p = r->n - 1; p >= 0; p--) /* never ready (unused): at the end */
        if (!seen[p]) o[k++] = p;
    free(seen);
    ddpl_tensor *got = host_collective(r, ord, true);
    ddpl_tensor_release(ord);
    int rc = got ? 0 : -1;
    if (rc == 0) {
        const int64_t *g = ddpl_tensor_data(got);
        int *order = ddpl_xcalloc((size_t)r->n, sizeof(int));
        for (int i = 0; i < r->n; i++) order[i] = (int)g[i];
        ddpl_storage **kept = kept_grads(r);
        drop_homes(r);
        buckets_free(r);
        rc = buckets_build(r, order);
        if (rc == 0) rc = grads_to_views(r);
        if (rc == 0) rc = set_homes(r);
        move_kept_grads(r, kept); /* releases what it does not move */
        free(order);
    }
    ddpl_tensor_release(got);
    r->rebuilt = true;
    return rc;
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
        for (int b = 0; b < r->nb; b++) (void)finish(r, b);
        r->expect_hooks = false;
        return -1;
    }
    if (r->finished_once && !r->rebuilt) return rebuild(r);
    return 0;
}

/* Depth-first walk of the graph from node n, marking the parameters reached. */
static void walk(ddpl_reducer *r, ddpl_node *n, ddpl_node ***seen, int *nseen, int *cap)
{
    for (int i = 0; i < *nseen; i++)
        if ((*seen)[i] == n) return;
    if (*nseen == *cap) {
        *cap *= 2;
        ddpl_node **s = realloc(*seen, (size_t)*cap * sizeof **seen);
        if (!s) abort(); /* small metadata, as ddpl_xmalloc */
        *seen = s;
    }
    (*seen)[(*nseen)++] = n;
    if (n->variable) {
        for (int p = 0; p < r->n; p++)
            if (r->params[p] == n->variable) r->used[p] = true;
        return;
    }
    for (int i = 0; i < n->n_inputs; i++)
        if (n->edges[i].node) walk(r, n->edges[i].node, seen, nseen, cap);
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
    r->t_begin = now();
    r->t_first = r->t_final_start = r->t_final_end = 0;
    if (!r->finished_once && !r->rebuilt) r->n_order = 0;
    for (int p = 0; p < r->n; p++) {
        r->ready[p] = false;
        r->in_grad[p] = false;
        r->used[p] = !r->cfg.find_unused;
    }
    for (int b = 0; b < r->nb; b++) {
        bucket *k = &r->buckets[b];
        k->pending = k->n;
        k->t_ready = k->t_start = k->t_end = 0;
        k->copied_bytes = 0;
    }
    if (!r->cfg.find_unused) return 0;
    int cap = 64, nseen = 0;
    ddpl_node **seen = ddpl_xcalloc((size_t)cap, sizeof *seen);
    for (int i = 0; i < n_outputs; i++) {
        ddpl_tensor *o = outputs[i];
        if (o->grad_fn)
            walk(r, o->grad_fn, &seen, &nseen, &cap);
        else
            for (int p = 0; p < r->n; p++)
                if (r->params[p] == o) r->used[p] = true;
    }
    free(seen);
    /* unused parameters are ready now: their buckets may be launched before backward starts */
    for (int p = 0; p < r->n; p++) {
        if (r->used[p]) continue;
        bool started = r->started;
        if (mark_ready(r, p) < 0) return -1;
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
    set_homes(r); /* sole-owner homes only serve the plain allreduce; cannot fail but on OOM */
}

int ddpl_reducer_num_buckets(const ddpl_reducer *r)
{
    return r->nb;
}

int ddpl_reducer_bucket_params(const ddpl_reducer *r, int b, int *out, int cap)
{
    if (b < 0 || b >= r->nb) return 0;
    const bucket *k = &r->buckets[b];
    for (int i = 0; i < k->n && i < cap; i++) out[i] = k->params[i];
    return k->n;
}

int64_t ddpl_reducer_bucket_bytes(const ddpl_reducer *r, int b)
{
    if (b < 0 || b >= r->nb) return 0;
    return param_bytes(r->buckets[b].flat);
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
        const bucket *bk = &r->buckets[b];
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
