/* cuemu/nccl/nccl_standin_wait.c: how a rank of the NCCL stand-in waits for its peers: doorbells
 * (futexes in the segment), the collective step barrier, and the checks that end a wait that
 * cannot succeed (abort, a failed, departed or dead peer, the timeout).
 * defines: standin_wait, standin_ring, standin_barrier, standin_pid_gone,
 *          standin_self_start_time, standin_now (nccl_standin.h).
 *
 * A wait polls its condition a few hundred times (only when the ranks do not outnumber the
 * CPUs: otherwise the peer it waits for may need the very core it spins on), then sleeps on its
 * rank's doorbell, a futex word in the shared segment that every change a rank may wait for
 * bumps (a peer's arrival, data in or room in a mailbox, a peer's failure, an abort). The
 * doorbell is read before the condition, so a change between the two makes FUTEX_WAIT return at
 * once: no wake-up is lost. Sleeps last at most 20 ms (a group spanning several communicators
 * sleeps on one doorbell only, and the checks below need a pulse). Between sleeps:
 *   - this communicator is being aborted (ncclCommAbort, maybe from another thread):
 *     ncclSystemError at once;
 *   - a watched peer's slot says FAILED, ABORTED or LEFT, or (every 100 ms) its process has
 *     exited, is a zombie, or its pid now belongs to another process (start time differs):
 *     ncclRemoteError, after one more look at the condition (a peer may finish its part, e.g.
 *     a send, and leave; that is not an error);
 *   - nothing moved for DDPL_CUEMU_NCCL_TIMEOUT seconds (default 300): ncclSystemError, naming
 *     the ranks that did not come.
 * Real NCCL has no such timeout (a missing peer hangs its kernel until the communicator is
 * aborted); the stand-in's exists so that an emulated test fails instead of hanging CI. */
#include "nccl_standin.h"

#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SLEEP_NS    20000000L /* longest sleep on a doorbell */
#define PID_CHECK_S 0.1       /* how often a waiting rank asks /proc about its peers */

double standin_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Shared (not FUTEX_PRIVATE): the word is in memory mapped by several processes. */
static void futex_wait(_Atomic uint32_t *word, uint32_t seen, long ns)
{
    struct timespec ts = {0, ns};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, seen, &ts, NULL, 0);
}

void standin_ring(ncclComm_t comm, int r)
{
    _Atomic uint32_t *bell = &comm->seg->ranks[r].doorbell;
    atomic_fetch_add(bell, 1);
    syscall(SYS_futex, (uint32_t *)bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* ------------------------------------------------------------------ processes ---- */
/* From /proc/<pid>/stat: the state letter and field 22 (start time, clock ticks since boot).
 * 0, or -1 when the file cannot be read (ENOENT: no such process). The command name (field 2)
 * may hold spaces and parentheses, so fields are counted from the last ')'. */
static int proc_stat(const char *path, char *state, uint64_t *start)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p) return -1;
    unsigned long long st = 0;
    /* after ')': state (field 3), then fields 4..21 skipped, then field 22 */
    if (sscanf(p + 1,
               " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
               "%*s %llu",
               state, &st) != 2)
        return -1;
    *start = st;
    return 0;
}

uint64_t standin_self_start_time(void)
{
    char state;
    uint64_t start = 0;
    return proc_stat("/proc/self/stat", &state, &start) == 0 ? start : 0;
}

bool standin_pid_gone(int pid, uint64_t start_time)
{
    if (pid <= 0) return false;
    if (kill(pid, 0) < 0 && errno == ESRCH) return true;
    char path[64], state = '?';
    uint64_t start = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (proc_stat(path, &state, &start) < 0) return errno == ENOENT;
    /* a zombie has exited (its parent has not reaped it yet): it will never come */
    if (state == 'Z' || state == 'X') return true;
    return start_time != 0 && start != start_time;
}

/* ----------------------------------------------------------------------- waits ---- */
/* Why a watched peer cannot take part any more, into why (0 when none can be named); *who is
 * the communicator it belongs to. */
static int peer_trouble(const standin_watch *watch, int nwatch, bool ask_proc, char *why, size_t n,
                        ncclComm_t *who)
{
    for (int i = 0; i < nwatch; i++) {
        ncclComm_t c = watch[i].comm;
        for (int q = 0; q < c->nranks; q++) {
            if (q == c->rank || !(watch[i].peers >> q & 1u)) continue;
            const standin_rank_slot *s = &c->seg->ranks[q];
            uint32_t st = atomic_load(&s->state);
            int pid = __atomic_load_n(&s->pid, __ATOMIC_SEQ_CST);
            const char *what = NULL;
            if (st == STANDIN_RANK_FAILED)
                what = "failed (an error broke its communicator; its own message says why)";
            else if (st == STANDIN_RANK_ABORTED)
                what = "aborted its communicator (ncclCommAbort)";
            else if (st == STANDIN_RANK_LEFT)
                what = "destroyed its communicator (ncclCommDestroy) before this call completed";
            else if (st == STANDIN_RANK_JOINED && ask_proc && pid != (int)getpid() &&
                     standin_pid_gone(pid, s->start_time))
                what = "exited (its process is gone or a zombie)";
            if (what) {
                snprintf(why, n, "rank %d (pid %d) %s", q, pid, what);
                *who = c;
                return 1;
            }
        }
    }
    return 0;
}

ncclResult_t standin_wait(const standin_waiter *w, const standin_watch *watch, int nwatch)
{
    ncclComm_t c0 = watch[0].comm;
    _Atomic uint32_t *bell = &c0->seg->ranks[c0->rank].doorbell;
    double idle_since = standin_now(), next_proc = idle_since + PID_CHECK_S;
    int spins = 0;
    for (;;) {
        uint32_t seen = atomic_load(bell);
        ncclResult_t err = ncclSuccess;
        int s = w->step(w->arg, &err);
        if (s == STANDIN_DONE) return ncclSuccess;
        if (s == STANDIN_FAILED) return err;
        for (int i = 0; i < nwatch; i++)
            if (atomic_load(&watch[i].comm->aborting))
                return standin_fail(watch[i].comm, ncclSystemError,
                                    "%s: the communicator was aborted (ncclCommAbort) while this "
                                    "rank waited",
                                    w->what);
        if (s == STANDIN_MOVED) {
            spins = 0;
            idle_since = -1.0; /* read the clock again only once idle */
            continue;
        }
        double now = standin_now();
        if (idle_since < 0) idle_since = now;
        bool ask_proc = now >= next_proc;
        if (ask_proc) next_proc = now + PID_CHECK_S;
        char why[256];
        ncclComm_t who = c0;
        if (peer_trouble(watch, nwatch, ask_proc, why, sizeof why, &who)) {
            s = w->step(w->arg, &err); /* what the peer did before it went may be enough */
            if (s == STANDIN_DONE) return ncclSuccess;
            if (s == STANDIN_FAILED) return err;
            if (s == STANDIN_MOVED) continue;
            return standin_break(who, ncclRemoteError, "%s: %s", w->what, why);
        }
        if (now - idle_since > c0->timeout_s) {
            char pending[256] = "";
            if (w->pending) w->pending(w->arg, pending, sizeof pending);
            return standin_break(c0, ncclSystemError,
                                 "%s: nothing moved for %g s (DDPL_CUEMU_NCCL_TIMEOUT); %s",
                                 w->what, c0->timeout_s, pending);
        }
        if (spins < c0->spin) {
            spins++;
            cpu_relax();
            continue;
        }
        futex_wait(bell, seen, SLEEP_NS);
    }
}

/* ------------------------------------------------------------------- the barrier ---- */
typedef struct barrier_wait {
    ncclComm_t comm;
    uint64_t target; /* every rank's epoch must reach it */
} barrier_wait;

/* Done once every rank has arrived, unless one of them has aborted since: its arrival may have
 * been at a call it then gave up (an abort from another thread), and what it staged is not to
 * be trusted. (A peer that failed is the caller's to judge, after comparing the steps: it may
 * have failed because the steps differ. One that left with ncclCommDestroy finished its
 * part.) */
static int barrier_step(void *arg, ncclResult_t *err)
{
    barrier_wait *b = arg;
    ncclComm_t c = b->comm;
    for (int q = 0; q < c->nranks; q++)
        if (atomic_load(&c->seg->ranks[q].epoch) < b->target) return STANDIN_IDLE;
    for (int q = 0; q < c->nranks; q++) {
        if (q == c->rank || atomic_load(&c->seg->ranks[q].state) != STANDIN_RANK_ABORTED) continue;
        *err = standin_break(c, ncclRemoteError, "step %llu: rank %d aborted its communicator",
                             (unsigned long long)b->target, q);
        return STANDIN_FAILED;
    }
    return STANDIN_DONE;
}

static void barrier_pending(void *arg, char *buf, size_t n)
{
    barrier_wait *b = arg;
    size_t used = (size_t)snprintf(
        buf, n, "ranks that did not reach step %llu:", (unsigned long long)b->target);
    for (int q = 0; q < b->comm->nranks && used < n; q++)
        if (atomic_load(&b->comm->seg->ranks[q].epoch) < b->target)
            used += (size_t)snprintf(buf + used, n - used, " %d", q);
}

/* Arrive, then wait for all. Whoever sees every rank arrived after its own arrival rings the
 * others: the stores and loads are sequentially consistent, so of two ranks arriving together
 * at least one sees the other, and the last to arrive always sees everyone. */
ncclResult_t standin_barrier(ncclComm_t comm, const char *what)
{
    barrier_wait b = {comm, ++comm->epoch};
    atomic_store(&comm->seg->ranks[comm->rank].epoch, b.target);
    ncclResult_t err = ncclSuccess;
    int s = barrier_step(&b, &err);
    if (s != STANDIN_IDLE) {
        for (int q = 0; q < comm->nranks; q++)
            if (q != comm->rank) standin_ring(comm, q);
        return s == STANDIN_DONE ? ncclSuccess : err;
    }
    standin_waiter w = {barrier_step, barrier_pending, &b, what};
    standin_watch watch = {comm, ~0ull};
    return standin_wait(&w, &watch, 1);
}
