/* distributed/gang.h: a gang of child processes that stand or fall together, torchrun's rule:
 * the first member to fail on its own is the gang's failure, and the others are stopped (a
 * signal now, SIGKILL after a grace period) and reaped. The one supervisor of the engine: the
 * launcher (cli/launch.c: the workers of `ddplua script.lua --nproc N`) and
 * ddpl.multiprocessing.spawn (lua/bind_process.c, lua/ddplua/multiprocessing.lua) both keep
 * their children in a gang, so they stop, wait and report alike.
 * defines: ddpl_gang and its calls, DDPL_GANG_GRACE_S, ddpl_exit_text.
 *
 * Nothing here blocks or owns a loop: each caller waits in its own (the launcher in poll with
 * its output pipes and signals, spawn in Lua, which a Ctrl-C must be able to interrupt) and
 * calls ddpl_gang_reap and ddpl_gang_enforce from it. Members are reaped by pid, never with
 * waitpid(-1): a Lua process has other children (DataLoader workers) that are not the gang's. */
#ifndef DDPL_DIST_GANG_H
#define DDPL_DIST_GANG_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Seconds between the stop signal and SIGKILL. */
#define DDPL_GANG_GRACE_S 5.0

typedef struct ddpl_gang_member {
    pid_t pid;
    int rank;   /* the caller's name for it: a global rank, a spawn index */
    bool alive; /* started and not yet reaped */
    int status; /* waitpid's status, once reaped */
} ddpl_gang_member;

typedef struct ddpl_gang {
    ddpl_gang_member *m;
    int n, cap, alive;
    int failed;     /* index of the first member that failed on its own, -1 while none did */
    bool to_groups; /* signals go to each member's process group (members that lead one) */
    double kill_at; /* when members still alive get SIGKILL; < 0 while not stopping */
    bool killed;    /* SIGKILL was sent */
} ddpl_gang;

/* An empty gang with room for cap members; -1 with the error set when out of memory. */
int ddpl_gang_init(ddpl_gang *g, int cap, bool to_groups);
void ddpl_gang_free(ddpl_gang *g);
/* Forgets every member (a new generation of the same size); the memory stays. */
void ddpl_gang_clear(ddpl_gang *g);
/* Adds a started child; returns its index. At most cap members. */
int ddpl_gang_add(ddpl_gang *g, pid_t pid, int rank);

/* Reaps the members that have ended (never blocks). A member that failed (a non-zero exit or a
 * signal) before the gang was being stopped becomes the gang's failure and the others are
 * stopped with SIGTERM. Returns the index of that member when it happened in this call, else
 * -1. */
int ddpl_gang_reap(ddpl_gang *g);
/* Sends sig to every member still alive. */
void ddpl_gang_signal(ddpl_gang *g, int sig);
/* Starts stopping the gang: sig now, SIGKILL once the grace period is over (ddpl_gang_enforce).
 * A second call while stopping does nothing. */
void ddpl_gang_stop(ddpl_gang *g, int sig);
/* Whether the grace period is over with members still alive (call ddpl_gang_enforce then). */
bool ddpl_gang_overdue(const ddpl_gang *g);
/* SIGKILLs every member still alive and remembers it. */
void ddpl_gang_enforce(ddpl_gang *g);
/* Seconds until the caller should look again (the grace deadline), or `idle` when nothing is
 * due sooner. */
double ddpl_gang_wait_s(const ddpl_gang *g, double idle);
/* The command's exit status for a member's waitpid status: its exit code, or 128 + signal. */
int ddpl_gang_exit_code(int status);

/* How a process ended, for messages: "failed with exit code 3", "was killed by signal SIGSEGV",
 * "exited normally". */
const char *ddpl_exit_text(int status, char *buf, size_t n);

#endif
