/* spec/c/test_threads.c: the CPU thread pool (cpu/cpu_threads.h): every part runs exactly
 * once, thread ids stay below the thread count, jobs of every size follow each other without
 * mixing (a late worker must never run a part of the next job), nested calls run inline, the
 * pool survives thread-count changes and fork(), and workers that went to sleep wake up.
 * Nested calls are jobs of their own: their parts see thread 0 (per-job scratch indexing). */
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "cpu/cpu_threads.h"

enum { MAX_PARTS_TESTED = 512 };

typedef struct {
    int job;                            /* which job these parts belong to */
    _Atomic int runs[MAX_PARTS_TESTED]; /* times each part ran */
    _Atomic int wrong_job;              /* parts that saw another job's context */
    _Atomic int bad_thread;             /* thread ids out of range */
    int nthreads;
    _Atomic int *current_job;
} job_ctx;

static void count_part(int part, int thread, void *p)
{
    job_ctx *c = p;
    if (atomic_load(c->current_job) != c->job) atomic_fetch_add(&c->wrong_job, 1);
    if (thread < 0 || thread >= c->nthreads) atomic_fetch_add(&c->bad_thread, 1);
    atomic_fetch_add(&c->runs[part], 1);
    if (part % 7 == 0) /* uneven parts, so threads finish at different times */
        for (volatile int i = 0; i < 2000; i++) {
        }
}

/* Runs `jobs` consecutive jobs of varying part counts; returns 1 when all were exact. */
static int run_jobs(int jobs, int nthreads)
{
    static _Atomic int current;
    int ok = 1;
    for (int j = 0; j < jobs; j++) {
        job_ctx *c = calloc(1, sizeof *c);
        c->job = j;
        c->nthreads = nthreads;
        c->current_job = &current;
        atomic_store(&current, j);
        int nparts = 1 + (j * 37) % MAX_PARTS_TESTED;
        cpu_threads_run(nparts, count_part, c);
        atomic_store(&current, -1); /* a part running after return would see this */
        for (int p = 0; p < MAX_PARTS_TESTED; p++) {
            int want = p < nparts ? 1 : 0;
            if (atomic_load(&c->runs[p]) != want) {
                fprintf(stderr, "  job %d: part %d ran %d times (want %d)\n", j, p,
                        atomic_load(&c->runs[p]), want);
                ok = 0;
                break;
            }
        }
        if (atomic_load(&c->wrong_job) || atomic_load(&c->bad_thread)) {
            fprintf(stderr, "  job %d: %d parts saw another job, %d bad thread ids\n", j,
                    atomic_load(&c->wrong_job), atomic_load(&c->bad_thread));
            ok = 0;
        }
        /* poison the context: a straggler touching it later would be caught by runs[] of
         * the next job only if it reused it, so keep the memory valid but marked */
        c->job = -2;
        free(c);
        if (!ok) break;
    }
    return ok;
}

static _Atomic int nested_outer, nested_inner;

static void inner_part(int part, int thread, void *p)
{
    (void)part;
    (void)p;
    if (!cpu_threads_in_parallel()) fprintf(stderr, "  inner part not marked parallel\n");
    atomic_fetch_add(&nested_inner, 1 + 1000 * (thread != 0)); /* a job of its own: thread 0 */
}

static void outer_part(int part, int thread, void *p)
{
    (void)part;
    (void)p;
    atomic_fetch_add(&nested_outer, 1);
    (void)thread;
    cpu_threads_run(3, inner_part, NULL); /* inline, on this thread */
}

int main(void)
{
    cpu_threads_set(4);
    CHECK(cpu_threads_get() == 4);
    CHECK(!cpu_threads_in_parallel());
    CHECK(run_jobs(2000, 4));

    /* nested: 5 outer parts, each running 3 inner parts inline on its own thread */
    cpu_threads_run(5, outer_part, NULL);
    CHECK(atomic_load(&nested_outer) == 5);
    CHECK(atomic_load(&nested_inner) == 15);

    /* fewer threads: ids must stay below the new count */
    cpu_threads_set(2);
    CHECK(run_jobs(500, 2));
    cpu_threads_set(1);
    CHECK(run_jobs(50, 1));

    /* workers asleep past the spin window wake for the next job */
    cpu_threads_set(3);
    CHECK(run_jobs(5, 3));
    usleep(300 * 1000);
    CHECK(run_jobs(200, 3));

    /* a forked child has no workers: the pool must start new ones, not wait for ghosts */
    pid_t pid = fork();
    if (pid == 0) _exit(run_jobs(300, 3) ? 0 : 1);
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
          WEXITSTATUS(status) == 0);
    CHECK(run_jobs(100, 3));
    return check_finish();
}
