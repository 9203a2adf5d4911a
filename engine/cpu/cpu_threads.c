/* cpu/cpu_threads.c: the CPU thread pool (see cpu_threads.h for why it exists).
 * defines: cpu_threads_run, cpu_threads_set, cpu_threads_get, cpu_threads_in_parallel.
 *
 * One job at a time (the engine's kernels are issued by one thread; a kernel issued from inside
 * a part runs inline). Publishing a job: fill fn/ctx, then store the claim word
 * {generation:32, nparts:16, next part:16} and bump `generation`, the futex word sleeping
 * workers wait on. A worker claims a part with a compare-and-swap on the claim word alone, which
 * fails once the generation has moved on, and reads fn/ctx only after its claim succeeded: the
 * job cannot complete (so fn/ctx cannot be replaced) while it holds an unfinished part. A worker
 * late for one job can therefore never run a part of the next one with stale values. */
#define _GNU_SOURCE
#include "cpu_threads.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { MAX_THREADS = 256, MAX_PARTS = 65535 };

static struct {
    void (*fn)(int, int, void *);
    void *ctx;
    /* threads allowed on this job (ids >= it stay out); atomic because a worker that wakes late
     * for a finished job reads it while the next job's caller writes it (the claim word then
     * turns that worker away, whatever it read) */
    atomic_int job_threads;
    _Atomic uint64_t claim;      /* generation << 32 | nparts << 16 | next unclaimed part */
    _Atomic uint32_t generation; /* futex word: bumped once per job */
    _Atomic int done;            /* parts finished in the current job */
    _Atomic int sleepers;        /* workers in futex_wait (wake only when some are) */
    int nworkers;                /* started worker threads (ids 1..nworkers) */
    int nthreads;                /* configured threads, caller included */
    pthread_mutex_t start_mu;
} pool = {.nthreads = 0, .start_mu = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local bool in_part;
static int64_t spin_ns = 100000; /* DDPLUA_SPIN_US */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void futex_wait(_Atomic uint32_t *word, uint32_t expected)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, MAX_THREADS, NULL, NULL, 0);
}

/* Claims and runs parts of job `gen` until none is left or the job is over. */
static void run_parts(uint32_t gen, int thread)
{
    uint64_t w = atomic_load_explicit(&pool.claim, memory_order_acquire);
    for (;;) {
        int next = (int)(w & 0xffff), nparts = (int)((w >> 16) & 0xffff);
        if ((uint32_t)(w >> 32) != gen || next >= nparts) return;
        if (!atomic_compare_exchange_weak_explicit(&pool.claim, &w, w + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        in_part = true;
        pool.fn(next, thread, pool.ctx);
        in_part = false;
        atomic_fetch_add_explicit(&pool.done, 1, memory_order_release);
        w = atomic_load_explicit(&pool.claim, memory_order_acquire);
    }
}

static void *worker_main(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint32_t seen = atomic_load_explicit(&pool.generation, memory_order_acquire);
    for (;;) {
        /* spin a little: the next kernel usually comes within microseconds */
        uint32_t gen = atomic_load_explicit(&pool.generation, memory_order_acquire);
        int64_t deadline = 0;
        for (int i = 0; gen == seen; i++) {
            cpu_relax();
            if ((i & 255) == 255) {
                int64_t t = now_ns();
                if (!deadline)
                    deadline = t + spin_ns;
                else if (t > deadline) {
                    atomic_fetch_add_explicit(&pool.sleepers, 1, memory_order_seq_cst);
                    futex_wait(&pool.generation, seen);
                    atomic_fetch_sub_explicit(&pool.sleepers, 1, memory_order_seq_cst);
                    deadline = 0;
                }
            }
            gen = atomic_load_explicit(&pool.generation, memory_order_acquire);
        }
        seen = gen;
        if (id < atomic_load_explicit(&pool.job_threads, memory_order_relaxed)) run_parts(gen, id);
    }
    return NULL;
}

/* In a forked child only the forking thread exists: start workers again when needed. */
static void after_fork_in_child(void)
{
    pool.nworkers = 0;
    atomic_store(&pool.sleepers, 0);
    pthread_mutex_init(&pool.start_mu, NULL);
}

static int default_threads(void)
{
    const char *env = getenv("OMP_NUM_THREADS"); /* torchrun's and the launcher's knob */
    if (env && atoi(env) > 0) return atoi(env);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void init_once(void)
{
    const char *spin = getenv("DDPLUA_SPIN_US");
    if (spin && atoi(spin) >= 0) spin_ns = (int64_t)atoi(spin) * 1000;
    pthread_atfork(NULL, NULL, after_fork_in_child);
    if (pool.nthreads == 0) pool.nthreads = default_threads();
    if (pool.nthreads > MAX_THREADS) pool.nthreads = MAX_THREADS;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

void cpu_threads_set(int n)
{
    pthread_once(&once, init_once);
    pool.nthreads = n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n;
}

int cpu_threads_get(void)
{
    pthread_once(&once, init_once);
    return pool.nthreads;
}

bool cpu_threads_in_parallel(void)
{
    return in_part;
}

/* Starts workers up to nthreads - 1 (they are never stopped; extra ones stay out of jobs). */
static void ensure_workers(int nthreads)
{
    pthread_mutex_lock(&pool.start_mu);
    while (pool.nworkers < nthreads - 1) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int id = pool.nworkers + 1;
        int rc = pthread_create(&t, &attr, worker_main, (void *)(intptr_t)id);
        pthread_attr_destroy(&attr);
        if (rc != 0) break; /* fewer threads: the caller takes their parts */
        pool.nworkers = id;
    }
    pthread_mutex_unlock(&pool.start_mu);
}

void cpu_threads_run(int nparts, void (*fn)(int part, int thread, void *ctx), void *ctx)
{
    if (nparts <= 0) return;
    int nthreads = cpu_threads_get();
    /* callers ask for a few parts per thread; more than the claim word holds run inline */
    if (nparts == 1 || nthreads == 1 || in_part || nparts > MAX_PARTS) {
        bool outer = in_part;
        in_part = true;
        for (int p = 0; p < nparts; p++) fn(p, 0, ctx);
        in_part = outer;
        return;
    }
    if (pool.nworkers < nthreads - 1) ensure_workers(nthreads);

    uint32_t gen = atomic_load_explicit(&pool.generation, memory_order_relaxed) + 1;
    pool.fn = fn;
    pool.ctx = ctx;
    atomic_store_explicit(&pool.job_threads, nthreads, memory_order_relaxed);
    atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
    atomic_store_explicit(&pool.claim, (uint64_t)gen << 32 | (uint64_t)nparts << 16,
                          memory_order_release);
    atomic_store_explicit(&pool.generation, gen, memory_order_seq_cst);
    if (atomic_load_explicit(&pool.sleepers, memory_order_seq_cst) > 0)
        futex_wake_all(&pool.generation);

    run_parts(gen, 0);
    /* parts claimed by other threads: they are running, wait for them */
    for (int i = 0; atomic_load_explicit(&pool.done, memory_order_acquire) < nparts; i++) {
        if (i < 4096)
            cpu_relax();
        else
            sched_yield(); /* the claimer was preempted: let it run */
    }
}
