/* distributed/reducer.h: the DDP reducer: bucketed, asynchronous gradient averaging driven by
 * autograd. defines: ddpl_reducer, ddpl_reducer_config, ddpl_comm_kind, ddpl_comm_hook_fn,
 *          ddpl_reducer_new/free, prepare_forward, prepare_backward, set_comm_hook, bucket
 *          queries, the timeline (ddpl_reducer_event); for join: shadow_backward, set_divisor;
 *          for static_graph: graph_walks.
 *
 * Mirrors PyTorch's reducer (DESIGN.md, "DDP reducer"). Parameters are grouped into buckets in
 * reverse registration order (split by dtype; the first bucket closes at first_bucket_mb, the
 * others at bucket_cap_mb). A gradient-ready hook on every parameter copies its gradient into the
 * bucket's flat buffer (or, with grad_as_bucket_view, .grad already is a view of that buffer).
 * Every slot of a CPU bucket is also its parameter's gradient home (ddpl_tensor_set_grad_home; in
 * default mode only on shared buckets with the plain allreduce), so a gradient that a matrix
 * product makes is computed in its slot and copied nowhere. When all of a bucket's parameters are
 * ready its allreduce is launched on the group's thread, strictly in bucket order so every rank
 * issues the same collectives in the same order. The allreduce sums the gradients each divided by
 * the world size, as PyTorch's pre-division, with the division done inside the reduction
 * (ddpl_pg_allreduce_prescaled). CPU buckets live in memory every rank on the machine maps
 * (ddpl_pg_shared_zeros), so their allreduce needs no staging copies. When the last bucket has been
 * launched (the last gradient of the backward pass) the reducer waits for all of them, running the
 * last one on its own thread when the group's thread is idle, and writes the averages back into
 * .grad. After the first synchronised iteration the buckets are rebuilt in the order the gradients
 * became ready on rank 0 (broadcast, so every rank uses the same layout).
 *
 * Call sequence per iteration (the Lua DistributedDataParallel does it):
 *     ddpl_reducer_prepare_forward(r);              // before the module's forward
 *     out = forward(...);
 *     ddpl_reducer_prepare_backward(r, 1, &out, sync); // sync=false inside no_sync
 *     backward(loss);                               // hooks reduce; .grad holds averages
 */
#ifndef DDPL_DIST_REDUCER_H
#define DDPL_DIST_REDUCER_H

#include "distributed/pg.h"

typedef struct ddpl_reducer ddpl_reducer;

typedef struct ddpl_reducer_config {
    double bucket_cap_mb;   /* <= 0: 25 */
    double first_bucket_mb; /* <= 0: 1 */
    bool find_unused;       /* mark parameters the forward did not reach as ready */
    bool grad_as_bucket_view;
    bool static_graph; /* the graph is the same every iteration: the unused parameters (as
                          find_unused, whether set or not) are found in the first synchronised
                          iteration only, by one graph walk and one exchange, then reused */
} ddpl_reducer_config;

typedef enum ddpl_comm_kind {
    DDPL_COMM_ALLREDUCE,
    DDPL_COMM_FP16,  /* the bucket travels (and is summed) rounded to float16 */
    DDPL_COMM_BF16,  /* ... to bfloat16 */
    DDPL_COMM_CUSTOM /* a caller's function, run synchronously on the bucket */
} ddpl_comm_kind;

/* A custom hook gets the flat bucket (1-D, not pre-divided: the hook averages) and must leave
 * the reduced result in it. 0, or -1 with ddpl_error set (backward then fails with it). */
typedef int (*ddpl_comm_hook_fn)(ddpl_tensor *bucket, int bucket_index, void *userdata);

/* params (n, borrowed, retained by the reducer) are the module's parameters that require grad in
 * registration order; names[i] is used in messages. Registers the gradient-ready hooks. */
ddpl_reducer *ddpl_reducer_new(ddpl_pg *pg, int n, ddpl_tensor *const *params,
                               const char *const *names, const ddpl_reducer_config *cfg);
/* Removes the hooks, waits for pending work (bounded by the group timeout), frees. NULL is fine. */
void ddpl_reducer_free(ddpl_reducer *r);

/* Before a forward: fails with PyTorch's "Expected to have finished reduction in the prior
 * iteration ..." error (naming the parameters that got no gradient) when the previous
 * synchronised backward did not reach every parameter; rebuilds the buckets after the first
 * finished iteration (a broadcast from rank 0: every rank must call it at the same point). */
int ddpl_reducer_prepare_forward(ddpl_reducer *r);
/* After the forward, when a backward may follow (grad mode on). sync=false: the coming backward
 * only accumulates locally (no_sync). With find_unused, walks the graph from outputs and marks
 * the parameters it does not reach as ready; with static_graph only in the first synchronised
 * iteration, later ones mark the same parameters without a walk. */
int ddpl_reducer_prepare_backward(ddpl_reducer *r, int n_outputs, ddpl_tensor *const *outputs,
                                  bool sync);
void ddpl_reducer_set_comm_hook(ddpl_reducer *r, ddpl_comm_kind kind, ddpl_comm_hook_fn fn,
                                void *userdata);

/* Join (PyTorch's _DDPJoinHook): on a rank that ran out of inputs, the collectives of one
 * synchronised backward with zero gradients, so that the ranks still training find their
 * bucket allreduces (or comm hooks) and used-parameter exchange matched. This rank's .grad and
 * bucket contents are left as they were. Every bucket is reduced, as when all parameters became
 * ready; afterwards the reducer counts as having finished an iteration (the bucket rebuild
 * follows on every rank at the same point). */
int ddpl_reducer_shadow_backward(ddpl_reducer *r);
/* Divide the summed gradients by divisor (>= 1) instead of the world size, from the next
 * backward on (join with divide_by_initial_world_size=false: the ranks not yet joined). The
 * built-in reductions use it; a custom comm hook does its own division. */
int ddpl_reducer_set_divisor(ddpl_reducer *r, int divisor);
/* How many times prepare_backward walked the autograd graph for unused parameters. */
int ddpl_reducer_graph_walks(const ddpl_reducer *r);

int ddpl_reducer_num_buckets(const ddpl_reducer *r);
/* Parameter indices (0-based, registration order) of bucket b, in bucket order; returns the
 * count and fills up to cap of them. */
int ddpl_reducer_bucket_params(const ddpl_reducer *r, int b, int *out, int cap);
int64_t ddpl_reducer_bucket_bytes(const ddpl_reducer *r, int b);
/* The flat buffer of bucket b (borrowed), e.g. to check that .grad is a view of it. */
ddpl_tensor *ddpl_reducer_bucket_tensor(const ddpl_reducer *r, int b);
bool ddpl_reducer_rebuilt(const ddpl_reducer *r);

/* Timeline of the last synchronised backward, in seconds of a monotonic clock. */
typedef struct ddpl_reducer_event {
    const char *name;         /* "backward", "bucket", "wait" */
    int bucket;               /* -1 unless name is "bucket" */
    double ready, start, end; /* bucket: ready, allreduce launched, allreduce seen done */
    int64_t copied_bytes;     /* bucket: gradient bytes copied into it (0 where the gradients
                                 were made in place or are reduced in .grad) */
} ddpl_reducer_event;
/* Fills up to cap events of the last iteration; returns how many there are. */
int ddpl_reducer_timeline(const ddpl_reducer *r, ddpl_reducer_event *out, int cap);

#endif
