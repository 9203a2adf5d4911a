/* distributed/reducer_buckets.c: the DDP reducer's buckets: their layout (by size and dtype, in
 * gradient-ready order after the first iteration), their slots as gradient homes, the rebuild.
 * defines: reducer_buckets_build, reducer_buckets_free, reducer_grads_to_views,
 *          reducer_set_homes, reducer_drop_homes, reducer_rebuild. */
#include <stdlib.h>

#include "autograd/leaves.h"
#include "distributed/reducer_impl.h"

/* ---- layout ---- */

void reducer_buckets_free(ddpl_reducer *r)
{
    for (int b = 0; b < r->nb; b++) {
        reducer_bucket *k = &r->buckets[b];
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

/* Groups the parameters, taken in `order`, into buckets: one open bucket per dtype, closed when
 * it reaches the current size limit (first_bucket_mb for the first one closed, then
 * bucket_cap_mb), as PyTorch's compute_bucket_assignment_by_size. Buckets are then sorted by
 * the position of their first parameter in `order`, so bucket 0 fills first. */
int reducer_buckets_build(ddpl_reducer *r, const int *order)
{
    int ndt = DDPL_DTYPE_COUNT;
    int *open = ddpl_xcalloc((size_t)ndt, sizeof *open); /* bucket index + 1 per dtype */
    reducer_bucket *bs = ddpl_xcalloc((size_t)r->n, sizeof *bs);
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
        reducer_bucket *bk = &bs[open[dt] - 1];
        bk->params[bk->n++] = p;
        bytes[open[dt] - 1] += reducer_param_bytes(r->params[p]);
        if ((double)bytes[open[dt] - 1] >= (closed == 0 ? first : cap)) {
            open[dt] = 0;
            closed++;
        }
    }
    /* sort by first position (insertion sort: a handful of buckets) */
    for (int i = 1; i < nb; i++) {
        for (int j = i; j > 0 && first_pos[j - 1] > first_pos[j]; j--) {
            reducer_bucket tb = bs[j];
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
        reducer_bucket *bk = &bs[b];
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

int reducer_grads_to_views(ddpl_reducer *r)
{
    if (!r->cfg.grad_as_bucket_view) return 0;
    for (int p = 0; p < r->n; p++) {
        ddpl_tensor *g = ddpl_tensor_grad(r->params[p]), *v = reducer_slot(r, p);
        if (!g || reducer_is_view_of(g, v)) continue;
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
 *   allreduce: ddpl_grad_home_prepare_write), so it keeps its values as in PyTorch, where each
 * step's gradient is new memory. The allreduce then finds the gradient already in the shared part
 * and moves nothing (shm_coll.c's walk_range). CPU buckets only for now: the CUDA path has not run
 * on a GPU yet. */

/* Deleter of a default-mode home's storage: the slot's memory belongs to the bucket. */
static void release_bucket(void *data, void *flat)
{
    (void)data;
    ddpl_tensor_release(flat);
}

int reducer_set_homes(ddpl_reducer *r)
{
    for (int b = 0; b < r->nb; b++) {
        reducer_bucket *k = &r->buckets[b];
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
            /* what lies in a sole home being replaced is not overwritten through the new one:
             * at a rebuild a .grad there moves into its new slot; when a comm hook is set, the
             * slot is written by copies from now on, so what lay there gets memory of its own */
            int rc = ddpl_grad_home_replace(param, home, sole);
            r->homes[p] = rc == 0 ? home : NULL; /* borrowed: the parameter holds it */
            ddpl_tensor_release(home);
            if (rc < 0) return -1;
        }
    }
    return 0;
}

void reducer_drop_homes(ddpl_reducer *r)
{
    for (int p = 0; p < r->n; p++) {
        if (r->homes[p] && ddpl_grad_home_of(r->params[p]) == r->homes[p])
            ddpl_tensor_set_grad_home(r->params[p], NULL, false);
        r->homes[p] = NULL;
    }
}

/* Rank 0's ready order, broadcast, becomes everyone's bucket order. */
int reducer_rebuild(ddpl_reducer *r)
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
    ddpl_tensor *got = reducer_host_collective(r, ord, true);
    ddpl_tensor_release(ord);
    int rc = got ? 0 : -1;
    if (rc == 0) {
        const int64_t *g = ddpl_tensor_data(got);
        int *order = ddpl_xcalloc((size_t)r->n, sizeof(int));
        for (int i = 0; i < r->n; i++) order[i] = (int)g[i];
        /* the old slots' memory outlives their buckets while gradients or homes lie in it
         * (release_bucket); reducer_set_homes moves the gradients into the new slots */
        reducer_buckets_free(r);
        rc = reducer_buckets_build(r, order);
        if (rc == 0) rc = reducer_grads_to_views(r);
        if (rc == 0) rc = reducer_set_homes(r);
        free(order);
    }
    ddpl_tensor_release(got);
    r->rebuilt = true;
    return rc;
}
