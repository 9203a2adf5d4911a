/* cuemu/nccl/test_nccl_standin.c: the NCCL stand-in (libcuemu_nccl.so) tested as the engine
 * uses it: opened with dlopen, called through NCCL's own signatures.
 * usage: test_nccl_standin /path/to/libcuemu_nccl.so; prints "N passed, M failed", exits 1 on
 * any failure.
 * defines: main; the harness (sh, L, now_s, sleep_ms, init_comm: test_nccl_standin.h), the
 *          fault cases, the one-process checks and the f16/bf16 reference. The per-rank
 *          collective checks are test_nccl_standin_coll.c's.
 *
 * What it covers:
 *   - the library: every symbol the engine needs is exported, internals are not; version, error
 *     strings, unique ids, argument errors (NULL comm, bad rank, bad config, bad type, op, root,
 *     NULL buffers, ncclGroupEnd without Start, an error inside a group);
 *   - float16 / bfloat16 conversions against a reference that rounds by searching the sorted
 *     representable values (independent of the bit tricks it checks);
 *   - worlds of 2 and 3 ranks as forked processes (blocking init, non-blocking init polled with
 *     ncclCommGetAsyncError, the plain ncclCommInitRank) and of 2 ranks as threads of one
 *     process; default staging sizes and tiny ones (DDPL_CUEMU_NCCL_STAGE_BYTES /
 *     _MAILBOX_BYTES), so counts span many chunks and rings wrap: AllReduce of every type with
 *     every operation, in and out of place, counts 0, 1, odd and beyond the staging area;
 *     Broadcast from every root; Reduce (recvbuff untouched off the root); AllGather and
 *     ReduceScatter in and out of place; grouped sends and receives in both orders, larger than
 *     a ring, to this rank itself; the engine's all-gather as grouped broadcasts; ranks get
 *     bit-identical sums of random floats; mismatched collectives and message sizes fail on the
 *     ranks instead of hanging; finalize (ncclInProgress when non-blocking) and destroy;
 *   - faults: ncclCommAbort from another thread while a collective waits for a peer that
 *     never comes (returns within a second; the peer then gets ncclRemoteError); abort during a
 *     non-blocking init; a peer killed while the survivor waits (ncclRemoteError within a few
 *     seconds, the killed process left a zombie on purpose); DDPL_CUEMU_NCCL_TIMEOUT for a
 *     peer that is alive but never calls, and for an init that a rank never joins;
 *   - nothing of this run is left in /dev/shm.
 * Every world gets fresh ids and its ranks a 60 s alarm, so a hang fails instead of stalling. */
#include "test_nccl_standin.h"

#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

/* ------------------------------------------------------------------- harness ---- */
struct shared *sh;
struct nccl_lib L;

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Tiny staging buffers and rings for a world that asks for them (before any rank starts: the
 * library reads the environment of the rank that creates the segment). */
static void set_env(const world *w)
{
    if (w->small) {
        setenv("DDPL_CUEMU_NCCL_STAGE_BYTES", "1000", 1); /* rounds down to 960 */
        setenv("DDPL_CUEMU_NCCL_MAILBOX_BYTES", "200", 1);
    } else {
        unsetenv("DDPL_CUEMU_NCCL_STAGE_BYTES");
        unsetenv("DDPL_CUEMU_NCCL_MAILBOX_BYTES");
    }
}

/* Runs w's ranks as forked processes; reaps them from rank 0 up (a killed later rank stays a
 * zombie while rank 0 waits: the stand-in must see through that). */
static void run_processes(const world *w)
{
    pid_t pids[8];
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < w->n; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm(60); /* a hang fails the test instead of stalling CI */
            set_env(w);
            w->fn(w, r);
            _exit(0);
        }
    }
    for (int r = 0; r < w->n; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        if (r == w->killed)
            CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "%s: rank %d was to be killed",
                  w->name, r);
        else
            CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: rank %d ended with status 0x%x",
                  w->name, r, st);
    }
}

typedef struct thread_arg {
    const world *w;
    int rank;
} thread_arg;

static void *rank_thread(void *p)
{
    thread_arg *a = p;
    a->w->fn(a->w, a->rank);
    return NULL;
}

static void run_threads(const world *w)
{
    pthread_t t[8];
    thread_arg a[8];
    set_env(w);
    for (int r = 0; r < w->n; r++) {
        a[r] = (thread_arg){w, r};
        pthread_create(&t[r], NULL, rank_thread, &a[r]);
    }
    for (int r = 0; r < w->n; r++) pthread_join(t[r], NULL);
    world plain = {0};
    set_env(&plain);
}

ncclComm_t init_comm(const world *w, int rank, const ncclUniqueId *id)
{
    ncclComm_t c = NULL;
    if (w->plain_init) {
        NCCL_OK(L.CommInitRank(&c, w->n, *id, rank), "ncclCommInitRank");
        return c;
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = w->blocking ? 1 : 0;
    ncclResult_t r = L.CommInitRankConfig(&c, w->n, *id, rank, &cfg);
    if (w->blocking) {
        CHECK(r == ncclSuccess, "%s: init: %s", w->name, L.GetErrorString(r));
        return r == ncclSuccess ? c : NULL;
    }
    CHECK(r == ncclInProgress, "%s: non-blocking init returned %s", w->name, L.GetErrorString(r));
    ncclResult_t state = ncclInProgress;
    double t0 = now_s();
    while (c && state == ncclInProgress && now_s() - t0 < 30) {
        L.CommGetAsyncError(c, &state);
        if (state == ncclInProgress) sleep_ms(1);
    }
    CHECK(state == ncclSuccess, "%s: non-blocking init ended in %s (%s)", w->name,
          L.GetErrorString(state), L.GetLastError(c));
    return state == ncclSuccess ? c : NULL;
}

/* ------------------------------------------------------------------ faults ---- */
static void *blocked_allreduce(void *arg)
{
    ncclComm_t c = arg;
    static float x[4];
    double t0 = now_s();
    ncclResult_t r = L.AllReduce(x, x, 4, ncclFloat32, ncclSum, c, NULL);
    double dt = now_s() - t0;
    CHECK(r == ncclSystemError, "allreduce under abort returned %s", L.GetErrorString(r));
    CHECK(dt < 2.0, "allreduce under abort took %.3f s", dt);
    return NULL;
}

/* Rank 0 blocks in an allreduce rank 1 never joins; another thread aborts it. Rank 1 then finds
 * rank 0 gone. */
static void rank_abort(const world *w, int rank)
{
    ncclComm_t c = init_comm(w, rank, &sh->ids[0]);
    if (!c) return;
    if (rank == 0) {
        pthread_t t;
        pthread_create(&t, NULL, blocked_allreduce, c);
        sleep_ms(300);
        double t0 = now_s();
        NCCL_OK(L.CommAbort(c), "abort while a collective waits");
        pthread_join(t, NULL);
        CHECK(now_s() - t0 < 1.0, "abort took %.3f s", now_s() - t0);
        atomic_store(&sh->flag[0], 1);
        return;
    }
    double t0 = now_s();
    while (!atomic_load(&sh->flag[0]) && now_s() - t0 < 20) sleep_ms(5);
    float x = 1;
    t0 = now_s();
    ncclResult_t r = L.AllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, NULL);
    CHECK(r == ncclRemoteError, "allreduce with an aborted peer: %s", L.GetErrorString(r));
    CHECK(now_s() - t0 < 2.0, "noticing the aborted peer took %.3f s", now_s() - t0);
    CHECK(strstr(L.GetLastError(c), "aborted") != NULL, "message: %s", L.GetLastError(c));
    ncclResult_t state = ncclSuccess;
    L.CommGetAsyncError(c, &state);
    CHECK(state == ncclRemoteError, "async error: %s", L.GetErrorString(state));
    NCCL_OK(L.CommAbort(c), "abort");
}

/* Rank 1 dies while rank 0 waits for it in an allreduce (its pid stays a zombie meanwhile). */
static void rank_killed(const world *w, int rank)
{
    ncclComm_t c = init_comm(w, rank, &sh->ids[0]);
    if (!c) return;
    float x = 1;
    NCCL_OK(L.AllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, NULL), "allreduce before");
    if (rank == 1) {
        sleep_ms(200);
        raise(SIGKILL);
    }
    double t0 = now_s();
    ncclResult_t r = L.AllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, NULL);
    double dt = now_s() - t0;
    CHECK(r == ncclRemoteError, "allreduce with a killed peer: %s", L.GetErrorString(r));
    CHECK(dt < 3.0, "noticing the killed peer took %.3f s", dt);
    CHECK(strstr(L.GetLastError(c), "exited") != NULL, "message: %s", L.GetLastError(c));
    NCCL_OK(L.CommAbort(c), "abort");
}

/* DDPL_CUEMU_NCCL_TIMEOUT=1: a live peer that never calls, and an init nobody else joins. */
static void rank_timeout(const world *w, int rank)
{
    setenv("DDPL_CUEMU_NCCL_TIMEOUT", "1", 1);
    ncclComm_t c = init_comm(w, rank, &sh->ids[0]);
    if (!c) return;
    if (rank == 0) {
        float x = 1;
        double t0 = now_s();
        ncclResult_t r = L.AllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, NULL);
        double dt = now_s() - t0;
        CHECK(r == ncclSystemError, "allreduce past the timeout: %s", L.GetErrorString(r));
        CHECK(dt > 0.9 && dt < 3.0, "the 1 s timeout took %.3f s", dt);
        CHECK(strstr(L.GetLastError(c), "did not reach") != NULL, "message: %s", L.GetLastError(c));
        NCCL_OK(L.CommAbort(c), "abort");
        atomic_store(&sh->flag[1], 1);
        /* an init the other rank never joins */
        ncclComm_t lone = NULL;
        t0 = now_s();
        r = L.CommInitRank(&lone, 2, sh->ids[1], 0);
        CHECK(r == ncclSystemError && lone == NULL, "lone init: %s", L.GetErrorString(r));
        CHECK(now_s() - t0 < 3.0, "lone init took %.3f s", now_s() - t0);
        CHECK(strstr(L.GetLastError(NULL), "never joined: 1") != NULL, "message: %s",
              L.GetLastError(NULL));
        return;
    }
    double t0 = now_s();
    while (!atomic_load(&sh->flag[1]) && now_s() - t0 < 20) sleep_ms(5);
    NCCL_OK(L.CommDestroy(c), "destroy");
}

/* Abort while a non-blocking init waits for a rank that never comes. */
static void check_abort_init(void)
{
    ncclUniqueId id;
    NCCL_OK(L.GetUniqueId(&id), "id");
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t c = NULL;
    ncclResult_t r = L.CommInitRankConfig(&c, 2, id, 1, &cfg);
    CHECK(r == ncclInProgress && c, "non-blocking init: %s", L.GetErrorString(r));
    if (!c) return;
    sleep_ms(50);
    ncclResult_t state = ncclSuccess;
    NCCL_OK(L.CommGetAsyncError(c, &state), "async error");
    CHECK(state == ncclInProgress, "init alone is in progress: %s", L.GetErrorString(state));
    float x = 0;
    r = L.AllReduce(&x, &x, 1, ncclFloat32, ncclSum, c, NULL);
    CHECK(r == ncclInvalidUsage, "allreduce during init: %s", L.GetErrorString(r));
    double t0 = now_s();
    NCCL_OK(L.CommAbort(c), "abort during init");
    CHECK(now_s() - t0 < 1.0, "abort during init took %.3f s", now_s() - t0);
}

/* ------------------------------------------------------------------ one process ---- */
static void check_api(void)
{
    int v = 0;
    NCCL_OK(L.GetVersion(&v), "version");
    CHECK(v == NCCL_VERSION_CODE, "version %d", v);
    CHECK(L.GetVersion(NULL) == ncclInvalidArgument, "version NULL");
    CHECK(!strcmp(L.GetErrorString(ncclSuccess), "no error"), "string of success");
    CHECK(!strcmp(L.GetErrorString(ncclRemoteError),
                  "remote process exited or there was a network error"),
          "string of remote error");
    CHECK(!strcmp(L.GetErrorString(ncclInProgress), "NCCL operation in progress"),
          "string of in progress");
    CHECK(!strcmp(L.GetErrorString((ncclResult_t)99), "unknown result code"), "unknown code");
    ncclUniqueId a, b;
    NCCL_OK(L.GetUniqueId(&a), "id a");
    NCCL_OK(L.GetUniqueId(&b), "id b");
    CHECK(memcmp(&a, &b, sizeof a) != 0, "two ids differ");
    CHECK(L.GetUniqueId(NULL) == ncclInvalidArgument, "id NULL");

    ncclComm_t c = NULL;
    CHECK(L.CommInitRank(NULL, 1, a, 0) == ncclInvalidArgument, "init comm NULL");
    CHECK(L.CommInitRank(&c, 0, a, 0) == ncclInvalidArgument, "init nranks 0");
    CHECK(L.CommInitRank(&c, 2, a, 2) == ncclInvalidArgument, "init rank 2 of 2");
    CHECK(L.CommInitRank(&c, 2, a, -1) == ncclInvalidArgument, "init rank -1");
    CHECK(strstr(L.GetLastError(NULL), "rank -1") != NULL, "last error: %s", L.GetLastError(NULL));
    ncclUniqueId junk;
    memset(&junk, 7, sizeof junk);
    CHECK(L.CommInitRank(&c, 1, junk, 0) == ncclInvalidArgument, "init with a foreign id");
    ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
    bad.magic = 0;
    CHECK(L.CommInitRankConfig(&c, 1, a, 0, &bad) == ncclInvalidArgument, "init bad config");
    CHECK(L.GroupEnd() == ncclInvalidUsage, "group end without start");
    float x[4] = {1, 2, 3, 4};
    CHECK(L.AllReduce(x, x, 4, ncclFloat32, ncclSum, NULL, NULL) == ncclInvalidArgument,
          "allreduce on NULL comm");
    CHECK(L.CommDestroy(NULL) == ncclSuccess && L.CommAbort(NULL) == ncclSuccess, "NULL comm");
    ncclResult_t st;
    CHECK(L.CommGetAsyncError(NULL, &st) == ncclInvalidArgument, "async error of NULL");

    /* a communicator of one rank */
    NCCL_OK(L.CommInitRank(&c, 1, a, 0), "init of 1");
    if (!c) return;
    NCCL_OK(L.AllReduce(x, x, 4, ncclFloat32, ncclAvg, c, NULL), "allreduce of 1");
    CHECK(x[0] == 1 && x[3] == 4, "allreduce of one rank is the identity");
    CHECK(L.AllReduce(x, x, 4, (ncclDataType_t)42, ncclSum, c, NULL) == ncclInvalidArgument,
          "bad type");
    CHECK(L.AllReduce(x, x, 4, ncclFloat32, (ncclRedOp_t)9, c, NULL) == ncclInvalidArgument,
          "bad op");
    CHECK(L.AllReduce(x, x, 4, ncclFloat8e4m3, ncclSum, c, NULL) == ncclInvalidArgument,
          "fp8 is not reduced");
    CHECK(L.Broadcast(x, x, 4, ncclFloat32, 1, c, NULL) == ncclInvalidArgument, "bad root");
    CHECK(L.AllReduce(NULL, x, 4, ncclFloat32, ncclSum, c, NULL) == ncclInvalidArgument,
          "NULL sendbuff");
    CHECK(L.Send(x, 4, ncclFloat32, 0, c, NULL) == ncclInvalidUsage, "self send alone");
    CHECK(L.Send(x, 4, ncclFloat32, 1, c, NULL) == ncclInvalidArgument, "send to rank 1 of 1");
    float y[4] = {0};
    NCCL_OK(L.GroupStart(), "group");
    NCCL_OK(L.Recv(y, 4, ncclFloat32, 0, c, NULL), "self recv");
    NCCL_OK(L.Send(x, 4, ncclFloat32, 0, c, NULL), "self send");
    NCCL_OK(L.GroupEnd(), "group end (self)");
    CHECK(y[0] == 1 && y[3] == 4, "a message to oneself");
    /* an argument error inside a group fails its End too, and nothing of it runs */
    y[0] = 0;
    NCCL_OK(L.GroupStart(), "group");
    NCCL_OK(L.Recv(y, 4, ncclFloat32, 0, c, NULL), "self recv");
    CHECK(L.Send(x, 4, ncclFloat32, 5, c, NULL) == ncclInvalidArgument, "bad peer in group");
    CHECK(L.GroupEnd() == ncclInvalidArgument, "group end after an error");
    CHECK(y[0] == 0, "the failed group ran nothing");
    NCCL_OK(L.CommDestroy(c), "destroy of 1");
    CHECK(L.AllReduce(x, x, 1, ncclFloat32, ncclSum, NULL, NULL) == ncclInvalidArgument,
          "NULL comm again");
}

/* The library exports NCCL's names only. */
static int load(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "cannot open %s: %s\n", path, dlerror());
        return -1;
    }
#define LOAD(f)                                                                                    \
    L.f = (__typeof__(L.f))dlsym(h, "nccl" #f);                                                    \
    CHECK(L.f != NULL, "symbol nccl" #f " missing");                                               \
    if (!L.f) return -1;
    SYMS(LOAD)
#undef LOAD
    CHECK(dlsym(h, "standin_fail") == NULL && dlsym(h, "standin_reduce") == NULL,
          "internal symbols are hidden");
    return 0;
}

/* ------------------------------------------------------------------ f16 / bf16 ---- */
/* Reference decoders: the value from the fields, by ldexp. */
static double ref_half(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

static double ref_bf16(uint16_t b)
{
    int e = (b >> 7) & 255, m = b & 127;
    double v = e == 0 ? ldexp(m, -133) : e == 255 ? (m ? NAN : INFINITY) : ldexp(128 + m, e - 134);
    return b & 0x8000 ? -v : v;
}

/* Reference rounding: binary search the largest finite code <= |f|, then the nearer of it and
 * the next, ties to the even code; one past the largest finite code stands for the value that
 * would follow it (2^16 for half, 2^128 for bf16), beyond whose midpoint lies infinity. */
static uint16_t ref_round(float f, double (*dec)(uint16_t), uint16_t max_finite, double beyond)
{
    if (isnan(f)) return 0x7fff;
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    uint16_t lo = 0, hi = max_finite;
    if (a >= dec(max_finite)) {
        lo = max_finite;
    } else {
        while (hi - lo > 1) {
            uint16_t mid = (uint16_t)((lo + hi) / 2);
            if (dec(mid) <= a)
                lo = mid;
            else
                hi = mid;
        }
    }
    double vlo = dec(lo), vhi = lo == max_finite ? beyond : dec((uint16_t)(lo + 1));
    uint16_t pick;
    if (a - vlo < vhi - a)
        pick = lo;
    else if (a - vlo > vhi - a)
        pick = (uint16_t)(lo + 1);
    else
        pick = lo % 2 == 0 ? lo : (uint16_t)(lo + 1);
    if (pick > max_finite) pick = (uint16_t)(max_finite + 1); /* infinity */
    return (uint16_t)(sign | pick);
}

static void check_converters(void)
{
    int bad_h = 0, bad_b = 0, bad_rh = 0, bad_rb = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        double want = ref_half((uint16_t)h), got = cuemu_half_to_float((uint16_t)h);
        bad_h += !(got == want || (isnan(got) && isnan(want)));
        want = ref_bf16((uint16_t)h);
        got = cuemu_bf16_to_float((uint16_t)h);
        bad_b += !(got == want || (isnan(got) && isnan(want)));
    }
    CHECK(bad_h == 0, "%d half codes decode wrongly", bad_h);
    CHECK(bad_b == 0, "%d bf16 codes decode wrongly", bad_b);
    /* floats: random bit patterns, every half value, the midpoints between neighbours (ties)
     * and one float ulp either side of them */
    uint64_t s = 88172645463325252ull;
    for (int k = 0; k < 600000; k++) {
        float f;
        if (k < 300000) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            uint32_t u = (uint32_t)s;
            if (k % 2) u = (u & 0x8fffffffu) | 0x30000000u; /* mostly near half's range */
            memcpy(&f, &u, 4);
        } else {
            int h = (k - 300000) / 4 % 0x7c00, kind = (k - 300000) % 4;
            double m = (ref_half((uint16_t)h) + ref_half((uint16_t)(h + 1))) / 2;
            f = kind == 0   ? (float)ref_half((uint16_t)h)
                : kind == 1 ? (float)m
                : kind == 2 ? nextafterf((float)m, 0)
                            : -nextafterf((float)m, INFINITY);
        }
        if (cuemu_float_to_half(f) != ref_round(f, ref_half, 0x7bff, 65536.0) && bad_rh++ < 3)
            fprintf(stderr, "half(%a) = %04x\n", (double)f, cuemu_float_to_half(f));
        if (cuemu_float_to_bf16(f) != ref_round(f, ref_bf16, 0x7f7f, ldexp(1, 128)) &&
            bad_rb++ < 3)
            fprintf(stderr, "bf16(%a) = %04x\n", (double)f, cuemu_float_to_bf16(f));
    }
    CHECK(bad_rh == 0, "%d floats round to half wrongly", bad_rh);
    CHECK(bad_rb == 0, "%d floats round to bf16 wrongly", bad_rb);
    CHECK(cuemu_float_to_half(INFINITY) == 0x7c00 && cuemu_float_to_half(-65520.f) == 0xfc00,
          "half infinities");
    CHECK(cuemu_float_to_bf16(-INFINITY) == 0xff80, "bf16 infinity");
}

/* ------------------------------------------------------------------ main ---- */
/* Objects of this run left in /dev/shm (the ids this process made name its pid). */
static int leftovers(void)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "ddpl-cuemu-nccl-%ld-", (long)getpid());
    DIR *d = opendir("/dev/shm");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, prefix, strlen(prefix))) {
            fprintf(stderr, "left in /dev/shm: %s\n", e->d_name);
            n++;
        }
    if (d) closedir(d);
    return n;
}

static void new_ids(void)
{
    for (int i = 0; i < 4; i++) L.GetUniqueId(&sh->ids[i]);
    for (int i = 0; i < 4; i++) atomic_store(&sh->flag[i], 0);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s libcuemu_nccl.so\n", argv[0]);
        return 2;
    }
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) return 2;
    double t0 = now_s();
    if (load(argv[1]) == 0) {
        check_api();
        check_converters();
        const world worlds[] = {
            {"2 processes, blocking", 2, true, false, false, -1, rank_suite},
            {"3 processes, non-blocking", 3, false, false, false, -1, rank_suite},
            {"2 processes, non-blocking, tiny buffers", 2, false, false, true, -1, rank_suite},
            {"3 processes, ncclCommInitRank, tiny buffers", 3, true, true, true, -1, rank_suite},
            {"misuse", 2, true, false, false, -1, rank_misuse},
            {"abort", 2, false, false, false, -1, rank_abort},
            {"killed peer", 2, true, false, false, 1, rank_killed},
            {"timeout", 2, true, false, false, -1, rank_timeout},
        };
        for (size_t i = 0; i < sizeof worlds / sizeof worlds[0]; i++) {
            double t1 = now_s();
            new_ids();
            run_processes(&worlds[i]);
            printf("%-48s %.2f s, %d checks\n", worlds[i].name, now_s() - t1,
                   atomic_load(&sh->pass) + atomic_load(&sh->fail));
        }
        double t1 = now_s();
        const world threads = {"2 threads, blocking", 2, true, false, true, -1, rank_suite};
        new_ids();
        run_threads(&threads);
        printf("%-48s %.2f s, %d checks\n", threads.name, now_s() - t1,
               atomic_load(&sh->pass) + atomic_load(&sh->fail));
        check_abort_init();
    }
    CHECK(leftovers() == 0, "objects left in /dev/shm");
    int pass = atomic_load(&sh->pass), fail = atomic_load(&sh->fail);
    printf("%d passed, %d failed (%.1f s)\n", pass, fail, now_s() - t0);
    return fail ? 1 : 0;
}
