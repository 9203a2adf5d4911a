/* cli/launch_rdzv.c: the launchers of one job on several machines agree on each generation of
 * its gang (--nnodes with --max-restarts, or --nnodes MIN:MAX): torchrun's elastic agent and
 * its c10d rendezvous, over the store that the launcher given --node-rank 0 hosts.
 * defines: launch_rdzv_open, launch_rdzv_join, launch_rdzv_poll, launch_rdzv_joining,
 *          launch_rdzv_failed, launch_rdzv_fail, launch_rdzv_finish, launch_rdzv_close (launch.h).
 *
 * Keys, under "rdzv/" (generation G is the gang's TORCHELASTIC_RESTART_COUNT):
 *   run_id       the host's run id, which every node's workers get (TORCHELASTIC_RUN_ID): a
 *                restarted gang finds its own checkpoints whatever node it runs on
 *   g<G>/join    a counter: each launcher adds 1, and the sum is its join number
 *   g<G>/id/<n>  join number n's --node-rank: the members' node ranks follow these ids' order,
 *                so a generation with the same nodes lays the ranks out the same way
 *   g<G>/closed  set by the host: how many joined; join numbers 1..closed are the members
 *   g<G>/failed  set by a launcher whose gang failed: why; the other members stop theirs
 *   g<G>/done    a counter: members whose gang succeeded
 *   finished     set by the host when the job is over (a launcher still waiting gives up)
 * The host closes a generation once MAX launchers joined, or once at least MIN did and no other
 * has for the last-call time (DDPLUA_RDZV_LAST_CALL seconds, default 10: torchrun waits 30). A
 * node that was lost never joins the next generation, which closes without it when at least MIN
 * are left. A launcher that joins after the close is no member: the members see the join counter
 * above `closed` and, when fewer than MAX run, stop their gang and start the next generation with
 * it (a membership change, which uses none of --max-restarts, as in torchrun).
 *
 * The store lives in the host's launcher: when that machine is lost, the job is (as with
 * torchrun's c10d rendezvous on one of the nodes); the others say so and stop. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ddpl/tensor.h" /* ddpl_last_error */
#include "distributed/store.h"
#include "distributed/store_server.h"
#include "launch.h"

/* Seconds between two looks at the store while the gang runs or a generation gathers. */
#define POLL_S 0.2

struct launch_rdzv {
    store_server *server; /* the host's */
    ddpl_store *store;
    bool host;
    int id; /* this launcher's --node-rank */
    int min_nodes, max_nodes;
    double last_call_s, join_timeout_s;
    int64_t members; /* of the current generation */
    double next_poll;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static double env_seconds(const char *name, double fallback)
{
    const char *v = getenv(name);
    char *end;
    double d = v && *v ? strtod(v, &end) : -1;
    return v && *v && *end == '\0' && d >= 0 ? d : fallback;
}

/* A store call failed: the host (or its machine) is gone. */
static int lost(const char *what)
{
    fprintf(stderr, "%s: lost the rendezvous store (the launcher of --node-rank 0) while %s: %s\n",
            CLI_PROGNAME, what, ddpl_last_error());
    return -1;
}

static bool present(launch_rdzv *r, const char *key, bool *ok)
{
    bool here = false;
    const char *keys[] = {key};
    *ok = ddpl_store_check(r->store, 1, keys, &here) == 0;
    return here;
}

launch_rdzv *launch_rdzv_open(launch_job *job, const cli_launch *l)
{
    launch_rdzv *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->host = l->node_rank == 0;
    r->id = l->node_rank;
    r->min_nodes = l->min_nodes;
    r->max_nodes = l->nnodes;
    r->last_call_s = env_seconds("DDPLUA_RDZV_LAST_CALL", 10.0);
    r->join_timeout_s = env_seconds("DDPLUA_RDZV_TIMEOUT", 900.0);
    const char *token = job->token[0] ? job->token : getenv("DDPLUA_STORE_TOKEN");
    if (r->host) {
        r->server = store_server_start(job->master_addr, job->master_port, token);
        if (!r->server) {
            fprintf(stderr, "%s: cannot host the rendezvous store on %s:%d: %s\n", CLI_PROGNAME,
                    job->master_addr, job->master_port, ddpl_last_error());
            free(r);
            return NULL;
        }
    }
    r->store =
        ddpl_store_create(job->master_addr, job->master_port, false, r->join_timeout_s, token);
    char key[] = "rdzv/run_id";
    if (r->store && r->host) {
        if (ddpl_store_set(r->store, key, job->run_id, strlen(job->run_id)) < 0) goto fail;
    } else if (r->store) {
        void *v = NULL;
        size_t len = 0;
        if (ddpl_store_get(r->store, key, &v, &len) < 0) goto fail;
        snprintf(job->run_id, sizeof job->run_id, "%.*s", (int)len, (char *)v);
        free(v);
    }
    if (!r->store) goto fail;
    job->agent_store = true; /* the workers rendezvous in it too, under their generation's prefix */
    return r;
fail:
    fprintf(stderr,
            "%s: cannot reach the rendezvous store at %s:%d (hosted by the launcher of "
            "--node-rank 0): %s\n",
            CLI_PROGNAME, job->master_addr, job->master_port, ddpl_last_error());
    launch_rdzv_close(r);
    return NULL;
}

/* The host: closes generation g once MAX joined, or MIN and the last call passed. */
static int close_generation(launch_rdzv *r, int g)
{
    char key[64];
    snprintf(key, sizeof key, "rdzv/g%d/join", g);
    int64_t seen = -1, count = 0;
    double changed = now_s(), started = changed;
    for (;;) {
        if (ddpl_store_add(r->store, key, 0, &count) < 0) return lost("gathering the nodes");
        double now = now_s();
        if (count != seen) seen = count, changed = now;
        if (count >= r->max_nodes || (count >= r->min_nodes && now - changed >= r->last_call_s))
            break;
        if (now - started > r->join_timeout_s) {
            fprintf(stderr,
                    "%s: only %lld of at least %d nodes joined within %g s "
                    "(DDPLUA_RDZV_TIMEOUT)\n",
                    CLI_PROGNAME, (long long)count, r->min_nodes, r->join_timeout_s);
            return -1;
        }
        sleep_s(POLL_S);
    }
    if (count > r->max_nodes) count = r->max_nodes;
    char v[24];
    snprintf(key, sizeof key, "rdzv/g%d/closed", g);
    snprintf(v, sizeof v, "%lld", (long long)count);
    return ddpl_store_set(r->store, key, v, strlen(v)) < 0 ? lost("closing a generation") : 0;
}

/* Waits for generation g's close (or the job's end): its member count, 0 when the job finished,
 * -1 on error. */
static int64_t wait_closed(launch_rdzv *r, int g)
{
    char key[64];
    snprintf(key, sizeof key, "rdzv/g%d/closed", g);
    double started = now_s();
    for (;;) {
        bool ok;
        if (present(r, key, &ok)) break;
        if (ok && present(r, "rdzv/finished", &ok)) return 0;
        if (!ok) return lost("waiting for the nodes to gather");
        if (now_s() - started > r->join_timeout_s + 60) {
            fprintf(stderr, "%s: generation %d did not start within %g s\n", CLI_PROGNAME, g,
                    r->join_timeout_s);
            return -1;
        }
        sleep_s(POLL_S);
    }
    void *v = NULL;
    size_t len = 0;
    if (ddpl_store_get(r->store, key, &v, &len) < 0) return lost("reading a generation");
    int64_t n = strtoll(v, NULL, 10);
    free(v);
    return n;
}

int launch_rdzv_join(launch_rdzv *r, launch_job *job)
{
    for (;;) {
        int g = job->restart_count;
        char key[64], v[24];
        int64_t me = 0;
        snprintf(key, sizeof key, "rdzv/g%d/join", g);
        if (ddpl_store_add(r->store, key, 1, &me) < 0) return lost("joining");
        snprintf(key, sizeof key, "rdzv/g%d/id/%lld", g, (long long)me);
        snprintf(v, sizeof v, "%d", r->id);
        if (ddpl_store_set(r->store, key, v, strlen(v)) < 0) return lost("joining");
        if (r->host && close_generation(r, g) < 0) return -1;
        int64_t members = wait_closed(r, g);
        if (members <= 0) return (int)members; /* the job finished without us, or an error */
        if (me > members) {                    /* late: the members restart with us when they can */
            fprintf(stderr,
                    "%s: generation %d started without this node (%lld nodes); waiting "
                    "for the next\n",
                    CLI_PROGNAME, g, (long long)members);
            job->restart_count++;
            continue;
        }
        int below = 0;
        for (int64_t n = 1; n <= members; n++) {
            void *idv = NULL;
            size_t len = 0;
            snprintf(key, sizeof key, "rdzv/g%d/id/%lld", g, (long long)n);
            if (ddpl_store_get(r->store, key, &idv, &len) < 0) return lost("reading the nodes");
            int id = (int)strtol(idv, NULL, 10);
            free(idv);
            if (n != me && id == r->id) {
                fprintf(stderr, "%s: two launchers of the job have --node-rank %d\n", CLI_PROGNAME,
                        id);
                return -1;
            }
            below += id < r->id;
        }
        r->members = members;
        job->nnodes = (int)members;
        job->node_rank = below;
        return 1;
    }
}

bool launch_rdzv_poll(launch_rdzv *r, const launch_job *job, char *why, size_t n)
{
    double now = now_s();
    if (now < r->next_poll) return false;
    r->next_poll = now + POLL_S;
    char key[64];
    bool ok;
    snprintf(key, sizeof key, "rdzv/g%d/failed", job->restart_count);
    if (present(r, key, &ok)) {
        void *v = NULL;
        size_t len = 0;
        if (ddpl_store_get(r->store, key, &v, &len) == 0) {
            snprintf(why, n, "%.*s", (int)len, (char *)v);
            free(v);
            return true;
        }
        ok = false;
    }
    if (!ok) {
        snprintf(why, n, "lost the rendezvous store (the launcher of --node-rank 0): %s",
                 ddpl_last_error());
        return true;
    }
    if (launch_rdzv_joining(r, job)) {
        snprintf(why, n, "a node is waiting to join (%lld running, at most %d)",
                 (long long)r->members, r->max_nodes);
        return true;
    }
    return false;
}

bool launch_rdzv_joining(launch_rdzv *r, const launch_job *job)
{
    char key[64];
    int64_t joined = 0;
    snprintf(key, sizeof key, "rdzv/g%d/join", job->restart_count);
    return r->members < r->max_nodes && ddpl_store_add(r->store, key, 0, &joined) == 0 &&
           joined > r->members;
}

bool launch_rdzv_failed(launch_rdzv *r, const launch_job *job)
{
    char key[64];
    bool ok;
    snprintf(key, sizeof key, "rdzv/g%d/failed", job->restart_count);
    return present(r, key, &ok) || !ok;
}

void launch_rdzv_fail(launch_rdzv *r, const launch_job *job, const char *why)
{
    char key[64], msg[400];
    snprintf(key, sizeof key, "rdzv/g%d/failed", job->restart_count);
    snprintf(msg, sizeof msg, "node %d (--node-rank %d): %s", job->node_rank, r->id, why);
    if (ddpl_store_set(r->store, key, msg, strlen(msg)) < 0) lost("reporting a failure");
}

int launch_rdzv_finish(launch_rdzv *r, const launch_job *job)
{
    char key[64];
    int64_t done = 0;
    snprintf(key, sizeof key, "rdzv/g%d/done", job->restart_count);
    if (ddpl_store_add(r->store, key, 1, &done) < 0) return lost("finishing");
    /* the host keeps the store until every member is done with it */
    double started = now_s();
    while (r->host && done < r->members) {
        if (launch_rdzv_failed(r, job)) {
            fprintf(stderr, "%s: another node failed after this node's workers had finished\n",
                    CLI_PROGNAME);
            return -1;
        }
        if (now_s() - started > r->join_timeout_s) break;
        sleep_s(POLL_S);
        if (ddpl_store_add(r->store, key, 0, &done) < 0) return lost("finishing");
    }
    return 0;
}

void launch_rdzv_close(launch_rdzv *r)
{
    if (!r) return;
    if (r->host && r->store) ddpl_store_set(r->store, "rdzv/finished", "1", 1);
    ddpl_store_free(r->store);
    store_server_stop(r->server, 2.0); /* the others' last calls */
    free(r);
}
