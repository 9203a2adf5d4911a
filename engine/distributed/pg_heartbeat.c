/* distributed/pg_heartbeat.c: the heartbeat of a CPU process group (see pg_heartbeat.h).
 * defines: pg_heartbeat_limit, pg_heartbeat_start, pg_heartbeat_stop, pg_heartbeat_fault,
 *          pg_heartbeat_declare.
 *
 * Time is measured by each rank on its own clock: over the store a peer's silence is how long
 * its counter had not changed as of the last poll that succeeded, so clocks of different machines
 * never meet, and a store that cannot be read makes nobody silent. The store client is the
 * thread's own (ddpl_store_clone), made at the first beat (the store may be gone by then: rank
 * 0 may have left a subgroup it is not in) with a short timeout (store_timeout): a store that
 * stops answering holds only this thread, and for a few seconds at a time; a client whose
 * connection failed is replaced at the next beat. Over shared memory the store is not used. */
#define _GNU_SOURCE
#include "distributed/pg_heartbeat.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "distributed/peer_fault.h"
#include "distributed/store_proto.h"

enum { FAULT_MAX = 768 };

#define DEFAULT_LIMIT_S 30.0
#define MAX_INTERVAL_S  5.0

struct pg_heartbeat {
    ddpl_pg *pg;
    pg_host *h;
    double limit_s, interval_s;
    char prefix[48]; /* "pg<id>/hb/" */
    /* the thread's store client; store_mu also guards its replacement (pg_heartbeat_fault uses
     * it from a lane) */
    pthread_mutex_t store_mu;
    ddpl_store *store;
    char store_error[256];
    double store_ok_at; /* when a poll of every peer last succeeded */
    int64_t *seen;      /* Gloo: each peer's counter, and when it last changed (store_now) */
    double *changed_at;
    pthread_t thread;
    pthread_mutex_t mu; /* stop, fault */
    pthread_cond_t cv;  /* CLOCK_MONOTONIC: wakes the thread to stop */
    bool stop;
    char fault[FAULT_MAX]; /* "" until this rank saw one */
};

double pg_heartbeat_limit(double cfg_s)
{
    if (cfg_s > 0) return cfg_s;
    if (cfg_s < 0) return 0;
    const char *env = getenv("DDPLUA_HEARTBEAT_TIMEOUT");
    if (env && *env) {
        char *end;
        double v = strtod(env, &end);
        if (end != env && *end == '\0') return v > 0 ? v : 0;
    }
    return DEFAULT_LIMIT_S;
}

/* Whether an operation that waits for group rank q runs now: a collective, or a send or
 * receive with q. */
static bool waited_for(ddpl_pg *pg, int q)
{
    const host_lanes *l = &host_of(pg)->lanes;
    return atomic_load(&l->coll_running) > 0 || atomic_load(&l->p2p_running[q]) > 0;
}

static void key_of(const pg_heartbeat *hb, char *out, size_t n, int rank)
{
    if (rank >= 0)
        snprintf(out, n, "%s%d", hb->prefix, rank);
    else
        snprintf(out, n, "%sfault", hb->prefix);
}

/* A store call failed: keep why, and drop the client (replaced at the next beat). Called with
 * store_mu held. */
static void store_lost(pg_heartbeat *hb)
{
    snprintf(hb->store_error, sizeof hb->store_error, "%s", ddpl_last_error());
    ddpl_store_free(hb->store);
    hb->store = NULL;
}

/* The heartbeat's store calls give up after this long: at least a beat interval, so that a busy
 * store is not taken for a silent one, and at most 2 s, so that a store that is gone (rank 0
 * left) holds the thread, and destroying the group, only that long. Seconds. */
static double store_timeout(const pg_heartbeat *hb)
{
    double t = hb->limit_s / 2 < 2.0 ? hb->limit_s / 2 : 2.0;
    return t > hb->interval_s ? t : hb->interval_s;
}

/* Over the store: adds 1 to this rank's counter, then reads every peer's and notes the ones that
 * changed. A failure leaves the peers' times as they were: the store's silence is checked on its
 * own (check_peers). */
static void beat_store(pg_heartbeat *hb)
{
    ddpl_pg *pg = hb->pg;
    char key[64];
    pthread_mutex_lock(&hb->store_mu);
    if (!hb->store) hb->store = ddpl_store_clone(hb->pg->store, store_timeout(hb));
    if (!hb->store) {
        snprintf(hb->store_error, sizeof hb->store_error, "%s", ddpl_last_error());
        pthread_mutex_unlock(&hb->store_mu);
        return;
    }
    key_of(hb, key, sizeof key, pg->rank);
    bool ok = ddpl_store_add(hb->store, key, 1, NULL) == 0;
    /* after an outage the peers' counters say nothing of the time the store could not be read
     * (they may not have reached it either): their silence counts from now */
    double now = store_now();
    if (ok && now - hb->store_ok_at > hb->limit_s / 2)
        for (int q = 0; q < pg->size; q++) hb->changed_at[q] = now;
    for (int q = 0; ok && q < pg->size; q++) {
        int64_t v = 0;
        if (q == pg->rank) continue;
        key_of(hb, key, sizeof key, q);
        ok = ddpl_store_add(hb->store, key, 0, &v) == 0;
        if (ok && v != hb->seen[q]) {
            hb->seen[q] = v;
            hb->changed_at[q] = now;
        }
    }
    if (ok)
        hb->store_ok_at = now;
    else
        store_lost(hb);
    pthread_mutex_unlock(&hb->store_mu);
}

/* Records the fault (the first one stays), publishes it for the other ranks and aborts the Gloo
 * pairs so that what waits on them returns now. */
static void declare(pg_heartbeat *hb, const char *msg)
{
    pthread_mutex_lock(&hb->mu);
    bool first = !hb->fault[0];
    if (first) snprintf(hb->fault, sizeof hb->fault, "%s", msg);
    pthread_mutex_unlock(&hb->mu);
    if (!first) return;
    char key[64], seen[FAULT_MAX + 64];
    int me = ddpl_pg_global_rank(hb->pg, hb->pg->rank);
    snprintf(seen, sizeof seen, "%s (seen by rank %d)", msg, me);
    key_of(hb, key, sizeof key, -1);
    pthread_mutex_lock(&hb->store_mu); /* Gloo only: the others may see nothing but our abort */
    if (hb->store && ddpl_store_set(hb->store, key, seen, strlen(seen)) < 0) store_lost(hb);
    pthread_mutex_unlock(&hb->store_mu);
    ddpl_gloo_abort(hb->h->gloo, msg);
    pg_host_hier_abort(hb->h->hier, msg);
}

bool pg_heartbeat_explain(pg_heartbeat *hb, const char *failed, char *out, size_t n)
{
    if (pg_heartbeat_fault(hb, out, n)) return true;
    if (!hb || !strstr(failed, "closed its connection")) return false;
    for (int i = 0; i < 25; i++) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
        if (pg_heartbeat_fault(hb, out, n)) return true;
    }
    return false;
}

void pg_heartbeat_declare(pg_heartbeat *hb, const char *msg)
{
    if (hb) declare(hb, msg);
}

/* A peer that an operation waits for (waited_for) and that is silent for longer than the limit
 * (or, over Gloo, a store that stopped answering for that long while an operation waits) is a
 * fault. */
static void check_peers(pg_heartbeat *hb)
{
    ddpl_pg *pg = hb->pg;
    pg_host *h = hb->h;
    double now = store_now();
    char label[320], msg[FAULT_MAX];
    bool waiting = false;
    for (int q = 0; q < pg->size; q++) waiting = waiting || (q != pg->rank && waited_for(pg, q));
    if (!waiting) return;
    if (!h->shm && now - hb->store_ok_at > hb->limit_s) {
        /* The peers cannot be heard without the store. When global rank 0 hosts it and this
         * operation waits for rank 0, its silence is rank 0's; otherwise (the launcher hosts the
         * store, or rank 0 is not in this group and may have left) nothing can be told. */
        int host = pg->agent_store ? -1 : ddpl_pg_group_rank(pg, 0);
        if (host < 0 || host == pg->rank || !waited_for(pg, host)) return;
        peer_label(label, sizeof label, 0, h->pids[host], h->hosts[host]);
        snprintf(msg, sizeof msg,
                 "%s, which hosts the store, stopped responding: the store gave no answer for "
                 "%.1f s (limit %g s; %s)",
                 label, now - hb->store_ok_at, hb->limit_s, hb->store_error);
        declare(hb, msg);
        return;
    }
    for (int q = 0; q < pg->size; q++) {
        if (q == pg->rank || !waited_for(pg, q)) continue;
        double silent = h->shm ? ddpl_shm_silence(h->shm, q) : hb->store_ok_at - hb->changed_at[q];
        if (silent <= hb->limit_s) continue;
        int pid = h->pids[q];
        peer_label(label, sizeof label, ddpl_pg_global_rank(pg, q), pid, h->hosts[q]);
        peer_silent_msg(msg, sizeof msg, label, pid, h->hosts[q], silent, hb->limit_s);
        declare(hb, msg);
        return;
    }
}

static void *heartbeat_main(void *arg)
{
    pg_heartbeat *hb = arg;
    pthread_mutex_lock(&hb->mu);
    while (!hb->stop) {
        bool faulted = hb->fault[0] != '\0';
        pthread_mutex_unlock(&hb->mu);
        if (hb->h->shm)
            ddpl_shm_beat(hb->h->shm);
        else
            beat_store(hb);
        pg_host_hier_beat(hb->h->hier); /* the node's segment, which its barriers watch */
        if (!faulted) check_peers(hb);
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        long ns = (long)((hb->interval_s - (double)(long)hb->interval_s) * 1e9);
        until.tv_sec += (time_t)hb->interval_s + (until.tv_nsec + ns) / 1000000000L;
        until.tv_nsec = (until.tv_nsec + ns) % 1000000000L;
        pthread_mutex_lock(&hb->mu);
        while (!hb->stop && pthread_cond_timedwait(&hb->cv, &hb->mu, &until) != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&hb->mu);
    return NULL;
}

static void heartbeat_free(pg_heartbeat *hb)
{
    ddpl_store_free(hb->store);
    free(hb->seen);
    free(hb->changed_at);
    pthread_mutex_destroy(&hb->store_mu);
    pthread_mutex_destroy(&hb->mu);
    pthread_cond_destroy(&hb->cv);
    free(hb);
}

pg_heartbeat *pg_heartbeat_start(ddpl_pg *pg, const char *prefix)
{
    double limit = pg_heartbeat_limit(pg->heartbeat_s);
    if (!(limit > 0) || pg->size < 2) return NULL;
    pg_heartbeat *hb = ddpl_xcalloc(1, sizeof *hb);
    hb->pg = pg;
    hb->h = host_of(pg);
    hb->limit_s = limit;
    hb->interval_s = limit / 10 < MAX_INTERVAL_S ? limit / 10 : MAX_INTERVAL_S;
    snprintf(hb->prefix, sizeof hb->prefix, "%shb/", prefix);
    hb->seen = ddpl_xcalloc((size_t)pg->size, sizeof *hb->seen);
    hb->changed_at = ddpl_xcalloc((size_t)pg->size, sizeof *hb->changed_at);
    hb->store_ok_at = store_now();
    for (int q = 0; q < pg->size; q++) hb->changed_at[q] = hb->store_ok_at;
    pthread_mutex_init(&hb->store_mu, NULL);
    pthread_mutex_init(&hb->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&hb->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (hb->h->shm) {
        ddpl_shm_beat(hb->h->shm); /* before any collective can wait for this rank */
        ddpl_shm_watch(hb->h->shm, hb->limit_s, pg->global_ranks, NULL);
    }
    pg_host_hier_watch(hb->h->hier, hb->limit_s, hb->h->hosts[pg->rank]);
    if (pthread_create(&hb->thread, NULL, heartbeat_main, hb) != 0) {
        heartbeat_free(hb);
        ddpl_error("cannot start the heartbeat thread");
        return NULL;
    }
    return hb;
}

void pg_heartbeat_stop(pg_heartbeat *hb)
{
    if (!hb) return;
    pthread_mutex_lock(&hb->mu);
    hb->stop = true;
    pthread_cond_signal(&hb->cv);
    pthread_mutex_unlock(&hb->mu);
    pthread_join(hb->thread, NULL);
    heartbeat_free(hb);
}

bool pg_heartbeat_fault(pg_heartbeat *hb, char *out, size_t n)
{
    if (!hb) return false;
    pthread_mutex_lock(&hb->mu);
    bool mine = hb->fault[0] != '\0';
    if (mine) snprintf(out, n, "%s", hb->fault);
    pthread_mutex_unlock(&hb->mu);
    if (mine) return true;
    /* another rank's: published before it aborted its pairs, so it is there by the time this
     * rank sees their connections close */
    char key[64];
    key_of(hb, key, sizeof key, -1);
    const char *keys[] = {key};
    bool found = false, present = false;
    pthread_mutex_lock(&hb->store_mu);
    if (hb->store && ddpl_store_check(hb->store, 1, keys, &present) == 0 && present) {
        void *v = NULL;
        size_t len = 0;
        if (ddpl_store_get(hb->store, key, &v, &len) == 0) {
            snprintf(out, n, "%.*s", (int)len, (const char *)v);
            free(v);
            found = true;
        }
    }
    pthread_mutex_unlock(&hb->store_mu);
    return found;
}
