/* distributed/pg_host_hier.c: hierarchical collectives for a group whose ranks span machines,
 * several of them on at least one machine (issue 30, item 3). defines: pg_host_hier_connect,
 * pg_host_hier_free, pg_host_hier_agree, pg_host_hier_allreduce, pg_host_hier_beat,
 * pg_host_hier_watch, pg_host_hier_abort, pg_host_hier_transport (pg_host.h).
 *
 * A flat Gloo ring over N ranks on M machines (ranks numbered node by node) sends 2(N-1)/N x G
 * bytes of a G-byte allreduce out of every machine: the ring's one edge that leaves the machine
 * carries as much as any other. Here the ranks of a machine ("node") first reduce into their
 * leader (the node's lowest group rank) through shared memory (shm_coll_rooted.h), the M leaders
 * allreduce over a Gloo mesh of their own (a ring of M: 2(M-1)/M x G out of each node), and
 * each leader broadcasts the sum to its node through shared memory. Every rank ends with the
 * same bits (the leaders' ring gives every leader the same sums). Allreduces smaller than
 * min_bytes (DDPLUA_HIER_MIN_BYTES, rank 0's value; bench/README.md has the measurement behind
 * the default) and every other collective keep the flat path: Gloo over the whole group's mesh;
 * the barrier is the fingerprint check's tree alone (below).
 *
 * The fingerprint check of every collective (agree) follows the same tree: each node's ranks
 * gather their fingerprints to the leader (shared memory), the leaders allgather their nodes'
 * blocks, and each leader broadcasts the verdict to its node. A mismatch thus fails on every
 * rank with the same message as the flat check, which names every rank's call. A failure inside
 * a node (a rank that died) is published by its leader as the heartbeat publishes a fault (the
 * store's pg<id>/hb/fault) before it closes its leaders' mesh, so the other nodes fail at once
 * and report it, naming the rank, instead of the leader whose connection closed. The check returns
 * on a rank only once every rank has joined it, so it is the barrier too.
 *
 * Chosen at connect, the same on every rank: every rank publishes its machine (ddpl_shm_machine_id)
 * and whether it may use shared memory (DDPLUA_SHM=0, DDPLUA_HIER=0 say no); the hierarchy is
 * used only when every rank may, the ranks span 2 machines or more, some machine has 2 ranks or
 * more, and every node's shared segment and the leaders' mesh were made. */
#include "core/alloc.h"
#include "distributed/pg_heartbeat.h"
#include "distributed/pg_host.h"
#include "distributed/shm_coll_rooted.h"

/* Allreduces of fewer bytes stay flat by default. Measured in bench/README.md ("Hierarchical
 * allreduce"): the hierarchy was not slower at any size from 4 KB up, so everything that is not
 * empty goes through it. */
enum { DEFAULT_MIN_BYTES = 1 };

enum { MSG_MAX = 768 };

struct host_hier {
    int nodes;          /* M */
    int local_rank;     /* within this node, in group-rank order; 0 is the leader */
    int local_size;     /* ranks on this node */
    int local_max;      /* the most ranks on any node: the slots of a leader's agree block */
    int *node_of;       /* per group rank: its node (nodes numbered by their lowest rank) */
    int *index_of;      /* per group rank: its local rank on its node */
    int *local_global;  /* this node's ranks, as global ranks (for the shm segment's messages) */
    ddpl_shm *local;    /* this node's ranks; NULL when it has one */
    ddpl_gloo *leaders; /* the leaders' mesh, on leaders only */
    /* the fingerprint check's buffers (a group's collectives run one at a time on its lane):
     * this node's (local_max, leaders only), every node's (nodes x local_max, leaders only),
     * every rank's (group size) */
    ddpl_pg_fp *fp_block, *fp_blocks, *fp_all;
    size_t min_bytes;
    char transport[96];
};

/* What a leader tells its node after a step across nodes: 0 ok, or a failure and its message. */
typedef struct hier_verdict {
    int32_t failed;
    int32_t mismatch; /* the fingerprints differ: every rank's follows (pg_host_hier_agree) */
    char msg[MSG_MAX];
} hier_verdict;

/* ------------------------------------------------------------------------- connect ---- */
static bool env_says_no(const char *name)
{
    const char *v = getenv(name);
    return v && strcmp(v, "0") == 0;
}

static size_t env_min_bytes(void)
{
    const char *v = getenv("DDPLUA_HIER_MIN_BYTES");
    if (!v || !*v) return DEFAULT_MIN_BYTES;
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    return end != v && *end == '\0' ? (size_t)n : DEFAULT_MIN_BYTES;
}

/* Every rank publishes "<may use 0|1> <min bytes> <machine>" under <prefix>hier/who/<rank> and
 * reads every rank's: the machines give each rank's node (numbered in order of the nodes' lowest
 * ranks). *use: whether every rank may use the hierarchy; min_bytes is rank 0's. */
static int learn_nodes(ddpl_pg *pg, host_hier *x, const char *prefix, bool *use)
{
    char key[256], me[256], id[160];
    ddpl_shm_machine_id(id, sizeof id);
    bool mine = !env_says_no("DDPLUA_SHM") && !env_says_no("DDPLUA_HIER");
    snprintf(me, sizeof me, "%d %zu %s", mine ? 1 : 0, env_min_bytes(), id);
    snprintf(key, sizeof key, "%shier/who/%d", prefix, pg->rank);
    if (ddpl_store_set(pg->store, key, me, strlen(me)) < 0) return -1;
    char **ids = ddpl_xcalloc((size_t)pg->size, sizeof *ids);
    int rc = 0;
    *use = true;
    for (int q = 0; q < pg->size && rc == 0; q++) {
        void *v = NULL;
        size_t len = 0;
        snprintf(key, sizeof key, "%shier/who/%d", prefix, q);
        if (ddpl_store_get(pg->store, key, &v, &len) < 0) {
            rc = -1;
            break;
        }
        ids[q] = ddpl_xmalloc(len + 1);
        memcpy(ids[q], v, len);
        ids[q][len] = '\0';
        free(v);
        int may = 0, skip = 0;
        unsigned long long min = 0;
        if (sscanf(ids[q], "%d %llu %n", &may, &min, &skip) < 2 || skip == 0) may = 0;
        *use = *use && may == 1;
        if (q == 0) x->min_bytes = (size_t)min;
        memmove(ids[q], ids[q] + skip, strlen(ids[q] + skip) + 1); /* keep the machine */
        x->node_of[q] = -1;
        for (int p = 0; p < q && x->node_of[q] < 0; p++)
            if (strcmp(ids[p], ids[q]) == 0) x->node_of[q] = x->node_of[p];
        if (x->node_of[q] < 0) x->node_of[q] = x->nodes++;
    }
    for (int q = 0; q < pg->size; q++) free(ids[q]);
    free(ids);
    return rc;
}

void pg_host_hier_free(host_hier *x)
{
    if (!x) return;
    ddpl_gloo_free(x->leaders);
    ddpl_shm_free(x->local);
    free(x->node_of);
    free(x->index_of);
    free(x->local_global);
    free(x->fp_block);
    free(x->fp_blocks);
    free(x->fp_all);
    free(x);
}

int pg_host_hier_connect(ddpl_pg *pg, pg_host *h, const char *prefix, const char *bind_host)
{
    host_hier *x = ddpl_xcalloc(1, sizeof *x);
    x->node_of = ddpl_xcalloc((size_t)pg->size, sizeof *x->node_of);
    x->index_of = ddpl_xcalloc((size_t)pg->size, sizeof *x->index_of);
    bool use = false;
    if (learn_nodes(pg, x, prefix, &use) < 0) {
        pg_host_hier_free(x);
        return -1;
    }
    /* one node is the whole-group shared memory's case; one rank per node gains nothing */
    if (!use || x->nodes < 2 || x->nodes == pg->size) {
        pg_host_hier_free(x);
        return 0;
    }
    int node = x->node_of[pg->rank];
    int *count = ddpl_xcalloc((size_t)x->nodes, sizeof *count);
    int *leader_global = ddpl_xcalloc((size_t)x->nodes, sizeof *leader_global);
    x->local_global = ddpl_xcalloc((size_t)pg->size, sizeof *x->local_global);
    for (int q = 0; q < pg->size; q++) {
        int k = x->node_of[q];
        if (count[k] == 0) leader_global[k] = q; /* a group rank for now */
        x->index_of[q] = count[k]++;
        if (k == node) x->local_global[x->index_of[q]] = ddpl_pg_global_rank(pg, q);
        if (count[k] > x->local_max) x->local_max = count[k];
    }
    x->local_rank = x->index_of[pg->rank];
    x->local_size = count[node];

    char key[256];
    snprintf(key, sizeof key, "%shier/n%d/", prefix, node);
    if (x->local_size > 1)
        x->local = ddpl_shm_connect(pg->store, key, x->local_rank, x->local_size, pg->timeout_s);
    if (x->local_rank == 0) {
        snprintf(key, sizeof key, "%shier/lead/", prefix);
        x->leaders = ddpl_gloo_connect(pg->store, key, node, x->nodes, bind_host, pg->timeout_s);
        if (x->leaders) {
            /* the leaders' mesh names a failed peer as the group does */
            int *pids = ddpl_xcalloc((size_t)x->nodes, sizeof *pids);
            const char **hosts = ddpl_xcalloc((size_t)x->nodes, sizeof *hosts);
            for (int k = 0; k < x->nodes; k++) {
                int q = leader_global[k];
                pids[k] = h->pids[q];
                hosts[k] = h->hosts[q];
                leader_global[k] = ddpl_pg_global_rank(pg, q);
            }
            ddpl_gloo_set_peers(x->leaders, leader_global, pids, hosts);
            free(pids);
            free(hosts);
        }
    }
    free(count);
    free(leader_global);
    bool mine = (x->local_size == 1 || x->local) && (x->local_rank != 0 || x->leaders), all = false;
    /* all made: every rank says "1" (one that says "0" makes them differ) */
    snprintf(key, sizeof key, "%shier/", prefix);
    int rc =
        ddpl_store_all_equal(pg->store, key, "made", pg->rank, pg->size, mine ? "1" : "0", &all);
    all = all && mine;
    if (rc < 0 || !all) {
        /* a node without room in /dev/shm: everybody stays flat */
        pg_host_hier_free(x);
        return rc;
    }
    snprintf(x->transport, sizeof x->transport,
             "gloo+shm (hierarchical: shared memory within each of %d nodes, gloo across)",
             x->nodes);
    if (x->leaders) {
        x->fp_block = ddpl_xcalloc((size_t)x->local_max, sizeof *x->fp_block);
        x->fp_blocks = ddpl_xcalloc((size_t)x->nodes * (size_t)x->local_max, sizeof *x->fp_blocks);
    }
    x->fp_all = ddpl_xcalloc((size_t)pg->size, sizeof *x->fp_all);
    h->hier = x;
    h->coll = &pg_host_hier_coll;
    return 0;
}

const char *pg_host_hier_transport(const host_hier *x)
{
    return x->transport;
}

/* --------------------------------------------------------------------------- faults ---- */
void pg_host_hier_watch(host_hier *x, double limit_s, const char *host)
{
    if (!x || !x->local) return;
    ddpl_shm_beat(x->local); /* before any collective can wait for this rank */
    ddpl_shm_watch(x->local, limit_s, x->local_global, host);
}

void pg_host_hier_beat(host_hier *x)
{
    if (x && x->local) ddpl_shm_beat(x->local);
}

void pg_host_hier_abort(host_hier *x, const char *why)
{
    if (x && x->leaders) ddpl_gloo_abort(x->leaders, why);
}

/* -------------------------------------------------------------------- the verdicts ---- */
/* A leader's failure across nodes as its node's verdict: the fault behind it where one is known
 * (a rank of another node died, and its leader published that before closing the mesh), so the
 * node's other ranks report the rank that died from the verdict alone. Looking it up on each of
 * them instead raced the leader's exit: a leader hosting the store takes it along, and a rank
 * that then asked found nothing and blamed the other leader, whose connection had closed. */
static hier_verdict verdict_of_error(pg_host *h)
{
    hier_verdict v = {.failed = 1};
    char failed[sizeof v.msg];
    snprintf(failed, sizeof failed, "%s", ddpl_last_error());
    if (!pg_heartbeat_explain(h->hb, failed, v.msg, sizeof v.msg))
        snprintf(v.msg, sizeof v.msg, "%s", failed);
    return v;
}

/* A leader whose node failed inside (a rank died) cannot take part in the steps across nodes:
 * it publishes the fault as the heartbeat does (the message the others report) and then closes
 * its mesh, so they fail now instead of at their timeout. */
static void leave_leaders(pg_host *h)
{
    char why[MSG_MAX];
    snprintf(why, sizeof why, "%s", ddpl_last_error());
    if (h->hb)
        pg_heartbeat_declare(h->hb, why); /* which also closes the leaders' mesh */
    else
        pg_host_hier_abort(h->hier, why);
    ddpl_error("%s", why);
}

/* rc of a step inside the node (shared memory): a failure there is seen by the node's ranks,
 * and its leader takes it to the other nodes (leave_leaders). */
static int node_step(pg_host *h, int rc)
{
    if (rc < 0 && h->hier->leaders) leave_leaders(h);
    return rc;
}

/* The leader's verdict to its node (every rank of a node with 2 or more calls it): 0, or -1
 * with the verdict's message as the error. */
static int share_verdict(pg_host *h, hier_verdict *v)
{
    if (node_step(h, ddpl_shm_broadcast(h->hier->local, v, sizeof *v, 0)) < 0) return -1;
    return v->failed ? ddpl_error("%s", v->msg) : 0;
}

/* ---------------------------------------------------------------------- agreement ---- */
/* The leaders exchange their nodes' fingerprints (fp_block: local_max of them, in local-rank
 * order); the verdict: the exchange's failure, else the flat check (ddpl_pg_fp_check) of every
 * rank's fingerprint, put in group-rank order into fp_all. */
static hier_verdict leaders_agree(pg_host *h, int size)
{
    host_hier *x = h->hier;
    hier_verdict v = {0};
    size_t block_bytes = (size_t)x->local_max * sizeof *x->fp_block;
    if (ddpl_gloo_allgather(x->leaders, x->fp_block, x->fp_blocks, block_bytes) < 0)
        return verdict_of_error(h);
    for (int q = 0; q < size; q++)
        x->fp_all[q] =
            x->fp_blocks[(size_t)x->node_of[q] * (size_t)x->local_max + (size_t)x->index_of[q]];
    v.mismatch = ddpl_pg_fp_check(&x->fp_all[0], x->fp_all, size) < 0;
    return v;
}

int pg_host_hier_agree(pg_host *h, const ddpl_pg_fp *fp, int size)
{
    host_hier *x = h->hier;
    /* 1. this node's fingerprints to its leader; a failure here (a rank died) is seen by every
     * rank of the node, and the leader takes it to the other nodes */
    if (x->local && node_step(h, ddpl_shm_gather(x->local, fp, x->fp_block, sizeof *fp, 0)) < 0)
        return -1;
    if (x->local_size == 1) x->fp_block[0] = *fp;
    /* 2. across nodes, 3. the verdict to the node */
    hier_verdict v = {0};
    if (x->leaders) v = leaders_agree(h, size);
    if (x->local && share_verdict(h, &v) < 0) return -1;
    if (!x->local && v.failed) return -1; /* the leader's own error is set */
    if (v.mismatch) {
        /* every rank checks its own call against all of them, as the flat check does */
        size_t all_bytes = (size_t)size * sizeof *x->fp_all;
        if (x->local && node_step(h, ddpl_shm_broadcast(x->local, x->fp_all, all_bytes, 0)) < 0)
            return -1;
        return ddpl_pg_fp_check(fp, x->fp_all, size);
    }
    return 0;
}

/* ------------------------------------------------------------------------ allreduce ---- */
int pg_host_hier_allreduce(pg_host *h, void *data, size_t count, size_t elsize, ddpl_reduce_fn fn)
{
    host_hier *x = h->hier;
    size_t nbytes = count * elsize;
    if (nbytes == 0 || nbytes < x->min_bytes)
        return ddpl_gloo_allreduce(h->gloo, data, count, elsize, fn);
    /* 1. the node's sum on its leader */
    if (x->local && node_step(h, ddpl_shm_reduce_to(x->local, data, count, elsize, fn, 0)) < 0)
        return -1;
    /* 2. the leaders' sum of the nodes' sums */
    hier_verdict v = {0};
    if (x->leaders && ddpl_gloo_allreduce(x->leaders, data, count, elsize, fn) < 0)
        v = verdict_of_error(h);
    if (!x->local) return v.failed ? -1 : 0;
    /* 3. the verdict, then the sum, to the node */
    if (share_verdict(h, &v) < 0) return -1;
    return node_step(h, ddpl_shm_broadcast(x->local, data, nbytes, 0));
}
