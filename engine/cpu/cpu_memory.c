/* cpu/cpu_memory.c: CPU kernels that create values: fill, copy with dtype conversion, random
 * numbers, arange; and the thread-count setting.
 * defines: cpu_fill, cpu_copy, cpu_uniform, cpu_normal, cpu_arange, ddpl_set_num_threads,
 *          ddpl_get_num_threads. */
#include <math.h>

#include "core/philox.h"
#include "cpu_iter.h"
#include "cpu_kernels.h"
#include "kernel_abi/kernel_params.h"

#include "cpu_threads.h"

/* OpenBLAS runs single-threaded: Debian's pthread build keeps its idle threads spinning after
 * each call, which slowed the kernels that followed by up to 10x on 2 cores. Large GEMMs are
 * split over the engine's threads instead (cpu_gemm.c), so one pool serves everything. */
void openblas_set_num_threads(int num_threads);

void ddpl_set_num_threads(int n)
{
    if (n < 1) n = 1;
    cpu_threads_set(n);
    openblas_set_num_threads(1);
}

int ddpl_get_num_threads(void)
{
    return cpu_threads_get();
}

/* ---- fill ---- */
typedef struct {
    unsigned char bytes[8];
    size_t esz;
} fill_ctx;

static void fill_loop(char **d, const int64_t *s, int64_t n, void *p)
{
    fill_ctx *c = p;
    char *o = d[0];
    switch (c->esz) {
    case 4: {
        uint32_t v;
        memcpy(&v, c->bytes, 4);
        if (s[0] == 4)
            for (int64_t i = 0; i < n; i++) ((uint32_t *)o)[i] = v;
        else
            for (int64_t i = 0; i < n; i++) *(uint32_t *)(o + i * s[0]) = v;
        break;
    }
    case 8: {
        uint64_t v;
        memcpy(&v, c->bytes, 8);
        for (int64_t i = 0; i < n; i++) *(uint64_t *)(o + i * s[0]) = v;
        break;
    }
    case 2: {
        uint16_t v;
        memcpy(&v, c->bytes, 2);
        for (int64_t i = 0; i < n; i++) *(uint16_t *)(o + i * s[0]) = v;
        break;
    }
    default:
        for (int64_t i = 0; i < n; i++) *(o + i * s[0]) = (char)c->bytes[0];
    }
}

int cpu_fill(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    DDPL_UNUSED(in);
    const ddpl_fill_params *p = params;
    ddpl_tensor *o = out[0];
    fill_ctx c = {.esz = ddpl_dtype_size((ddpl_dtype)o->dtype)};
    ddpl_store_f64(c.bytes, (ddpl_dtype)o->dtype, p->value);
    cpu_iter it;
    cpu_iter_init(&it, 1, out);
    cpu_iter_run(&it, fill_loop, &c);
    return 0;
}

/* ---- copy with conversion ---- */
typedef struct {
    ddpl_dtype from, to;
} copy_ctx;

#define CONVERT_LOOP(TO, FROM)                                                                     \
    for (int64_t i = 0; i < n; i++) *(TO *)(o + i * so) = (TO) * (const FROM *)(x + i * sx)

static void copy_loop(char **d, const int64_t *s, int64_t n, void *p)
{
    copy_ctx *c = p;
    char *o = d[0];
    const char *x = d[1];
    int64_t so = s[0], sx = s[1];
    size_t esz = ddpl_dtype_size(c->to);
    if (c->from == c->to) {
        if (so == (int64_t)esz && sx == (int64_t)esz) {
            /* glibc's memcpy moves mid-sized blocks with rep movsb, which on this AMD host
             * runs at about half speed when the destination is not 32-byte aligned (a roll
             * along the last dim copies rows shifted by a few elements: 2.6x torch's time).
             * A plain loop vectorises to ordinary unaligned loads and stores; aligned and
             * large copies (where memcpy streams) keep memcpy. */
            size_t bytes = (size_t)n * esz;
            bool unaligned = ((uintptr_t)o & 31) != 0 && bytes < ((size_t)1 << 20);
            if (unaligned && esz == 4) {
                uint32_t *restrict ot = (uint32_t *)o;
                const uint32_t *restrict xt = (const uint32_t *)x;
                for (int64_t i = 0; i < n; i++) ot[i] = xt[i];
            } else if (unaligned && esz == 8) {
                uint64_t *restrict ot = (uint64_t *)o;
                const uint64_t *restrict xt = (const uint64_t *)x;
                for (int64_t i = 0; i < n; i++) ot[i] = xt[i];
            } else {
                memcpy(o, x, bytes);
            }
            return;
        }
        switch (esz) {
        case 8:
            CONVERT_LOOP(uint64_t, uint64_t);
            return;
        case 4:
            CONVERT_LOOP(uint32_t, uint32_t);
            return;
        case 2:
            CONVERT_LOOP(uint16_t, uint16_t);
            return;
        default:
            CONVERT_LOOP(uint8_t, uint8_t);
            return;
        }
    }
    if (c->to == DDPL_FLOAT32 && c->from == DDPL_FLOAT64) {
        CONVERT_LOOP(float, double);
        return;
    }
    if (c->to == DDPL_FLOAT64 && c->from == DDPL_FLOAT32) {
        CONVERT_LOOP(double, float);
        return;
    }
    if (c->to == DDPL_FLOAT32 && c->from == DDPL_INT64) {
        CONVERT_LOOP(float, int64_t);
        return;
    }
    if (c->to == DDPL_FLOAT32 && c->from == DDPL_UINT8) {
        CONVERT_LOOP(float, uint8_t);
        return;
    }
    if (c->to == DDPL_FLOAT32 && c->from == DDPL_BOOL) {
        CONVERT_LOOP(float, uint8_t);
        return;
    }
    if (c->to == DDPL_FLOAT32 && c->from == DDPL_BFLOAT16) {
        if (so == 4 && sx == 2) {
            cpu_bf16_to_float((float *)o, (const uint16_t *)x, n);
        } else {
            for (int64_t i = 0; i < n; i++)
                *(float *)(o + i * so) = ddpl_bf16_to_float(*(const uint16_t *)(x + i * sx));
        }
        return;
    }
    if (c->to == DDPL_BFLOAT16 && c->from == DDPL_FLOAT32) { /* autocast's cast of every input */
        if (so == 2 && sx == 4) {
            cpu_float_to_bf16((uint16_t *)o, (const float *)x, n);
        } else {
            for (int64_t i = 0; i < n; i++)
                *(uint16_t *)(o + i * so) = ddpl_float_to_bf16(*(const float *)(x + i * sx));
        }
        return;
    }
    if (ddpl_dtype_is_integral(c->to) && ddpl_dtype_is_integral(c->from)) {
        for (int64_t i = 0; i < n; i++)
            ddpl_store_i64(o + i * so, c->to, ddpl_load_i64(x + i * sx, c->from));
        return;
    }
    for (int64_t i = 0; i < n; i++)
        ddpl_store_f64(o + i * so, c->to, ddpl_load_f64(x + i * sx, c->from));
}

int cpu_copy(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    DDPL_UNUSED(params);
    copy_ctx c = {(ddpl_dtype)in[0]->dtype, (ddpl_dtype)out[0]->dtype};
    ddpl_tensor *ops[2] = {out[0], in[0]};
    cpu_iter it;
    cpu_iter_init(&it, 2, ops);
    cpu_iter_run(&it, copy_loop, &c);
    return 0;
}

/* ---- random: out is contiguous; element i uses stream values i (uniform) or 2i, 2i+1
 * (normal) ---- */
typedef struct {
    const ddpl_random_params *p;
    ddpl_tensor *out;
    bool normal;
} random_ctx;

static void random_range(int64_t begin, int64_t end, void *pctx)
{
    random_ctx *c = pctx;
    const ddpl_random_params *p = c->p;
    ddpl_dtype dt = (ddpl_dtype)c->out->dtype;
    char *o = ddpl_data_ptr(c->out);
    size_t esz = ddpl_dtype_size(dt);
    int64_t per = c->normal ? 2 : 1; /* 32-bit values consumed per element */
    uint32_t block[4];
    uint64_t cached = UINT64_MAX;
    for (int64_t i = begin; i < end; i++) {
        double v;
        uint32_t u[2];
        for (int j = 0; j < per; j++) {
            uint64_t k = (uint64_t)(i * per + j);
            if (k / 4 != cached) {
                cached = k / 4;
                ddpl_philox4x32(p->seed, p->offset + cached, block);
            }
            u[j] = block[k % 4];
        }
        if (!c->normal)
            v = ddpl_philox_uniform(u[0], p->a, p->b, dt == DDPL_FLOAT64, dt == DDPL_FLOAT32);
        else
            v = ddpl_philox_normal(u[0], u[1], p->a, p->b);
        if (dt == DDPL_FLOAT32)
            ((float *)o)[i] = (float)v;
        else if (dt == DDPL_FLOAT64)
            ((double *)o)[i] = v;
        else
            ddpl_store_f64(o + i * esz, dt, v);
    }
}

static int run_random(ddpl_tensor **out, const void *params, bool normal)
{
    random_ctx c = {params, out[0], normal};
    cpu_parallel_for(ddpl_tensor_numel(out[0]), CPU_GRAIN / 8, random_range, &c);
    return 0;
}

int cpu_uniform(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    DDPL_UNUSED(in);
    return run_random(out, params, false);
}

int cpu_normal(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    DDPL_UNUSED(in);
    return run_random(out, params, true);
}

int cpu_arange(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    DDPL_UNUSED(in);
    const ddpl_arange_params *p = params;
    ddpl_tensor *o = out[0];
    ddpl_dtype dt = (ddpl_dtype)o->dtype;
    int64_t n = ddpl_tensor_numel(o);
    char *d = ddpl_data_ptr(o);
    size_t esz = ddpl_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) {
        if (ddpl_dtype_is_integral(dt))
            ddpl_store_i64(d + i * o->strides[0] * esz, dt,
                           (int64_t)llround(p->start + (double)i * p->step));
        else
            ddpl_store_f64(d + i * o->strides[0] * esz, dt, p->start + (double)i * p->step);
    }
    return 0;
}
