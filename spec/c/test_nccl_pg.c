/* spec/c/test_nccl_pg.c: the nccl process group through the C interface (engine/distributed/pg.h):
 * without a usable GPU (or without NCCL in the build) the backend is refused by name with the
 * reason, before any rendezvous; with a GPU, a one-rank group on cuda:0 runs an allreduce, a
 * broadcast, an allgather and a barrier, refuses a CPU tensor, and its work handles order the
 * compute stream (the values read afterwards are the results).
 * defines: main. */
#include <unistd.h>

#include "check.h"
#include "net_util.h"
#include "core/core.h"
#include "distributed/pg.h"

static bool has(const char *s, const char *want)
{
    return s && strstr(s, want) != NULL;
}

/* The values of a (small) tensor on any device, as float64 on the host. */
static void read_values(ddpl_tensor *t, double *out, int n)
{
    ddpl_tensor *h = ddpl_to(t, DDPL_FLOAT64, ddpl_cpu());
    CHECK(h != NULL);
    if (!h) return;
    const double *d = ddpl_tensor_data(h);
    for (int i = 0; i < n; i++) out[i] = d[i];
    ddpl_tensor_release(h);
}

static void gpu_checks(void)
{
    CHECK(ddpl_cuda_set_device(0) == 0);
    ddpl_pg_config cfg = {.backend = "nccl",
                          .master_addr = "127.0.0.1",
                          .master_port = free_port(29500),
                          .rank = 0,
                          .world_size = 1,
                          .timeout_s = 30};
    ddpl_pg *pg = ddpl_pg_create(&cfg);
    CHECK(pg != NULL);
    if (!pg) return;
    CHECK(strcmp(ddpl_pg_backend(pg), "nccl") == 0);
    ddpl_device cuda0 = {DDPL_CUDA, 0};
    int64_t n = 5;
    double v[5];

    /* allreduce of one rank: avg leaves the values; the input is written by a kernel queued
     * just before, the result read after the wait */
    ddpl_tensor *x = ddpl_full(1, &n, 3.0, DDPL_FLOAT32, cuda0);
    CHECK(x != NULL);
    ddpl_work *w = x ? ddpl_pg_allreduce(pg, x, DDPL_REDUCE_AVG) : NULL;
    CHECK(w != NULL);
    CHECK(w && ddpl_work_wait(w, -1) == 0);
    read_values(x, v, 5);
    for (int i = 0; i < 5; i++) CHECK(v[i] == 3.0);
    CHECK(w && ddpl_work_is_completed(w)); /* the values were read: the event completed */
    CHECK(w && ddpl_work_error(w) == NULL);
    ddpl_work_release(w);

    /* broadcast from itself, allgather into one tensor */
    w = ddpl_pg_broadcast(pg, x, 0);
    CHECK(w && ddpl_work_wait(w, -1) == 0);
    ddpl_work_release(w);
    ddpl_tensor *out = ddpl_zeros(1, &n, DDPL_FLOAT32, cuda0);
    w = ddpl_pg_allgather_into(pg, out, x);
    CHECK(w && ddpl_work_wait(w, -1) == 0);
    ddpl_work_release(w);
    read_values(out, v, 5);
    for (int i = 0; i < 5; i++) CHECK(v[i] == 3.0);

    /* a CPU tensor is refused by name; the group stays usable */
    ddpl_tensor *c = ddpl_zeros(1, &n, DDPL_FLOAT32, ddpl_cpu());
    CHECK(ddpl_pg_allreduce(pg, c, DDPL_REDUCE_SUM) == NULL);
    CHECK(has(ddpl_last_error(), "all_reduce: expected a CUDA tensor on cuda:0"));
    w = ddpl_pg_barrier(pg);
    CHECK(w && ddpl_work_wait(w, -1) == 0);
    ddpl_work_release(w);

    /* a handle released without a wait: the compute stream is ordered after it anyway */
    w = ddpl_pg_allreduce(pg, out, DDPL_REDUCE_SUM);
    CHECK(w != NULL);
    ddpl_work_release(w);
    ddpl_tensor_release(out);
    ddpl_tensor_release(c);
    ddpl_tensor_release(x);
    ddpl_pg_free(pg);
}

int main(void)
{
    CHECK(ddpl_pg_backend_check("gloo") == 0);
    CHECK(ddpl_pg_backend_check("mpi") < 0);
    CHECK(has(ddpl_last_error(), "init_process_group: unknown backend 'mpi'"));
    if (!ddpl_cuda_is_available()) {
        CHECK(ddpl_pg_backend_check("nccl") < 0);
        const char *e = ddpl_last_error();
        CHECK(has(e, "init_process_group: backend 'nccl'"));
        CHECK(has(e, "has no NCCL") || has(e, "CUDA is not available"));
        /* refused before any rendezvous: no address is needed to learn it */
        ddpl_pg_config cfg = {.backend = "nccl", .rank = 0, .world_size = 1, .timeout_s = 1};
        CHECK(ddpl_pg_create(&cfg) == NULL);
        CHECK(has(ddpl_last_error(), "backend 'nccl'"));
    } else {
        CHECK(ddpl_pg_backend_check("nccl") == 0);
        gpu_checks();
    }
    return check_finish();
}
