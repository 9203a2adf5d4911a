/* cli/launch_env.c: the environment of a distributed job: the torchrun variables of each worker,
 * the cluster launchers' variables (srun, mpirun), a free port, random ids.
 * defines: launch_worker_env, cli_cluster_env, launch_pick_port, launch_random_hex. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "launch.h"

static void set_int(const char *name, long v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%ld", v);
    setenv(name, buf, 1);
}

/* torchrun's role variables: one role, "default", holding every rank. */
static void set_role(void)
{
    setenv("ROLE_NAME", "default", 1);
    setenv("ROLE_RANK", getenv("RANK"), 1);
    setenv("ROLE_WORLD_SIZE", getenv("WORLD_SIZE"), 1);
}

void launch_worker_env(const launch_job *job, int local)
{
    set_int("RANK", (long)job->node_rank * job->nproc + local);
    set_int("LOCAL_RANK", local);
    set_int("WORLD_SIZE", (long)job->nnodes * job->nproc);
    set_int("LOCAL_WORLD_SIZE", job->nproc);
    set_int("GROUP_RANK", job->node_rank);
    set_int("GROUP_WORLD_SIZE", job->nnodes);
    set_role(); /* after RANK and WORLD_SIZE */
    setenv("MASTER_ADDR", job->master_addr, 1);
    set_int("MASTER_PORT", job->master_port);
    setenv("DDPLUA_RUN_ID", job->run_id, 1);
    /* N workers each starting an OpenMP pool of every core would oversubscribe the machine
     * N-fold (torchrun sets 1 too); a value the user chose is kept. */
    setenv("OMP_NUM_THREADS", "1", 0);
    if (job->token[0]) setenv("DDPLUA_STORE_TOKEN", job->token, 1);
    /* torchrun's elastic variables: which start of the gang this is, and whether the launcher
     * hosts the store (then rank 0 joins it as a client, lua/ddplua/distributed.lua) */
    set_int("TORCHELASTIC_RESTART_COUNT", job->restart_count);
    set_int("TORCHELASTIC_MAX_RESTARTS", job->max_restarts);
    setenv("TORCHELASTIC_USE_AGENT_STORE", job->agent_store ? "True" : "False", 1);
    setenv("TORCHELASTIC_RUN_ID", job->run_id, 1);
}

/* The value of the first variable of names that is set to an integer, else -1. */
static long env_int(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        char *end;
        if (!v || !*v) continue;
        long x = strtol(v, &end, 10);
        if (*end == '\0' && x >= 0) return x;
    }
    return -1;
}

/* The first host of a Slurm host list (SLURM_JOB_NODELIST): "node[01-04,07],gpu5" gives
 * "node01", "rack1-n[3-5]-ib" gives "rack1-n3-ib": each bracket group contributes the start of
 * its first range, zero padding kept. False when the list is empty, malformed (an unclosed
 * bracket) or the host does not fit out (n bytes). */
static bool slurm_first_host(const char *list, char *out, size_t n)
{
    size_t k = 0;
    for (const char *p = list; *p && *p != ','; p++) {
        if (*p == '[') {
            const char *close = strchr(p, ']');
            if (!close) return false;
            /* the first range's start: digits up to '-', ',' or ']' */
            const char *q = p + 1;
            while (q < close && *q != '-' && *q != ',') {
                if (k + 1 >= n) return false;
                out[k++] = *q++;
            }
            p = close;
            continue;
        }
        if (k + 1 >= n) return false;
        out[k++] = *p;
    }
    out[k] = '\0';
    return k > 0;
}

/* Tasks per node from SLURM_TASKS_PER_NODE when every node has the same number ("4", "4(x3)"),
 * else -1 ("2(x2),1": nodes differ). */
static long slurm_tasks_per_node(void)
{
    const char *v = getenv("SLURM_TASKS_PER_NODE");
    if (!v || !*v) return -1;
    long first = -1;
    for (const char *p = v; *p;) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x <= 0) return -1;
        if (first >= 0 && x != first) return -1;
        first = x;
        p = end;
        if (*p == '(') { /* "(x3)": repeated */
            const char *close = strchr(p, ')');
            if (!close) return -1;
            p = close + 1;
        }
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return first;
}

void cli_cluster_env(const cli_launch *l)
{
    if (getenv("RANK")) return; /* a launcher (ours or torchrun-like) already decided */
    /* srun; Open MPI's mpirun; MPICH and Intel MPI (Hydra's PMI) */
    static const char *const rank_v[] = {"SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", NULL};
    static const char *const size_v[] = {"SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
    static const char *const local_v[] = {"SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
                                          "MPI_LOCALRANKID", NULL};
    static const char *const lsize_v[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE",
                                          "MPI_LOCALNRANKS", NULL};
    static const char *const node_v[] = {"SLURM_NODEID", NULL};
    static const char *const nnodes_v[] = {"SLURM_NNODES", "SLURM_JOB_NUM_NODES", NULL};
    long rank = env_int(rank_v), size = env_int(size_v);
    if (rank < 0 || size <= 0) return;
    long local = env_int(local_v), lsize = env_int(lsize_v), node = env_int(node_v);
    long nnodes = env_int(nnodes_v);
    if (local < 0) local = rank;
    if (lsize <= 0) lsize = slurm_tasks_per_node();
    if (lsize <= 0) lsize = nnodes == 1 ? size : -1;
    if (node < 0 && lsize > 0) node = rank / lsize;
    set_int("RANK", rank);
    set_int("WORLD_SIZE", size);
    set_int("LOCAL_RANK", local);
    if (lsize > 0) set_int("LOCAL_WORLD_SIZE", lsize);
    if (node >= 0) set_int("GROUP_RANK", node);
    if (nnodes > 0) set_int("GROUP_WORLD_SIZE", nnodes);
    set_role();
    /* rank 0's host: --master-addr, else MASTER_ADDR, else the first host of the Slurm
     * allocation (srun starts task 0 there), else loopback when the job is on one node */
    const char *nodelist = getenv("SLURM_JOB_NODELIST");
    if (!nodelist || !*nodelist) nodelist = getenv("SLURM_NODELIST");
    char first[256];
    if (l->master_addr)
        setenv("MASTER_ADDR", l->master_addr, 1);
    else if (getenv("MASTER_ADDR") && *getenv("MASTER_ADDR"))
        ;
    else if (nodelist && slurm_first_host(nodelist, first, sizeof first))
        setenv("MASTER_ADDR", first, 1);
    else if (nnodes == 1 || lsize == size)
        setenv("MASTER_ADDR", "127.0.0.1", 1);
    if (l->master_port)
        set_int("MASTER_PORT", l->master_port);
    else
        setenv("MASTER_PORT", "29500", 0); /* torchrun's default */
}

int launch_pick_port(const char *addr)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(addr, "0", &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "%s: cannot resolve the master address '%s': %s\n", CLI_PROGNAME, addr,
                gai_strerror(rc));
        return -1;
    }
    int port = -1, err = 0;
    for (struct addrinfo *ai = res; ai && port < 0; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) continue;
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
            port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                  : ((struct sockaddr_in *)&ss)->sin_port);
        else
            err = errno;
        close(fd);
    }
    freeaddrinfo(res);
    if (port < 0)
        fprintf(stderr,
                "%s: cannot find a free port on the master address %s (%s); give one "
                "with --master-port\n",
                CLI_PROGNAME, addr, strerror(err));
    return port;
}

bool launch_random_hex(char *out, size_t n)
{
    unsigned char buf[64];
    if (n > sizeof buf) n = sizeof buf;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, buf, n) : -1;
    if (fd >= 0) close(fd);
    bool ok = got == (ssize_t)n;
    if (!ok) { /* no /dev/urandom (a bare chroot): time and pid, unique but not secret */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned long long x = (unsigned long long)ts.tv_nsec ^
                               (unsigned long long)ts.tv_sec << 20 ^
                               (unsigned long long)getpid() << 40;
        for (size_t i = 0; i < n; i++)
            buf[i] = (unsigned char)(x >> (8 * (i % 8))) ^ (unsigned char)i;
    }
    for (size_t i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", buf[i]);
    out[2 * n] = '\0';
    return ok;
}
