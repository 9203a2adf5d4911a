/* distributed/shm_coll.c: shared-memory collectives for ranks on one machine (see shm_coll.h).
 * defines: ddpl_shm_connect, ddpl_shm_expect, ddpl_shm_allreduce, ddpl_shm_broadcast,
 *          ddpl_shm_allgather, ddpl_shm_barrier, ddpl_shm_checked_barrier, ddpl_shm_free,
 *          ddpl_shm_buffer_new/data/nbytes/allreduce/free, the heartbeat's calls
 *          (ddpl_shm_watch, ddpl_shm_beat, ddpl_shm_silence), ddpl_shm_machine_id; the
 *          staging accessors of distributed/shm_coll_rooted.h (ddpl_shm_staging, ...).
 *
 * Layout of the segment (/dev/shm/ddplua-<job>): a header with the barrier words, then two
 * sets of `size` per-rank buffers of CHUNK bytes. A tensor goes through in chunks; per chunk:
 *   1. rank r copies its chunk into its buffer of the current set;
 *   2. barrier;
 *   3. rank r reduces elements [r*m/N, (r+1)*m/N) of all N buffers into buffer 0 (disjoint
 *      ranges, so no locking);
 *   4. barrier;
 *   5. every rank copies buffer 0 back into its tensor.
 * Alternating the two sets between chunks makes a third barrier unnecessary: a rank overwrites a
 * set only after the barrier of step 4 of the next chunk, which every rank reaches after
 * finishing step 5 with that set. Barriers are a sense-reversing counter that spins briefly,
 * then sleeps on a futex (shared, with the group's timeout). Ranks that outnumber the CPUs they
 * may run on do not spin: the peer a spinning rank waits for is then often waiting for a core,
 * the one the spinner holds (docs/internals/scaling.md, "Ranks that share cores", has the A/B).
 *
 * Shared buffers (ddpl_shm_buffer) skip steps 1 and 5: every rank's data already lies where the
 * others can read it, so rank r sums its share of the elements over all N parts and writes the
 * sums into every part; one more barrier and every part holds the result. (Writing the sums
 * only into the own part and having every rank gather the other shares afterwards needs a
 * third barrier and measured twice as slow for 1 MB on 2 ranks: 78 vs 40 us, the gather's
 * writes to lines the peer still holds being the expensive part.) Values a rank keeps outside
 * its part (segments: the DDP gradients) are copied into the part only where other ranks read
 * them (their shares), read in place for its own share, where the sums are also written, and
 * the other shares' sums are copied back to them after the second barrier.
 * Before the first barrier of every operation (allreduce, broadcast, allgather, barrier, buffer
 * creation) each rank writes into its tag slot the fingerprint of the call it is making
 * (ddpl_shm_expect: operation, dtype, element count, reduce op, root, sequence number) and, for
 * an allreduce, what it is about to reduce (buffer, offset, count; buffer 0 for a staged
 * tensor); after it, every rank compares the slots, so ranks that disagree (a bug, or ranks that
 * issued collectives in different orders) get an error naming every rank's call, on every rank,
 * before anything is reduced or copied out: no barrier beyond those the operations already have.
 * The slots alternate between two sets, one per comparison: a rank writes the set of comparison
 * k + 2 only after passing the first barrier of comparison k + 1, which every rank reaches after
 * finishing comparison k. An operation of no bytes still has its one barrier, for the check.
 *
 * Faults: a barrier that waits re-checks its peers every 100 ms. A peer whose process is gone is
 * named at once; one whose heartbeat (its heartbeat thread's time stamp in the header, written
 * every few seconds by distributed/pg_heartbeat.c whatever the rank's main thread does) is older
 * than the limit is named as stopped, with what /proc says of it (distributed/peer_fault.h); a peer
 * that beats but does not come (busy elsewhere, or never calling the collective) only at the
 * group's timeout, naming the ranks that did not arrive.
 *
 * Segments are sized with posix_fallocate, not just ftruncate: a tmpfs that is too small (a
 * container's 64 MB /dev/shm) then fails here, cleanly, instead of killing the process with
 * SIGBUS at the first write to a page it cannot back. */
#define _GNU_SOURCE
#include "distributed/shm_coll.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "distributed/peer_fault.h"
#include "distributed/pg_fingerprint.h"

enum { CHUNK = 4 << 20, HEADER = 256 << 10, SPINS = 4000 }; /* bytes, bytes (pages), pause loops */

enum { MAX_RANKS = 1000 };

/* the call a rank is making, and what it is about to all-reduce (shared buffer id, 0 for a
 * staged tensor; offset; count; all 0 for other operations) */
typedef struct shm_tag {
    uint64_t buffer, offset, count;
    ddpl_pg_fp fp;
} shm_tag;

typedef struct shm_header {
    _Atomic uint32_t arrived;    /* ranks at the current barrier */
    _Atomic uint32_t generation; /* bumped by the last rank to arrive; waiters sleep on it */
    int32_t pids[MAX_RANKS];     /* so a waiter notices a peer that exited, before the timeout */
    /* generation + 1 once rank r reached the barrier of that generation: a waiter that times out
     * names the ranks that never came (one relaxed store per barrier and rank) */
    _Atomic uint32_t reached[MAX_RANKS];
    shm_tag tags[2][MAX_RANKS]; /* [comparison % 2][rank] */
    /* shared-buffer creation: 2 * id + 1 once rank r created (mapped) its parts, 2 * id if not */
    uint32_t created[MAX_RANKS], mapped[MAX_RANKS];
    /* CLOCK_MONOTONIC (one clock for the whole machine) in ms when rank r's heartbeat thread last
     * beat (ddpl_shm_beat); 0 while it has not */
    _Atomic uint64_t beat_ms[MAX_RANKS];
} shm_header;
_Static_assert(sizeof(shm_header) <= HEADER, "the header must fit its pages");

struct ddpl_shm {
    int rank, size;
    double timeout_s;
    char *base;
    size_t bytes;
    shm_header *hdr;
    int set;            /* buffer set of the next chunk */
    char name[96];      /* of the segment; shared buffers are named after it */
    uint64_t n_buffers; /* shared buffers created so far (the same count on every rank) */
    uint64_t n_agreed;  /* tag comparisons so far (the same count on every rank) */
    ddpl_pg_fp fp;      /* of the call being made (ddpl_shm_expect) */
    double watch_s;     /* heartbeat limit (ddpl_shm_watch); 0: peers' heartbeats not checked */
    int spins;          /* pause loops before a barrier sleeps; 0: more ranks than CPUs */
    int *global;        /* group rank -> global rank, for messages; NULL: the same */
    char *host;         /* this machine's name in messages (ddpl_shm_watch); NULL: none */
};

/* Rank q's part starts PART_SKEW * (q % 2) bytes into its segment. Every part would otherwise
 * start on a page boundary, so element i of two parts would sit in the same L1 set, and when
 * the two mappings also happen to be a distance apart whose virtual-address hash matches (AMD's
 * L1 "utag": 0x108000 bytes is one such distance, and the kernel placed a 1 MB bucket's parts
 * exactly so), a loop touching both parts at i misses L1 at every access: the two-rank sum of a
 * 0.5 MB share took 113 us instead of 12. Half a page apart, the lines a loop touches together
 * are never in one set. */
enum { PART_SKEW = 2048 };

struct ddpl_shm_buffer {
    uint64_t id; /* 1, 2, ... in creation order */
    int rank, size;
    size_t nbytes;
    char **parts; /* parts[q]: rank q's part, mapped here (PART_SKEW into its mapping) */
    char **maps;  /* the mappings, of map_bytes each */
    size_t map_bytes;
};

static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
    return syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Rank q's global rank, for messages. */
static int global_rank(const ddpl_shm *s, int q)
{
    return s->global ? s->global[q] : q;
}

/* The ranks that have not reached the barrier of generation gen, as "rank 3" or "ranks 1, 3". */
static void missing_ranks(const ddpl_shm *s, uint32_t gen, char *out, size_t n)
{
    int count = 0;
    for (int q = 0; q < s->size; q++)
        count += atomic_load_explicit(&s->hdr->reached[q], memory_order_relaxed) != gen + 1;
    size_t used = (size_t)snprintf(out, n, "%s", count == 1 ? "rank " : "ranks ");
    for (int q = 0, listed = 0; q < s->size && used + 16 < n; q++) {
        if (atomic_load_explicit(&s->hdr->reached[q], memory_order_relaxed) == gen + 1) continue;
        used +=
            (size_t)snprintf(out + used, n - used, "%s%d", listed++ ? ", " : "", global_rank(s, q));
    }
    if (count == 0) snprintf(out, n, "a peer"); /* all came, the last one too late to see */
}

static uint64_t now_ms(void)
{
    return (uint64_t)(now_s() * 1000.0);
}

/* -1 with the error when a peer that has not reached the barrier of generation gen is known to
 * be lost: its process is gone, or (with a heartbeat limit) its heartbeat is older than the
 * limit; else 0. */
static int check_peers(const ddpl_shm *s, uint32_t gen)
{
    char label[96], msg[512];
    for (int q = 0; q < s->size; q++) {
        int pid = s->hdr->pids[q];
        /* a rank that reached this barrier is not what it waits for, even if it has exited
         * since (its error, say, ended it before this rank woke up) */
        if (q == s->rank ||
            atomic_load_explicit(&s->hdr->reached[q], memory_order_relaxed) == gen + 1)
            continue;
        if (peer_gone(pid, NULL)) {
            peer_label(label, sizeof label, global_rank(s, q), pid, s->host);
            return ddpl_error("%s exited while the others waited for it in a collective", label);
        }
        if (!(s->watch_s > 0)) continue;
        uint64_t beat = atomic_load_explicit(&s->hdr->beat_ms[q], memory_order_relaxed);
        double silent = beat ? (double)(now_ms() - beat) / 1000.0 : 0;
        if (silent <= s->watch_s) continue;
        peer_label(label, sizeof label, global_rank(s, q), pid, s->host);
        peer_silent_msg(msg, sizeof msg, label, pid, NULL, silent, s->watch_s);
        return ddpl_error("%s", msg);
    }
    return 0;
}

void ddpl_shm_watch(ddpl_shm *s, double limit_s, const int *global, const char *host)
{
    s->watch_s = limit_s > 0 ? limit_s : 0;
    free(s->host);
    s->host = host ? ddpl_xstrdup(host) : NULL;
    free(s->global);
    s->global = NULL;
    if (global)
        s->global = memcpy(ddpl_xmalloc((size_t)s->size * sizeof *global), global,
                           (size_t)s->size * sizeof *global);
}

void ddpl_shm_beat(ddpl_shm *s)
{
    atomic_store_explicit(&s->hdr->beat_ms[s->rank], now_ms(), memory_order_relaxed);
}

double ddpl_shm_silence(const ddpl_shm *s, int q)
{
    uint64_t beat = atomic_load_explicit(&s->hdr->beat_ms[q], memory_order_relaxed);
    return beat ? (double)(now_ms() - beat) / 1000.0 : -1;
}

int ddpl_shm_pid(const ddpl_shm *s, int q)
{
    return s->hdr->pids[q];
}

int ddpl_shm_barrier(ddpl_shm *s)
{
    uint32_t gen = atomic_load(&s->hdr->generation);
    atomic_store_explicit(&s->hdr->reached[s->rank], gen + 1, memory_order_relaxed);
    if (atomic_fetch_add(&s->hdr->arrived, 1) == (uint32_t)s->size - 1) {
        atomic_store(&s->hdr->arrived, 0);
        atomic_fetch_add(&s->hdr->generation, 1);
        futex(&s->hdr->generation, FUTEX_WAKE, INT_MAX, NULL);
        return 0;
    }
    for (int i = 0; i < s->spins; i++) {
        if (atomic_load(&s->hdr->generation) != gen) return 0;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause(); /* lets the sibling hyper-thread run while spinning */
#endif
    }
    double deadline = now_s() + s->timeout_s;
    while (atomic_load(&s->hdr->generation) == gen) {
        double left = deadline - now_s();
        if (left <= 0) {
            char who[256];
            missing_ranks(s, gen, who, sizeof who);
            return ddpl_error("shared-memory barrier timed out after %g s: %s of the group did "
                              "not arrive (stopped, or busy in something else)",
                              s->timeout_s, who);
        }
        /* the barrier may have completed since the loop's test: then nothing is lost */
        if (check_peers(s, gen) < 0) return atomic_load(&s->hdr->generation) == gen ? -1 : 0;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 100000000}; /* re-check every 100 ms */
        futex(&s->hdr->generation, FUTEX_WAIT, gen, &ts);
    }
    return 0;
}

static char *buffer(ddpl_shm *s, int set, int r)
{
    return s->base + HEADER + ((size_t)set * (size_t)s->size + (size_t)r) * CHUNK;
}

static void describe_tag(shm_tag t, char *out, size_t n)
{
    if (t.buffer)
        snprintf(out, n, "%llu elements at byte %llu of shared buffer %llu",
                 (unsigned long long)t.count, (unsigned long long)t.offset,
                 (unsigned long long)t.buffer);
    else
        snprintf(out, n, "%llu elements of a tensor, from byte %llu", (unsigned long long)t.count,
                 (unsigned long long)t.offset);
}

void ddpl_shm_expect(ddpl_shm *s, const ddpl_pg_fp *fp)
{
    s->fp = *fp;
}

/* Publishes this rank's tag (with the call's fingerprint), passes the barrier, and checks that
 * every rank published the same. */
static int agree(ddpl_shm *s, shm_tag tag)
{
    tag.fp = s->fp;
    shm_tag *tags = s->hdr->tags[s->n_agreed++ & 1];
    tags[s->rank] = tag;
    if (ddpl_shm_barrier(s) < 0) return -1;
    for (int q = 0; q < s->size; q++) {
        if (ddpl_pg_fp_same(&tags[q].fp, &tag.fp)) continue;
        ddpl_pg_fp *fps = ddpl_xcalloc((size_t)s->size, sizeof *fps);
        for (int p = 0; p < s->size; p++) fps[p] = tags[p].fp;
        ddpl_pg_fp_check(&tag.fp, fps, s->size);
        free(fps);
        return -1;
    }
    for (int q = 0; q < s->size; q++) {
        shm_tag t = tags[q];
        if (t.buffer == tag.buffer && t.offset == tag.offset && t.count == tag.count) continue;
        char mine[128], theirs[128];
        describe_tag(tag, mine, sizeof mine);
        describe_tag(t, theirs, sizeof theirs);
        return ddpl_error("all_reduce: rank %d reduces %s, but rank %d reduces %s (the ranks "
                          "issued different collectives)",
                          s->rank, mine, q, theirs);
    }
    return 0;
}

/* The check of an operation that moves no bytes: one barrier. */
static int agree_only(ddpl_shm *s)
{
    return agree(s, (shm_tag){0});
}

int ddpl_shm_checked_barrier(ddpl_shm *s)
{
    return agree_only(s);
}

int ddpl_shm_allreduce(ddpl_shm *s, void *data, size_t count, size_t elsize, ddpl_reduce_fn fn)
{
    if (count == 0) return agree_only(s);
    size_t per_chunk = CHUNK / elsize;
    for (size_t first = 0; first < count; first += per_chunk) {
        size_t m = count - first < per_chunk ? count - first : per_chunk;
        char *mine = (char *)data + first * elsize;
        char *own = buffer(s, s->set, s->rank), *dst = buffer(s, s->set, 0);
        memcpy(own, mine, m * elsize);
        if (agree(s, (shm_tag){.offset = first * elsize, .count = m}) < 0) return -1;
        size_t lo = m * (size_t)s->rank / (size_t)s->size;
        size_t hi = m * (size_t)(s->rank + 1) / (size_t)s->size;
        for (int q = 1; q < s->size && hi > lo; q++)
            fn(dst + lo * elsize, dst + lo * elsize, buffer(s, s->set, q) + lo * elsize, hi - lo);
        if (ddpl_shm_barrier(s) < 0) return -1;
        memcpy(mine, dst, m * elsize);
        s->set ^= 1;
    }
    return 0;
}

/* One barrier per chunk suffices here too: a reader is done with a set before it enters the
 * next step, whose barrier the writer must pass before it reuses that set. */
int ddpl_shm_broadcast(ddpl_shm *s, void *data, size_t nbytes, int root)
{
    if (nbytes == 0) return agree_only(s);
    for (size_t off = 0; off < nbytes; off += CHUNK) {
        size_t m = nbytes - off < CHUNK ? nbytes - off : CHUNK;
        char *buf = buffer(s, s->set, 0);
        if (s->rank == root) memcpy(buf, (char *)data + off, m);
        if ((off == 0 ? agree_only(s) : ddpl_shm_barrier(s)) < 0) return -1;
        if (s->rank != root) memcpy((char *)data + off, buf, m);
        s->set ^= 1;
    }
    return 0;
}

int ddpl_shm_allgather(ddpl_shm *s, const void *in, void *out, size_t nbytes)
{
    if (nbytes == 0) return agree_only(s);
    for (size_t off = 0; off < nbytes; off += CHUNK) {
        size_t m = nbytes - off < CHUNK ? nbytes - off : CHUNK;
        memcpy(buffer(s, s->set, s->rank), (const char *)in + off, m);
        if ((off == 0 ? agree_only(s) : ddpl_shm_barrier(s)) < 0) return -1;
        for (int q = 0; q < s->size; q++)
            memcpy((char *)out + (size_t)q * nbytes + off, buffer(s, s->set, q), m);
        s->set ^= 1;
    }
    return 0;
}

/* Each chunk of every rank's input is staged once; rank r then sums, straight out of the staged
 * parts, the piece of the chunk inside its own block [r * count, (r + 1) * count) into out, in
 * rank order (the allreduce's order: the same bits). Against a reduce-scatter by allreduce, no
 * copy of the whole reduced buffer back out of the staging. One barrier per chunk, as allgather. */
int ddpl_shm_reduce_scatter(ddpl_shm *s, const void *in, void *out, size_t count, size_t elsize,
                            ddpl_reduce_fn fn)
{
    size_t total = count * (size_t)s->size * elsize;
    if (total == 0) return agree_only(s);
    size_t b0 = count * (size_t)s->rank * elsize, b1 = b0 + count * elsize; /* my block */
    for (size_t off = 0; off < total; off += CHUNK) {
        size_t m = total - off < CHUNK ? total - off : CHUNK;
        memcpy(buffer(s, s->set, s->rank), (const char *)in + off, m);
        if ((off == 0 ? agree_only(s) : ddpl_shm_barrier(s)) < 0) return -1;
        size_t lo = off > b0 ? off : b0, hi = off + m < b1 ? off + m : b1;
        if (hi > lo) {
            char *dst = (char *)out + (lo - b0);
            size_t n = (hi - lo) / elsize, at = lo - off;
            if (s->size == 1)
                memcpy(dst, buffer(s, s->set, 0) + at, hi - lo);
            else
                fn(dst, buffer(s, s->set, 0) + at, buffer(s, s->set, 1) + at, n);
            for (int q = 2; q < s->size; q++) fn(dst, dst, buffer(s, s->set, q) + at, n);
        }
        s->set ^= 1;
    }
    return 0;
}

void ddpl_shm_machine_id(char *out, size_t n)
{
    char boot[64] = "?", net[64] = "?", pid[64] = "?";
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY);
    if (fd >= 0) {
        ssize_t k = read(fd, boot, sizeof boot - 1);
        boot[k > 0 ? k : 0] = '\0';
        close(fd);
    }
    ssize_t k = readlink("/proc/self/ns/net", net, sizeof net - 1);
    net[k > 0 ? k : 0] = '\0';
    k = readlink("/proc/self/ns/pid", pid, sizeof pid - 1);
    pid[k > 0 ? k : 0] = '\0';
    snprintf(out, n, "%s %s %s", boot, net, pid);
}

/* The CPUs this process may run on (its affinity mask; the online CPUs if that is unknown). */
static int usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

ddpl_shm *ddpl_shm_connect(ddpl_store *st, const char *prefix, int rank, int size, double timeout_s)
{
    const char *env = getenv("DDPLUA_SHM");
    if (size < 2 || size > MAX_RANKS || (env && strcmp(env, "0") == 0)) return NULL;
    char id[160];
    ddpl_shm_machine_id(id, sizeof id);
    bool same = false;
    if (ddpl_store_all_equal(st, prefix, "host", rank, size, id, &same) < 0 || !same) return NULL;

    /* rank 0 names the segment; every rank maps it; all must succeed */
    char name[96], key[256];
    snprintf(key, sizeof key, "%sname", prefix);
    if (rank == 0) {
        snprintf(name, sizeof name, "/ddplua-%d-%lx", (int)getpid(), (unsigned long)time(NULL));
        if (ddpl_store_set(st, key, name, strlen(name)) < 0) return NULL;
    } else {
        void *v = NULL;
        size_t len = 0;
        if (ddpl_store_get(st, key, &v, &len) < 0) return NULL;
        snprintf(name, sizeof name, "%.*s", (int)len, (char *)v);
        free(v);
    }
    size_t bytes = HEADER + 2 * (size_t)size * CHUNK;
    ddpl_shm *s = ddpl_xcalloc(1, sizeof *s);
    *s = (ddpl_shm){.rank = rank,
                    .size = size,
                    .timeout_s = timeout_s,
                    .bytes = bytes,
                    .spins = size > usable_cpus() ? 0 : SPINS};
    int fd = rank == 0 ? shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600) : -1;
    if (rank == 0 && fd >= 0 && posix_fallocate(fd, 0, (off_t)bytes) != 0) {
        close(fd);
        fd = -1;
    }
    /* the others open it only after rank 0 created and sized it */
    bool created = rank != 0 || fd >= 0, ok = false;
    if (ddpl_store_all_equal(st, prefix, "created", rank, size, created ? "1" : "0", &ok) < 0 ||
        !ok) {
        if (fd >= 0) close(fd);
        if (rank == 0 && created) shm_unlink(name);
        free(s);
        return NULL;
    }
    if (rank != 0) fd = shm_open(name, O_RDWR, 0600);
    void *p = fd >= 0 ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (fd >= 0) close(fd);
    bool mapped = p != MAP_FAILED;
    ok = false;
    int rc = ddpl_store_all_equal(st, prefix, "mapped", rank, size, mapped ? "1" : "0", &ok);
    /* Everyone has mapped it (or given up) once "mapped" is read: the name can go, and the
     * memory lives until the last rank unmaps. */
    if (rank == 0) shm_unlink(name);
    if (rc < 0 || !ok) {
        if (mapped) munmap(p, bytes);
        free(s);
        return NULL;
    }
    s->base = p;
    s->hdr = (shm_header *)p;
    snprintf(s->name, sizeof s->name, "%s", name);
    s->hdr->pids[rank] = (int32_t)getpid(); /* read only after the first barrier */
    if (ddpl_shm_barrier(s) < 0) {
        ddpl_shm_free(s);
        return NULL;
    }
    return s;
}

void ddpl_shm_free(ddpl_shm *s)
{
    if (!s) return;
    munmap(s->base, s->bytes);
    free(s->global);
    free(s->host);
    free(s);
}

/* ------------------------------------------------------------------ shared buffers ---- */
static void part_name(const ddpl_shm *s, uint64_t id, int rank, char *out, size_t n)
{
    snprintf(out, n, "%s-b%llu-r%d", s->name, (unsigned long long)id, rank);
}

/* Every rank's word for this round is 2 * id + 1. */
static bool all_ok(const uint32_t *words, int size, uint64_t id)
{
    for (int q = 0; q < size; q++)
        if (words[q] != (uint32_t)(2 * id + 1)) return false;
    return true;
}

void ddpl_shm_buffer_free(ddpl_shm_buffer *b)
{
    if (!b) return;
    for (int q = 0; q < b->size; q++)
        if (b->maps[q]) munmap(b->maps[q], b->map_bytes);
    free(b->parts);
    free(b->maps);
    free(b);
}

/* Each rank creates its part (named after the group's segment, the buffer and the rank), all
 * check that all did, map every part, check again, and the owners unlink the names: the memory
 * lives until the last rank unmaps it, and nothing is left in /dev/shm by a crash after this. */
int ddpl_shm_buffer_new(ddpl_shm *s, size_t nbytes, ddpl_shm_buffer **out)
{
    *out = NULL;
    uint64_t id = ++s->n_buffers;
    size_t bytes = nbytes ? nbytes : 1;
    ddpl_shm_buffer *b = ddpl_xcalloc(1, sizeof *b);
    *b = (ddpl_shm_buffer){.id = id,
                           .rank = s->rank,
                           .size = s->size,
                           .nbytes = bytes,
                           .map_bytes = bytes + PART_SKEW};
    b->parts = ddpl_xcalloc((size_t)s->size, sizeof *b->parts);
    b->maps = ddpl_xcalloc((size_t)s->size, sizeof *b->maps);
    char name[160];
    part_name(s, id, s->rank, name, sizeof name);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    bool opened = fd >= 0, created = opened && posix_fallocate(fd, 0, (off_t)b->map_bytes) == 0;
    if (opened) close(fd);
    s->hdr->created[s->rank] = (uint32_t)(2 * id + (created ? 1 : 0));
    int rc = agree(s, (shm_tag){.count = nbytes}); /* the first barrier checks the call too */
    bool ok = rc == 0 && all_ok(s->hdr->created, s->size, id);
    for (int q = 0; ok && q < s->size; q++) {
        char peer[160];
        part_name(s, id, q, peer, sizeof peer);
        int pfd = shm_open(peer, O_RDWR, 0600);
        void *p = pfd >= 0 ? mmap(NULL, b->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0)
                           : MAP_FAILED;
        if (pfd >= 0) close(pfd);
        if (p == MAP_FAILED) {
            ok = false;
        } else {
            b->maps[q] = p;
            b->parts[q] = (char *)p + PART_SKEW * (q % 2);
        }
    }
    if (rc == 0) {
        s->hdr->mapped[s->rank] = (uint32_t)(2 * id + (ok ? 1 : 0));
        rc = ddpl_shm_barrier(s);
        ok = ok && rc == 0 && all_ok(s->hdr->mapped, s->size, id);
    }
    if (opened) shm_unlink(name); /* every rank has opened it, or given up, by now */
    if (rc < 0 || !ok) {
        ddpl_shm_buffer_free(b);
        return rc;
    }
    *out = b; /* fresh tmpfs pages read as zeros */
    return 0;
}

void *ddpl_shm_buffer_data(const ddpl_shm_buffer *b)
{
    return b->parts[b->rank];
}

size_t ddpl_shm_buffer_nbytes(const ddpl_shm_buffer *b)
{
    return b->nbytes;
}

/* Elements [lo, hi) of count are rank r's share: split on cache lines, so no two ranks write
 * one line. */
static void share(int r, int size, size_t count, size_t elsize, size_t *lo, size_t *hi)
{
    size_t line = 64 / elsize ? 64 / elsize : 1, lines = (count + line - 1) / line;
    *lo = lines * (size_t)r / (size_t)size * line;
    *hi = lines * (size_t)(r + 1) / (size_t)size * line;
    if (*lo > count) *lo = count;
    if (*hi > count) *hi = count;
}

/* The pieces of elements [i, i + m) of a reduced range: each lies either in a segment (this
 * rank's own memory) or, between segments, in the rank's part (own, the range's start in it).
 * walk_range visits them: GET copies them into buf, PUT from buf; PUBLISH copies the segment
 * pieces into the part, GATHER back (buf NULL for both); PAIR runs the 2-rank fused step on
 * each piece and the peer's part at the same elements. */
typedef struct seg_walk {
    const ddpl_shm_seg *segs;
    int nsegs;
    char *own;
    size_t es;
} seg_walk;

enum { GET, PUT, PUBLISH, GATHER, PAIR };

/* PAIR: the 2-rank fused step on each piece against the peer's part at the same elements. */
typedef struct pair_arg {
    const ddpl_shm_reduce *how;
    char *peer; /* the peer's part, at the range's start */
} pair_arg;

static void walk_range(const seg_walk *w, size_t i, size_t m, char *buf, int what,
                       const pair_arg *pair)
{
    /* first segment ending after i (segments are sorted) */
    int lo = 0, hi = w->nsegs;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (w->segs[mid].start + w->segs[mid].count <= i)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t end = i + m;
    for (int k = lo; i < end; k++) {
        const ddpl_shm_seg *g = k < w->nsegs ? &w->segs[k] : NULL;
        size_t gap_end = g && g->start < end ? g->start : end;
        if (i < gap_end) { /* in the part */
            size_t n = gap_end - i;
            char *part = w->own + i * w->es;
            if (what == GET) memcpy(buf, part, n * w->es);
            if (what == PUT) memcpy(part, buf, n * w->es);
            if (what == PAIR) pair->how->pair(part, pair->peer + i * w->es, n, pair->how->factor);
            if (buf) buf += n * w->es;
            i = gap_end;
        }
        if (!g || i >= end) break;
        size_t seg_end = g->start + g->count < end ? g->start + g->count : end;
        char *mem = g->data + (i - g->start) * w->es, *part = w->own + i * w->es;
        size_t bytes = (seg_end - i) * w->es;
        if (what == GET) memcpy(buf, mem, bytes);
        if (what == PUT) memcpy(mem, buf, bytes);
        if (what == PUBLISH && mem != part) memcpy(part, mem, bytes);
        if (what == GATHER && mem != part) memcpy(mem, part, bytes);
        if (what == PAIR)
            pair->how->pair(mem, pair->peer + i * w->es, seg_end - i, pair->how->factor);
        if (buf) buf += bytes;
        i = seg_end;
    }
}

/* Step 2 for any number of ranks: in blocks that stay in L1, gather this rank's values into
 * `mine`, combine all ranks' in rank order, write the result to the other parts and back. */
static void reduce_share(ddpl_shm *s, ddpl_shm_buffer *b, const seg_walk *w, size_t offset,
                         size_t lo, size_t hi, const ddpl_shm_reduce *how)
{
    _Alignas(64) char acc[4096], tmp[4096], mine[4096];
    size_t es = how->elsize, per_block = sizeof acc / es;
    for (size_t i = lo; i < hi; i += per_block) {
        size_t m = hi - i < per_block ? hi - i : per_block, at = offset + i * es;
        walk_range(w, i, m, mine, GET, NULL);
        for (int q = 0; q < s->size; q++) {
            const char *in = q == s->rank ? mine : b->parts[q] + at;
            if (q == 0) {
                if (how->scale)
                    how->scale(acc, in, m, how->factor);
                else
                    memcpy(acc, in, m * es);
            } else if (how->scale) {
                how->scale(tmp, in, m, how->factor);
                how->fn(acc, acc, tmp, m);
            } else {
                how->fn(acc, acc, in, m);
            }
        }
        for (int q = 0; q < s->size; q++)
            if (q != s->rank) memcpy(b->parts[q] + at, acc, m * es);
        walk_range(w, i, m, acc, PUT, NULL);
    }
}

int ddpl_shm_buffer_allreduce(ddpl_shm *s, ddpl_shm_buffer *b, size_t offset, size_t count,
                              const ddpl_shm_reduce *how, const ddpl_shm_seg *segs, int nsegs)
{
    size_t es = how->elsize;
    if (offset + count * es > b->nbytes)
        return ddpl_error("all_reduce: %zu elements at byte %zu overrun the shared buffer of %zu "
                          "bytes",
                          count, offset, b->nbytes);
    seg_walk w = {segs, nsegs, b->parts[s->rank] + offset, es};
    size_t lo, hi;
    share(s->rank, s->size, count, es, &lo, &hi);
    /* 1. the values the other ranks reduce go into the part; this rank's share stays put */
    walk_range(&w, 0, lo, NULL, PUBLISH, NULL);
    walk_range(&w, hi, count - hi, NULL, PUBLISH, NULL);
    if (agree(s, (shm_tag){.buffer = b->id, .offset = offset, .count = count}) < 0) return -1;
    /* 2. reduce this rank's share; the sums go to the other ranks' parts and to this rank's
     *    values. On 2 ranks in one fused pass instead of the blocks' six passes through L1. */
    if (s->size == 2 && how->pair) {
        pair_arg pa = {how, b->parts[1 - s->rank] + offset};
        walk_range(&w, lo, hi - lo, NULL, PAIR, &pa);
    } else {
        reduce_share(s, b, &w, offset, lo, hi, how);
    }
    /* 3. every rank wrote its sums into this part: copy them where this rank's values live. No
     *    third barrier: before its first barrier the next allreduce writes only the rank's own
     *    part (step 1), which nobody else reads after this barrier, and other ranks' parts only
     *    after it, which every rank reaches after finishing this one. */
    if (ddpl_shm_barrier(s) < 0) return -1;
    walk_range(&w, 0, lo, NULL, GATHER, NULL);
    walk_range(&w, hi, count - hi, NULL, GATHER, NULL);
    return 0;
}

/* ---------------------------------------- staging buffers, for distributed/shm_coll_rooted.c ----
 */
char *ddpl_shm_staging(ddpl_shm *s, int r)
{
    return buffer(s, s->set, r);
}

void ddpl_shm_next_set(ddpl_shm *s)
{
    s->set ^= 1;
}

size_t ddpl_shm_staging_bytes(void)
{
    return CHUNK;
}

int ddpl_shm_rank(const ddpl_shm *s)
{
    return s->rank;
}

int ddpl_shm_size(const ddpl_shm *s)
{
    return s->size;
}
