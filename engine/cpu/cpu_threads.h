/* cpu/cpu_threads.h: the engine's own CPU thread pool, behind every parallel CPU kernel.
 * defines: cpu_threads_run, cpu_threads_set, cpu_threads_get, cpu_threads_in_parallel.
 *
 * Why not OpenMP: a training step is dozens of short kernels separated by microseconds of Lua.
 * libgomp either spins its idle threads for a long while (fast when the machine is idle, but a
 * spinning thread steals the core the busy one needs as soon as anything else runs, and a
 * preempted thread stalls every fork-join barrier for a scheduler tick: 2-thread training fell
 * to a tenth of 1-thread speed on our 2-core machines) or sleeps them (OMP_WAIT_POLICY=passive:
 * a futex wake-up per kernel). This pool spins briefly (DDPLUA_SPIN_US, default 100 us: the gap
 * between kernels of one step), then sleeps; and its parts are claimed dynamically, so a thread
 * that is late or preempted never holds up the others: the caller takes the parts nobody has
 * claimed. Only a part already claimed is waited for. */
#ifndef DDPL_CPU_THREADS_H
#define DDPL_CPU_THREADS_H

#include <stdbool.h>

/* Parts per thread that the parallel loops (cpu_parallel_for, cpu_blas_parallel_for) aim for:
 * a thread that finishes its parts waits only for the parts the others have claimed, so the
 * last part's length is what a job loses to imbalance and to a worker that starts late (its
 * wake-up). Two parts per thread left the caller of the lenet's convolution and pooling jobs
 * waiting 5-8% of their time at 2 threads; a part costs a compare-and-swap (tens of ns). */
#define CPU_PARTS_PER_THREAD 8

/* Runs fn(part, thread, ctx) for every part in [0, nparts), on up to cpu_threads_get()
 * threads; the caller is thread 0 and takes part too; thread < cpu_threads_get() (for
 * per-thread scratch). Parts may run in any order and on any thread. Returns when all are done.
 * Called from inside a part, it runs every part inline on the calling thread. */
void cpu_threads_run(int nparts, void (*fn)(int part, int thread, void *ctx), void *ctx);
/* Threads used by cpu_threads_run, the caller included (n >= 1). Workers start lazily. */
void cpu_threads_set(int n);
int cpu_threads_get(void);
/* True inside a part run by cpu_threads_run (on any thread). */
bool cpu_threads_in_parallel(void);

#endif
