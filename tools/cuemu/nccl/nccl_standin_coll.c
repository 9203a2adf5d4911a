/* cuemu/nccl/nccl_standin_coll.c: the collectives of the NCCL stand-in, through the per-rank
 * staging buffers of the communicator's segment.
 * defines: ncclAllReduce, ncclBroadcast, ncclBcast, ncclReduce, ncclAllGather,
 *          ncclReduceScatter (nccl.h); standin_coll_run, standin_coll_check, standin_coll_name
 *          (nccl_standin.h).
 *
 * A collective of `count` elements goes in chunks of what one staging buffer holds (stage_bytes
 * / element size; ReduceScatter's chunk is that over nranks, as a rank stages one piece for every
 * rank). Per chunk, with p the parity of the step:
 *   1. each rank copies its part of the chunk into its buffer p, and writes what it is doing
 *      (standin_desc) into its slot's desc[p];
 *   2. step barrier (standin_barrier);
 *   3. each rank checks that every rank's desc[p] is its own (same collective, count, type,
 *      operation, root, chunk; else ncclInvalidUsage) and that no rank has failed or aborted
 *      since it arrived (else ncclRemoteError), then reads the buffers p it needs into its output:
 * AllReduce and ReduceScatter fold all ranks' buffers in rank order (nccl_standin_reduce.c), Reduce
 *      only on the root, Broadcast copies the root's, AllGather copies every rank's.
 * Alternating the two buffers makes a second barrier per chunk unnecessary: a rank writes
 * buffer p again at step e + 2, after passing step e + 1, which no rank reaches before it has
 * finished reading the buffers of step e. In-place calls (sendbuff == recvbuff, or AllGather's
 * sendbuff == recvbuff + rank * sendcount, ReduceScatter's sendbuff + rank * recvcount ==
 * recvbuff) are safe: a chunk's input is staged before any output of it is written, and the
 * outputs of a chunk never overlap inputs of later chunks. A call of count 0 returns at once
 * without meeting the peers, as NCCL's does.
 *
 * Each call returns when the result is in recvbuff on this rank (the stream is not used): what
 * only real NCCL shows is a collective that runs on the GPU while the host goes on, with its own
 * algorithm (ring, tree, NVLS) and protocol (LL, LL128, Simple) and their rounding order for
 * three or more ranks (see nccl_standin_reduce.c). */
#include "nccl_standin.h"

#include <stdio.h>
#include <string.h>

const char *standin_coll_name(standin_coll_kind k)
{
    switch (k) {
    case STANDIN_ALLREDUCE:
        return "ncclAllReduce";
    case STANDIN_BROADCAST:
        return "ncclBroadcast";
    case STANDIN_REDUCE:
        return "ncclReduce";
    case STANDIN_ALLGATHER:
        return "ncclAllGather";
    case STANDIN_REDUCESCATTER:
        return "ncclReduceScatter";
    }
    return "(collective)";
}

static bool reduces(standin_coll_kind k)
{
    return k == STANDIN_ALLREDUCE || k == STANDIN_REDUCE || k == STANDIN_REDUCESCATTER;
}

static bool rooted(standin_coll_kind k)
{
    return k == STANDIN_BROADCAST || k == STANDIN_REDUCE;
}

ncclResult_t standin_coll_check(ncclComm_t comm, const standin_coll *a, const char *fn)
{
    size_t es = standin_dtype_size(a->dtype);
    if (es == 0)
        return standin_fail(comm, ncclInvalidArgument, "%s: invalid data type %d", fn,
                            (int)a->dtype);
    if (rooted(a->kind) && (a->root < 0 || a->root >= comm->nranks))
        return standin_fail(comm, ncclInvalidArgument, "%s: root %d out of range [0, %d)", fn,
                            a->root, comm->nranks);
    if (reduces(a->kind) && (unsigned)a->op >= ncclNumOps)
        return standin_fail(comm, ncclInvalidArgument,
                            "%s: invalid reduction operation %d (the stand-in has no "
                            "ncclRedOpCreatePreMulSum operations)",
                            fn, (int)a->op);
    if (reduces(a->kind) && !standin_reduces(a->dtype, a->op))
        return standin_fail(comm, ncclInvalidArgument, "%s: the stand-in does not reduce %s", fn,
                            standin_dtype_name(a->dtype));
    /* the largest buffer is nranks * count elements (AllGather's out, ReduceScatter's in) */
    if (a->count > SIZE_MAX / es / (size_t)comm->nranks)
        return standin_fail(comm, ncclInvalidArgument, "%s: count %zu overflows", fn, a->count);
    if (a->count == 0) return ncclSuccess;
    bool root = a->root == comm->rank;
    bool needs_send = a->kind != STANDIN_BROADCAST || root;
    bool needs_recv = a->kind != STANDIN_REDUCE || root;
    if (needs_send && !a->send)
        return standin_fail(comm, ncclInvalidArgument, "%s: sendbuff is NULL", fn);
    if (needs_recv && !a->recv)
        return standin_fail(comm, ncclInvalidArgument, "%s: recvbuff is NULL", fn);
    return ncclSuccess;
}

/* What this rank does in one step, as the peers must see it too. */
static standin_desc describe(ncclComm_t comm, const standin_coll *a, uint64_t chunk)
{
    standin_desc d = {comm->seq, a->count, chunk, (int32_t)a->kind, (int32_t)a->dtype, -1, -1};
    if (reduces(a->kind)) d.op = (int32_t)a->op;
    if (rooted(a->kind)) d.root = a->root;
    return d;
}

static int desc_str(char *buf, size_t n, const standin_desc *d)
{
    return snprintf(buf, n, "%s #%llu (count %llu, %s, op %s, root %d, chunk %llu)",
                    standin_coll_name((standin_coll_kind)d->kind), (unsigned long long)d->seq,
                    (unsigned long long)d->count, standin_dtype_name((ncclDataType_t)d->dtype),
                    d->op < 0 ? "-" : standin_op_name((ncclRedOp_t)d->op), d->root,
                    (unsigned long long)d->chunk);
}

/* After the step's barrier: every rank's desc[p] must be this rank's (the seq may differ: it
 * only counts calls for messages), and no rank may have failed (one that timed out, say, has
 * arrived, but gave up and returned an error: its result is not this one's). A mismatch is
 * reported first, as the failed peer may have failed for that very mismatch. */
static ncclResult_t check_peers_agree(ncclComm_t comm, int p, const standin_desc *mine)
{
    for (int q = 0; q < comm->nranks; q++) {
        const standin_desc *d = &comm->seg->ranks[q].desc[p];
        if (d->count == mine->count && d->chunk == mine->chunk && d->kind == mine->kind &&
            d->dtype == mine->dtype && d->op == mine->op && d->root == mine->root)
            continue;
        char a[160], b[160];
        desc_str(a, sizeof a, mine);
        desc_str(b, sizeof b, d);
        return standin_break(comm, ncclInvalidUsage,
                             "ranks called different collectives: this rank %s, rank %d %s", a, q,
                             b);
    }
    for (int q = 0; q < comm->nranks; q++)
        if (q != comm->rank && atomic_load(&comm->seg->ranks[q].state) == STANDIN_RANK_FAILED)
            return standin_break(comm, ncclRemoteError,
                                 "rank %d failed (an error broke its communicator) in the same "
                                 "call",
                                 q);
    return ncclSuccess;
}

ncclResult_t standin_coll_run(ncclComm_t comm, const standin_coll *a)
{
    if (a->count == 0) return ncclSuccess;
    const size_t es = standin_dtype_size(a->dtype);
    const int n = comm->nranks, me = comm->rank;
    const char *send = a->send;
    char *recv = a->recv;
    comm->seq++;
    char what[96];
    snprintf(what, sizeof what, "%s #%llu", standin_coll_name(a->kind),
             (unsigned long long)comm->seq);
    size_t per_chunk = comm->seg->stage_bytes / es; /* elements */
    if (a->kind == STANDIN_REDUCESCATTER) per_chunk /= (size_t)n;
    const void *src[STANDIN_MAX_RANKS];
    uint64_t chunk = 0;
    for (size_t off = 0; off < a->count; off += per_chunk, chunk++) {
        size_t c = a->count - off < per_chunk ? a->count - off : per_chunk;
        size_t bytes = c * es;
        int p = (int)((comm->epoch + 1) & 1u);
        char *mine = standin_stage(comm, me, p);
        standin_desc d = describe(comm, a, chunk);
        comm->seg->ranks[me].desc[p] = d;
        switch (a->kind) {
        case STANDIN_BROADCAST:
            if (me == a->root) memcpy(mine, send + off * es, bytes);
            break;
        case STANDIN_REDUCESCATTER: /* rank q's piece of this chunk at q * bytes */
            for (int q = 0; q < n; q++)
                memcpy(mine + (size_t)q * bytes, send + ((size_t)q * a->count + off) * es, bytes);
            break;
        default:
            memcpy(mine, send + off * es, bytes);
        }
        ncclResult_t r = standin_barrier(comm, what);
        if (r == ncclSuccess) r = check_peers_agree(comm, p, &d);
        if (r != ncclSuccess) return r;
        switch (a->kind) {
        case STANDIN_ALLREDUCE:
            for (int q = 0; q < n; q++) src[q] = standin_stage(comm, q, p);
            standin_reduce(recv + off * es, src, n, c, a->dtype, a->op);
            break;
        case STANDIN_REDUCE:
            if (me != a->root) break;
            for (int q = 0; q < n; q++) src[q] = standin_stage(comm, q, p);
            standin_reduce(recv + off * es, src, n, c, a->dtype, a->op);
            break;
        case STANDIN_REDUCESCATTER:
            for (int q = 0; q < n; q++) src[q] = standin_stage(comm, q, p) + (size_t)me * bytes;
            standin_reduce(recv + off * es, src, n, c, a->dtype, a->op);
            break;
        case STANDIN_BROADCAST:
            if (me != a->root)
                memcpy(recv + off * es, standin_stage(comm, a->root, p), bytes);
            else if (recv != send)
                memmove(recv + off * es, send + off * es, bytes);
            break;
        case STANDIN_ALLGATHER:
            for (int q = 0; q < n; q++)
                memcpy(recv + ((size_t)q * a->count + off) * es, standin_stage(comm, q, p), bytes);
            break;
        }
    }
    return ncclSuccess;
}

/* ------------------------------------------------------------------- the API ---- */
/* Every collective: enter comm, check, run now or queue (inside a group), leave. */
static ncclResult_t collective(ncclComm_t comm, const standin_coll *a)
{
    const char *fn = standin_coll_name(a->kind);
    ncclResult_t r = standin_enter(comm, fn);
    if (r == ncclSuccess) {
        r = standin_coll_check(comm, a, fn);
        if (r == ncclSuccess) r = standin_group_coll(comm, a);
        standin_leave(comm);
    }
    standin_group_error(r);
    return r;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
    (void)stream; /* synchronous: done when the call returns */
    standin_coll a = {STANDIN_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, -1};
    return collective(comm, &a);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    standin_coll a = {STANDIN_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root};
    return collective(comm, &a);
}

/* the legacy in-place broadcast */
ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream)
{
    return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    standin_coll a = {STANDIN_REDUCE, sendbuff, recvbuff, count, datatype, op, root};
    return collective(comm, &a);
}

/* recvbuff holds nranks * sendcount elements, rank r's at r * sendcount */
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    (void)stream;
    standin_coll a = {STANDIN_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, -1};
    return collective(comm, &a);
}

/* sendbuff holds nranks * recvcount elements; rank r receives the reduction of piece r */
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream)
{
    (void)stream;
    standin_coll a = {STANDIN_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, -1};
    return collective(comm, &a);
}
