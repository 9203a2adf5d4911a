/* cuemu/nccl/nccl_standin_seg.c: the unique id and the shared-memory segment of a communicator:
 * creating or opening it, the rank slots, the wait for every rank, unlinking, unmapping.
 * defines: ncclGetUniqueId (nccl.h); standin_seg_join, standin_seg_leave, standin_stage,
 *          standin_mbox_of, standin_mbox_data (nccl_standin.h).
 *
 * The id names a POSIX shared-memory object ("/ddpl-cuemu-nccl-<pid>-<random>"), where real
 * NCCL's id holds the address of rank 0's bootstrap socket. Whichever rank comes first creates
 * it (O_CREAT|O_EXCL: exactly one wins), sizes it with posix_fallocate (a /dev/shm too small
 * fails here, cleanly, instead of SIGBUS at a later write), fills the header and sets `ready`;
 * the others open it, wait for `ready` and check that they agree on the number of ranks. Each
 * rank claims its slot (pid, start time) and waits until every slot is taken; then the name is
 * unlinked by every rank (the first succeeds), so nothing is left in /dev/shm whatever happens
 * to the processes later: the memory lives while a rank still maps it. A rank that gives up
 * before every rank has joined unlinks the name too.
 *
 * Sizes: two staging buffers per rank of `stage_bytes` (DDPL_CUEMU_NCCL_STAGE_BYTES, else
 * 8 MiB / nranks clamped to [64 KiB, 2 MiB]) and nranks^2 mailboxes of `mbox_bytes`
 * (DDPL_CUEMU_NCCL_MAILBOX_BYTES, else 4 MiB / nranks^2 clamped to [4 KiB, 256 KiB]): about
 * 9 MiB for 2 ranks. The creator's environment decides; the others read the sizes from the
 * header. Small values from the environment exist for tests (chunking, ring wrap-around). */
#include "nccl_standin.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ID_MAGIC     "CUEMUNCL" /* the id's first 8 bytes; the name follows, NUL-terminated */
#define ID_MAGIC_LEN 8

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    if (!uniqueId) return standin_fail(NULL, ncclInvalidArgument, "ncclGetUniqueId: uniqueId NULL");
    uint64_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        /* no entropy source: the time and an address still make a collision unlikely */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        rnd = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&ts;
    }
    memset(uniqueId, 0, sizeof *uniqueId);
    memcpy(uniqueId->internal, ID_MAGIC, ID_MAGIC_LEN);
    snprintf(uniqueId->internal + ID_MAGIC_LEN, sizeof uniqueId->internal - ID_MAGIC_LEN,
             "/ddpl-cuemu-nccl-%ld-%016llx", (long)getpid(), (unsigned long long)rnd);
    return ncclSuccess;
}

/* ------------------------------------------------------------------------ layout ---- */
static size_t round_down(size_t v, size_t to)
{
    return v / to * to;
}

static size_t round_up(size_t v, size_t to)
{
    return (v + to - 1) / to * to;
}

/* An environment size in bytes, or dflt when unset or unreadable. */
static size_t env_bytes(const char *name, size_t dflt)
{
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    return *end || v == 0 ? dflt : (size_t)v;
}

static size_t clampz(size_t v, size_t lo, size_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static size_t mbox_stride(const standin_seg *seg)
{
    return sizeof(standin_mbox) + (size_t)seg->mbox_bytes;
}

/* Fills the header of a new segment for n ranks (the memory is zero: a fresh tmpfs object). */
static void layout(standin_seg *seg, int n, size_t *total)
{
    size_t stage = env_bytes("DDPL_CUEMU_NCCL_STAGE_BYTES",
                             clampz((8u << 20) / (size_t)n, 64u << 10, 2u << 20));
    size_t mbox = env_bytes("DDPL_CUEMU_NCCL_MAILBOX_BYTES",
                            clampz((4u << 20) / ((size_t)n * (size_t)n), 4u << 10, 256u << 10));
    /* a chunk of ReduceScatter is stage / (n * 8) elements of 8 bytes: at least one */
    stage = round_down(stage, STANDIN_LINE);
    if (stage < (size_t)n * 8u) stage = round_up((size_t)n * 8u, STANDIN_LINE);
    mbox = round_down(mbox, STANDIN_LINE);
    if (mbox < STANDIN_LINE) mbox = STANDIN_LINE;
    size_t head = sizeof(standin_seg) + (size_t)n * sizeof(standin_rank_slot);
    seg->layout = STANDIN_SEG_LAYOUT;
    seg->nranks = n;
    seg->stage_bytes = stage;
    seg->mbox_bytes = mbox;
    seg->stage_off = round_up(head, 4096);
    seg->mbox_off = seg->stage_off + 2u * (size_t)n * stage;
    *total = seg->mbox_off + (size_t)n * (size_t)n * (sizeof(standin_mbox) + mbox);
    seg->total_bytes = *total;
}

/* The header's sizes for n ranks, before the segment exists (to size it). */
static size_t layout_total(int n)
{
    size_t head = sizeof(standin_seg) + (size_t)n * sizeof(standin_rank_slot);
    standin_seg *tmp = calloc(1, head);
    size_t total = 0;
    if (tmp) layout(tmp, n, &total);
    free(tmp);
    return total;
}

char *standin_stage(ncclComm_t comm, int r, int parity)
{
    const standin_seg *seg = comm->seg;
    return (char *)seg + seg->stage_off + ((size_t)r * 2u + (size_t)parity) * seg->stage_bytes;
}

standin_mbox *standin_mbox_of(ncclComm_t comm, int src, int dst)
{
    const standin_seg *seg = comm->seg;
    size_t i = (size_t)src * (size_t)seg->nranks + (size_t)dst;
    return (standin_mbox *)((char *)seg + seg->mbox_off + i * mbox_stride(seg));
}

char *standin_mbox_data(ncclComm_t comm, int src, int dst)
{
    return (char *)standin_mbox_of(comm, src, dst) + sizeof(standin_mbox);
}

/* ----------------------------------------------------------------------- joining ---- */
static void nap_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* The segment's name from the id: 0, or -1 when the id is not one of ours. */
static int name_of(const ncclUniqueId *id, char *name, size_t n)
{
    if (memcmp(id->internal, ID_MAGIC, ID_MAGIC_LEN) != 0) return -1;
    const char *s = id->internal + ID_MAGIC_LEN;
    size_t len = strnlen(s, sizeof id->internal - ID_MAGIC_LEN);
    if (len == 0 || len >= n || len == sizeof id->internal - ID_MAGIC_LEN || s[0] != '/') return -1;
    memcpy(name, s, len + 1);
    return 0;
}

/* Creates the object (this rank came first): sized, mapped, header filled, ready set. */
static ncclResult_t create_seg(ncclComm_t comm, int fd)
{
    size_t total = layout_total(comm->nranks);
    if (total == 0) return standin_fail(comm, ncclSystemError, "out of host memory");
    int e = ftruncate(fd, (off_t)total) < 0 ? errno : posix_fallocate(fd, 0, (off_t)total);
    if (e != 0)
        return standin_fail(comm, ncclSystemError,
                            "cannot size the shared-memory segment %s to %zu bytes: %s (is "
                            "/dev/shm too small?)",
                            comm->shm_name, total, strerror(e));
    void *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return standin_fail(comm, ncclSystemError, "cannot map %s (%zu bytes): %s", comm->shm_name,
                            total, strerror(errno));
    standin_seg *seg = p;
    layout(seg, comm->nranks, &total);
    comm->seg = seg;
    comm->seg_bytes = total;
    atomic_store(&seg->ready, STANDIN_SEG_READY);
    return ncclSuccess;
}

/* Maps an object another rank created, once it is ready; checks that it agrees. */
static ncclResult_t open_seg(ncclComm_t comm, int fd)
{
    double t0 = standin_now();
    struct stat st;
    for (;;) {
        if (fstat(fd, &st) < 0)
            return standin_fail(comm, ncclSystemError, "fstat %s: %s", comm->shm_name,
                                strerror(errno));
        if (st.st_size > 0) break; /* the creator's ftruncate gives the full size at once */
        if (st.st_nlink == 0)
            return standin_fail(comm, ncclSystemError,
                                "the rank that created %s gave up before sizing it",
                                comm->shm_name);
        if (atomic_load(&comm->aborting))
            return standin_fail(comm, ncclSystemError, "aborted while joining");
        if (standin_now() - t0 > comm->timeout_s)
            return standin_fail(comm, ncclSystemError, "%s was never sized (timeout %g s)",
                                comm->shm_name, comm->timeout_s);
        nap_ms(1);
    }
    size_t size = (size_t)st.st_size;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return standin_fail(comm, ncclSystemError, "cannot map %s (%zu bytes): %s", comm->shm_name,
                            size, strerror(errno));
    standin_seg *seg = p;
    comm->seg = seg; /* mapped: standin_seg_leave unmaps it from here on */
    comm->seg_bytes = size;
    while (atomic_load(&seg->ready) != STANDIN_SEG_READY) {
        if (fstat(fd, &st) == 0 && st.st_nlink == 0)
            return standin_fail(comm, ncclSystemError,
                                "the rank that created %s gave up before filling it",
                                comm->shm_name);
        if (atomic_load(&comm->aborting))
            return standin_fail(comm, ncclSystemError, "aborted while joining");
        if (standin_now() - t0 > comm->timeout_s)
            return standin_fail(comm, ncclSystemError, "%s never became ready (timeout %g s)",
                                comm->shm_name, comm->timeout_s);
        nap_ms(1);
    }
    if (seg->layout != STANDIN_SEG_LAYOUT || seg->total_bytes != size)
        return standin_fail(comm, ncclInvalidUsage,
                            "%s was made by another build of the stand-in (layout %u, %llu "
                            "bytes)",
                            comm->shm_name, seg->layout, (unsigned long long)seg->total_bytes);
    if (seg->nranks != comm->nranks)
        return standin_fail(comm, ncclInvalidUsage,
                            "this rank was told nranks=%d, a rank that joined first nranks=%d "
                            "(same ncclUniqueId, different sizes)",
                            comm->nranks, seg->nranks);
    return ncclSuccess;
}

typedef struct join_wait {
    ncclComm_t comm;
} join_wait;

static int joined_step(void *arg, ncclResult_t *err)
{
    (void)err;
    ncclComm_t c = ((join_wait *)arg)->comm;
    for (int q = 0; q < c->nranks; q++)
        if (atomic_load(&c->seg->ranks[q].state) == STANDIN_RANK_EMPTY) return STANDIN_IDLE;
    return STANDIN_DONE;
}

static void joined_pending(void *arg, char *buf, size_t n)
{
    ncclComm_t c = ((join_wait *)arg)->comm;
    size_t used = (size_t)snprintf(buf, n, "ranks that never joined:");
    for (int q = 0; q < c->nranks && used < n; q++)
        if (atomic_load(&c->seg->ranks[q].state) == STANDIN_RANK_EMPTY)
            used += (size_t)snprintf(buf + used, n - used, " %d", q);
}

/* Takes slot comm->rank (the pid claims it: a second claim is refused) and announces it. */
static ncclResult_t claim_slot(ncclComm_t comm)
{
    standin_rank_slot *slot = &comm->seg->ranks[comm->rank];
    int32_t expect = 0;
    if (!__atomic_compare_exchange_n(&slot->pid, &expect, (int32_t)getpid(), false,
                                     __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        return standin_fail(comm, ncclInvalidUsage,
                            "rank %d joined twice (pid %d has it already): two ranks were given "
                            "the same rank number",
                            comm->rank, (int)expect);
    comm->claimed = true;
    slot->start_time = standin_self_start_time();
    atomic_store(&slot->state, STANDIN_RANK_JOINED);
    for (int q = 0; q < comm->nranks; q++)
        if (q != comm->rank) standin_ring(comm, q);
    return ncclSuccess;
}

ncclResult_t standin_seg_join(ncclComm_t comm, const ncclUniqueId *id)
{
    if (name_of(id, comm->shm_name, sizeof comm->shm_name) < 0)
        return standin_fail(comm, ncclInvalidArgument,
                            "the ncclUniqueId was not made by this stand-in's ncclGetUniqueId "
                            "(or was corrupted in transit)");
    int fd = -1;
    bool created = false;
    double t0 = standin_now();
    /* create, or open; an object that vanished between the two (its creator gave up) is
     * created anew */
    while (fd < 0) {
        fd = shm_open(comm->shm_name, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd >= 0) {
            created = true;
            break;
        }
        if (errno == EEXIST) fd = shm_open(comm->shm_name, O_RDWR, 0);
        if (fd < 0 && errno != ENOENT)
            return standin_fail(comm, ncclSystemError, "shm_open %s: %s", comm->shm_name,
                                strerror(errno));
        if (fd < 0 && standin_now() - t0 > comm->timeout_s)
            return standin_fail(comm, ncclSystemError, "cannot open %s (timeout %g s)",
                                comm->shm_name, comm->timeout_s);
    }
    ncclResult_t r = created ? create_seg(comm, fd) : open_seg(comm, fd);
    close(fd); /* the mapping keeps the object */
    if (r == ncclSuccess) r = claim_slot(comm);
    if (r == ncclSuccess) {
        join_wait jw = {comm};
        standin_waiter w = {joined_step, joined_pending, &jw, "ncclCommInitRank"};
        standin_watch watch = {comm, ~0ull};
        r = standin_wait(&w, &watch, 1);
    }
    if (r != ncclSuccess) {
        standin_seg_leave(comm, STANDIN_RANK_FAILED);
        return r;
    }
    /* every rank has mapped it: the name can go (the first rank here removes it) */
    shm_unlink(comm->shm_name);
    comm->unlinked = true;
    return ncclSuccess;
}

void standin_seg_leave(ncclComm_t comm, uint32_t final_state)
{
    if (comm->seg) {
        standin_rank_slot *slot = &comm->seg->ranks[comm->rank];
        if (comm->claimed) {
            /* a failure stays a failure: peers report it as such */
            uint32_t s = atomic_load(&slot->state);
            if (s != STANDIN_RANK_FAILED) atomic_store(&slot->state, final_state);
            for (int q = 0; q < comm->nranks; q++)
                if (q != comm->rank) standin_ring(comm, q);
        }
        munmap(comm->seg, comm->seg_bytes);
        comm->seg = NULL;
    }
    if (!comm->unlinked && comm->shm_name[0]) {
        shm_unlink(comm->shm_name);
        comm->unlinked = true;
    }
}
