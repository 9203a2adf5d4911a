/* spec/c/test_pg.c: the process-group C interface (engine/dist/pg.h) as the DDP reducer uses it:
 * two forked ranks on loopback run async allreduce (avg of float32; max of a non-contiguous
 * int64 view), broadcast and barrier; argument errors come back as NULL with a message; and when
 * one rank goes away, the other's collective fails within the timeout (no hang) and every later
 * one fails at once, naming the earlier failure. Both allreduce paths run: shared memory (the
 * default for ranks on one machine) and Gloo (DDPLUA_SHM=0).
 * defines: main. */
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "core/core.h"
#include "dist/pg.h"

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0)
        return 29000 + getpid() % 1000;
    close(fd);
    return ntohs(a.sin_port);
}

static double at(ddpl_tensor *t, int64_t i)
{
    return ddpl_load_f64(ddpl_data_ptr(t) + i * (int64_t)ddpl_dtype_size(t->dtype), t->dtype);
}

static int rank_main(int rank, int port)
{
    ddpl_pg_config cfg = {.backend = "gloo",
                          .master_addr = "127.0.0.1",
                          .master_port = port,
                          .rank = rank,
                          .world_size = 2,
                          .timeout_s = 3.0};
    ddpl_pg *pg = ddpl_pg_create(&cfg);
    CHECK(pg != NULL);
    if (!pg) return check_finish();
    CHECK(ddpl_pg_rank(pg) == rank && ddpl_pg_size(pg) == 2);

    /* avg of float32: rank r holds i + 10 r, so the mean is i + 5 */
    int64_t n = 1000;
    ddpl_tensor *x =
        ddpl_arange(10.0 * rank, 10.0 * rank + (double)n, 1.0, DDPL_FLOAT32, ddpl_cpu());
    ddpl_work *w = ddpl_pg_allreduce(pg, x, DDPL_REDUCE_AVG);
    CHECK(w != NULL);
    CHECK(ddpl_work_wait(w, -1) == 0);
    CHECK(ddpl_work_is_completed(w) && ddpl_work_error(w) == NULL);
    CHECK(strcmp(ddpl_work_name(w), "all_reduce") == 0);
    ddpl_work_release(w);
    CHECK_CLOSE(at(x, 0), 5.0, 0);
    CHECK_CLOSE(at(x, n - 1), (double)(n - 1) + 5.0, 0);

    /* max over a transposed (non-contiguous) int64 view of a 2x3 block, written back in place */
    int64_t sizes[2] = {2, 3}, tsizes[2] = {3, 2}, tstrides[2] = {1, 3};
    int64_t vals[6] = {1, -5, 7, 0, 2, -3};
    for (int i = 0; i < 6; i++) vals[i] *= rank ? -1 : 1;
    ddpl_tensor *base = ddpl_from_data(2, sizes, DDPL_INT64, vals, ddpl_cpu());
    ddpl_tensor *view = ddpl_tensor_alias(base, 2, tsizes, tstrides, 0);
    CHECK(!ddpl_tensor_is_contiguous(view));
    w = ddpl_pg_allreduce(pg, view, DDPL_REDUCE_MAX);
    CHECK(w && ddpl_work_wait(w, 10.0) == 0);
    ddpl_work_release(w);
    int64_t *got = (int64_t *)ddpl_data_ptr(base);
    int64_t want[6] = {1, 5, 7, 0, 2, 3};
    for (int i = 0; i < 6; i++) CHECK(got[i] == want[i]);

    /* broadcast from rank 1 */
    ddpl_tensor *b = ddpl_full(1, &n, (double)rank + 1, DDPL_FLOAT64, ddpl_cpu());
    w = ddpl_pg_broadcast(pg, b, 1);
    CHECK(w && ddpl_work_wait(w, -1) == 0);
    ddpl_work_release(w);
    CHECK(at(b, 0) == 2.0 && at(b, n - 1) == 2.0);

    /* argument errors: NULL and a message naming the call */
    ddpl_tensor *i32 = ddpl_zeros(1, &n, DDPL_INT32, ddpl_cpu());
    CHECK(ddpl_pg_allreduce(pg, i32, DDPL_REDUCE_SUM) == NULL);
    CHECK(strstr(ddpl_last_error(),
                 "all_reduce: expected a CPU tensor of float32/float64/int64, got int32") != NULL);
    CHECK(ddpl_pg_broadcast(pg, b, 2) == NULL);
    CHECK(strstr(ddpl_last_error(), "broadcast: src rank 2 is out of range") != NULL);

    w = ddpl_pg_barrier(pg);
    CHECK(w && ddpl_work_wait(w, -1) == 0);
    ddpl_work_release(w);

    /* rank 1 leaves; rank 0's next collective fails (reset or timeout), not hangs */
    if (rank == 0) {
        sleep(1);
        w = ddpl_pg_allreduce(pg, x, DDPL_REDUCE_SUM);
        CHECK(w != NULL);
        CHECK(ddpl_work_wait(w, 20.0) < 0);
        CHECK(strncmp(ddpl_last_error(), "all_reduce: ", 12) == 0);
        ddpl_work_release(w);
        w = ddpl_pg_barrier(pg);
        CHECK(w && ddpl_work_wait(w, 5.0) < 0);
        CHECK(strstr(ddpl_last_error(), "barrier: the process group is unusable") != NULL);
        ddpl_work_release(w);
    }
    ddpl_pg_free(pg);
    ddpl_tensor_release(x);
    ddpl_tensor_release(view);
    ddpl_tensor_release(base);
    ddpl_tensor_release(b);
    ddpl_tensor_release(i32);
    return check_finish();
}

/* Runs both ranks once with DDPLUA_SHM=shm (shared memory or Gloo's TCP for allreduce). */
static int run_job(const char *shm)
{
    setenv("DDPLUA_SHM", shm, 1);
    int port = free_port();
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm(60); /* a hang is a failure, never a stuck ctest */
            int rc = rank_main(r, port);
            fflush(stdout);
            _exit(rc);
        }
    }
    /* reap in exit order: a rank that exited must not linger as a zombie, which the other's
     * shared-memory barrier would still count as alive */
    int failed = 0;
    for (int k = 0; k < 2; k++) {
        int status = 0;
        pid_t pid = wait(&status);
        int r = pid == pids[0] ? 0 : 1;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "DDPLUA_SHM=%s: rank %d failed (status %d)\n", shm, r, status);
            failed = 1;
        }
    }
    return failed;
}

int main(void)
{
    int failed = run_job("1") | run_job("0");
    printf("test_pg: %s\n", failed ? "FAILED" : "ok");
    return failed;
}
