/* distributed/worker_ipc.h: how DataLoader workers hand batches to the main process without
 * copying them there: shared-memory slots, reused batch after batch, announced over a socket.
 * The other inter-process mechanism of the engine beside the store (store.h): the store serves
 * ranks that found each other by address, this serves a parent and the workers it forked.
 * defines: ddpl_ipc_socketpair, ddpl_ipc_send, ddpl_ipc_recv_header, ddpl_ipc_recv_body;
 *          ddpl_batch_slot and its calls (the worker's side); ddpl_batch_view and its calls (the
 *          main process's side).
 *
 * Messages: a u32 length, then the bytes; a file descriptor may travel with one (SCM_RIGHTS),
 * which is how the main process gets a slot's memfd.
 *
 * Why slots are reused: first-touching fresh pages is the dominant cost of a new segment per
 * batch (11 ms for 400 kB on the 2-core VM this was written on, against 0.03 ms to copy into
 * pages already mapped). A slot starts with a state word (FREE / LENT): the worker lends it with a
 * batch; the main process hands it back when the tensors read from it are freed (their storage's
 * deleter), and the worker writes the next batch only into a free slot.
 *
 * Slot layout after the 64-byte state line (both ends are this build, so dtype codes and byte
 * order are the host's): "DLSG", u32 count, then per tensor: u8 dtype, u8 ndim, 6 zero bytes, u64
 * offset of its bytes from the start of the slot, ndim i64 sizes; then the tensors' bytes, 64-byte
 * aligned. ddpl_batch_view_read checks every offset, size and dtype against the mapping before it
 * makes a tensor: a slot is written by another process.
 *
 * Every call returns 0 / a result, or -1 / NULL with ddpl_error set ("DataLoader worker
 * transport: <what>"). */
#ifndef DDPL_DIST_WORKER_IPC_H
#define DDPL_DIST_WORKER_IPC_H

#include "core/core.h"

#define DDPL_IPC_MSG_MAX       ((size_t)1 << 30) /* bytes of one message */
#define DDPL_BATCH_MAX_TENSORS 65536             /* tensors in one batch */

/* ---- messages ---- */

/* A connected AF_UNIX stream pair, blocking, close-on-exec. */
int ddpl_ipc_socketpair(int fds[2]);
/* Sends one message of n bytes; passfd >= 0 travels with it (the receiver gets its own copy). */
int ddpl_ipc_send(int fd, const void *body, size_t n, int passfd);
/* Waits at most wait_s (< 0: for ever) for the next message and reads its length and the fd
 * that came with it (-1 if none; the caller owns it). Returns 1 (a message: read its body with
 * ddpl_ipc_recv_body), 0 (the time passed, or a signal came: the caller's own loop looks at
 * both), -2 (the other end closed, or died in the middle of a message), -1 (an error). */
int ddpl_ipc_recv_header(int fd, double wait_s, size_t *len, int *passfd);
/* Reads the len bytes of the message whose header was just read: 0, or -2 when the sender died
 * in the middle of it. */
int ddpl_ipc_recv_body(int fd, void *body, size_t len);

/* ---- the worker's side: a memfd it keeps mapped and writes batch after batch into ---- */

typedef struct ddpl_batch_slot ddpl_batch_slot;

/* *bytes = what a slot needs for these tensors (each contiguous, on the CPU). */
int ddpl_batch_slot_bytes(ddpl_tensor *const *tensors, int count, size_t *bytes);
ddpl_batch_slot *ddpl_batch_slot_new(size_t nbytes);
/* Copies the tensors into a free slot and lends it to the main process until it has dropped
 * every tensor read from it. */
int ddpl_batch_slot_write(ddpl_batch_slot *s, ddpl_tensor *const *tensors, int count);
bool ddpl_batch_slot_is_free(const ddpl_batch_slot *s);
size_t ddpl_batch_slot_size(const ddpl_batch_slot *s);
int ddpl_batch_slot_fd(const ddpl_batch_slot *s); /* to send once; the slot keeps it */
void ddpl_batch_slot_free(ddpl_batch_slot *s);

/* ---- the main process's side: one mapping of a slot ---- */

typedef struct ddpl_batch_view ddpl_batch_view;

/* Maps the slot behind fd (which stays the caller's). pin page-locks it where CUDA is available
 * (DataLoader's pin_memory). */
ddpl_batch_view *ddpl_batch_view_map(int fd, bool pin);
/* The batch now in the slot as *count new tensors over the mapping (no copy), in a malloc'd
 * array *out the caller frees (and releases each tensor of). When the last of them is freed the
 * slot goes back to the worker; a batch refused as malformed goes back at once. */
int ddpl_batch_view_read(ddpl_batch_view *v, ddpl_tensor ***out, int *count);
/* Lets go of the view; the mapping stays while tensors read from it live. */
void ddpl_batch_view_free(ddpl_batch_view *v);

#endif
