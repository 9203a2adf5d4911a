/* spec/c/test_pg_rooted.c: the rooted collectives and all-to-all of engine/distributed/pg.h
 * (ddpl_pg_reduce, _gather, _scatter, _alltoall, _alltoall_single) through the C interface: on a
 * one-rank group, the argument checks that Lua cannot reach (NULL lists, split sizes near
 * INT64_MAX) and the message for an entry the backend table lacks; on two forked ranks, over
 * shared memory and over Gloo (DDPLUA_SHM=0), sizes around the shared-memory staging buffer
 * (4 MB) and an all-to-all whose one big pair takes many rounds while the other rank sends
 * little (every rank must run the same rounds).
 * defines: main. */
#include <stdint.h>

#include "check.h"
#include "net_util.h"
#include "core/core.h"
#include "distributed/pg.h"
#include "distributed/pg_impl.h" /* the backend table, to take entries out of it */

static uint8_t byte_at(const ddpl_tensor *t, int64_t i)
{
    return ((const uint8_t *)ddpl_data_ptr((ddpl_tensor *)t))[i];
}

/* the j-th byte rank `from` sends to rank `to` */
static uint8_t pattern(int from, int to, int64_t j)
{
    return (uint8_t)(from * 37 + to * 11 + j * 7 + j / 251);
}

static ddpl_tensor *bytes_of(int from, int to, int64_t n)
{
    ddpl_tensor *t = ddpl_zeros(1, &n, DDPL_UINT8, ddpl_cpu());
    uint8_t *p = (uint8_t *)ddpl_data_ptr(t);
    for (int64_t j = 0; j < n; j++) p[j] = pattern(from, to, j);
    return t;
}

/* every byte of t is pattern(from, to, j) */
static bool holds(const ddpl_tensor *t, int from, int to)
{
    int64_t n = ddpl_tensor_numel(t);
    for (int64_t j = 0; j < n; j++)
        if (byte_at(t, j) != pattern(from, to, j)) return false;
    return true;
}

static int wait_ok(ddpl_work *w)
{
    int rc = w ? ddpl_work_wait(w, -1) : -1;
    ddpl_work_release(w);
    return rc;
}

/* ------------------------------------------------------------------- one-rank checks ---- */
static void check_one_rank(void)
{
    ddpl_pg *pg = one_rank_group(29500);
    if (!pg) return;
    int64_t n = 4, two = 2;
    ddpl_tensor *t = ddpl_ones(1, &n, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *m = ddpl_ones(1, &two, DDPL_FLOAT32, ddpl_cpu());

    CHECK(ddpl_pg_gather(pg, t, NULL, 1, 0) == NULL);
    CHECK(strstr(ddpl_last_error(), "gather: the dst (rank 0) needs a gather_list of 1 tensors "
                                    "(the group's size), got nil") != NULL);
    CHECK(ddpl_pg_scatter(pg, t, &m, 1, 0) == NULL);
    CHECK(strstr(ddpl_last_error(), "scatter: scatter_list[0] is [2] float32, but the output is "
                                    "[4] float32") != NULL);
    CHECK(ddpl_pg_alltoall(pg, &t, 1, NULL, 0) == NULL);
    CHECK(strstr(ddpl_last_error(), "all_to_all: expected an input_tensor_list of 1 tensors") !=
          NULL);
    ddpl_tensor *none = NULL;
    CHECK(ddpl_pg_alltoall(pg, &none, 1, &t, 1) == NULL);
    CHECK(strstr(ddpl_last_error(), "all_to_all: expected a tensor for output_tensor_list[0], "
                                    "got nil") != NULL);
    int64_t huge[1] = {INT64_MAX};
    CHECK(ddpl_pg_alltoall_single(pg, t, t, NULL, 0, huge, 1) == NULL);
    CHECK(strstr(ddpl_last_error(), "input_split_sizes[0] = 9223372036854775807 is more than the "
                                    "rows left of dim 0") != NULL);
    CHECK(ddpl_pg_reduce(pg, t, 0, DDPL_REDUCE_OP_COUNT) == NULL);
    CHECK(strstr(ddpl_last_error(), "reduce: unknown reduce op") != NULL);

    /* an entry the table lacks is named, never called; the group goes on working */
    const struct ddpl_pg_backend *full = pg->backend;
    struct ddpl_pg_backend partial = *full;
    partial.reduce = NULL;
    partial.gather = NULL;
    partial.scatter = NULL;
    partial.alltoall = NULL;
    partial.alltoall_single = NULL;
    pg->backend = &partial;
    CHECK(ddpl_pg_reduce(pg, t, 0, DDPL_REDUCE_SUM) == NULL);
    CHECK(strcmp(ddpl_last_error(), "reduce: not supported by backend gloo") == 0);
    CHECK(ddpl_pg_gather(pg, t, &t, 1, 0) == NULL);
    CHECK(strcmp(ddpl_last_error(), "gather: not supported by backend gloo") == 0);
    CHECK(ddpl_pg_scatter(pg, t, &t, 1, 0) == NULL);
    CHECK(strcmp(ddpl_last_error(), "scatter: not supported by backend gloo") == 0);
    CHECK(ddpl_pg_alltoall(pg, &t, 1, &t, 1) == NULL);
    CHECK(strcmp(ddpl_last_error(), "all_to_all: not supported by backend gloo") == 0);
    CHECK(ddpl_pg_alltoall_single(pg, t, t, NULL, 0, NULL, 0) == NULL);
    CHECK(strcmp(ddpl_last_error(), "all_to_all_single: not supported by backend gloo") == 0);
    pg->backend = full;
    CHECK(wait_ok(ddpl_pg_reduce(pg, t, 0, DDPL_REDUCE_SUM)) == 0);
    CHECK(((float *)ddpl_data_ptr(t))[3] == 1.0f);

    ddpl_tensor_release(t);
    ddpl_tensor_release(m);
    ddpl_pg_free(pg);
}

/* ------------------------------------------------------------------------ two ranks ---- */
enum { STAGING = 4 << 20 }; /* shm_coll.c's staging buffer per rank */

static int rank_main(int rank, int port)
{
    ddpl_pg *pg = join_group(rank, port, 20.0);
    if (!pg) return check_finish();

    /* reduce of float64 just over two staging buffers, odd: the rounds' last piece is short */
    int64_t n = 2 * STAGING / 8 + 3;
    ddpl_tensor *x = ddpl_arange(rank, rank + (double)n, 1.0, DDPL_FLOAT64, ddpl_cpu());
    CHECK(wait_ok(ddpl_pg_reduce(pg, x, 1, DDPL_REDUCE_SUM)) == 0);
    const double *xv = (const double *)ddpl_data_ptr(x);
    /* rank 1: sum over ranks of i + r = 2 i + 1; rank 0 keeps its values */
    CHECK(xv[0] == (rank == 1 ? 1.0 : 0.0) &&
          xv[n - 1] == (rank == 1 ? 2.0 * (double)(n - 1) + 1 : (double)(n - 1)));

    /* gather and scatter of STAGING + 3 bytes: a full round and a 3-byte one */
    int64_t g = STAGING + 3;
    ddpl_tensor *mine = bytes_of(rank, 0, g);
    ddpl_tensor *outs[2] = {ddpl_zeros(1, &g, DDPL_UINT8, ddpl_cpu()),
                            ddpl_zeros(1, &g, DDPL_UINT8, ddpl_cpu())};
    CHECK(wait_ok(ddpl_pg_gather(pg, mine, rank == 0 ? outs : NULL, rank == 0 ? 2 : 0, 0)) == 0);
    if (rank == 0) CHECK(holds(outs[0], 0, 0) && holds(outs[1], 1, 0));
    ddpl_tensor *ins[2] = {bytes_of(1, 0, g), bytes_of(1, 1, g)};
    ddpl_tensor *got = ddpl_zeros(1, &g, DDPL_UINT8, ddpl_cpu());
    CHECK(wait_ok(ddpl_pg_scatter(pg, got, rank == 1 ? ins : NULL, rank == 1 ? 2 : 0, 1)) == 0);
    CHECK(holds(got, 1, rank));

    /* all-to-all: 0 -> 1 carries 5 MB (2 MB slots: 3 rounds), every other pair 10 bytes; rank 1
     * sends little but must run all the rounds */
    int64_t big = 5 << 20, small = 10;
    int64_t send_n[2] = {small, rank == 0 ? big : small};
    int64_t recv_n[2] = {rank == 1 ? big : small, small};
    ddpl_tensor *a_in[2], *a_out[2];
    for (int q = 0; q < 2; q++) {
        a_in[q] = bytes_of(rank, q, send_n[q]);
        a_out[q] = ddpl_zeros(1, &recv_n[q], DDPL_UINT8, ddpl_cpu());
    }
    CHECK(wait_ok(ddpl_pg_alltoall(pg, a_out, 2, a_in, 2)) == 0);
    CHECK(holds(a_out[0], 0, rank) && holds(a_out[1], 1, rank));

    /* the same through all_to_all_single: one tensor each side, split sizes in rows */
    int64_t in_total = send_n[0] + send_n[1], out_total = recv_n[0] + recv_n[1];
    ddpl_tensor *s_in = ddpl_zeros(1, &in_total, DDPL_UINT8, ddpl_cpu());
    ddpl_tensor *s_out = ddpl_zeros(1, &out_total, DDPL_UINT8, ddpl_cpu());
    uint8_t *sp = (uint8_t *)ddpl_data_ptr(s_in);
    for (int q = 0, at = 0; q < 2; at += (int)send_n[q], q++)
        memcpy(sp + at, ddpl_data_ptr(a_in[q]), (size_t)send_n[q]);
    CHECK(wait_ok(ddpl_pg_alltoall_single(pg, s_out, s_in, recv_n, 2, send_n, 2)) == 0);
    ddpl_tensor *first = ddpl_tensor_alias(s_out, 1, &recv_n[0], (int64_t[]){1}, 0);
    ddpl_tensor *second = ddpl_tensor_alias(s_out, 1, &recv_n[1], (int64_t[]){1}, recv_n[0]);
    CHECK(holds(first, 0, rank) && holds(second, 1, rank));

    ddpl_tensor *all[] = {x,       mine,     outs[0],  outs[1], ins[0], ins[1], got,   a_in[0],
                          a_in[1], a_out[0], a_out[1], s_in,    s_out,  first,  second};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) ddpl_tensor_release(all[i]);
    ddpl_pg_free(pg);
    return check_finish();
}

int main(void)
{
    check_one_rank();
    int failed = check_finish();
    fflush(stdout); /* not again from the forked ranks */
    if (failed) return 1;
    failed = run_two_ranks("1", rank_main, 120) | run_two_ranks("0", rank_main, 120);
    printf("test_pg_rooted: %s\n", failed ? "FAILED" : "ok");
    return failed;
}
