/* distributed/peer_fault.h: how a fault names the peer behind it, shared by the shared-memory path
 * (shm_coll.c), the Gloo wrapper (gloo_pg.cpp) and the heartbeat (pg_heartbeat.c).
 * defines: peer_label, peer_is_local, peer_gone, peer_silent_msg. Internal to engine/distributed;
 * plain C types only, so the one C++ file can include it.
 *
 * A peer is named by its global rank, its pid and its host ("rank 1 (pid 4242, host node3)").
 * On this machine (the peer's host is ours) /proc tells whether the process is gone, stopped
 * (SIGSTOP, a debugger) or alive; elsewhere only the heartbeat's silence is known. */
#ifndef DDPL_DIST_PEER_FAULT_H
#define DDPL_DIST_PEER_FAULT_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "rank R (pid P, host H)"; pid <= 0 or host NULL/"" leave their part out. */
void peer_label(char *out, size_t n, int rank, int pid, const char *host);
/* Whether host names this machine (NULL or "" count as this machine). */
bool peer_is_local(const char *host);
/* Whether the process pid on host is known to have exited (gone, or a zombie): only on this
 * machine (host NULL or this machine's name), else false. */
bool peer_gone(int pid, const char *host);
/* "<label> stopped responding: no heartbeat for S s (limit L s); <what /proc says>" where what
 * /proc says is "the process is stopped (SIGSTOP or a debugger)", "the process has exited",
 * "the process is alive but its heartbeat thread does not run (hung?)", or for a peer on
 * another machine "on another machine: stopped, hung, or its network is down". */
void peer_silent_msg(char *out, size_t n, const char *label, int pid, const char *host,
                     double silent_s, double limit_s);

#ifdef __cplusplus
}
#endif
#endif
