/* distributed/peer_fault.c: naming the peer behind a fault (see peer_fault.h).
 * defines: peer_label, peer_is_local, peer_gone, peer_silent_msg. */
#define _GNU_SOURCE
#include "distributed/peer_fault.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void peer_label(char *out, size_t n, int rank, int pid, const char *host)
{
    bool has_host = host && *host;
    if (pid > 0 && has_host)
        snprintf(out, n, "rank %d (pid %d, host %s)", rank, pid, host);
    else if (pid > 0)
        snprintf(out, n, "rank %d (pid %d)", rank, pid);
    else
        snprintf(out, n, "rank %d", rank);
}

bool peer_is_local(const char *host)
{
    if (!host || !*host) return true;
    char me[256] = "";
    if (gethostname(me, sizeof me - 1) < 0) return false;
    return strcmp(me, host) == 0;
}

/* The state letter of /proc/<pid>/stat ('R', 'S', 'T', 'Z', ...), or 0 when it cannot be read
 * (gone, or another pid namespace). The command name in parentheses may hold spaces: the state
 * follows the last ')'. */
static char proc_state(int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = '\0';
    char *close = strrchr(buf, ')');
    return close && close[1] == ' ' ? close[2] : 0;
}

bool peer_gone(int pid, const char *host)
{
    if (pid <= 0 || !peer_is_local(host)) return false;
    if (kill(pid, 0) < 0 && errno == ESRCH) return true;
    char st = proc_state(pid); /* a zombie has exited; only its parent has not reaped it yet */
    return st == 'Z' || st == 'X';
}

void peer_silent_msg(char *out, size_t n, const char *label, int pid, const char *host,
                     double silent_s, double limit_s)
{
    const char *what = "on another machine: stopped, hung, or its network is down";
    if (pid > 0 && peer_is_local(host)) {
        char st = proc_state(pid);
        if (peer_gone(pid, host))
            what = "the process has exited";
        else if (st == 'T' || st == 't')
            what = "the process is stopped (SIGSTOP or a debugger)";
        else if (st)
            what = "the process is alive but its heartbeat thread does not run (hung?)";
    }
    snprintf(out, n, "%s stopped responding: no heartbeat for %.1f s (limit %g s); %s", label,
             silent_s, limit_s, what);
}
