/* cli/launch.h: the torchrun-style launcher of the ddplua command.
 * defines: cli_launch_wanted, cli_launch_run, cli_cluster_env; between launch*.c: launch_job,
 *          launch_pick_port, launch_random_hex, launch_store_token, launch_worker_env, launch_rdzv
 *          and its calls,
 *          launch_out and its calls. */
#ifndef DDPL_CLI_LAUNCH_H
#define DDPL_CLI_LAUNCH_H

#include <poll.h>
#include <stddef.h>

#include "cli.h"

/* Whether the command line asks for the launcher rather than running the script here: any
 * launcher flag, except that a process started by srun/mpirun (SLURM_PROCID, OMPI_COMM_WORLD_RANK
 * or PMI_RANK set) with no --nproc/--nnodes/--log-dir/--prefix-output runs as its cluster rank
 * (cli_cluster_env). */
bool cli_launch_wanted(const cli_options *o);

/* Starts the workers, supervises them and returns the exit status for the command: 0 when every
 * worker succeeded, the failing worker's status (128 + signal when killed) otherwise, 128 + the
 * signal when the launcher itself was stopped by SIGINT/SIGTERM/SIGHUP. */
int cli_launch_run(char **argv, const cli_options *o);

/* Under srun or mpirun, and when RANK is not set already: sets RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE from the SLURM_, OMPI_COMM_WORLD_, or PMI_ and
 * MPI_LOCAL (MPICH, Intel MPI) variables, and MASTER_ADDR/MASTER_PORT from the flags, else from
 * the environment, else the first host of SLURM_JOB_NODELIST (or 127.0.0.1 on a single node),
 * and port 29500. */
void cli_cluster_env(const cli_launch *l);

/* ---- shared by launch.c, launch_env.c and launch_output.c ---- */

/* What every worker of this node gets. */
typedef struct launch_job {
    int nproc, nnodes, node_rank;
    const char *master_addr;
    int master_port;
    char run_id[40];
    char token[72]; /* "" = none generated (DDPLUA_STORE_TOKEN is then inherited as it is) */
    int restart_count, max_restarts; /* which start of the gang this is (0 = the first) */
    bool agent_store; /* the launcher hosts the store (TORCHELASTIC_USE_AGENT_STORE) */
} launch_job;

/* A free TCP port on addr (bind port 0, read it back, close): -1 with a message printed. The
 * port is only free at that moment; the rank-0 store binds it soon after (PyTorch does the same).
 */
int launch_pick_port(const char *addr);
/* n random bytes from /dev/urandom as 2n hex digits into out (2n + 1 bytes); false when
 * /dev/urandom could not be read (the digits are then unique, not secret). n <= 64. */
bool launch_random_hex(char *out, size_t n);
/* The store's token into job->token (launch_token.c): from --store-token-file, else none to
 * set when DDPLUA_STORE_TOKEN is in the environment (the workers inherit it), else a random one
 * on one machine; several machines without a token (and without --no-store-auth) are refused.
 * 0, or -1 with a message printed. */
int launch_store_token(launch_job *job, const cli_launch *l);
/* In a forked worker, before exec: the torchrun environment for local rank `local`. */
void launch_worker_env(const launch_job *job, int local);

/* The launchers of a job on several machines agreeing on each generation of the gang
 * (--nnodes with --max-restarts, or --nnodes MIN:MAX; launch_rdzv.c). */
typedef struct launch_rdzv launch_rdzv;
/* Hosts the store (the launcher of --node-rank 0, on --master-addr/--master-port) or connects
 * to it; takes the host's run id into job; NULL with a message printed. */
launch_rdzv *launch_rdzv_open(launch_job *job, const cli_launch *l);
/* Joins generation job->restart_count (a later one when it started without this node) and
 * blocks until it is closed: sets job->nnodes and job->node_rank. 1: a member; 0: the job
 * finished meanwhile; -1: an error (printed). */
int launch_rdzv_join(launch_rdzv *r, launch_job *job);
/* While the gang runs, about 5 times a second at most: true, with why, when the generation must
 * end here too: another node's gang failed, the store is gone, or a node waits to join. */
bool launch_rdzv_poll(launch_rdzv *r, const launch_job *job, char *why, size_t n);
/* Whether some node reported a failure of this generation (else it ended for a node joining). */
bool launch_rdzv_failed(launch_rdzv *r, const launch_job *job);
/* Whether a node waits to join: the members stop their gangs for it, so a worker that fails now
 * most likely lost a peer that was stopped, and the restart is a membership change. */
bool launch_rdzv_joining(launch_rdzv *r, const launch_job *job);
/* This node's gang failed: tells the other nodes (why names the rank and how it ended). */
void launch_rdzv_fail(launch_rdzv *r, const launch_job *job, const char *why);
/* This node's gang succeeded; the host waits for every member's: 0, or -1 (printed) when
 * another node failed meanwhile or the store was lost. */
int launch_rdzv_finish(launch_rdzv *r, const launch_job *job);
/* Ends the job's part of the rendezvous (the host: marks the job finished, stops the store);
 * NULL is fine. */
void launch_rdzv_close(launch_rdzv *r);

/* Per-rank output: prefixed lines ("[rank1]: ") and/or log files, pumped from pipes. */
typedef struct launch_out launch_out;
/* NULL with a message printed when a log file cannot be opened. log_dir may be NULL. append:
 * the log files get the output of a restarted gang after that of the one before. */
launch_out *launch_out_new(int nproc, int first_rank, const char *log_dir, bool prefix,
                           bool append);
/* The pipe ends a worker writes to (stdout and stderr). */
void launch_out_child_fds(const launch_out *o, int local, int *out_fd, int *err_fd);
/* Closes the write ends in the launcher after every fork. */
void launch_out_parent_ready(launch_out *o);
/* pollfd entries for the open read ends: returns how many were written to pfds. */
int launch_out_pollfds(const launch_out *o, struct pollfd *pfds, int max);
/* Reads from the ready descriptors of pfds and writes the lines on; false once all are closed. */
bool launch_out_pump(launch_out *o, const struct pollfd *pfds, int n);
/* Flushes partial lines, closes everything. */
void launch_out_free(launch_out *o);

#endif
