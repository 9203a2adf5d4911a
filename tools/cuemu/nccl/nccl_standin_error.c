/* cuemu/nccl/nccl_standin_error.c: status strings, the last error, the version, and the check
 * every call on a communicator starts with.
 * defines: ncclGetErrorString, ncclGetLastError, ncclGetVersion (nccl.h); standin_fail,
 *          standin_break, standin_enter, standin_leave (nccl_standin.h).
 *
 * ncclGetErrorString returns NCCL's own strings (as of 2.28), so messages that quote them read
 * as on a GPU machine. Real NCCL keeps one thread-local last error and ignores the comm
 * argument of ncclGetLastError; the stand-in also keeps the last error of each communicator and
 * returns that one for a non-NULL comm, because a non-blocking init fails on the init thread,
 * whose thread-local message the caller could never read. */
#include "nccl_standin.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[STANDIN_ERRLEN];

const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
        return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
        return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "NCCL operation in progress";
    default:
        return "unknown result code";
    }
}

/* The returned string stays valid until the next failure on the same thread (comm NULL) or
 * until comm is destroyed; it is copied under comm's mutex into the thread's buffer so that a
 * failure on another thread cannot change it while the caller reads it. */
const char *ncclGetLastError(ncclComm_t comm)
{
    if (comm && comm->magic == STANDIN_COMM_MAGIC) {
        pthread_mutex_lock(&comm->mu);
        if (comm->error[0]) snprintf(last_error, sizeof last_error, "%s", comm->error);
        pthread_mutex_unlock(&comm->mu);
    }
    return last_error;
}

ncclResult_t ncclGetVersion(int *version)
{
    if (!version) return standin_fail(NULL, ncclInvalidArgument, "ncclGetVersion: version NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

static ncclResult_t vfail(ncclComm_t comm, ncclResult_t r, const char *fmt, va_list ap)
{
    char msg[STANDIN_ERRLEN];
    int n = 0;
    if (comm)
        n = snprintf(msg, sizeof msg, "NCCL stand-in (rank %d of %d): ", comm->rank, comm->nranks);
    else
        n = snprintf(msg, sizeof msg, "NCCL stand-in: ");
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    snprintf(last_error, sizeof last_error, "%s", msg);
    if (comm) {
        pthread_mutex_lock(&comm->mu);
        snprintf(comm->error, sizeof comm->error, "%s", msg);
        pthread_mutex_unlock(&comm->mu);
    }
    return r;
}

ncclResult_t standin_fail(ncclComm_t comm, ncclResult_t r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(comm, r, fmt, ap);
    va_end(ap);
    return r;
}

ncclResult_t standin_break(ncclComm_t comm, ncclResult_t r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(comm, r, fmt, ap);
    va_end(ap);
    int expect = ncclSuccess;
    atomic_compare_exchange_strong(&comm->async, &expect, (int)r);
    if (comm->seg) {
        /* peers sleeping on this rank learn at once that it will not come */
        uint32_t joined = STANDIN_RANK_JOINED;
        atomic_compare_exchange_strong(&comm->seg->ranks[comm->rank].state, &joined,
                                       STANDIN_RANK_FAILED);
        for (int q = 0; q < comm->nranks; q++)
            if (q != comm->rank) standin_ring(comm, q);
    }
    return r;
}

ncclResult_t standin_enter(ncclComm_t comm, const char *fn)
{
    if (!comm) return standin_fail(NULL, ncclInvalidArgument, "%s: comm is NULL", fn);
    if (comm->magic != STANDIN_COMM_MAGIC)
        return standin_fail(NULL, ncclInvalidArgument,
                            "%s: comm %p is not a live communicator (destroyed already?)", fn,
                            (void *)comm);
    atomic_fetch_add(&comm->active, 1);
    ncclResult_t r = ncclSuccess;
    int async = atomic_load(&comm->async);
    if (atomic_load(&comm->aborting))
        r = standin_fail(comm, ncclInvalidUsage, "%s: the communicator is being aborted", fn);
    else if (async == ncclInProgress)
        r = standin_fail(comm, ncclInvalidUsage,
                         "%s: the non-blocking init of this communicator has not completed "
                         "(poll ncclCommGetAsyncError until it is no longer ncclInProgress)",
                         fn);
    else if (async != ncclSuccess) {
        /* the thread's message only: ncclGetLastError(comm) keeps naming the first failure */
        char first[STANDIN_ERRLEN];
        pthread_mutex_lock(&comm->mu);
        snprintf(first, sizeof first, "%s", comm->error);
        pthread_mutex_unlock(&comm->mu);
        r = standin_fail(NULL, (ncclResult_t)async,
                         "%s on rank %d: the communicator failed earlier, abort it (%s)", fn,
                         comm->rank, first);
    } else if (comm->finalized)
        r = standin_fail(comm, ncclInvalidUsage, "%s: the communicator was finalized", fn);
    if (r != ncclSuccess) atomic_fetch_sub(&comm->active, 1);
    return r;
}

void standin_leave(ncclComm_t comm)
{
    atomic_fetch_sub(&comm->active, 1);
}
