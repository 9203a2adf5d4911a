/* cuda/cuda_index_check.h: the deferred bad-index checks of the CUDA index ops and nll_loss.
 * defines: CUDA_INDEX_CHECK_RING, cuda_index_pending, cuda_index_check_raw,
 *          cuda_index_check_setup, cuda_index_check_push, cuda_index_check_flush.
 *
 * A kernel cannot raise an error, so a kernel that meets an index out of range skips that
 * element and records its position in an 8-byte device flag (the lowest position wins: the one
 * the CPU reports). Reading the flag at the end of each op would stall the host once per
 * index_select, embedding backward or cross-entropy (about six times per GPT step). Instead each
 * op takes a flag from a ring per device (reset on the compute stream, so in stream order before
 * its kernels) and returns at once; the flags are read when the host waits for the device anyway
 * (a copy to the host: item, tolist, printing, saving; cuda.synchronize) and when the ring is
 * full (one wait per CUDA_INDEX_CHECK_RING ops). The first op, in issue order, whose flag is set
 * then makes that call fail with the op's own message, as PyTorch's device-side asserts surface
 * at the next synchronisation; until then the op's output holds skipped (unwritten) elements.
 * The op's index tensor is kept alive until its flag is read, so the message can name the bad
 * value. Thread-safe (one lock); the raw device calls come from a table, so spec/c's test runs
 * this logic on the CPU with fakes. */
#ifndef DDPL_CUDA_INDEX_CHECK_H
#define DDPL_CUDA_INDEX_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "ddpl/tensor.h"

enum { CUDA_INDEX_CHECK_RING = 256, CUDA_INDEX_CHECK_MAX_DEVICES = 64 };

/* One op whose flag has not been read yet. */
typedef struct cuda_index_pending cuda_index_pending;
struct cuda_index_pending {
    const char *op;     /* a static string: "index_select", "nll_loss", ... */
    ddpl_tensor *index; /* the op's indices (or targets), retained until the check */
    int dim;
    int64_t bound; /* the valid range is [0, bound): the dim's size, or the classes */
    int64_t extra; /* nll_loss's ignore_index */
    /* Sets the op's error (ddpl_error) for the bad position pos (row-major in index); -1. */
    int (*report)(const cuda_index_pending *p, int64_t pos);
};

/* The device calls (cuda_index.cu). Each returns 0, or -1 with ddpl_error. */
typedef struct cuda_index_check_raw {
    void *(*flags_alloc)(int device, size_t nbytes); /* device memory; NULL with the error */
    int (*flag_reset)(void *flag, int device);       /* to all ones on the compute stream */
    /* n flags from the device into dst, after the device's compute stream has finished */
    int (*flags_read)(uint64_t *dst, const void *src, size_t n, int device);
} cuda_index_check_raw;

/* Installs the raw calls (once, at backend start). */
void cuda_index_check_setup(const cuda_index_check_raw *raw);

/* A flag for the op p on device (reset, in stream order); p is copied and p->index retained.
 * NULL with ddpl_error (then the ring was full and an earlier op's check failed, or memory ran
 * out). */
void *cuda_index_check_push(int device, const cuda_index_pending *p);

/* Reads the flags of device's pending ops (the caller's synchronisation `what` has just
 * happened, or is done here): 0, or -1 with the first failing op's error, which names `what`
 * as where it surfaced. Every pending op is released either way. */
int cuda_index_check_flush(int device, const char *what);

#endif
