/* distributed/pg_host_lanes.c: the host backend's lanes (see pg_host_lanes.h): queueing, the
 * threads, running a work item (failure state, fingerprint, the operation, the fault behind a
 * failure) and the work hooks that let a waiter run the item itself. defines: host_lanes_start,
 * host_lanes_stop, host_lanes_free, host_lane_push, host_lanes_work_wait, host_lanes_work_poll,
 * host_lanes_wait_follows (pg_host_lanes.h).
 *
 * The engine's error message is thread-local, so a lane records the failing call's message in
 * the work item (pg_work_finish), where the caller's wait finds it. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <string.h>

#include "distributed/pg_heartbeat.h"
#include "distributed/pg_host.h"

/* Runs w (taken off its lane by the caller) and completes it: a group broken earlier fails it
 * at once; a collective's fingerprint is compared before the operation touches data; a failure
 * names the call, and the fault the heartbeat knows (a silent peer) explains it better than what
 * the transport saw of it (a closed connection). */
static void lane_run(ddpl_pg *pg, ddpl_work *w)
{
    pg_host *h = host_of(pg);
    host_work *hw = host_work_of(w);
    char msg[1024];
    const char *error = NULL;
    bool broken = pg_broken(pg, w->name, msg, sizeof msg);
    /* a send's or receive's peer is a group rank; the collective lane waits for every peer */
    bool p2p = hw->lane != &h->lanes.coll && w->peer >= 0 && w->peer < pg->size;
    atomic_int *running = p2p ? &h->lanes.p2p_running[w->peer] : &h->lanes.coll_running;
    atomic_fetch_add(running, 1);
    if (broken) {
        error = msg;
    } else if ((w->fp.seq && h->coll->agree(h, &w->fp, pg->size) < 0) || hw->run(w) < 0) {
        char failed[768], fault[768];
        snprintf(failed, sizeof failed, "%s", ddpl_last_error());
        const char *e = pg_heartbeat_explain(h->hb, failed, fault, sizeof fault) ? fault : failed;
        /* messages of the transport do not name the API call: prefix it */
        size_t n = strlen(w->name);
        if (strncmp(e, w->name, n) == 0 && e[n] == ':')
            snprintf(msg, sizeof msg, "%s", e);
        else
            snprintf(msg, sizeof msg, "%s: %s (rank %d of %d)", w->name, e, pg->rank, pg->size);
        error = msg;
        if (!hw->harmless) pg_break(pg, msg);
    }
    atomic_fetch_sub(running, 1);
    pg_work_finish(w, error);
}

/* Takes the head item of ln when nothing of ln runs (ln->mu held); NULL otherwise. */
static ddpl_work *lane_take(host_lane *ln)
{
    ddpl_work *w = ln->busy ? NULL : ln->head;
    if (!w) return NULL;
    ln->head = host_work_of(w)->next;
    if (!ln->head) ln->tail = NULL;
    ln->busy = true;
    return w;
}

typedef struct lane_arg {
    ddpl_pg *pg;
    host_lane *ln;
} lane_arg;

/* Runs queued work until stopped and drained. */
static void *lane_main(void *arg)
{
    lane_arg a = *(lane_arg *)arg;
    free(arg);
    for (;;) {
        pthread_mutex_lock(&a.ln->mu);
        while ((!a.ln->head || a.ln->busy) && !(a.ln->stop && !a.ln->head))
            pthread_cond_wait(&a.ln->cv, &a.ln->mu);
        ddpl_work *w = lane_take(a.ln);
        pthread_mutex_unlock(&a.ln->mu);
        if (!w) break;
        lane_run(a.pg, w);
        pthread_mutex_lock(&a.ln->mu);
        a.ln->busy = false;
        pthread_mutex_unlock(&a.ln->mu);
        ddpl_work_release(w);
    }
    return NULL;
}

static int lane_start(ddpl_pg *pg, host_lane *ln)
{
    pthread_mutex_init(&ln->mu, NULL);
    pthread_cond_init(&ln->cv, NULL);
    lane_arg *a = ddpl_xmalloc(sizeof *a);
    *a = (lane_arg){pg, ln};
    if (pthread_create(&ln->thread, NULL, lane_main, a) != 0) {
        free(a);
        pthread_mutex_destroy(&ln->mu);
        pthread_cond_destroy(&ln->cv);
        return ddpl_error("init_process_group: cannot start a worker thread");
    }
    ln->started = true;
    return 0;
}

int host_lanes_start(ddpl_pg *pg, host_lanes *l)
{
    l->p2p_running = ddpl_xcalloc((size_t)pg->size, sizeof *l->p2p_running);
    if (lane_start(pg, &l->coll) < 0 || lane_start(pg, &l->send) < 0 ||
        lane_start(pg, &l->recv) < 0)
        return -1;
    return 0;
}

/* Lets the lane finish its queue, then joins it; false when it is still busy after wait_s, in
 * which case the thread is left running. */
static bool lane_stop(host_lane *ln, double wait_s)
{
    if (!ln->started) return true;
    pthread_mutex_lock(&ln->mu);
    ln->stop = true;
    pthread_cond_signal(&ln->cv);
    pthread_mutex_unlock(&ln->mu);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline); /* pthread_timedjoin_np takes CLOCK_REALTIME */
    deadline.tv_sec += (time_t)wait_s + 1;
    if (pthread_timedjoin_np(ln->thread, NULL, &deadline) != 0) return false;
    pthread_mutex_destroy(&ln->mu);
    pthread_cond_destroy(&ln->cv);
    ln->started = false;
    return true;
}

bool host_lanes_stop(host_lanes *l, double wait_s)
{
    bool stopped = lane_stop(&l->coll, wait_s);
    stopped = lane_stop(&l->send, stopped ? wait_s : 0.0) && stopped;
    stopped = lane_stop(&l->recv, stopped ? wait_s : 0.0) && stopped;
    return stopped;
}

void host_lanes_free(host_lanes *l)
{
    free(l->p2p_running);
    l->p2p_running = NULL;
}

ddpl_work *host_lane_push(host_lane *ln, ddpl_work *w)
{
    host_work *hw = host_work_of(w);
    ddpl_work_retain(w);
    hw->lane = ln;
    pthread_mutex_lock(&ln->mu);
    hw->next = NULL;
    if (ln->tail)
        host_work_of(ln->tail)->next = w;
    else
        ln->head = w;
    ln->tail = w;
    if (!hw->quiet) pthread_cond_signal(&ln->cv);
    pthread_mutex_unlock(&ln->mu);
    return w;
}

/* ---------------------------------------------------------------------- work hooks ---- */
/* The lane of w while it waits in it (NULL once done), and its group. */
static host_lane *pending_lane(ddpl_work *w, ddpl_pg **pg, bool quiet_only)
{
    host_work *hw = host_work_of(w);
    pthread_mutex_lock(&w->mu);
    host_lane *ln = w->done || (quiet_only && !hw->quiet) ? NULL : hw->lane;
    if (pg) *pg = w->pg;
    pthread_mutex_unlock(&w->mu);
    return ln;
}

/* The waiter runs w itself when w is next in its lane and nothing of the lane is running: it
 * would only sleep until the lane's thread had done the same, and handing the work over and back
 * costs two thread switches (tens of microseconds: a DDP step of a small model pays them on its
 * last bucket). The lane's thread may wake meanwhile; it finds the lane busy and sleeps again. */
static void run_if_next(ddpl_work *w)
{
    ddpl_pg *pg;
    host_lane *ln = pending_lane(w, &pg, false);
    if (!ln) return;
    pthread_mutex_lock(&ln->mu);
    bool mine = ln->head == w && lane_take(ln) == w;
    pthread_mutex_unlock(&ln->mu);
    if (!mine) return;
    lane_run(pg, w);
    pthread_mutex_lock(&ln->mu);
    ln->busy = false;
    if (ln->head) pthread_cond_signal(&ln->cv);
    pthread_mutex_unlock(&ln->mu);
    ddpl_work_release(w); /* the lane's reference */
}

/* A work queued quietly (ddpl_pg_wait_follows) that its caller polls, or waits for without
 * running it, must still reach the lane's thread. */
void host_lanes_work_poll(ddpl_work *w)
{
    host_lane *ln = pending_lane(w, NULL, true);
    if (!ln) return;
    pthread_mutex_lock(&ln->mu);
    pthread_cond_signal(&ln->cv);
    pthread_mutex_unlock(&ln->mu);
}

int host_lanes_work_wait(ddpl_work *w, double timeout_s)
{
    /* running it here may take as long as the operation's own timeout: not for shorter waits */
    if (timeout_s < 0 || timeout_s >= w->timeout_s) run_if_next(w);
    host_lanes_work_poll(w);
    return pg_work_wait_done(w, timeout_s);
}

void host_lanes_wait_follows(ddpl_pg *pg)
{
    pg_host *h = host_of(pg);
    if (h) h->lanes.quiet_next = true; /* NULL: not a member (its calls fail) */
}
