/* cuemu/nccl/nccl_standin_group.c: group calls and point-to-point messages of the NCCL
 * stand-in.
 * defines: ncclGroupStart, ncclGroupEnd, ncclSend, ncclRecv (nccl.h); standin_group_coll,
 *          standin_group_error (nccl_standin.h).
 *
 * Groups: between ncclGroupStart and the matching ncclGroupEnd (they nest; only the outermost
 * End runs anything) the calling thread's collectives, sends and receives are queued, and
 * ncclGroupEnd runs them: first the collectives, one after the other in call order (NCCL makes
 * every rank issue a communicator's collectives in the same order, so they meet), then all
 * point-to-point messages together. A call outside a group is a group of one. An argument error
 * inside a group is returned at once and again by ncclGroupEnd, which then drops the whole group
 * (as NCCL does), so no rank runs half of it.
 *
 * Messages: every (sender, receiver) pair of a communicator has a ring buffer in the segment
 * (mbox_bytes of data; head and tail count bytes ever consumed and produced). A send writes an
 * 8-byte header (its byte count) then its bytes as room allows; a receive reads the header,
 * checks it against its own byte count (a mismatch is ncclInvalidUsage on the receiver, which
 * real NCCL does not detect), then the bytes. ncclGroupEnd keeps stepping every queued message
 * (sends fill rings, receives drain them) until all are complete, so sends and receives between
 * two ranks in either order, any sizes, and messages to this rank itself complete without
 * deadlock. Messages between the same two ranks in the same direction keep their call order:
 * one does not start before the previous one has finished. A send outside a group returns once
 * its last byte is in the ring (it may return before the receiver took it, where real NCCL's
 * send waits for the receiver: a program that relies on the ordering NCCL imposes is not
 * checked here); count 0 moves nothing, on either side. Only real NCCL shows its P2P transports
 * (NVLink, PCIe, IB with GPUDirect) and their chunking and speed. */
#include "nccl_standin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEADER_BYTES 8u /* uint64_t: the message's byte count */

enum { OP_COLL, OP_SEND, OP_RECV };

typedef struct group_op {
    int kind; /* OP_* */
    ncclComm_t comm;
    standin_coll coll; /* OP_COLL */
    /* OP_SEND / OP_RECV */
    const char *sbuf;
    char *rbuf;
    size_t bytes, done; /* payload bytes, and how many moved so far */
    int peer;
    bool header_done, finished;
} group_op;

/* The calling thread's group: nesting depth, queued operations, first argument error. */
static _Thread_local struct {
    int depth;
    group_op *ops;
    int nops, cap;
    ncclResult_t err;
} group;

static void group_clear(void)
{
    free(group.ops);
    group.ops = NULL;
    group.nops = group.cap = 0;
    group.err = ncclSuccess;
}

static ncclResult_t group_push(const group_op *op)
{
    if (group.nops == group.cap) {
        int cap = group.cap ? 2 * group.cap : 16;
        group_op *p = realloc(group.ops, (size_t)cap * sizeof *p);
        if (!p) return standin_fail(op->comm, ncclSystemError, "out of host memory");
        group.ops = p;
        group.cap = cap;
    }
    group.ops[group.nops++] = *op;
    return ncclSuccess;
}

/* ------------------------------------------------------------------ ring buffers ---- */
static void ring_put(char *data, size_t cap, uint64_t pos, const void *src, size_t n)
{
    size_t at = (size_t)(pos % cap), first = n < cap - at ? n : cap - at;
    memcpy(data + at, src, first);
    memcpy(data, (const char *)src + first, n - first);
}

static void ring_get(const char *data, size_t cap, uint64_t pos, void *dst, size_t n)
{
    size_t at = (size_t)(pos % cap), first = n < cap - at ? n : cap - at;
    memcpy(dst, data + at, first);
    memcpy((char *)dst + first, data, n - first);
}

/* Moves what fits of a send into its ring: STANDIN_MOVED, or IDLE when the ring is full. */
static int send_step(group_op *op)
{
    ncclComm_t c = op->comm;
    standin_mbox *mb = standin_mbox_of(c, c->rank, op->peer);
    char *data = standin_mbox_data(c, c->rank, op->peer);
    size_t cap = (size_t)c->seg->mbox_bytes;
    uint64_t tail = atomic_load_explicit(&mb->tail, memory_order_relaxed); /* ours alone */
    size_t room = cap - (size_t)(tail - atomic_load(&mb->head));
    bool moved = false;
    if (!op->header_done) {
        if (room < HEADER_BYTES) return STANDIN_IDLE;
        uint64_t h = op->bytes;
        ring_put(data, cap, tail, &h, HEADER_BYTES);
        tail += HEADER_BYTES;
        room -= HEADER_BYTES;
        op->header_done = moved = true;
    }
    size_t n = op->bytes - op->done < room ? op->bytes - op->done : room;
    if (n > 0) {
        ring_put(data, cap, tail, op->sbuf + op->done, n);
        tail += n;
        op->done += n;
        moved = true;
    }
    if (!moved) return STANDIN_IDLE;
    atomic_store(&mb->tail, tail); /* publishes the bytes written above */
    standin_ring(c, op->peer);
    op->finished = op->done == op->bytes;
    return STANDIN_MOVED;
}

/* Takes what has arrived for a receive: STANDIN_MOVED, IDLE, or FAILED (size mismatch). */
static int recv_step(group_op *op, ncclResult_t *err)
{
    ncclComm_t c = op->comm;
    standin_mbox *mb = standin_mbox_of(c, op->peer, c->rank);
    const char *data = standin_mbox_data(c, op->peer, c->rank);
    size_t cap = (size_t)c->seg->mbox_bytes;
    uint64_t head = atomic_load_explicit(&mb->head, memory_order_relaxed); /* ours alone */
    size_t avail = (size_t)(atomic_load(&mb->tail) - head);
    bool moved = false;
    if (!op->header_done) {
        if (avail < HEADER_BYTES) return STANDIN_IDLE;
        uint64_t h;
        ring_get(data, cap, head, &h, HEADER_BYTES);
        if (h != op->bytes) {
            *err = standin_break(c, ncclInvalidUsage,
                                 "ncclRecv from rank %d of %zu bytes met a ncclSend of %llu "
                                 "bytes (counts or types differ between the two ranks)",
                                 op->peer, op->bytes, (unsigned long long)h);
            return STANDIN_FAILED;
        }
        head += HEADER_BYTES;
        avail -= HEADER_BYTES;
        op->header_done = moved = true;
    }
    size_t n = op->bytes - op->done < avail ? op->bytes - op->done : avail;
    if (n > 0) {
        ring_get(data, cap, head, op->rbuf + op->done, n);
        head += n;
        op->done += n;
        moved = true;
    }
    if (!moved) return STANDIN_IDLE;
    atomic_store(&mb->head, head); /* the sender may reuse the room only after the copy */
    standin_ring(c, op->peer);
    op->finished = op->done == op->bytes;
    return STANDIN_MOVED;
}

/* ------------------------------------------------------------------ running p2p ---- */
typedef struct p2p_run {
    group_op **ops;
    int n;
    standin_watch *watch; /* one per communicator; peers = those with unfinished messages */
    int nwatch;
} p2p_run;

/* Whether an earlier unfinished message has the same communicator, direction and peer. */
static bool queued_behind(const p2p_run *p, int i)
{
    const group_op *o = p->ops[i];
    for (int j = 0; j < i; j++) {
        const group_op *e = p->ops[j];
        if (!e->finished && e->comm == o->comm && e->kind == o->kind && e->peer == o->peer)
            return true;
    }
    return false;
}

static int p2p_step(void *arg, ncclResult_t *err)
{
    p2p_run *p = arg;
    bool moved = false, all = true;
    for (int i = 0; i < p->n; i++) {
        group_op *o = p->ops[i];
        if (o->finished) continue;
        if (!queued_behind(p, i)) {
            int s = o->kind == OP_SEND ? send_step(o) : recv_step(o, err);
            if (s == STANDIN_FAILED) return s;
            moved |= s == STANDIN_MOVED;
        }
        all &= o->finished;
    }
    if (all) return STANDIN_DONE;
    /* a peer whose messages are all done may leave: watch only the others */
    for (int w = 0; w < p->nwatch; w++) p->watch[w].peers = 0;
    for (int i = 0; i < p->n; i++) {
        const group_op *o = p->ops[i];
        if (o->finished) continue;
        for (int w = 0; w < p->nwatch; w++)
            if (p->watch[w].comm == o->comm) p->watch[w].peers |= 1ull << o->peer;
    }
    return moved ? STANDIN_MOVED : STANDIN_IDLE;
}

static void p2p_pending(void *arg, char *buf, size_t n)
{
    p2p_run *p = arg;
    size_t used = (size_t)snprintf(buf, n, "unfinished:");
    for (int i = 0; i < p->n && used < n; i++) {
        const group_op *o = p->ops[i];
        if (o->finished) continue;
        used += (size_t)snprintf(buf + used, n - used, " %s rank %d (%zu of %zu bytes)",
                                 o->kind == OP_SEND ? "send to" : "recv from", o->peer, o->done,
                                 o->bytes);
    }
}

/* Runs the messages among ops[0..n) to completion. */
static ncclResult_t run_p2p(group_op *ops, int n)
{
    group_op **list = malloc((size_t)n * sizeof *list);
    standin_watch *watch = malloc((size_t)n * sizeof *watch);
    if (!list || !watch) {
        free(list);
        free(watch);
        return standin_fail(NULL, ncclSystemError, "out of host memory");
    }
    p2p_run p = {list, 0, watch, 0};
    for (int i = 0; i < n; i++) {
        if (ops[i].kind == OP_COLL) continue;
        list[p.n++] = &ops[i];
        int w = 0;
        while (w < p.nwatch && watch[w].comm != ops[i].comm) w++;
        if (w == p.nwatch) watch[p.nwatch++] = (standin_watch){ops[i].comm, 0};
    }
    ncclResult_t r = ncclSuccess;
    if (p.n > 0) {
        char what[64];
        snprintf(what, sizeof what, "%d ncclSend/ncclRecv", p.n);
        standin_waiter w = {p2p_step, p2p_pending, &p, what};
        r = standin_wait(&w, watch, p.nwatch);
    }
    free(list);
    free(watch);
    return r;
}

/* Runs a whole group: its collectives in order, then its messages. */
static ncclResult_t run_ops(group_op *ops, int n)
{
    int entered = 0;
    ncclResult_t r = ncclSuccess;
    for (; entered < n && r == ncclSuccess; entered++) {
        r = standin_enter(ops[entered].comm, "ncclGroupEnd");
        if (r != ncclSuccess) break;
    }
    for (int i = 0; i < n && r == ncclSuccess; i++)
        if (ops[i].kind == OP_COLL) r = standin_coll_run(ops[i].comm, &ops[i].coll);
    if (r == ncclSuccess) r = run_p2p(ops, n);
    for (int i = 0; i < entered; i++) standin_leave(ops[i].comm);
    return r;
}

/* ------------------------------------------------------------------------ the API ---- */
ncclResult_t ncclGroupStart(void)
{
    group.depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    if (group.depth == 0)
        return standin_fail(NULL, ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--group.depth > 0) return ncclSuccess;
    ncclResult_t r = group.err;
    if (r == ncclSuccess && group.nops > 0) r = run_ops(group.ops, group.nops);
    group_clear();
    return r;
}

ncclResult_t standin_group_coll(ncclComm_t comm, const standin_coll *a)
{
    if (group.depth == 0) return standin_coll_run(comm, a);
    group_op op = {.kind = OP_COLL, .comm = comm, .coll = *a};
    return group_push(&op);
}

void standin_group_error(ncclResult_t r)
{
    if (group.depth > 0 && group.err == ncclSuccess) group.err = r;
}

/* Checks a message, then queues it (in a group) or runs it as a group of one. */
static ncclResult_t p2p(int kind, const void *sbuf, void *rbuf, size_t count,
                        ncclDataType_t datatype, int peer, ncclComm_t comm)
{
    const char *fn = kind == OP_SEND ? "ncclSend" : "ncclRecv";
    ncclResult_t r = standin_enter(comm, fn);
    if (r != ncclSuccess) {
        standin_group_error(r);
        return r;
    }
    size_t es = standin_dtype_size(datatype);
    if (es == 0)
        r = standin_fail(comm, ncclInvalidArgument, "%s: invalid data type %d", fn, (int)datatype);
    else if (peer < 0 || peer >= comm->nranks)
        r = standin_fail(comm, ncclInvalidArgument, "%s: peer %d out of range [0, %d)", fn, peer,
                         comm->nranks);
    else if (count > SIZE_MAX / es)
        r = standin_fail(comm, ncclInvalidArgument, "%s: count %zu overflows", fn, count);
    else if (count > 0 && !(kind == OP_SEND ? sbuf : rbuf))
        r = standin_fail(comm, ncclInvalidArgument, "%s: %s is NULL", fn,
                         kind == OP_SEND ? "sendbuff" : "recvbuff");
    else if (group.depth == 0 && peer == comm->rank && count > 0)
        r = standin_fail(comm, ncclInvalidUsage,
                         "%s to this rank itself outside ncclGroupStart/End: its matching "
                         "%s can never be posted",
                         fn, kind == OP_SEND ? "ncclRecv" : "ncclSend");
    if (r == ncclSuccess && count > 0) {
        group_op op = {.kind = kind,
                       .comm = comm,
                       .sbuf = sbuf,
                       .rbuf = rbuf,
                       .bytes = count * es,
                       .peer = peer};
        if (group.depth > 0)
            r = group_push(&op);
        else
            r = run_p2p(&op, 1);
    }
    standin_group_error(r);
    standin_leave(comm);
    return r;
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return p2p(OP_SEND, sendbuff, NULL, count, datatype, peer, comm);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    return p2p(OP_RECV, NULL, recvbuff, count, datatype, peer, comm);
}
