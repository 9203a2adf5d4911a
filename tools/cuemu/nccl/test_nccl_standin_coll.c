/* cuemu/nccl/test_nccl_standin_coll.c: the NCCL stand-in's test, per rank: every collective
 * and message pattern against values computed here, and ranks that disagree.
 * defines: rank_suite, rank_misuse (test_nccl_standin.h).
 *
 * Inputs are small integers (val), so sums, products of 3 ranks, maxima and minima are exact in
 * every type and expected values are the exact fold converted into the type (fold_exact); an
 * average over 3 ranks is compared within the type's tolerance instead (NCCL's pre-multiplied
 * 1/3 is not exact), and sums of random floats are compared between the ranks, bit for bit. */
#include "test_nccl_standin.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ elements ---- */
static const ncclDataType_t all_types[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,
                                           ncclInt64,   ncclUint64,  ncclFloat16, ncclFloat32,
                                           ncclFloat64, ncclBfloat16};
#define NTYPES (int)(sizeof all_types / sizeof all_types[0])

static size_t tsize(ncclDataType_t t)
{
    return t == ncclInt8 || t == ncclUint8                         ? 1
           : t == ncclFloat16 || t == ncclBfloat16                 ? 2
           : t == ncclInt32 || t == ncclUint32 || t == ncclFloat32 ? 4
                                                                   : 8;
}

static bool is_float(ncclDataType_t t)
{
    return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16;
}

static bool is_unsigned(ncclDataType_t t)
{
    return t == ncclUint8 || t == ncclUint32 || t == ncclUint64;
}

static double get(ncclDataType_t t, const void *b, size_t i)
{
    switch (t) {
    case ncclInt8:
        return ((const int8_t *)b)[i];
    case ncclUint8:
        return ((const uint8_t *)b)[i];
    case ncclInt32:
        return ((const int32_t *)b)[i];
    case ncclUint32:
        return ((const uint32_t *)b)[i];
    case ncclInt64:
        return (double)((const int64_t *)b)[i];
    case ncclUint64:
        return (double)((const uint64_t *)b)[i];
    case ncclFloat16:
        return cuemu_half_to_float(((const uint16_t *)b)[i]);
    case ncclBfloat16:
        return cuemu_bf16_to_float(((const uint16_t *)b)[i]);
    case ncclFloat32:
        return ((const float *)b)[i];
    default:
        return ((const double *)b)[i];
    }
}

/* v is an integer (exact) or a float; integers are wrapped into the type as C converts. */
static void set(ncclDataType_t t, void *b, size_t i, double v)
{
    switch (t) {
    case ncclInt8:
        ((int8_t *)b)[i] = (int8_t)(int64_t)v;
        break;
    case ncclUint8:
        ((uint8_t *)b)[i] = (uint8_t)(int64_t)v;
        break;
    case ncclInt32:
        ((int32_t *)b)[i] = (int32_t)(int64_t)v;
        break;
    case ncclUint32:
        ((uint32_t *)b)[i] = (uint32_t)(int64_t)v;
        break;
    case ncclInt64:
        ((int64_t *)b)[i] = (int64_t)v;
        break;
    case ncclUint64:
        ((uint64_t *)b)[i] = (uint64_t)(int64_t)v;
        break;
    case ncclFloat16:
        ((uint16_t *)b)[i] = cuemu_float_to_half((float)v);
        break;
    case ncclBfloat16:
        ((uint16_t *)b)[i] = cuemu_float_to_bf16((float)v);
        break;
    case ncclFloat32:
        ((float *)b)[i] = (float)v;
        break;
    default:
        ((double *)b)[i] = v;
    }
}

/* Rank r's element i: a small integer, so sums, products (of 3 ranks), maxima and minima are
 * exact in every type (and wrap predictably in 8-bit ones). */
static double val(ncclDataType_t t, int r, size_t i)
{
    int v = (int)((i * 7u + (size_t)r * 3u + 1u) % 8u);
    return is_unsigned(t) ? v : v - 3;
}

/* The exact result of op over the n ranks' element i (before rounding into the type). */
static double fold_exact(ncclDataType_t t, ncclRedOp_t op, int n, size_t i)
{
    double acc = val(t, 0, i);
    double sum = acc;
    for (int r = 1; r < n; r++) {
        double x = val(t, r, i);
        sum += x;
        acc = op == ncclProd  ? acc * x
              : op == ncclMax ? fmax(acc, x)
              : op == ncclMin ? fmin(acc, x)
                              : acc + x;
    }
    if (op == ncclAvg) return is_float(t) ? sum / n : (double)((int64_t)sum / n);
    return acc;
}

/* Element-wise got == want (as stored in the type); returns the first bad index or -1. */
static long first_diff(ncclDataType_t t, const void *got, const void *want, size_t count)
{
    size_t es = tsize(t);
    for (size_t i = 0; i < count; i++)
        if (memcmp((const char *)got + i * es, (const char *)want + i * es, es) != 0)
            return (long)i;
    return -1;
}

/* ------------------------------------------------------------------ collectives ---- */
static void check_allreduce(const world *w, ncclComm_t c, int rank, ncclDataType_t t,
                            ncclRedOp_t op, size_t count, bool in_place)
{
    size_t es = tsize(t), bytes = count * es + 1;
    char *in = malloc(bytes), *out = malloc(bytes), *want = malloc(bytes);
    for (size_t i = 0; i < count; i++) set(t, in, i, val(t, rank, i));
    for (size_t i = 0; i < count; i++) set(t, want, i, fold_exact(t, op, w->n, i));
    char *dst = in_place ? in : out;
    ncclResult_t r = L.AllReduce(in, dst, count, t, op, c, NULL);
    CHECK(r == ncclSuccess, "%s allreduce %d op %d count %zu: %s", w->name, t, op, count,
          L.GetLastError(c));
    bool approx = op == ncclAvg && is_float(t) && w->n != 2; /* 1/3 is not exact */
    long bad = -1;
    if (approx) {
        double tol = t == ncclFloat16 ? 4e-3 : t == ncclBfloat16 ? 3e-2 : 1e-6;
        for (size_t i = 0; i < count && bad < 0; i++)
            if (fabs(get(t, dst, i) - get(t, want, i)) > tol * fmax(1.0, fabs(get(t, want, i))))
                bad = (long)i;
    } else {
        bad = first_diff(t, dst, want, count);
    }
    CHECK(bad < 0, "%s allreduce type %d op %d count %zu %s: element %ld is %g, want %g", w->name,
          t, op, count, in_place ? "in place" : "out of place", bad,
          bad < 0 ? 0 : get(t, dst, (size_t)bad), bad < 0 ? 0 : get(t, want, (size_t)bad));
    free(in);
    free(out);
    free(want);
}

/* Sums of random floats (the rounding order matters) are bit-identical on every rank. */
static void check_identical(const world *w, ncclComm_t c, int rank, ncclDataType_t t)
{
    size_t count = 4099, es = tsize(t);
    char *x = malloc(count * es), *all = malloc(count * es * (size_t)w->n);
    uint64_t s = 1234u + (uint64_t)rank * 7919u; /* xorshift: per rank, thread-safe */
    for (size_t i = 0; i < count; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        set(t, x, i, (double)(s >> 11) * 0x1p-52 - 1.0);
    }
    NCCL_OK(L.AllReduce(x, x, count, t, ncclSum, c, NULL), "allreduce random");
    NCCL_OK(L.AllGather(x, all, count * es, ncclUint8, c, NULL), "allgather results");
    int same = 0;
    for (int q = 0; q < w->n; q++) same += memcmp(all + (size_t)q * count * es, x, count * es) == 0;
    CHECK(same == w->n, "%s: type %d: only %d of %d ranks have the same sum bits", w->name, t, same,
          w->n);
    free(x);
    free(all);
}

static void check_broadcast(const world *w, ncclComm_t c, int rank, size_t count)
{
    for (int root = 0; root < w->n; root++) {
        for (int in_place = 0; in_place < 2; in_place++) {
            float *in = malloc(count * 4 + 4), *out = malloc(count * 4 + 4);
            for (size_t i = 0; i < count; i++) in[i] = rank == root ? (float)(i * 3 + root) : -1;
            float *dst = in_place ? in : out;
            NCCL_OK(L.Broadcast(in, dst, count, ncclFloat32, root, c, NULL), "broadcast");
            long bad = -1;
            for (size_t i = 0; i < count && bad < 0; i++)
                if (dst[i] != (float)(i * 3 + root)) bad = (long)i;
            CHECK(bad < 0, "%s: broadcast from %d count %zu: element %ld wrong", w->name, root,
                  count, bad);
            free(in);
            free(out);
        }
    }
}

static void check_reduce(const world *w, ncclComm_t c, int rank, size_t count)
{
    int root = w->n - 1;
    int64_t *in = malloc(count * 8 + 8), *out = malloc(count * 8 + 8);
    for (size_t i = 0; i < count; i++) in[i] = (int64_t)(i + 1) * (rank + 1);
    memset(out, 0xab, count * 8);
    NCCL_OK(L.Reduce(in, out, count, ncclInt64, ncclSum, root, c, NULL), "reduce");
    int64_t tri = (int64_t)w->n * (w->n + 1) / 2;
    long bad = -1;
    for (size_t i = 0; i < count && bad < 0; i++) {
        int64_t want;
        memset(&want, 0xab, 8);
        if (rank == root) want = (int64_t)(i + 1) * tri;
        if (out[i] != want) bad = (long)i;
    }
    CHECK(bad < 0, "%s: reduce to %d count %zu: element %ld wrong on rank %d", w->name, root, count,
          bad, rank);
    /* in place: the root's buffer gets the sum, the others' stays their input */
    NCCL_OK(L.Reduce(in, in, count, ncclInt64, ncclMax, root, c, NULL), "reduce in place");
    bad = -1;
    for (size_t i = 0; i < count && bad < 0; i++)
        if (in[i] != (int64_t)(i + 1) * (rank == root ? w->n : rank + 1)) bad = (long)i;
    CHECK(bad < 0, "%s: reduce in place count %zu: element %ld wrong on rank %d", w->name, count,
          bad, rank);
    free(in);
    free(out);
}

static void check_allgather(const world *w, ncclComm_t c, int rank, size_t count)
{
    size_t n = (size_t)w->n;
    int32_t *in = malloc(count * 4 + 4), *out = malloc(n * count * 4 + 4);
    for (size_t i = 0; i < count; i++) in[i] = (int32_t)(rank * 1000003 + (int)i);
    for (int in_place = 0; in_place < 2; in_place++) {
        int32_t *src = in;
        if (in_place) {
            src = out + (size_t)rank * count;
            memcpy(src, in, count * 4);
        }
        NCCL_OK(L.AllGather(src, out, count, ncclInt32, c, NULL), "allgather");
        long bad = -1;
        for (size_t q = 0; q < n; q++)
            for (size_t i = 0; i < count && bad < 0; i++)
                if (out[q * count + i] != (int32_t)((int)q * 1000003 + (int)i))
                    bad = (long)(q * count + i);
        CHECK(bad < 0, "%s: allgather count %zu %s: element %ld wrong", w->name, count,
              in_place ? "in place" : "out of place", bad);
    }
    free(in);
    free(out);
}

static void check_reduce_scatter(const world *w, ncclComm_t c, int rank, ncclDataType_t t,
                                 size_t count)
{
    size_t n = (size_t)w->n, es = tsize(t);
    char *in = malloc(n * count * es + 1), *out = malloc(count * es + 1);
    char *want = malloc(count * es + 1);
    for (size_t j = 0; j < n * count; j++) set(t, in, j, val(t, rank, j));
    for (size_t i = 0; i < count; i++)
        set(t, want, i, fold_exact(t, ncclSum, w->n, (size_t)rank * count + i));
    NCCL_OK(L.ReduceScatter(in, out, count, t, ncclSum, c, NULL), "reducescatter");
    CHECK(first_diff(t, out, want, count) < 0, "%s: reducescatter type %d count %zu wrong", w->name,
          t, count);
    /* in place: recvbuff is this rank's piece of sendbuff */
    char *mine = in + (size_t)rank * count * es;
    NCCL_OK(L.ReduceScatter(in, mine, count, t, ncclSum, c, NULL), "reducescatter in place");
    CHECK(first_diff(t, mine, want, count) < 0, "%s: reducescatter in place type %d count %zu",
          w->name, t, count);
    free(in);
    free(out);
    free(want);
}

/* ------------------------------------------------------------- point to point ---- */
static uint8_t msg_byte(int from, int to, size_t i)
{
    return (uint8_t)(i * 131u + (size_t)from * 17u + (size_t)to * 5u);
}

/* Every rank sends `bytes` to every rank (itself included) in one group; odd ranks post their
 * receives first, even ranks their sends. */
static void check_alltoall(const world *w, ncclComm_t c, int rank, size_t bytes)
{
    size_t n = (size_t)w->n;
    uint8_t *out = malloc(n * bytes + 1), *in = malloc(n * bytes + 1);
    for (size_t q = 0; q < n; q++)
        for (size_t i = 0; i < bytes; i++) out[q * bytes + i] = msg_byte(rank, (int)q, i);
    memset(in, 0, n * bytes);
    NCCL_OK(L.GroupStart(), "group start");
    for (int pass = 0; pass < 2; pass++) {
        bool sends = (pass == 0) == (rank % 2 == 0);
        for (int q = 0; q < w->n; q++) {
            if (sends)
                NCCL_OK(L.Send(out + (size_t)q * bytes, bytes, ncclUint8, q, c, NULL), "send");
            else
                NCCL_OK(L.Recv(in + (size_t)q * bytes, bytes, ncclUint8, q, c, NULL), "recv");
        }
    }
    NCCL_OK(L.GroupEnd(), "group end (all to all)");
    long bad = -1;
    for (size_t q = 0; q < n && bad < 0; q++)
        for (size_t i = 0; i < bytes && bad < 0; i++)
            if (in[q * bytes + i] != msg_byte((int)q, rank, i)) bad = (long)(q * bytes + i);
    CHECK(bad < 0, "%s: all to all of %zu bytes: byte %ld wrong", w->name, bytes, bad);
    free(out);
    free(in);
}

/* Two messages each way between ranks 0 and 1, kept in order; outside groups, rank 0 sends
 * first and rank 1 receives first (as NCCL users must pair them). */
static void check_pairs(const world *w, ncclComm_t c, int rank, size_t count)
{
    if (rank > 1) return;
    int peer = 1 - rank;
    double *a = malloc(count * 8), *b = malloc(count * 8), *ra = malloc(count * 8),
           *rb = malloc(count * 8);
    for (size_t i = 0; i < count; i++) a[i] = (double)i + rank, b[i] = -(double)i - rank;
    NCCL_OK(L.GroupStart(), "group");
    NCCL_OK(L.Send(a, count, ncclFloat64, peer, c, NULL), "send a");
    NCCL_OK(L.Recv(ra, count, ncclFloat64, peer, c, NULL), "recv a");
    NCCL_OK(L.Send(b, count, ncclFloat64, peer, c, NULL), "send b");
    NCCL_OK(L.Recv(rb, count, ncclFloat64, peer, c, NULL), "recv b");
    NCCL_OK(L.GroupEnd(), "group end (pairs)");
    long bad = -1;
    for (size_t i = 0; i < count && bad < 0; i++)
        if (ra[i] != (double)i + peer || rb[i] != -(double)i - peer) bad = (long)i;
    CHECK(bad < 0, "%s: grouped pair messages of %zu doubles: element %ld wrong", w->name, count,
          bad);
    memset(ra, 0, count * 8);
    if (rank == 0) {
        NCCL_OK(L.Send(a, count, ncclFloat64, peer, c, NULL), "send alone");
        NCCL_OK(L.Recv(ra, count, ncclFloat64, peer, c, NULL), "recv alone");
    } else {
        NCCL_OK(L.Recv(ra, count, ncclFloat64, peer, c, NULL), "recv alone");
        NCCL_OK(L.Send(a, count, ncclFloat64, peer, c, NULL), "send alone");
    }
    bad = -1;
    for (size_t i = 0; i < count && bad < 0; i++)
        if (ra[i] != (double)i + peer) bad = (long)i;
    CHECK(bad < 0, "%s: ungrouped messages of %zu doubles: element %ld wrong", w->name, count, bad);
    free(a);
    free(b);
    free(ra);
    free(rb);
}

/* distributed/nccl_pg.c's all_gather: one broadcast per root, as bytes, in one group. */
static void check_engine_allgather(const world *w, ncclComm_t c, int rank, size_t bytes)
{
    uint8_t *in = malloc(bytes), *outs[8];
    for (size_t i = 0; i < bytes; i++) in[i] = msg_byte(rank, 0, i);
    for (int q = 0; q < w->n; q++) outs[q] = calloc(1, bytes);
    NCCL_OK(L.GroupStart(), "group");
    for (int q = 0; q < w->n; q++)
        NCCL_OK(L.Broadcast(in, outs[q], bytes, ncclUint8, q, c, NULL), "broadcast in group");
    NCCL_OK(L.GroupEnd(), "group end (broadcasts)");
    int good = 0;
    for (int q = 0; q < w->n; q++) {
        size_t i = 0;
        while (i < bytes && outs[q][i] == msg_byte(q, 0, i)) i++;
        good += i == bytes;
        free(outs[q]);
    }
    CHECK(good == w->n, "%s: grouped broadcasts of %zu bytes: %d of %d right", w->name, bytes, good,
          w->n);
    free(in);
}

/* ------------------------------------------------------------------ the suite ---- */
void rank_suite(const world *w, int rank)
{
    ncclComm_t c = init_comm(w, rank, &sh->ids[0]);
    if (!c) return;
    int cnt = -1, me = -1;
    NCCL_OK(L.CommCount(c, &cnt), "count");
    NCCL_OK(L.CommUserRank(c, &me), "user rank");
    CHECK(cnt == w->n && me == rank, "%s: count %d rank %d", w->name, cnt, me);

    /* every type and operation; counts beyond the staging area need a few chunks */
    const size_t big = w->small ? 3001 : 300007;
    const size_t counts[] = {0, 1, 1001, big};
    for (int ti = 0; ti < NTYPES; ti++)
        for (int op = 0; op < ncclNumOps; op++)
            for (int k = 0; k < 4; k++) {
                if (k == 3 && !w->small && op != ncclSum && op != ncclMax) continue;
                check_allreduce(w, c, rank, all_types[ti], (ncclRedOp_t)op, counts[k],
                                (ti + op + k) % 2 == 0);
            }
    /* count 0 with NULL buffers is fine, as in NCCL */
    NCCL_OK(L.AllReduce(NULL, NULL, 0, ncclFloat32, ncclSum, c, NULL), "allreduce of 0");
    check_identical(w, c, rank, ncclFloat32);
    check_identical(w, c, rank, ncclFloat16);
    check_identical(w, c, rank, ncclBfloat16);
    check_identical(w, c, rank, ncclFloat64);

    size_t large = w->small ? 2500 : 1000003; /* 4 MB of float32 */
    check_broadcast(w, c, rank, 5);
    check_broadcast(w, c, rank, large);
    check_reduce(w, c, rank, 3);
    check_reduce(w, c, rank, w->small ? 999 : 400001);
    check_allgather(w, c, rank, 1);
    check_allgather(w, c, rank, w->small ? 777 : 600001);
    for (int ti = 0; ti < NTYPES; ti++) check_reduce_scatter(w, c, rank, all_types[ti], 1);
    check_reduce_scatter(w, c, rank, ncclFloat32, w->small ? 1234 : 500003);
    check_reduce_scatter(w, c, rank, ncclBfloat16, w->small ? 1234 : 500003);
    check_reduce_scatter(w, c, rank, ncclInt8, w->small ? 555 : 70001);

    check_alltoall(w, c, rank, 3);
    check_alltoall(w, c, rank, w->small ? 1999 : (1u << 20) + 17); /* beyond a ring */
    check_pairs(w, c, rank, 5);
    check_pairs(w, c, rank, w->small ? 333 : 100003);
    check_engine_allgather(w, c, rank, w->small ? 2049 : (3u << 20) + 5);

    /* finalize: non-blocking reports ncclInProgress, then the state settles */
    ncclResult_t r = L.CommFinalize(c);
    if (w->blocking || w->plain_init) {
        CHECK(r == ncclSuccess, "%s: finalize: %s", w->name, L.GetErrorString(r));
    } else {
        CHECK(r == ncclInProgress, "%s: non-blocking finalize: %s", w->name, L.GetErrorString(r));
        ncclResult_t state = ncclInProgress;
        double t0 = now_s();
        while (state == ncclInProgress && now_s() - t0 < 10) L.CommGetAsyncError(c, &state);
        CHECK(state == ncclSuccess, "%s: finalize settled in %s", w->name, L.GetErrorString(state));
    }
    float x = 1;
    r = L.AllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, NULL);
    CHECK(r == ncclInvalidUsage, "%s: allreduce after finalize: %s", w->name, L.GetErrorString(r));
    NCCL_OK(L.CommDestroy(c), "destroy");
}

/* Ranks that disagree fail, on every rank, instead of hanging or reading wrong data. */
void rank_misuse(const world *w, int rank)
{
    ncclComm_t c = init_comm(w, rank, &sh->ids[1]);
    if (!c) return;
    float buf[8] = {0};
    ncclResult_t r = L.AllReduce(buf, buf, rank == 0 ? 5 : 6, ncclFloat32, ncclSum, c, NULL);
    CHECK(r == ncclInvalidUsage, "mismatched counts: %s", L.GetErrorString(r));
    CHECK(strstr(L.GetLastError(c), "different collectives") != NULL, "message: %s",
          L.GetLastError(c));
    ncclResult_t state = ncclSuccess;
    L.CommGetAsyncError(c, &state);
    CHECK(state == ncclInvalidUsage, "the mismatch breaks the communicator: %s",
          L.GetErrorString(state));
    NCCL_OK(L.CommAbort(c), "abort");

    c = init_comm(w, rank, &sh->ids[2]);
    if (!c) return;
    if (rank == 0) {
        /* fits in the ring: the send returns at once */
        NCCL_OK(L.Send(buf, 4, ncclFloat32, 1, c, NULL), "send 16 bytes");
    } else {
        r = L.Recv(buf, 8, ncclFloat32, 0, c, NULL);
        CHECK(r == ncclInvalidUsage, "recv of 32 bytes met a send of 16: %s", L.GetErrorString(r));
    }
    NCCL_OK(L.CommAbort(c), "abort");
}
