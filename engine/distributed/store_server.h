/* distributed/store_server.h: the store's server thread (rank 0), internal to engine/distributed
 * and to the launcher, which hosts the store itself for --max-restarts (cli/launch.c). defines:
 * store_server, store_server_start, store_server_port, store_server_clients, store_server_stop. */
#ifndef DDPL_DIST_STORE_SERVER_H
#define DDPL_DIST_STORE_SERVER_H

typedef struct store_server store_server;

/* Listens at port (0 = a free one) and serves in a new thread: on loopback only when host (the
 * address the clients dial: MASTER_ADDR) is a loopback address, which no other machine could
 * reach anyway; otherwise (or host NULL) on every interface, as PyTorch's TCPStore. token: NULL
 * or "" for none. NULL with ddpl_error set ("store: cannot listen on port 29500 (address already
 * in use)"). */
store_server *store_server_start(const char *host, int port, const char *token);
int store_server_port(const store_server *s);
/* The connections open now, its owner's own client included (any thread). */
size_t store_server_clients(const store_server *s);
/* Stops accepting, lets the connected clients finish for up to drain_s seconds (other ranks may
 * still be using the store when rank 0 lets go of it), then joins the thread and frees. */
void store_server_stop(store_server *s, double drain_s);

#endif
