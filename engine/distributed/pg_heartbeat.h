/* distributed/pg_heartbeat.h: the heartbeat of a CPU process group (backend gloo, over Gloo or
 * shared memory): each rank shows it is alive, and a collective that waits names a peer that is
 * not. defines: pg_heartbeat, pg_heartbeat_start, pg_heartbeat_stop, pg_heartbeat_fault,
 *          pg_heartbeat_explain, pg_heartbeat_limit, pg_heartbeat_declare. Internal to
 * engine/distributed (docs/internals/fault-detection.md).
 *
 * A thread of its own beats every limit/10 s (at most 5 s), whatever the rank's main thread
 * does, so a rank that computes for minutes between collectives is never reported; one that is
 * stopped (SIGSTOP, a debugger), killed or frozen stops beating. Where the beat goes:
 *   shared memory: the group's segment (ddpl_shm_beat), which the barriers check themselves;
 *   Gloo:          a counter in the store (key pg<id>/hb/<rank>, through a store client of its
 *                  own), which this thread reads for every peer, noting when each last changed;
 *                  when the store cannot be read for longer than the limit, only its host
 *                  (global rank 0, when the operation waits for it) is named.
 * While an operation waits for a peer (a collective for every peer, a send or receive for its
 * own), that peer silent for longer than the limit is a fault: the thread records the message
 * ("rank 1 (pid 4242, host h) stopped responding: no heartbeat for 3.1 s (limit 3 s); the process
 * is stopped (SIGSTOP or a debugger)"), publishes it in the store (key pg<id>/hb/fault, so ranks
 * that only see the connections close report the same cause) and aborts the group's Gloo pairs, so
 * what waits on them returns at once. */
#ifndef DDPL_DIST_PG_HEARTBEAT_H
#define DDPL_DIST_PG_HEARTBEAT_H

#include "distributed/pg_host.h"

typedef struct pg_heartbeat pg_heartbeat;

/* The heartbeat limit for a configured value (ddpl_pg_config's heartbeat_s): > 0 as given; 0
 * the default (DDPLUA_HEARTBEAT_TIMEOUT, else 30 s); < 0 none (returns 0). */
PG_HIDDEN double pg_heartbeat_limit(double cfg_s);
/* Starts the heartbeat of pg (connected, lanes started: pg->impl is its pg_host) with the limit
 * pg_heartbeat_limit(pg->heartbeat_s); keys go under prefix ("pg<id>/"). NULL when there is no
 * limit or the group has one rank (no error); NULL with the error set when the thread cannot
 * start. */
PG_HIDDEN pg_heartbeat *pg_heartbeat_start(ddpl_pg *pg, const char *prefix);
/* Stops and joins the thread (within one beat); NULL is fine. Before the transport is freed. */
PG_HIDDEN void pg_heartbeat_stop(pg_heartbeat *hb);
/* The fault behind a failed operation, when there is one: this rank's, else the one another
 * rank published; copied into out (n bytes) and true. False (out untouched) when none is known
 * or hb is NULL. */
PG_HIDDEN bool pg_heartbeat_fault(pg_heartbeat *hb, char *out, size_t n);
/* The fault behind a failure whose message is failed: pg_heartbeat_fault's, waiting a little
 * (up to 0.5 s) for one when a peer closed its connection, since that peer most often saw a fault
 * and left, and its publication may still be on its way; false (out untouched) if none. */
PG_HIDDEN bool pg_heartbeat_explain(pg_heartbeat *hb, const char *failed, char *out, size_t n);
/* A fault found outside the thread (the hierarchy's node lost a rank): recorded, published and
 * the pairs aborted, as the thread does with the ones it finds. NULL hb: nothing. */
PG_HIDDEN void pg_heartbeat_declare(pg_heartbeat *hb, const char *msg);

#endif
