/* cuemu/nccl/nccl_standin_comm.c: the life of a communicator of the NCCL stand-in: init
 * (blocking, or non-blocking on a thread of its own), its asynchronous state, finalize,
 * destroy, abort, and the queries.
 * defines: ncclCommInitRank, ncclCommInitRankConfig, ncclCommGetAsyncError, ncclCommFinalize,
 *          ncclCommDestroy, ncclCommAbort, ncclCommCount, ncclCommUserRank (nccl.h).
 *
 * Init joins the communicator's shared-memory segment (nccl_standin_seg.c) and returns once
 * every rank has joined. With config.blocking = 0 it returns ncclInProgress at once and a thread
 * joins; ncclCommGetAsyncError reports ncclInProgress until that thread is done, then
 * ncclSuccess or the init's error, as real NCCL's non-blocking init does. Other calls on the
 * communicator before then get ncclInvalidUsage. Finalize has nothing to flush (every call
 * completed before it returned): it marks the communicator finalized and, non-blocking, returns
 * ncclInProgress with the state already ncclSuccess, which a caller polling
 * ncclCommGetAsyncError sees at its first poll. Destroy leaves the segment (peers that still
 * wait for this rank then fail with ncclRemoteError); abort does the same without any check, and
 * may come from another thread while a call on the communicator is blocked: it raises the
 * communicator's abort flag, rings its doorbell, and waits for that call to notice (within one
 * 20 ms sleep) and return ncclSystemError, before unmapping anything.
 *
 * Asynchronous errors: besides the error that broke a call, ncclCommGetAsyncError reports
 * ncclRemoteError once a peer's slot says it failed or aborted, as NCCL's proxy thread reports a
 * peer whose connections closed. What only real NCCL has: init's topology detection, bootstrap
 * over sockets, connection setup, and errors of the network and the GPU. */
#include "nccl_standin.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_TIMEOUT_S 300.0
#define CONFIG_MAGIC      0xcafebeefu /* NCCL_CONFIG_INITIALIZER's */
#define SPIN_POLLS        200         /* polls before a wait sleeps, when there are CPUs enough */

static double env_timeout(void)
{
    const char *s = getenv("DDPL_CUEMU_NCCL_TIMEOUT");
    if (!s || !*s) return DEFAULT_TIMEOUT_S;
    char *end;
    double v = strtod(s, &end);
    return *end || !(v > 0) ? DEFAULT_TIMEOUT_S : v;
}

/* CPUs this process may run on. */
static int cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    return 1;
}

static void comm_free(ncclComm_t comm)
{
    comm->magic = 0;
    pthread_mutex_destroy(&comm->mu);
    free(comm);
}

typedef struct init_job {
    ncclComm_t comm;
    ncclUniqueId id;
} init_job;

static void *init_thread(void *arg)
{
    init_job *job = arg;
    ncclResult_t r = standin_seg_join(job->comm, &job->id);
    atomic_store(&job->comm->async, (int)r);
    free(job);
    return NULL;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config)
{
    const char *fn = "ncclCommInitRank";
    if (!comm) return standin_fail(NULL, ncclInvalidArgument, "%s: comm NULL", fn);
    *comm = NULL;
    if (nranks < 1 || nranks > STANDIN_MAX_RANKS)
        return standin_fail(NULL, ncclInvalidArgument,
                            "%s: nranks %d out of range [1, %d] (the stand-in's limit)", fn, nranks,
                            STANDIN_MAX_RANKS);
    if (rank < 0 || rank >= nranks)
        return standin_fail(NULL, ncclInvalidArgument, "%s: rank %d out of range [0, %d)", fn, rank,
                            nranks);
    if (config && config->magic != CONFIG_MAGIC)
        return standin_fail(NULL, ncclInvalidArgument,
                            "%s: config was not initialised with NCCL_CONFIG_INITIALIZER", fn);
    ncclComm_t c = calloc(1, sizeof *c);
    if (!c) return standin_fail(NULL, ncclSystemError, "%s: out of host memory", fn);
    c->magic = STANDIN_COMM_MAGIC;
    c->rank = rank;
    c->nranks = nranks;
    c->blocking = !(config && config->blocking == 0); /* unset means blocking */
    c->timeout_s = env_timeout();
    c->spin = nranks <= cpus() ? SPIN_POLLS : 0;
    pthread_mutex_init(&c->mu, NULL);
    atomic_init(&c->async, (int)ncclInProgress);
    if (c->blocking) {
        ncclResult_t r = standin_seg_join(c, &commId);
        if (r != ncclSuccess) {
            comm_free(c); /* its message stays the thread's last error */
            return r;
        }
        atomic_store(&c->async, (int)ncclSuccess);
        *comm = c;
        return ncclSuccess;
    }
    init_job *job = malloc(sizeof *job);
    if (!job) {
        comm_free(c);
        return standin_fail(NULL, ncclSystemError, "%s: out of host memory", fn);
    }
    job->comm = c;
    job->id = commId;
    if (pthread_create(&c->init_thread, NULL, init_thread, job) != 0) {
        free(job);
        comm_free(c);
        return standin_fail(NULL, ncclSystemError, "%s: cannot start the init thread", fn);
    }
    c->has_init_thread = true;
    *comm = c;
    return ncclInProgress;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    return ncclCommInitRankConfig(comm, nranks, commId, rank, NULL);
}

/* comm is a live handle (NULL and freed ones are refused). */
static ncclResult_t check_handle(ncclComm_t comm, const char *fn)
{
    if (!comm) return standin_fail(NULL, ncclInvalidArgument, "%s: comm is NULL", fn);
    if (comm->magic != STANDIN_COMM_MAGIC)
        return standin_fail(NULL, ncclInvalidArgument,
                            "%s: comm %p is not a live communicator (destroyed already?)", fn,
                            (void *)comm);
    return ncclSuccess;
}

/* A peer that failed or aborted breaks this communicator too (see the file comment). */
static void notice_peers(ncclComm_t comm)
{
    for (int q = 0; q < comm->nranks; q++) {
        uint32_t st = atomic_load(&comm->seg->ranks[q].state);
        if (q == comm->rank || (st != STANDIN_RANK_FAILED && st != STANDIN_RANK_ABORTED)) continue;
        standin_break(comm, ncclRemoteError, "rank %d %s", q,
                      st == STANDIN_RANK_FAILED ? "failed (an error broke its communicator)"
                                                : "aborted its communicator (ncclCommAbort)");
        return;
    }
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    ncclResult_t r = check_handle(comm, "ncclCommGetAsyncError");
    if (r != ncclSuccess) return r;
    if (!asyncError)
        return standin_fail(comm, ncclInvalidArgument, "ncclCommGetAsyncError: asyncError NULL");
    int s = atomic_load(&comm->async);
    if (s == ncclSuccess && !atomic_load(&comm->aborting) && comm->seg) {
        notice_peers(comm);
        s = atomic_load(&comm->async);
    }
    *asyncError = (ncclResult_t)s;
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    ncclResult_t r = standin_enter(comm, "ncclCommFinalize");
    if (r != ncclSuccess) return r;
    comm->finalized = true; /* nothing is pending: every call completed before it returned */
    standin_leave(comm);
    return comm->blocking ? ncclSuccess : ncclInProgress;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm) return ncclSuccess; /* as NCCL */
    ncclResult_t r = check_handle(comm, "ncclCommDestroy");
    if (r != ncclSuccess) return r;
    if (atomic_load(&comm->async) == ncclInProgress)
        return standin_fail(comm, ncclInvalidUsage,
                            "ncclCommDestroy: the non-blocking init has not completed (wait for "
                            "it, or ncclCommAbort)");
    if (atomic_load(&comm->active) > 0)
        return standin_fail(comm, ncclInvalidUsage,
                            "ncclCommDestroy: another thread is inside a call on this "
                            "communicator (ncclCommAbort stops it)");
    if (comm->has_init_thread) pthread_join(comm->init_thread, NULL); /* it has finished */
    standin_seg_leave(comm, STANDIN_RANK_LEFT);
    comm_free(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm) return ncclSuccess; /* as NCCL */
    ncclResult_t r = check_handle(comm, "ncclCommAbort");
    if (r != ncclSuccess) return r;
    atomic_store(&comm->aborting, 1);
    if (comm->has_init_thread) {
        /* init's waits check the flag at least every 20 ms */
        pthread_join(comm->init_thread, NULL);
        comm->has_init_thread = false;
    }
    if (comm->seg) standin_ring(comm, comm->rank); /* wake a call of this rank that sleeps */
    /* a call on another thread returns within one sleep; only then may the segment go */
    struct timespec nap = {0, 200000};
    while (atomic_load(&comm->active) > 0) nanosleep(&nap, NULL);
    standin_seg_leave(comm, STANDIN_RANK_ABORTED);
    comm_free(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    ncclResult_t r = check_handle(comm, "ncclCommCount");
    if (r != ncclSuccess) return r;
    if (!count) return standin_fail(comm, ncclInvalidArgument, "ncclCommCount: count NULL");
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    ncclResult_t r = check_handle(comm, "ncclCommUserRank");
    if (r != ncclSuccess) return r;
    if (!rank) return standin_fail(comm, ncclInvalidArgument, "ncclCommUserRank: rank NULL");
    *rank = comm->rank;
    return ncclSuccess;
}
