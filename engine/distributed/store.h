/* distributed/store.h: the TCP key-value store that bootstraps a distributed job (PyTorch's
 * TCPStore). defines: ddpl_store and its operations.
 *
 * Rank 0 hosts the server (a thread in its process) at host:port; every rank, rank 0 included,
 * is a client. Clients retry connecting until the timeout. Values are byte strings. All calls
 * return 0 (or a value >= 0) on success and -1 with ddpl_error set ("store: timed out after 30 s
 * waiting for key 'gloo/1'"), never hang past their timeout. Safe to use from several threads. */
#ifndef DDPL_DIST_STORE_H
#define DDPL_DIST_STORE_H

#include "core/core.h"

typedef struct ddpl_store ddpl_store;

/* is_server: also start the server (port 0 picks a free port, see ddpl_store_port).
 * token: optional shared secret (NULL or "" for none); a client with the wrong token is refused
 * with an error naming the reason. timeout_s bounds connecting and every blocking call. */
ddpl_store *ddpl_store_create(const char *host, int port, bool is_server, double timeout_s,
                              const char *token);
/* Puts prefix in front of every key this client sends from now on (PyTorch's PrefixStore): the
 * rendezvous of each generation of an elastic job lives under its own prefix, so a restarted
 * gang never sees the keys of the one before. The count of num_keys is still the whole
 * store's. NULL or "" for none; -1 with the error set when it is too long. Call before the
 * store is shared between threads. */
int ddpl_store_set_prefix(ddpl_store *s, const char *prefix);
int ddpl_store_port(const ddpl_store *s);
/* How many clients other than s itself are connected to the server s hosts; -1 when s hosts
 * none. */
int ddpl_store_others_connected(const ddpl_store *s);
double ddpl_store_timeout(const ddpl_store *s);
void ddpl_store_set_timeout(ddpl_store *s, double timeout_s);

int ddpl_store_set(ddpl_store *s, const char *key, const void *value, size_t len);
/* Blocks until the key exists (or the timeout); *value is malloc'd, the caller frees it. */
int ddpl_store_get(ddpl_store *s, const char *key, void **value, size_t *len);
/* Atomically adds delta to the integer stored at key (missing = 0); *result gets the new value.
 * A sum past the 64-bit range is an error, the value left as it was (never a wrap). */
int ddpl_store_add(ddpl_store *s, const char *key, int64_t delta, int64_t *result);
/* *present = whether all keys exist now (no waiting). */
int ddpl_store_check(ddpl_store *s, int nkeys, const char *const *keys, bool *present);
/* Blocks until all keys exist; timeout_s < 0 uses the store's timeout. */
int ddpl_store_wait(ddpl_store *s, int nkeys, const char *const *keys, double timeout_s);
/* *deleted = whether the key existed. */
int ddpl_store_delete(ddpl_store *s, const char *key, bool *deleted);
/* The number of keys the store holds (those of the engine's own rendezvous included, as
 * PyTorch's TCPStore counts its own). */
int ddpl_store_num_keys(ddpl_store *s, int64_t *count);
/* A client of its own (a connection, and its own mutex) to the same server, with the same token
 * and key prefix and the given timeout: a thread that must not queue behind the others' blocking
 * calls, nor block them (the heartbeat, distributed/pg_heartbeat.c). NULL with the error set. */
ddpl_store *ddpl_store_clone(const ddpl_store *s, double timeout_s);
/* Collective over ranks 0..size-1 of a group: publishes value under <prefix><name>/<rank>, reads
 * every rank's, and *equal tells whether all published the same (a decision every rank then
 * takes alike). Blocks up to the store's timeout for the others. */
int ddpl_store_all_equal(ddpl_store *s, const char *prefix, const char *name, int rank, int size,
                         const char *value, bool *equal);
/* Disconnects; the server (rank 0) stops once it is freed. */
void ddpl_store_free(ddpl_store *s);

#endif
