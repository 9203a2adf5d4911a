/* spec/c/net_util.h: what the C tests of the distributed runtime share.
 * defines: free_port, join_group, one_rank_group, run_two_ranks. */
#ifndef DDPL_SPEC_NET_UTIL_H
#define DDPL_SPEC_NET_UTIL_H

#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "distributed/pg.h"

/* A TCP port on loopback that was free a moment ago (the kernel's pick for port 0), for the
 * store of a test's group; when even that fails, one derived from the pid (fallback_base +
 * pid % 1000), so concurrent tests rarely collide. */
static inline int free_port(int fallback_base)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        if (fd >= 0) close(fd);
        return fallback_base + (int)(getpid() % 1000);
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* This rank's member of a 2-rank gloo group on loopback, or NULL (a failed check). */
static inline ddpl_pg *join_group(int rank, int port, double timeout_s)
{
    ddpl_pg_config cfg = {.backend = "gloo",
                          .master_addr = "127.0.0.1",
                          .master_port = port,
                          .rank = rank,
                          .world_size = 2,
                          .timeout_s = timeout_s};
    ddpl_pg *pg = ddpl_pg_create(&cfg);
    CHECK(pg != NULL);
    return pg;
}

/* A one-rank gloo group on loopback (the store on a free port), or NULL (a failed check). */
static inline ddpl_pg *one_rank_group(int fallback_port)
{
    ddpl_pg_config cfg = {.master_addr = "127.0.0.1",
                          .master_port = free_port(fallback_port),
                          .rank = 0,
                          .world_size = 1,
                          .timeout_s = 10};
    ddpl_pg *pg = ddpl_pg_create(&cfg);
    CHECK(pg != NULL);
    return pg;
}

/* Forks ranks 0 and 1 of a job (job(rank, port) returns its exit status) with DDPLUA_SHM=shm
 * (collectives through shared memory, or Gloo's TCP), each killed after alarm_s (a hang is a
 * failure, never a stuck ctest); 0 when both exited 0. */
static inline int run_two_ranks(const char *shm, int (*job)(int rank, int port), int alarm_s)
{
    setenv("DDPLUA_SHM", shm, 1);
    int port = free_port(29000);
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            alarm((unsigned)alarm_s);
            int rc = job(r, port);
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

#endif
