/* spec/c/net_util.h: what the C tests of the distributed runtime share.
 * defines: free_port, join_group. */
#ifndef DDPL_SPEC_NET_UTIL_H
#define DDPL_SPEC_NET_UTIL_H

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "dist/pg.h"

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

#endif
