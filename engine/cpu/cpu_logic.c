/* cpu/cpu_logic.c: any/all CPU kernels over a set of dims.
 * defines: cpu_any, cpu_all.
 *
 * out (bool or uint8, 0 or 1) has in[0]'s rank with the reduced dims of size 1 (ops.def); the
 * plan is core/reduce_geom.h's, as the other reductions'. Each output looks for a deciding
 * element (any: a non-zero one, NaN included; all: a zero) and stops at the first: a mask that
 * is mostly true answers any() after one block. Runs of the innermost reduced dim with stride 1
 * are tested SCAN_BLOCK elements at a time without a branch per element, so the loop
 * vectorises; other layouts and dtypes go through the generic element loads. Outputs are
 * split over threads; a single output splits its outermost reduced dim instead. */
#include <string.h>

#include "cpu_iter.h"
#include "cpu_kernels.h"
#include "kernel_abi/kernel_params.h"
#include "core/reduce_geom.h"

#define LOGIC_BLOCK 256 /* elements tested between two early-exit checks */
#define LOGIC_PARTS 64  /* most parts a single output is split into */

/* Whether the n elements of type T at p (stride 1) hold a deciding element: want_zero looks for
 * a zero (all), otherwise for a non-zero (any). */
#define FIND_FN(NAME, T)                                                                           \
    static bool NAME(const char *p_, int64_t n, bool want_zero)                                    \
    {                                                                                              \
        const T *p = (const T *)p_;                                                                \
        for (int64_t i = 0; i < n; i += LOGIC_BLOCK) {                                             \
            int64_t m = n - i < LOGIC_BLOCK ? n - i : LOGIC_BLOCK;                                 \
            int hit = 0;                                                                           \
            if (want_zero)                                                                         \
                for (int64_t j = 0; j < m; j++) hit |= p[i + j] == 0;                              \
            else                                                                                   \
                for (int64_t j = 0; j < m; j++) hit |= p[i + j] != 0;                              \
            if (hit) return true;                                                                  \
        }                                                                                          \
        return false;                                                                              \
    }
FIND_FN(find_f32, float)
FIND_FN(find_f64, double)
FIND_FN(find_u8, uint8_t) /* uint8 and bool */
FIND_FN(find_i32, int32_t)
FIND_FN(find_i64, int64_t)

typedef bool (*find_fn)(const char *p, int64_t n, bool want_zero);

static find_fn contiguous_finder(ddpl_dtype dt)
{
    switch (dt) {
    case DDPL_FLOAT32:
        return find_f32;
    case DDPL_FLOAT64:
        return find_f64;
    case DDPL_UINT8:
    case DDPL_BOOL:
        return find_u8;
    case DDPL_INT32:
        return find_i32;
    case DDPL_INT64:
        return find_i64;
    default:
        return NULL;
    }
}

typedef struct {
    const ddpl_tensor *in, *out;
    const ddpl_reduce_geom *g;
    bool want_zero; /* all */
    int64_t chunk;  /* single output: outer reduced indices per part */
    bool part[LOGIC_PARTS];
} logic_job;

/* Whether the reduced elements of one output (first at base; rsize0 replaces the outermost
 * reduced size: a part of it) hold a deciding element. */
static bool find_one(const logic_job *j, const char *base, int64_t rsize0)
{
    const ddpl_reduce_geom *g = j->g;
    ddpl_dtype dt = (ddpl_dtype)j->in->dtype;
    int64_t esz = (int64_t)ddpl_dtype_size(dt);
    bool floating = ddpl_dtype_is_floating(dt);
    int nr = g->nr;
    int64_t sizes[DDPL_MAX_DIMS], idx[DDPL_MAX_DIMS] = {0};
    memcpy(sizes, g->rsize, sizeof sizes);
    sizes[0] = rsize0;
    int64_t inner = sizes[nr - 1], s = g->rin[nr - 1], rows = 1;
    for (int d = 0; d < nr - 1; d++) rows *= sizes[d];
    if (inner == 0) rows = 0;
    find_fn f = s == 1 ? contiguous_finder(dt) : NULL;
    for (int64_t r = 0; r < rows; r++) {
        int64_t off = 0;
        for (int d = 0; d < nr - 1; d++) off += idx[d] * g->rin[d];
        const char *p = base + off * esz;
        if (f) {
            if (f(p, inner, j->want_zero)) return true;
        } else {
            for (int64_t i = 0; i < inner; i++) {
                const char *e = p + i * s * esz;
                /* NaN != 0 holds, so a NaN is non-zero, as in PyTorch */
                bool nonzero = floating ? ddpl_load_f64(e, dt) != 0 : ddpl_load_i64(e, dt) != 0;
                if (nonzero != j->want_zero) return true;
            }
        }
        for (int d = nr - 2; d >= 0; d--) {
            if (++idx[d] < sizes[d]) break;
            idx[d] = 0;
        }
    }
    return false;
}

/* any: found a non-zero -> 1; all: found a zero -> 0 */
static void store(const logic_job *j, int64_t out_off, bool found)
{
    ((uint8_t *)ddpl_data_ptr(j->out))[out_off] = (uint8_t)(found != j->want_zero);
}

static void outputs_range(int64_t begin, int64_t end, void *ctx)
{
    const logic_job *j = ctx;
    const char *in = ddpl_data_ptr(j->in);
    int64_t esz = (int64_t)ddpl_dtype_size((ddpl_dtype)j->in->dtype);
    for (int64_t o = begin; o < end; o++) {
        int64_t io, oo;
        ddpl_reduce_geom_offsets(j->g, o, &io, &oo);
        store(j, oo, find_one(j, in + io * esz, j->g->rsize[0]));
    }
}

static void parts_range(int64_t begin, int64_t end, void *ctx)
{
    logic_job *j = ctx;
    const char *in = ddpl_data_ptr(j->in);
    int64_t esz = (int64_t)ddpl_dtype_size((ddpl_dtype)j->in->dtype);
    for (int64_t c = begin; c < end; c++) {
        int64_t lo = c * j->chunk, hi = lo + j->chunk;
        if (hi > j->g->rsize[0]) hi = j->g->rsize[0];
        j->part[c] = find_one(j, in + lo * j->g->rin[0] * esz, hi - lo);
    }
}

static int run_logic(ddpl_tensor **out, ddpl_tensor **in, const void *params, bool want_zero)
{
    const ddpl_reduce_params *p = params;
    ddpl_reduce_geom g;
    ddpl_reduce_geom_init(&g, in[0], out[0], p->reduce_mask);
    if (g.nout == 0) return 0;
    logic_job j = {.in = in[0], .out = out[0], .g = &g, .want_zero = want_zero};
    int64_t parts = g.nred / CPU_GRAIN;
    if (parts > LOGIC_PARTS) parts = LOGIC_PARTS;
    if (parts > g.rsize[0]) parts = g.rsize[0];
    if (g.nout > 1 || parts < 2) {
        cpu_parallel_for(g.nout, CPU_GRAIN / (g.nred + 1) + 1, outputs_range, &j);
        return 0;
    }
    j.chunk = (g.rsize[0] + parts - 1) / parts;
    parts = (g.rsize[0] + j.chunk - 1) / j.chunk;
    cpu_parallel_for(parts, 1, parts_range, &j);
    bool found = false;
    for (int64_t c = 0; c < parts; c++) found = found || j.part[c];
    int64_t io, oo;
    ddpl_reduce_geom_offsets(&g, 0, &io, &oo);
    store(&j, oo, found);
    return 0;
}

int cpu_any(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_logic(out, in, params, false);
}

int cpu_all(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    return run_logic(out, in, params, true);
}
