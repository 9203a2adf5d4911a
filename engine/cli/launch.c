/* cli/launch.c: `ddplua script.lua --nproc N`: starts the workers of this node, supervises them
 * and stops them all when one fails or when the launcher is told to stop (torchrun's gang rule).
 * defines: cli_launch_wanted, cli_launch_run.
 *
 * Each worker is this executable again (/proc/self/exe) with the script, its arguments and the
 * Lua options, without the launcher flags, and the torchrun environment (launch_env.c). The
 * launcher itself runs no Lua and touches no OpenMP or BLAS: it only forks, polls and waits.
 * Signals reach the poll loop through a self-pipe. A worker dies with the launcher
 * (PR_SET_PDEATHSIG), so a launcher killed with SIGKILL leaves no orphans behind.
 *
 * --max-restarts N (torchrun's elastic restart): after a failure, once the whole gang has
 * stopped, it is started again (a new generation: TORCHELASTIC_RESTART_COUNT 1, 2, ...), up to
 * N times. The launcher then hosts the store itself (a server thread: distributed/store_server.h)
 * and keeps it across generations, as torchrun's agent does; each generation rendezvous under its
 * own key prefix. On several machines (--nnodes with --max-restarts, or --nnodes MIN:MAX) the
 * launchers agree on every generation through the store the launcher of --node-rank 0 hosts
 * (launch_rdzv.c): a failure anywhere stops every node's gang, and the next generation runs on
 * the nodes that join it, at least MIN. Without restarts the launcher runs no thread and rank 0
 * hosts the store, as before. */
#define _GNU_SOURCE /* pipe2, sigabbrev_np */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ddpl/tensor.h" /* ddpl_last_error */
#include "distributed/gang.h"
#include "distributed/store_server.h"
#include "launch.h"

typedef struct supervisor {
    ddpl_gang gang;    /* this node's workers: the first to fail stops the others */
    int stop_signal;   /* the signal that told the launcher to stop, 0 if none */
    bool start_failed; /* a fork failed: the job is not restarted */
    char failure[96];  /* how the failed worker ended: "failed with exit code 1" */
    const char *log_dir;
    /* several machines: the rendezvous, which can end the generation here too */
    launch_rdzv *rdzv;
    const launch_job *job;
    bool peer_stop; /* the gang was stopped because of another node (or a node joining) */
} supervisor;

static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    if (write(sig_pipe[1], &b, 1) < 0) {
    } /* a full pipe already holds a wake-up */
    errno = saved;
}

static const char *signame(int sig, char *buf, size_t n)
{
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev)
        snprintf(buf, n, "SIG%s", abbrev);
    else
        snprintf(buf, n, "signal %d", sig);
    return buf;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool cli_launch_wanted(const cli_options *o)
{
    const cli_launch *l = &o->launch;
    if (!l->given) return false;
    if (l->nproc > 1 || l->nnodes > 1 || l->log_dir || l->prefix_output) return true;
    return !(getenv("SLURM_PROCID") || getenv("OMPI_COMM_WORLD_RANK") || getenv("PMI_RANK"));
}

/* The worker's command line: Lua's options, the script, "--" (so that script arguments that look
 * like launcher flags stay the script's), the script's arguments. */
static char **worker_argv(char **argv, const cli_options *o)
{
    char **w = calloc((size_t)(8 + o->n_actions + o->n_script_args), sizeof *w);
    if (!w) return NULL;
    int k = 0;
    w[k++] = argv[0];
    if (o->no_env) w[k++] = "-E";
    if (o->warnings) w[k++] = "-W";
    if (o->version) w[k++] = "-v";
    for (int i = 0; i < o->n_actions; i++) {
        /* joined ("-eCODE"), so that code starting with '-' is not taken for an option */
        size_t len = strlen(o->actions[i].value) + 3;
        char *a = malloc(len);
        if (!a) return NULL;
        snprintf(a, len, "-%c%s", o->actions[i].kind, o->actions[i].value);
        w[k++] = a;
    }
    if (o->script) {
        w[k++] = argv[o->script];
        w[k++] = "--";
        for (int i = 0; i < o->n_script_args; i++) w[k++] = o->script_args[i];
    }
    w[k] = NULL;
    return w;
}

static void free_worker_argv(char **w, const cli_options *o)
{
    if (!w) return;
    int first_action = 1 + o->no_env + o->warnings + o->version; /* as worker_argv lays it out */
    for (int i = 0; i < o->n_actions && w[first_action + i]; i++) free(w[first_action + i]);
    free(w);
}

static void report_failure(supervisor *sv, int i)
{
    char where[300] = "";
    const ddpl_gang_member *w = &sv->gang.m[i];
    ddpl_exit_text(w->status, sv->failure, sizeof sv->failure);
    if (sv->log_dir)
        snprintf(where, sizeof where, " (its output: %s/rank%d.stderr)", sv->log_dir, w->rank);
    int others = sv->gang.alive;
    fprintf(stderr, "%s: rank %d (pid %d) %s%s", CLI_PROGNAME, w->rank, (int)w->pid, sv->failure,
            where);
    if (others > 0)
        fprintf(stderr, "; stopping the other %d worker%s", others, others == 1 ? "" : "s");
    fprintf(stderr, "\n");
    fflush(stderr);
}

static void reap(supervisor *sv)
{
    int failed = ddpl_gang_reap(&sv->gang); /* it also starts stopping the others */
    if (failed >= 0) report_failure(sv, failed);
}

static void on_stop_signal(supervisor *sv, int sig)
{
    char sn[32];
    if (sv->stop_signal) { /* a second request: no more grace */
        ddpl_gang_enforce(&sv->gang);
        return;
    }
    sv->stop_signal = sig;
    int alive = sv->gang.alive;
    if (alive > 0) {
        fprintf(stderr, "%s: got %s; stopping the %d worker%s\n", CLI_PROGNAME,
                signame(sig, sn, sizeof sn), alive, alive == 1 ? "" : "s");
        fflush(stderr);
    }
    /* the same signal: a worker's own handling of SIGINT (Lua's "interrupted!") applies */
    ddpl_gang_stop(&sv->gang, sig);
}

/* Handles the signals waiting in the self-pipe (it is non-blocking: none waiting is fine). */
static void take_signals(supervisor *sv)
{
    unsigned char sigs[64];
    ssize_t got;
    while ((got = read(sig_pipe[0], sigs, sizeof sigs)) > 0)
        for (ssize_t i = 0; i < got; i++)
            if (sigs[i] != SIGCHLD) on_stop_signal(sv, sigs[i]);
}

static void install_signals(void)
{
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) sigaction(sigs[i], &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a closed console must not kill the supervisor of the job */
}

/* In the forked child: never returns. */
static void exec_worker(char **wargv, const launch_job *job, int local, launch_out *out,
                        pid_t launcher)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher) _exit(127); /* the launcher died before prctl took effect */
    signal(SIGPIPE, SIG_DFL);              /* ignored dispositions survive exec */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (out) {
        int ofd, efd;
        launch_out_child_fds(out, local, &ofd, &efd);
        dup2(ofd, 1);
        dup2(efd, 2);
    }
    launch_worker_env(job, local);
    execv("/proc/self/exe", wargv);
    fprintf(stderr, "%s: rank %d: cannot start %s (%s)\n", CLI_PROGNAME,
            job->node_rank * job->nproc + local, wargv[0], strerror(errno));
    _exit(127);
}

static int check_command(const cli_options *o, char **argv)
{
    const cli_launch *l = &o->launch;
    const char *bad = NULL;
    if (l->node_rank >= l->nnodes)
        bad = "--node-rank must be smaller than --nnodes";
    else if (!o->script && o->n_actions == 0)
        bad = "the launcher needs a script (or -e code) for its workers to run";
    else if (o->script && strcmp(argv[o->script], "-") == 0)
        bad = "the workers cannot share the script on stdin; give a file";
    else if (o->interactive)
        bad = "-i cannot be used with the launcher: the workers cannot share one REPL";
    else if ((long)l->nproc * l->nnodes > 1000000)
        bad = "--nproc times --nnodes is too large";
    if (!bad) return 0;
    fprintf(stderr, "%s: %s\n", CLI_PROGNAME, bad);
    return -1;
}

/* The poll loop: output, signals, exits; returns when every worker has ended (and its output
 * has been read, for at most a second more: a worker's child may hold the pipes open). */
static void supervise(supervisor *sv, launch_out *out)
{
    ddpl_gang *g = &sv->gang;
    int max = 1 + (out ? 2 * g->n : 0);
    struct pollfd *pfds = calloc((size_t)max, sizeof *pfds);
    if (!pfds) { /* without a poll set the workers cannot be watched: stop them */
        fprintf(stderr, "%s: out of memory; stopping the workers\n", CLI_PROGNAME);
        ddpl_gang_enforce(g);
        while (g->alive > 0) {
            ddpl_gang_reap(g);
            usleep(10000);
        }
        sv->start_failed = true;
        return;
    }
    bool open_out = out != NULL;
    double drain_until = -1;
    for (;;) {
        double now = now_s();
        if (g->alive == 0) {
            if (!open_out) break;
            if (drain_until < 0) drain_until = now + 1.0;
            if (now >= drain_until) break;
        }
        pfds[0] = (struct pollfd){.fd = sig_pipe[0], .events = POLLIN};
        int n = 1 + (open_out ? launch_out_pollfds(out, pfds + 1, max - 1) : 0);
        /* also reap at least once a second, and look at the other nodes 5 times a second */
        double wake = now + ddpl_gang_wait_s(g, sv->rdzv ? 0.2 : 1.0);
        if (drain_until >= 0 && drain_until < wake) wake = drain_until;
        int ms = wake <= now ? 0 : (int)((wake - now) * 1000.0) + 1;
        int rc = poll(pfds, (nfds_t)n, ms);
        if (rc > 0 && (pfds[0].revents & POLLIN)) take_signals(sv);
        reap(sv);
        char why[400];
        if (sv->rdzv && g->kill_at < 0 && g->alive > 0 &&
            launch_rdzv_poll(sv->rdzv, sv->job, why, sizeof why)) {
            fprintf(stderr, "%s: %s; stopping the %d worker%s of this node\n", CLI_PROGNAME, why,
                    g->alive, g->alive == 1 ? "" : "s");
            fflush(stderr);
            sv->peer_stop = true;
            ddpl_gang_stop(g, SIGTERM);
        }
        if (rc > 0 && n > 1) open_out = launch_out_pump(out, pfds + 1, n - 1);
        if (ddpl_gang_overdue(g)) {
            for (int i = 0; i < g->n; i++)
                if (g->m[i].alive)
                    fprintf(stderr, "%s: rank %d (pid %d) did not stop within %g s; killing it\n",
                            CLI_PROGNAME, g->m[i].rank, (int)g->m[i].pid, DDPL_GANG_GRACE_S);
            ddpl_gang_enforce(g);
        }
    }
    free(pfds);
}

/* Starts the gang of this node (generation job->restart_count) and supervises it until every
 * worker has ended. false when it could not be set up (a message is printed). */
static bool run_gang(supervisor *sv, const launch_job *job, char **wargv, const cli_launch *l)
{
    ddpl_gang_clear(&sv->gang);
    sv->peer_stop = false;
    sv->failure[0] = '\0';
    launch_out *out = NULL;
    if (l->log_dir || l->prefix_output) {
        out = launch_out_new(l->nproc, job->node_rank * l->nproc, l->log_dir, l->prefix_output,
                             job->restart_count > 0);
        if (!out) return false;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t self = getpid();
    for (int i = 0; i < l->nproc; i++) {
        int rank = job->node_rank * l->nproc + i;
        pid_t pid = fork();
        if (pid == 0) exec_worker(wargv, job, i, out, self);
        if (pid < 0) {
            fprintf(stderr, "%s: cannot start rank %d (%s); stopping the others\n", CLI_PROGNAME,
                    rank, strerror(errno));
            sv->start_failed = true;
            ddpl_gang_stop(&sv->gang, SIGTERM);
            break;
        }
        ddpl_gang_add(&sv->gang, pid, rank); /* room for nproc: made at the start */
    }
    if (out) launch_out_parent_ready(out);
    supervise(sv, out);
    launch_out_free(out);
    return true;
}

/* --max-restarts: the launcher hosts the store on the master port (a free one when none was
 * given: the server binds port 0, so no other job can take it in between) and keeps it for the
 * whole job; each generation's workers rendezvous under their own key prefix
 * (lua/ddplua/distributed.lua). NULL with a message printed. */
static store_server *host_store(launch_job *job, const cli_launch *l)
{
    const char *token = job->token[0] ? job->token : getenv("DDPLUA_STORE_TOKEN");
    store_server *server = store_server_start(job->master_addr, l->master_port, token);
    if (!server) {
        fprintf(stderr, "%s: cannot host the store for --max-restarts: %s\n", CLI_PROGNAME,
                ddpl_last_error());
        return NULL;
    }
    job->master_port = store_server_port(server);
    job->agent_store = true;
    return server;
}

int cli_launch_run(char **argv, const cli_options *o)
{
    const cli_launch *l = &o->launch;
    if (check_command(o, argv) < 0) return 1;
    if (l->standalone && (l->nnodes != 1 || l->node_rank != 0)) {
        fprintf(stderr,
                "%s: --standalone runs one machine; it cannot go with --nnodes %d or "
                "--node-rank %d\n",
                CLI_PROGNAME, l->nnodes, l->node_rank);
        return 1;
    }
    launch_job job = {.nproc = l->nproc,
                      .nnodes = l->nnodes,
                      .node_rank = l->node_rank,
                      .max_restarts = l->max_restarts};
    job.master_addr = l->master_addr ? l->master_addr : "127.0.0.1";
    const char *run_id = getenv("DDPLUA_RUN_ID");
    if (run_id && *run_id)
        snprintf(job.run_id, sizeof job.run_id, "%s", run_id);
    else
        launch_random_hex(job.run_id, 8);
    if (launch_store_token(&job, l) < 0) return 1; /* never an open store by default */
    store_server *server = NULL;
    launch_rdzv *rdzv = NULL;
    if (l->nnodes > 1 && (l->max_restarts > 0 || l->min_nodes < l->nnodes)) {
        job.master_port = l->master_port ? l->master_port : 29500;
        if (!(rdzv = launch_rdzv_open(&job, l))) return 1;
    } else if (l->max_restarts > 0) {
        if (!(server = host_store(&job, l))) return 1;
    } else {
        /* one node: a free port, so two jobs on one machine never collide; several nodes must
         * agree without talking, hence torchrun's fixed default */
        job.master_port = l->master_port   ? l->master_port
                          : l->nnodes == 1 ? launch_pick_port(job.master_addr)
                                           : 29500;
        if (job.master_port < 0) return 1;
    }

    char **wargv = worker_argv(argv, o);
    supervisor sv = {.log_dir = l->log_dir, .rdzv = rdzv, .job = &job};
    if (!wargv || ddpl_gang_init(&sv.gang, l->nproc, false) < 0 ||
        pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        fprintf(stderr, "%s: cannot set up the launcher (%s)\n", CLI_PROGNAME, strerror(errno));
        store_server_stop(server, 0);
        launch_rdzv_close(rdzv);
        free_worker_argv(wargv, o);
        ddpl_gang_free(&sv.gang);
        return 1;
    }
    const ddpl_gang *g = &sv.gang;
    install_signals();
    bool set_up = true;
    int rdzv_status = 0;
    for (int restarts = 0;;) {
        if (rdzv && (rdzv_status = launch_rdzv_join(rdzv, &job)) <= 0) break;
        if (!(set_up = run_gang(&sv, &job, wargv, l))) break;
        take_signals(&sv); /* one that came as the gang ended must not be missed */
        /* A worker that failed while a node waits to join most likely lost a peer that another
         * launcher stopped for the join (it may fail before this launcher's own poll sees the
         * join): the restart is a membership change, as when this launcher stops its gang. */
        if (rdzv && g->failed >= 0 && !sv.stop_signal && launch_rdzv_joining(rdzv, &job)) {
            fprintf(stderr, "%s: rank %d %s while a node waits to join; restarting with it\n",
                    CLI_PROGNAME, g->m[g->failed].rank, sv.failure);
            sv.peer_stop = true;
            sv.gang.failed = -1;
        }
        if (rdzv && (g->failed >= 0 || sv.stop_signal || sv.start_failed)) {
            char why[200];
            if (g->failed >= 0)
                snprintf(why, sizeof why, "rank %d %s", g->m[g->failed].rank, sv.failure);
            else
                snprintf(why, sizeof why, "its launcher %s",
                         sv.stop_signal ? "was stopped" : "could not start a worker");
            launch_rdzv_fail(rdzv, &job, why);
        }
        if (sv.stop_signal || sv.start_failed) break;
        if (g->failed < 0 && !sv.peer_stop) { /* this node's gang succeeded */
            if (rdzv && launch_rdzv_finish(rdzv, &job) < 0) rdzv_status = -1;
            break;
        }
        /* a node that joins restarts the gang without using a restart (torchrun's rule) */
        bool failure = !rdzv || launch_rdzv_failed(rdzv, &job);
        if (failure && restarts == l->max_restarts) {
            if (l->max_restarts > 0 && g->failed >= 0)
                fprintf(stderr, "%s: rank %d %s; no restarts left (--max-restarts %d), giving up\n",
                        CLI_PROGNAME, g->m[g->failed].rank, sv.failure, l->max_restarts);
            else if (g->failed < 0)
                fprintf(stderr, "%s: no restarts left (--max-restarts %d), giving up\n",
                        CLI_PROGNAME, l->max_restarts);
            if (g->failed < 0) rdzv_status = -1;
            break;
        }
        restarts += failure;
        job.restart_count++;
        if (rdzv)
            fprintf(stderr,
                    "%s: starting generation %d on the nodes that join it (restart %d of "
                    "%d)\n",
                    CLI_PROGNAME, job.restart_count, restarts, l->max_restarts);
        else
            fprintf(stderr, "%s: rank %d %s; restarting all %d worker%s (restart %d of %d)\n",
                    CLI_PROGNAME, g->m[g->failed].rank, sv.failure, l->nproc,
                    l->nproc == 1 ? "" : "s", job.restart_count, l->max_restarts);
    }
    launch_rdzv_close(rdzv);
    store_server_stop(server, 0);
    close(sig_pipe[0]);
    close(sig_pipe[1]);
    int failed_status = g->failed >= 0 ? ddpl_gang_exit_code(g->m[g->failed].status) : 0;
    bool failed = g->failed >= 0;
    ddpl_gang_free(&sv.gang);
    free_worker_argv(wargv, o);
    if (!set_up || rdzv_status < 0) return 1;
    if (failed) return failed_status ? failed_status : 1;
    if (sv.start_failed) return 1;
    if (sv.stop_signal) return 128 + sv.stop_signal;
    return 0;
}
