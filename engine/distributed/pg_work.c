/* distributed/pg_work.c: work handles, the same for every backend: a reference-counted item holding
 * the operation's tensors until it completes, its completion (done, error) under a mutex any thread
 * may finish it with, and the backend's per-work state (w->impl) in the same allocation.
 * defines: pg_work_new, pg_work_slot, pg_work_finish, pg_work_wait_done, pg_work_is_done,
 *          pg_strided_copy (pg_impl.h); ddpl_work_wait, ddpl_work_is_completed,
 *          ddpl_work_error, ddpl_work_name, ddpl_work_retain, ddpl_work_release,
 *          ddpl_pg_wait_follows (pg.h).
 *
 * The engine's error message is thread-local, so whoever completes a work item (a lane of the
 * host backend, NCCL's poll) records the failure's message in it, where the caller's wait finds
 * it. The backend's work hooks (pg_backend.h) take over where a backend does more than sleep
 * until done: the host backend runs a work item on the waiting thread, NCCL orders a stream. */
#define _GNU_SOURCE /* pthread_condattr_setclock */
#include <errno.h>
#include <stdalign.h>
#include <time.h>

#include "distributed/pg_impl.h"

/* Walks the elements of t in row-major order, copying each between the tensor's memory and a
 * contiguous buffer (to_buf: tensor -> buf). */
void pg_strided_copy(const ddpl_tensor *t, char *buf, bool to_buf)
{
    size_t es = ddpl_dtype_size((ddpl_dtype)t->dtype);
    int64_t n = ddpl_numel(t->ndim, t->sizes);
    if (ddpl_tensor_is_contiguous(t)) { /* one copy (a reduce-scatter's input element by element
                                           took 10% of an FSDP step) */
        char *data = (char *)t->storage->data + (size_t)t->offset * es;
        if (to_buf)
            memcpy(buf, data, (size_t)n * es);
        else
            memcpy(data, buf, (size_t)n * es);
        return;
    }
    int64_t idx[DDPL_MAX_DIMS] = {0};
    char *base = (char *)t->storage->data;
    for (int64_t i = 0; i < n; i++) {
        int64_t off = t->offset;
        for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
        if (to_buf)
            memcpy(buf + (size_t)i * es, base + (size_t)off * es, es);
        else
            memcpy(base + (size_t)off * es, buf + (size_t)i * es, es);
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (++idx[d] < t->sizes[d]) break;
            idx[d] = 0;
        }
    }
}

/* the backend's state starts here, aligned for anything it holds */
enum {
    IMPL_OFFSET =
        (sizeof(ddpl_work) + alignof(max_align_t) - 1) / alignof(max_align_t) * alignof(max_align_t)
};

ddpl_work *pg_work_new(ddpl_pg *pg, const char *name, int nslots)
{
    size_t impl = pg->backend->work_size;
    ddpl_work *w = ddpl_xcalloc(1, (size_t)IMPL_OFFSET + impl);
    atomic_init(&w->refcount, 1);
    w->name = name;
    w->pg = pg;
    w->backend = pg->backend;
    w->timeout_s = pg->timeout_s;
    w->nslots = nslots;
    w->slots = nslots ? ddpl_xcalloc((size_t)nslots, sizeof *w->slots) : NULL;
    w->impl = impl ? (char *)w + IMPL_OFFSET : NULL;
    w->fp = pg->next_fp; /* a collective's, set by pg_expect just before; else seq 0 */
    memset(&pg->next_fp, 0, sizeof pg->next_fp);
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    return w;
}

ddpl_work *ddpl_work_retain(ddpl_work *w)
{
    if (w) atomic_fetch_add(&w->refcount, 1);
    return w;
}

/* Drops the tensors and buffers (at completion, so a finished handle pins no memory). */
static void work_drop_args(ddpl_work *w)
{
    if (w->backend->work_drop) w->backend->work_drop(w);
    for (int i = 0; i < w->nslots; i++) {
        ddpl_tensor_release(w->slots[i].t);
        free(w->slots[i].stage);
    }
    free(w->slots);
    w->slots = NULL;
    w->nslots = 0;
    free(w->scratch);
    w->scratch = NULL;
}

void ddpl_work_release(ddpl_work *w)
{
    if (!w || atomic_fetch_sub(&w->refcount, 1) != 1) return;
    if (w->backend->work_release) w->backend->work_release(w); /* before the tensors go */
    work_drop_args(w);
    free(w->error);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

void pg_work_slot(ddpl_work *w, int i, ddpl_tensor *t, bool reads, bool writes)
{
    pg_slot *s = &w->slots[i];
    /* A plain view of t's storage rather than t itself: another thread may drop the last
     * reference, and a view has no autograd node or Lua hooks to free off the main thread. */
    s->t = ddpl_tensor_alias(t, t->ndim, t->sizes, t->strides, t->offset);
    s->write_back = writes;
    if (ddpl_tensor_is_contiguous(t)) {
        s->data = ddpl_data_ptr(t);
    } else {
        size_t n = ddpl_tensor_nbytes(t);
        s->stage = ddpl_xmalloc(n ? n : 1);
        if (reads) pg_strided_copy(t, s->stage, true);
        s->data = s->stage;
    }
}

void pg_work_finish(ddpl_work *w, const char *error)
{
    if (!error) {
        for (int i = 0; i < w->nslots; i++) {
            pg_slot *s = &w->slots[i];
            if (!s->write_back) continue;
            if (s->stage) pg_strided_copy(s->t, s->stage, false);
            ddpl_storage_bump_version(s->t->storage);
        }
    }
    work_drop_args(w);
    pthread_mutex_lock(&w->mu);
    w->error = error ? ddpl_xstrdup(error) : NULL;
    w->done = true;
    w->pg = NULL;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

bool pg_work_is_done(ddpl_work *w, const char **error)
{
    pthread_mutex_lock(&w->mu);
    bool d = w->done;
    if (error) *error = d ? w->error : NULL;
    pthread_mutex_unlock(&w->mu);
    return d;
}

int pg_work_wait_done(ddpl_work *w, double timeout_s)
{
    if (timeout_s < 0) timeout_s = w->timeout_s + 10.0; /* the operation times out first */
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    double whole = (double)(int64_t)timeout_s;
    deadline.tv_sec += (time_t)whole;
    deadline.tv_nsec += (long)((timeout_s - whole) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    while (!w->done && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&w->cv, &w->mu, &deadline);
    bool done = w->done;
    pthread_mutex_unlock(&w->mu);
    if (!done)
        return ddpl_error("%s: wait timed out after %g s (the operation is still running)", w->name,
                          timeout_s);
    if (w->error) return ddpl_error("%s", w->error);
    return 0;
}

int ddpl_work_wait(ddpl_work *w, double timeout_s)
{
    if (w->backend->work_wait) return w->backend->work_wait(w, timeout_s);
    return pg_work_wait_done(w, timeout_s);
}

bool ddpl_work_is_completed(ddpl_work *w)
{
    if (w->backend->work_poll) w->backend->work_poll(w);
    return pg_work_is_done(w, NULL);
}

const char *ddpl_work_error(ddpl_work *w)
{
    if (w->backend->work_poll) w->backend->work_poll(w);
    const char *e = NULL;
    pg_work_is_done(w, &e);
    return e;
}

const char *ddpl_work_name(const ddpl_work *w)
{
    return w->name;
}

void ddpl_pg_wait_follows(ddpl_pg *pg)
{
    if (pg->backend->wait_follows) pg->backend->wait_follows(pg);
}
