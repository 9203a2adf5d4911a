/* cuda/cuda_index_check.c: the ring of deferred bad-index checks (cuda_index_check.h).
 * defines: cuda_index_check_setup, cuda_index_check_push, cuda_index_check_flush.
 *
 * Per device: CUDA_INDEX_CHECK_RING flags in one device allocation (made on first use), the ops
 * issued and checked so far (issued - checked <= RING are pending, in slots issued % RING). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"
#include "cuda_index_check.h"

#define RING       CUDA_INDEX_CHECK_RING
#define FLAG_CLEAR UINT64_MAX /* nothing bad recorded (the reset value) */

typedef struct ring {
    uint64_t *flags; /* device memory: RING flags */
    uint64_t issued, checked;
    cuda_index_pending pending[RING];
} ring;

static const cuda_index_check_raw *raw;
static ring rings[CUDA_INDEX_CHECK_MAX_DEVICES];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void cuda_index_check_setup(const cuda_index_check_raw *r)
{
    raw = r;
}

static ring *ring_of(int device)
{
    if (device < 0 || device >= CUDA_INDEX_CHECK_MAX_DEVICES) {
        ddpl_error("cuda index check: bad device %d", device);
        return NULL;
    }
    return &rings[device];
}

/* The error of a failing op p, as the synchronisation `what` reports it. */
static int report(const cuda_index_pending *p, int64_t pos, const char *what)
{
    p->report(p, pos);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ddpl_last_error());
    return ddpl_error("%s" DDPL_DEFERRED_ERROR_NOTE "%s; reported at %s)", msg, p->op, what);
}

/* Reads and releases every pending op of r; the first failure (in issue order) is the error. */
static int flush_locked(ring *r, int device, const char *what)
{
    uint64_t n = r->issued - r->checked;
    if (n == 0) return 0;
    uint64_t flags[RING];
    size_t first = (size_t)(r->checked % RING);
    size_t head = n < RING - first ? (size_t)n : RING - first; /* up to the ring's end */
    int rc = raw->flags_read(flags, r->flags + first, head, device);
    if (rc == 0 && head < n) rc = raw->flags_read(flags + head, r->flags, (size_t)n - head, device);
    for (uint64_t i = 0; i < n; i++) {
        cuda_index_pending *p = &r->pending[(r->checked + i) % RING];
        if (rc == 0 && flags[i] != FLAG_CLEAR) rc = report(p, (int64_t)flags[i], what);
        ddpl_tensor_release(p->index);
        p->index = NULL;
    }
    r->checked = r->issued;
    return rc;
}

void *cuda_index_check_push(int device, const cuda_index_pending *p)
{
    ring *r = ring_of(device);
    if (!r) return NULL;
    void *flag = NULL;
    pthread_mutex_lock(&lock);
    if (!r->flags) r->flags = raw->flags_alloc(device, RING * sizeof(uint64_t));
    /* a full ring is read first: a program that never synchronises still learns of its bad
     * indices, and the index tensors kept for the messages stay bounded */
    if (r->flags && (r->issued - r->checked < RING || flush_locked(r, device, p->op) == 0)) {
        uint64_t *slot = r->flags + r->issued % RING;
        if (raw->flag_reset(slot, device) == 0) {
            cuda_index_pending *q = &r->pending[r->issued % RING];
            *q = *p;
            q->index = ddpl_tensor_retain(p->index);
            r->issued++;
            flag = slot;
        }
    }
    pthread_mutex_unlock(&lock);
    return flag;
}

int cuda_index_check_flush(int device, const char *what)
{
    ring *r = ring_of(device);
    if (!r) return -1;
    pthread_mutex_lock(&lock);
    int rc = r->flags ? flush_locked(r, device, what) : 0;
    pthread_mutex_unlock(&lock);
    return rc;
}
