/* distributed/reducer_impl.h: what the DDP reducer's files share: its state and their entry points
 * into each other. Internal to engine/distributed.
 * defines: reducer_bucket, reducer_hook_ud, struct ddpl_reducer, reducer_now, reducer_slot,
 *          reducer_param_bytes, reducer_is_view_of, reducer_detects_unused, and the functions
 *          of reducer_buckets.c (layout, gradient homes, rebuild) and reducer_ready.c
 *          (gradient-ready hooks, launching, finishing, join's shadow backward).
 *
 * reducer.c is the public face (reducer.h); reducer_buckets.c lays parameters out in buckets
 * and makes the slots gradient homes; reducer_ready.c takes each gradient as it becomes ready
 * and runs the buckets' collectives. */
#ifndef DDPL_DIST_REDUCER_IMPL_H
#define DDPL_DIST_REDUCER_IMPL_H

#include <time.h>

#include "core/core.h"
#include "ddpl/autograd.h"
#include "ddpl/ops.h"
#include "distributed/reducer.h"

/* engine-internal: not exported from libddplua.so */
#define REDUCER_HIDDEN __attribute__((visibility("hidden")))

typedef struct reducer_bucket {
    ddpl_tensor *flat;     /* 1-D, the bucket's dtype, numel = sum of its parameters' numels */
    int n;                 /* parameters in it */
    int *params;           /* their indices, in bucket order */
    int64_t *offsets;      /* element offset of each parameter in flat */
    ddpl_tensor **views;   /* views[i]: flat[offsets[i] : +numel] shaped as parameter params[i] */
    int pending;           /* parameters not ready yet in this backward */
    ddpl_work *work;       /* the launched collective, until waited for */
    ddpl_tensor *gathered; /* fp16/bf16: world * numel compressed values (allgather) */
    bool shared;           /* flat is a shared buffer of the group (ddpl_pg_is_shared) */
    double t_ready, t_start, t_end;
    int64_t copied_bytes; /* gradients copied into flat in this backward (timeline) */
} reducer_bucket;

typedef struct reducer_hook_ud {
    ddpl_reducer *r;
    int index;
} reducer_hook_ud;

struct ddpl_reducer {
    ddpl_pg *pg;
    int rank, world;
    int n;                /* parameters */
    ddpl_tensor **params; /* retained */
    char **names;
    reducer_hook_ud *uds;     /* one per parameter: the hook's userdata */
    int *bucket_of, *slot_of; /* parameter -> bucket, position in it */
    ddpl_reducer_config cfg;
    int nb;
    reducer_bucket *buckets;
    ddpl_comm_kind comm;
    ddpl_comm_hook_fn comm_fn;
    void *comm_ud;
    /* per backward */
    bool sync;           /* the coming backward reduces */
    bool expect_hooks;   /* prepare_backward(sync) ran, finalize has not */
    bool started;        /* a hook fired since prepare_backward */
    bool *ready;         /* per parameter */
    bool *used;          /* per parameter: reached by this forward's graph */
    bool *in_grad;       /* per parameter: the allreduce reads and writes .grad itself */
    ddpl_tensor **homes; /* per parameter: the home reducer_set_homes gave it (borrowed) */
    int next_launch;     /* buckets 0..next_launch-1 are launched */
    int n_ready_params;
    double t_begin, t_first, t_final_start, t_final_end;
    /* rebuild */
    int *order; /* parameter indices in the order they became ready (first iteration) */
    int n_order;
    bool finished_once, rebuilt;
    int divisor;            /* gradients are averaged over this many (the world, or join's) */
    ddpl_tensor *inv_world; /* 0-dim scalar 1/divisor (float64: the kernels convert) */
    /* static_graph: the used maps of the first synchronised iteration, reused after it (a rank
     * that only shadowed it under join walks its own graph the first time it trains) */
    bool static_known, static_walked;   /* static_global, static_local are filled */
    bool *static_local, *static_global; /* per parameter: used here, used on some rank */
    int graph_walks;                    /* ddpl_leaves_reached calls (for specs) */
};

static inline double reducer_now(void) /* seconds, monotonic */
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Parameter p's slot in its bucket: a view of the flat buffer shaped as p. */
static inline ddpl_tensor *reducer_slot(const ddpl_reducer *r, int p)
{
    return r->buckets[r->bucket_of[p]].views[r->slot_of[p]];
}

static inline int64_t reducer_param_bytes(const ddpl_tensor *p)
{
    return ddpl_tensor_numel(p) * (int64_t)ddpl_dtype_size((ddpl_dtype)p->dtype);
}

/* Whether g (may be NULL) is v's view of v's storage: .grad living in its bucket slot. */
static inline bool reducer_is_view_of(const ddpl_tensor *g, const ddpl_tensor *v)
{
    return g && ddpl_tensor_same_storage(g, v) && ddpl_tensor_data(g) == ddpl_tensor_data(v);
}

/* ---- reducer_buckets.c ---- */
/* Lays the parameters, taken in `order`, out in new buckets (0, or -1 with an error). */
REDUCER_HIDDEN int reducer_buckets_build(ddpl_reducer *r, const int *order);
/* Waits for the buckets' pending work and frees them. */
REDUCER_HIDDEN void reducer_buckets_free(ddpl_reducer *r);
/* gradient_as_bucket_view: points every existing .grad at its slot (contents kept). */
REDUCER_HIDDEN int reducer_grads_to_views(ddpl_reducer *r);
/* Makes every slot its parameter's gradient home, as the configuration and comm hook allow. */
REDUCER_HIDDEN int reducer_set_homes(ddpl_reducer *r);
/* Takes back the homes reducer_set_homes gave (those still in place). */
REDUCER_HIDDEN void reducer_drop_homes(ddpl_reducer *r);
/* After the first finished iteration: buckets in rank 0's gradient-ready order. */
REDUCER_HIDDEN int reducer_rebuild(ddpl_reducer *r);

/* ---- reducer_ready.c ---- */
/* The gradient-ready hook (ddpl_grad_ready_fn) of every parameter; userdata: reducer_hook_ud. */
REDUCER_HIDDEN int reducer_on_grad_ready(ddpl_tensor *leaf, void *userdata);
/* Marks parameter p ready (its gradient, or zeros, goes to its bucket); launches what can go. */
REDUCER_HIDDEN int reducer_mark_ready(ddpl_reducer *r, int p);
/* Waits for bucket b's collective and leaves the averages in its flat buffer. */
REDUCER_HIDDEN int reducer_finish(ddpl_reducer *r, int b);
/* Whether the unused parameters are detected (find_unused or static_graph). */
static inline bool reducer_detects_unused(const ddpl_reducer *r)
{
    return r->cfg.find_unused || r->cfg.static_graph;
}
/* ddpl_reducer_shadow_backward (reducer.h). */
REDUCER_HIDDEN int reducer_shadow_backward(ddpl_reducer *r);
/* A small blocking broadcast (from rank 0) or sum of a CPU tensor; the result, a new CPU
 * tensor, or NULL. */
REDUCER_HIDDEN ddpl_tensor *reducer_host_collective(ddpl_reducer *r, ddpl_tensor *host,
                                                    bool broadcast);

#endif
