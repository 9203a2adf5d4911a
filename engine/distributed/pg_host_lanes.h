/* distributed/pg_host_lanes.h: the lanes of the host backend (backend gloo): FIFO queues of work
 * items, each with a thread that runs them in issue order (distributed/pg_host_lanes.c). defines:
 * host_lane, host_lanes, host_lanes_start, host_lanes_stop, host_lanes_free, host_lane_push,
 *          host_lanes_work_wait, host_lanes_work_poll, host_lanes_wait_follows.
 *          Internal to engine/distributed.
 *
 * A group has three lanes: the collective lane runs collectives one by one (so every rank runs
 * them in issue order); the send and receive lanes complete point-to-point messages that were
 * posted to Gloo when they were issued. Sends and receives wait on separate lanes: a send
 * completes only once the peer's receive lane has posted the payload, which must not queue
 * behind our own sends (deadlock). A work item holds references to its tensors until it
 * completes. */
#ifndef DDPL_DIST_PG_HOST_LANES_H
#define DDPL_DIST_PG_HOST_LANES_H

#include "distributed/pg_impl.h"

/* A FIFO of work and the thread that runs it. busy: an item is running, on the lane's thread or
 * on a caller that took the head item to run it itself (host_lanes_work_wait): nobody else may
 * start one meanwhile, so items still run one at a time in issue order. */
typedef struct host_lane {
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ddpl_work *head, *tail;
    bool busy;
    bool stop;
} host_lane;

typedef struct host_lanes {
    host_lane coll, send, recv;
    /* what runs now, for the heartbeat (distributed/pg_heartbeat.h): collectives, which wait for
     * every peer, and sends and receives per peer (size entries, by group rank) */
    atomic_int coll_running;
    atomic_int *p2p_running;
    bool quiet_next; /* ddpl_pg_wait_follows: the next work item is queued quietly */
} host_lanes;

/* Starts the threads of pg's lanes (pg's host backend state holds them). 0, or -1 with the
 * error set (what started is left for host_lanes_stop). */
PG_HIDDEN int host_lanes_start(ddpl_pg *pg, host_lanes *l);
/* Lets each lane finish its queue (each bounded by wait_s), then joins it; false when one is
 * still busy after that (an operation stuck on a peer that is gone), its thread left running. */
PG_HIDDEN bool host_lanes_stop(host_lanes *l, double wait_s);
/* Frees what host_lanes_start allocated, once the lanes are stopped and nothing reads their
 * counters (the heartbeat stopped). */
PG_HIDDEN void host_lanes_free(host_lanes *l);
/* Queues w on ln (the lane takes its own reference) and returns w to the caller. */
PG_HIDDEN ddpl_work *host_lane_push(host_lane *ln, ddpl_work *w);
/* The backend's work_wait, work_poll and wait_follows entries (pg_backend.h). */
PG_HIDDEN int host_lanes_work_wait(ddpl_work *w, double timeout_s);
PG_HIDDEN void host_lanes_work_poll(ddpl_work *w);
PG_HIDDEN void host_lanes_wait_follows(ddpl_pg *pg);

#endif
