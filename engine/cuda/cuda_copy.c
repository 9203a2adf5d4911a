/* cuda/cuda_copy.c: host<->device copies over raw calls: the return contract and the pinned
 * staging (see cuda_copy.h for both).
 * defines: CUDA_COPY_STAGE_MIN, CUDA_COPY_STAGE_CHUNK, cuda_copy_h2d_via, cuda_copy_d2h_via. */
#include "cuda_copy.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

const size_t CUDA_COPY_STAGE_MIN = (size_t)1 << 20;
const size_t CUDA_COPY_STAGE_CHUNK = (size_t)4 << 20;

static const char what[] = "copy to cuda";

/* Two pinned buffers per device, used alternately. */
typedef struct staging {
    void *buf[2];
    void *done[2]; /* event recorded after the DMA out of buf[i] */
    bool busy[2];  /* done[i] was recorded and not yet waited for */
    bool failed;   /* pinned memory or events were refused once: do not retry on every copy */
} staging;

static staging stages[CUDA_COPY_MAX_DEVICES];
/* Serialises staged copies (two threads must not refill one buffer). One lock for all devices:
 * a process drives one GPU as a rule (one rank per GPU), and the copies are bandwidth-bound. */
static pthread_mutex_t stage_lock = PTHREAD_MUTEX_INITIALIZER;

/* The device's buffers, made on first use; false when pinned memory is not available. */
static bool stage_ready(const cuda_copy_raw *raw, staging *st)
{
    if (st->failed) return false;
    if (st->buf[0]) return true;
    for (int i = 0; i < 2; i++) {
        st->buf[i] = raw->host_alloc(CUDA_COPY_STAGE_CHUNK);
        st->done[i] = st->buf[i] ? raw->event_create() : NULL;
        if (!st->done[i]) {
            for (int j = 0; j <= i; j++) {
                if (st->buf[j]) raw->host_free(st->buf[j]);
                if (st->done[j]) raw->event_destroy(st->done[j]);
                st->buf[j] = st->done[j] = NULL;
            }
            st->failed = true;
            return false;
        }
    }
    return true;
}

static int staged_copy(const cuda_copy_raw *raw, staging *st, char *to, const char *from,
                       size_t nbytes, void *stream)
{
    for (size_t off = 0, k = 0; off < nbytes; off += CUDA_COPY_STAGE_CHUNK, k++) {
        int i = (int)(k & 1);
        size_t len = nbytes - off < CUDA_COPY_STAGE_CHUNK ? nbytes - off : CUDA_COPY_STAGE_CHUNK;
        if (st->busy[i] && raw->event_synchronize(st->done[i]) < 0) return -1;
        st->busy[i] = false;
        memcpy(st->buf[i], from + off, len);
        if (raw->copy_async(to + off, st->buf[i], len, CUDA_H2D, stream) < 0 ||
            raw->event_record(st->done[i], stream) < 0)
            return -1;
        st->busy[i] = true;
    }
    return 0;
}

int cuda_copy_h2d_via(const cuda_copy_raw *raw, void *dst, int device, const void *src,
                      size_t nbytes, void *stream)
{
    if (nbytes == 0) return 0;
    if (device < 0 || device >= CUDA_COPY_MAX_DEVICES)
        return ddpl_error("%s: bad device %d", what, device);
    if (raw->is_pinned(src)) { /* the DMA reads src after we return: wait for it */
        if (raw->copy_async(dst, src, nbytes, CUDA_H2D, stream) < 0) return -1;
        return raw->stream_synchronize(stream);
    }
    if (nbytes < CUDA_COPY_STAGE_MIN) return raw->copy_async(dst, src, nbytes, CUDA_H2D, stream);
    staging *st = &stages[device];
    pthread_mutex_lock(&stage_lock);
    int rc = stage_ready(raw, st) ? staged_copy(raw, st, dst, src, nbytes, stream)
                                  : raw->copy_async(dst, src, nbytes, CUDA_H2D, stream);
    pthread_mutex_unlock(&stage_lock);
    return rc;
}

/* The stream is synchronised: the caller reads dst next (item, tolist, printing, saving). */
int cuda_copy_d2h_via(const cuda_copy_raw *raw, void *dst, const void *src, size_t nbytes,
                      void *stream)
{
    if (nbytes == 0) return 0;
    if (raw->copy_async(dst, src, nbytes, CUDA_D2H, stream) < 0) return -1;
    return raw->stream_synchronize(stream);
}
