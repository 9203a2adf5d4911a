/* distributed/gang.c: child processes that stand or fall together (gang.h).
 * defines: ddpl_gang_*, ddpl_exit_text. */
#define _GNU_SOURCE /* sigabbrev_np */
#include "gang.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "ddpl/tensor.h" /* ddpl_error */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int ddpl_gang_init(ddpl_gang *g, int cap, bool to_groups)
{
    *g = (ddpl_gang){.cap = cap, .failed = -1, .to_groups = to_groups, .kill_at = -1};
    if (cap > 0 && !(g->m = calloc((size_t)cap, sizeof *g->m)))
        return ddpl_error("gang: out of memory for %d processes", cap);
    return 0;
}

void ddpl_gang_free(ddpl_gang *g)
{
    free(g->m);
    g->m = NULL;
    g->n = g->cap = g->alive = 0;
}

void ddpl_gang_clear(ddpl_gang *g)
{
    g->n = g->alive = 0;
    g->failed = -1;
    g->kill_at = -1;
    g->killed = false;
}

int ddpl_gang_add(ddpl_gang *g, pid_t pid, int rank)
{
    if (g->n == g->cap) return ddpl_error("gang: more than %d processes", g->cap);
    g->m[g->n] = (ddpl_gang_member){.pid = pid, .rank = rank, .alive = true};
    g->alive++;
    return g->n++;
}

static void signal_member(const ddpl_gang *g, const ddpl_gang_member *m, int sig)
{
    kill(g->to_groups ? -m->pid : m->pid, sig);
}

void ddpl_gang_signal(ddpl_gang *g, int sig)
{
    for (int i = 0; i < g->n; i++)
        if (g->m[i].alive) signal_member(g, &g->m[i], sig);
}

void ddpl_gang_stop(ddpl_gang *g, int sig)
{
    if (g->kill_at >= 0) return;
    ddpl_gang_signal(g, sig);
    g->kill_at = now_s() + DDPL_GANG_GRACE_S;
}

int ddpl_gang_reap(ddpl_gang *g)
{
    int first = -1;
    for (int i = 0; i < g->n; i++) {
        ddpl_gang_member *m = &g->m[i];
        if (!m->alive) continue;
        int st;
        pid_t r;
        do r = waitpid(m->pid, &st, WNOHANG);
        while (r < 0 && errno == EINTR);
        if (r == 0) continue;
        if (r < 0) st = 1 << 8; /* reaped by someone else: it cannot be watched, count it failed */
        m->alive = false;
        m->status = st;
        g->alive--;
        bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        /* members that end because the gang was stopped are not failures of their own */
        if (!ok && g->failed < 0 && g->kill_at < 0) {
            g->failed = first = i;
            ddpl_gang_stop(g, SIGTERM);
            return first; /* the others are reaped by later calls: its report counts them */
        }
    }
    return first;
}

bool ddpl_gang_overdue(const ddpl_gang *g)
{
    return g->alive > 0 && g->kill_at >= 0 && !g->killed && now_s() >= g->kill_at;
}

void ddpl_gang_enforce(ddpl_gang *g)
{
    ddpl_gang_signal(g, SIGKILL);
    g->killed = true;
}

double ddpl_gang_wait_s(const ddpl_gang *g, double idle)
{
    if (g->kill_at < 0 || g->killed) return idle;
    double left = g->kill_at - now_s();
    return left < 0 ? 0 : left < idle ? left : idle;
}

int ddpl_gang_exit_code(int status)
{
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

const char *ddpl_exit_text(int status, char *buf, size_t n)
{
    if (WIFSIGNALED(status)) {
        const char *abbrev = sigabbrev_np(WTERMSIG(status));
        if (abbrev)
            snprintf(buf, n, "was killed by signal SIG%s", abbrev);
        else
            snprintf(buf, n, "was killed by signal %d", WTERMSIG(status));
    } else if (WEXITSTATUS(status) != 0) {
        snprintf(buf, n, "failed with exit code %d", WEXITSTATUS(status));
    } else {
        snprintf(buf, n, "exited normally");
    }
    return buf;
}
