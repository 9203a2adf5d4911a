/* cuemu/nccl/nccl_standin.h: internals of the NCCL stand-in of the CUDA emulation build
 * (libcuemu_nccl.so): the communicator, the shared-memory segment its ranks share, and the
 * functions the stand-in's files call on each other. Not a public header: the public face is
 * NVIDIA's own nccl.h, which every file here includes so that types, enum values and
 * signatures are NCCL's.
 * defines: struct ncclComm, standin_seg (the segment) and its parts, standin_* (internal calls,
 *          each listed with the file that defines it).
 *
 * What the stand-in is: ranks are processes (or threads) of one machine; device memory is host
 * memory (the emulated CUDA runtime hands out ordinary host pointers) and a call that takes a
 * cudaStream_t does all its work before it returns, on the calling thread, so the stream
 * argument is ignored. Every collective goes through per-rank staging buffers in one POSIX
 * shared-memory segment per communicator, point-to-point messages through per-(sender,
 * receiver) ring buffers in the same segment. What only real NCCL can show: its algorithms
 * (rings, trees, NVLS, CollNet) and the rounding order they give sums of more than two ranks,
 * its transports (NVLink, PCIe P2P, InfiniBand, sockets), its speed, and true asynchrony with
 * respect to the host and other streams. */
#ifndef CUEMU_NCCL_STANDIN_H
#define CUEMU_NCCL_STANDIN_H

#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every function nccl.h declares and this library defines is exported (default visibility);
 * the library is built with -fvisibility=hidden, so everything else stays internal. */
#pragma GCC visibility push(default)
#include <nccl.h>

#include "cuemu_fp16.h" /* f16 / bf16 to and from float, bit-exact (tools/cuemu/common) */
#pragma GCC visibility pop

#if ATOMIC_INT_LOCK_FREE != 2 || ATOMIC_LLONG_LOCK_FREE != 2
#error "the segment's words are shared between processes: they must be lock-free atomics"
#endif

#define STANDIN_MAX_RANKS 64 /* peer sets are uint64_t masks */
#define STANDIN_ERRLEN    512
#define STANDIN_LINE      64 /* bytes: one cache line, so ranks' words do not share lines */

/* ------------------------------------------------------------------- the segment ---- */
/* A rank's slot's state, written by that rank only (peers read it while they wait). */
enum {
    STANDIN_RANK_EMPTY = 0, /* not joined yet */
    STANDIN_RANK_JOINED,    /* joined, communicating */
    STANDIN_RANK_FAILED,    /* an error broke its communicator (timeout, mismatch, dead peer) */
    STANDIN_RANK_ABORTED,   /* ncclCommAbort */
    STANDIN_RANK_LEFT,      /* ncclCommDestroy */
};

/* What a rank is doing in one collective step; ranks compare these after each step's barrier,
 * so ranks that call different collectives (or the same with other counts, types, operations
 * or roots) get ncclInvalidUsage on every rank instead of reading each other's wrong data. */
typedef struct standin_desc {
    uint64_t seq;   /* the collective's number on this rank (only for messages) */
    uint64_t count; /* elements, as the caller passed it */
    uint64_t chunk; /* which chunk of it */
    int32_t kind;   /* standin_coll_kind */
    int32_t dtype, op, root;
} standin_desc;

/* One per rank, each on its own cache lines. */
typedef struct standin_rank_slot {
    _Atomic uint32_t state;    /* STANDIN_RANK_* */
    _Atomic uint32_t doorbell; /* futex word: bumped (and woken) whenever something this rank
                                  may be waiting for changes */
    _Atomic uint64_t epoch;    /* collective steps (barriers) this rank has arrived at */
    int32_t pid;
    uint32_t pad_;
    uint64_t start_time;  /* /proc/<pid>/stat field 22 (clock ticks after boot): tells a
                             recycled pid from the rank's own process */
    standin_desc desc[2]; /* by the parity of the step's epoch (see standin_barrier) */
} __attribute__((aligned(STANDIN_LINE))) standin_rank_slot;

/* The read and write positions of one ring buffer (bytes ever consumed / produced), on
 * separate lines since the receiver writes one and the sender the other. */
typedef struct standin_mbox {
    _Atomic uint64_t head __attribute__((aligned(STANDIN_LINE))); /* receiver's */
    _Atomic uint64_t tail __attribute__((aligned(STANDIN_LINE))); /* sender's */
} __attribute__((aligned(STANDIN_LINE))) standin_mbox;

/* The segment: this header, nranks slots, then the staging buffers (2 per rank, stage_bytes
 * each) and the mailboxes (nranks * nranks of them, a standin_mbox then mbox_bytes of data,
 * indexed [src * nranks + dst]). Offsets are from the segment's start. */
typedef struct standin_seg {
    _Atomic uint32_t ready; /* STANDIN_SEG_READY once the creator has filled in the rest */
    uint32_t layout;        /* STANDIN_SEG_LAYOUT: ranks of different builds refuse each other */
    int32_t nranks;
    uint32_t pad_;
    uint64_t total_bytes, stage_bytes, mbox_bytes, stage_off, mbox_off;
    standin_rank_slot ranks[];
} standin_seg;

#define STANDIN_SEG_READY  0x52454459u /* "REDY" */
#define STANDIN_SEG_LAYOUT 1u

/* --------------------------------------------------------------- the communicator ---- */
struct ncclComm {
    uint32_t magic; /* STANDIN_COMM_MAGIC while alive: a best-effort check of handles */
    int rank, nranks;
    bool blocking;    /* config.blocking: 0 makes init and finalize report ncclInProgress */
    double timeout_s; /* DDPL_CUEMU_NCCL_TIMEOUT: the longest wait without progress */
    int spin;         /* polls before sleeping: 0 when the ranks outnumber the CPUs */
    char shm_name[96];
    standin_seg *seg; /* NULL until joined */
    size_t seg_bytes;
    bool claimed;   /* slot `rank` of the segment is this communicator's */
    bool unlinked;  /* the name is gone from /dev/shm (every rank had joined) */
    uint64_t epoch; /* == seg->ranks[rank].epoch: steps this rank has arrived at */
    uint64_t seq;   /* collectives started (for messages) */
    bool finalized;
    _Atomic int aborting;  /* ncclCommAbort has begun: waits return at once */
    _Atomic int active;    /* calls inside the library on this communicator (abort waits) */
    _Atomic int async;     /* ncclResult_t: ncclInProgress during non-blocking init, then
                              ncclSuccess, or the error that broke the communicator */
    pthread_t init_thread; /* non-blocking init's joiner */
    bool has_init_thread;
    pthread_mutex_t mu;         /* guards error */
    char error[STANDIN_ERRLEN]; /* the last failure on this communicator */
};

#define STANDIN_COMM_MAGIC 0x4e43434cu /* "NCCL" */

/* ------------------------------------------------- nccl_standin_error.c: errors ---- */
/* Records "NCCL stand-in (rank R of N): <message>" as the last error of the calling thread and
 * of comm (may be NULL), returns r. */
ncclResult_t standin_fail(ncclComm_t comm, ncclResult_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* As standin_fail, and breaks comm: its asynchronous error becomes r (the first one stays) and
 * its slot says FAILED, so peers waiting on it get ncclRemoteError instead of waiting on. */
ncclResult_t standin_break(ncclComm_t comm, ncclResult_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Checks comm is a live, initialised communicator and counts the caller in comm->active
 * (standin_leave undoes it): ncclSuccess, or the error (NULL or freed handle: InvalidArgument;
 * init still in progress, finalized or aborting: InvalidUsage; broken: its error). */
ncclResult_t standin_enter(ncclComm_t comm, const char *fn);
void standin_leave(ncclComm_t comm);

/* ------------------------------------------- nccl_standin_seg.c: the shm segment ---- */
/* Joins (creating it when first) the segment named by id as rank `rank` of comm->nranks:
 * maps it, fills the slot, waits (bounded) until every rank has joined, then unlinks the
 * name. On failure the name is unlinked too and comm->seg stays NULL. */
ncclResult_t standin_seg_join(ncclComm_t comm, const ncclUniqueId *id);
/* Unmaps comm's segment after setting its slot's final state (LEFT, ABORTED); unlinks the
 * name when it still exists (init never completed). */
void standin_seg_leave(ncclComm_t comm, uint32_t final_state);
/* The staging buffer `parity` of rank r; the data area and positions of mailbox src -> dst. */
char *standin_stage(ncclComm_t comm, int r, int parity);
standin_mbox *standin_mbox_of(ncclComm_t comm, int src, int dst);
char *standin_mbox_data(ncclComm_t comm, int src, int dst);

/* --------------------------------------------------- nccl_standin_wait.c: waiting ---- */
/* A wait: step() makes what progress it can without blocking. */
enum { STANDIN_IDLE, STANDIN_MOVED, STANDIN_DONE, STANDIN_FAILED };
typedef struct standin_waiter {
    int (*step)(void *arg, ncclResult_t *err);       /* STANDIN_*; on FAILED, *err is the result */
    void (*pending)(void *arg, char *buf, size_t n); /* names whom it waits for (messages) */
    void *arg;
    const char *what; /* "ncclAllReduce #3" */
} standin_waiter;
/* The communicators a wait depends on, and on each the peers whose death or failure ends it. */
typedef struct standin_watch {
    ncclComm_t comm;
    uint64_t peers; /* bit q: rank q */
} standin_watch;
/* Runs w.step until DONE; in between sleeps on the first watch's doorbell (spins briefly
 * first). Fails with ncclSystemError when a watched communicator is being aborted or nothing
 * moved for its timeout, ncclRemoteError when a watched peer failed, aborted, left or died;
 * the communicator is broken then (not for an abort). */
ncclResult_t standin_wait(const standin_waiter *w, const standin_watch *watch, int nwatch);
/* Wakes rank r of comm (and any thread of it sleeping in standin_wait). */
void standin_ring(ncclComm_t comm, int r);
/* One collective step: comm's epoch advances, then waits until every rank has arrived. */
ncclResult_t standin_barrier(ncclComm_t comm, const char *what);
/* Whether process pid (started at start_time, 0: unknown) has exited or is a zombie. */
bool standin_pid_gone(int pid, uint64_t start_time);
/* This process's start time, as standin_pid_gone compares it. */
uint64_t standin_self_start_time(void);
/* Seconds of CLOCK_MONOTONIC. */
double standin_now(void);

/* -------------------------------------------- nccl_standin_reduce.c: element math ---- */
/* Bytes of one element, 0 for a type outside nccl.h's enum. */
size_t standin_dtype_size(ncclDataType_t dt);
const char *standin_dtype_name(ncclDataType_t dt);
const char *standin_op_name(ncclRedOp_t op);
/* Whether this stand-in reduces dt with op (every op on every integer and float type but the
 * fp8 ones). */
bool standin_reduces(ncclDataType_t dt, ncclRedOp_t op);
/* dst[i] = src[0][i] op src[1][i] op ... op src[n-1][i], i < count, folded in index order: the
 * same order, hence the same bits, on every rank. */
void standin_reduce(void *dst, const void *const *src, int n, size_t count, ncclDataType_t dt,
                    ncclRedOp_t op);


/* ----------------------------------------------- nccl_standin_coll.c: collectives ---- */
typedef enum standin_coll_kind {
    STANDIN_ALLREDUCE = 1,
    STANDIN_BROADCAST,
    STANDIN_REDUCE,
    STANDIN_ALLGATHER,
    STANDIN_REDUCESCATTER,
} standin_coll_kind;

typedef struct standin_coll {
    standin_coll_kind kind;
    const void *send;
    void *recv;
    size_t count; /* per rank: AllGather's sendcount, ReduceScatter's recvcount */
    ncclDataType_t dtype;
    ncclRedOp_t op;
    int root;
} standin_coll;

/* Runs one collective on comm to completion (comm entered by the caller). */
ncclResult_t standin_coll_run(ncclComm_t comm, const standin_coll *a);
/* Checks a collective's arguments as NCCL does (null buffers, type, operation, root). */
ncclResult_t standin_coll_check(ncclComm_t comm, const standin_coll *a, const char *fn);
const char *standin_coll_name(standin_coll_kind k);

/* ---------------------------------------------- nccl_standin_group.c: groups, p2p ---- */
/* Runs a (checked) collective now, or queues it when the calling thread is inside
 * ncclGroupStart/End. */
ncclResult_t standin_group_coll(ncclComm_t comm, const standin_coll *a);
/* Inside a group: r (when not success, and the first) makes ncclGroupEnd drop the group. */
void standin_group_error(ncclResult_t r);

#endif
