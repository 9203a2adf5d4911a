/* cuemu/nccl/test_nccl_standin.h: what the two files of the NCCL stand-in's test share: the
 * pass/fail counters (in memory shared with the forked ranks), the library's functions as
 * dlsym found them, and the description of a world of ranks.
 * defines: CHECK, NCCL_OK, sh (counters, flags, ids), L (the library), world, now_s, sleep_ms,
 *          init_comm (test_nccl_standin.c); rank_suite, rank_misuse (test_nccl_standin_coll.c). */
#ifndef CUEMU_TEST_NCCL_STANDIN_H
#define CUEMU_TEST_NCCL_STANDIN_H

#define _GNU_SOURCE
#include "nccl_standin.h" /* nccl.h, and the f16/bf16 converters compiled into this test */

#include <stdio.h>
#include <unistd.h>

/* Counters and flags shared by the forked ranks (anonymous shared memory: not in /dev/shm). */
struct shared {
    _Atomic int pass, fail;
    _Atomic int flag[4];
    ncclUniqueId ids[4]; /* fresh for each world */
};
extern struct shared *sh;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            atomic_fetch_add(&sh->pass, 1);                                                        \
        } else {                                                                                   \
            atomic_fetch_add(&sh->fail, 1);                                                        \
            fprintf(stderr, "FAIL %s:%d (pid %d): ", __FILE__, __LINE__, (int)getpid());           \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

#define NCCL_OK(call, what)                                                                        \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        CHECK(r_ == ncclSuccess, "%s: %s (%s)", what, L.GetErrorString(r_), L.GetLastError(NULL)); \
    } while (0)

/* The library's functions, typed as nccl.h declares them: L.AllReduce is ncclAllReduce. */
/* clang-format off */
#define SYMS(X) \
    X(AllGather) X(AllReduce) X(Broadcast) X(CommAbort) X(CommDestroy) X(CommGetAsyncError) \
    X(CommInitRank) X(GetErrorString) X(GetLastError) X(GetUniqueId) X(GetVersion) X(GroupEnd) \
    X(GroupStart) X(Recv) X(Reduce) X(ReduceScatter) X(Send) X(CommInitRankConfig) \
    X(CommFinalize) X(CommCount) X(CommUserRank)
/* clang-format on */
struct nccl_lib {
#define FIELD(f) __typeof__(nccl##f) *f;
    SYMS(FIELD)
#undef FIELD
};
extern struct nccl_lib L;

/* A world: n ranks running fn, as processes or threads. */
typedef struct world {
    const char *name;
    int n;
    bool blocking, plain_init; /* plain_init: ncclCommInitRank (no config) */
    bool small;                /* tiny staging and rings: many chunks, wrapping rings */
    int killed;                /* the rank that is expected to die of SIGKILL, or -1 */
    void (*fn)(const struct world *w, int rank);
} world;

double now_s(void);
void sleep_ms(long ms);
/* Init as the world says (blocking, non-blocking polled, or plain); NULL (a failure counted)
 * when it does not work. */
ncclComm_t init_comm(const world *w, int rank, const ncclUniqueId *id);

/* Every collective and message pattern on the communicator of sh->ids[0], then finalize. */
void rank_suite(const world *w, int rank);
/* Ranks that disagree (collective counts, message sizes) fail instead of hanging. */
void rank_misuse(const world *w, int rank);

#endif
