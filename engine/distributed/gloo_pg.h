/* distributed/gloo_pg.h: the C face of the Gloo backend (engine/distributed/gloo_pg.cpp, the only
 * C++ file). defines: ddpl_gloo, ddpl_reduce_fn, ddpl_gloo_connect/free, the collectives on raw
 * buffers (allreduce, broadcast, allgather, barrier, reduce, gather, scatter, alltoallv),
 *          point-to-point send/recv handles, peer names and abort (faults).
 *
 * Everything here works on contiguous host bytes; dtypes, shapes, staging copies and threads are
 * the business of the host backend of process groups (pg_host.c). Every int-returning call gives 0
 * or -1 with ddpl_error set (Gloo's exceptions are caught and turned into messages); none blocks
 * past the timeout given at connect. */
#ifndef DDPL_DIST_GLOO_PG_H
#define DDPL_DIST_GLOO_PG_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* store.h includes core.h, whose C11 atomics C++ cannot parse: only the name is needed here. */
typedef struct ddpl_store ddpl_store;
typedef struct ddpl_gloo ddpl_gloo;
typedef struct ddpl_gloo_p2p ddpl_gloo_p2p;

/* out[i] = a[i] (op) b[i] for n elements; out may alias a or b (Gloo's reduction signature). */
typedef void (*ddpl_reduce_fn)(void *out, const void *a, const void *b, size_t n);

/* Rendezvous through `store` (keys under `prefix`) and a full mesh of TCP pairs. bind_host is the
 * local address to listen on (the one that routes to the master). timeout_s bounds the rendezvous
 * and every later operation. */
ddpl_gloo *ddpl_gloo_connect(ddpl_store *store, const char *prefix, int rank, int size,
                             const char *bind_host, double timeout_s);
void ddpl_gloo_free(ddpl_gloo *g);

/* In place on data (count elements of elsize bytes: 1, 2, 4 or 8). */
int ddpl_gloo_allreduce(ddpl_gloo *g, void *data, size_t count, size_t elsize, ddpl_reduce_fn fn);
int ddpl_gloo_broadcast(ddpl_gloo *g, void *data, size_t nbytes, int root);
/* out holds size * nbytes: rank r's `in` lands at out + r * nbytes. */
int ddpl_gloo_allgather(ddpl_gloo *g, const void *in, void *out, size_t nbytes);
int ddpl_gloo_barrier(ddpl_gloo *g);
/* count elements of every rank's `in` reduced into `out` on root; elsewhere out is scratch that
 * Gloo's ring leaves partly written (in is only read). in == out for in place. */
int ddpl_gloo_reduce(ddpl_gloo *g, const void *in, void *out, size_t count, size_t elsize,
                     ddpl_reduce_fn fn, int root);
/* out (root only; size * nbytes) receives rank r's `in` at out + r * nbytes. */
int ddpl_gloo_gather(ddpl_gloo *g, const void *in, void *out, size_t nbytes, int root);
/* in (root only; size * nbytes): rank r's `out` receives in + r * nbytes. */
int ddpl_gloo_scatter(ddpl_gloo *g, const void *in, void *out, size_t nbytes, int root);
/* in_bytes[q] bytes of in (consecutive, in rank order) go to rank q, which receives them in its
 * out at its out_bytes[this rank]-byte slot: every pair's counts must agree (the caller
 * checks: Gloo aborts otherwise). */
int ddpl_gloo_alltoallv(ddpl_gloo *g, const void *in, const size_t *in_bytes, void *out,
                        const size_t *out_bytes);

/* Posts a send to / receive from a peer without waiting (safe from any thread). Messages between
 * two ranks match in posting order within a channel (0 or 1: independent streams, so a small
 * header can go ahead of its payload). The handle is finished (waited for and freed) with
 * ddpl_gloo_p2p_wait; the buffer must stay alive until then. The receiver's size must equal the
 * sender's (Gloo aborts the process otherwise: pg_host.c sends the size first). NULL on error. */
ddpl_gloo_p2p *ddpl_gloo_send(ddpl_gloo *g, void *data, size_t nbytes, int dst, int channel);
ddpl_gloo_p2p *ddpl_gloo_recv(ddpl_gloo *g, void *data, size_t nbytes, int src, int channel);
int ddpl_gloo_p2p_wait(ddpl_gloo_p2p *p, double timeout_s); /* frees p either way */

/* Who the group's ranks are, for messages (per group rank: global rank, pid, host; copied): a
 * peer whose connection fails is then named "rank 1 (pid 4242, host node3) closed its
 * connection: Connection reset by peer", with "(the process has exited)" when it is gone. */
void ddpl_gloo_set_peers(ddpl_gloo *g, const int *global, const int *pids,
                         const char *const *hosts);
/* Fails what waits on any pair, now and later, with `why` (the heartbeat found a peer silent):
 * every operation of g then returns -1 with `why` as its error. Safe from any thread while an
 * operation runs; the first call's message stays. */
void ddpl_gloo_abort(ddpl_gloo *g, const char *why);

#ifdef __cplusplus
}
#endif
#endif
