/* cpu/cpu_rnn.c: the fused LSTM and GRU cell kernels on the CPU, forward and backward.
 * defines: cpu_lstm_cell, cpu_lstm_cell_backward, cpu_gru_cell, cpu_gru_cell_backward.
 *
 * One time step of a recurrent layer is one GEMM for the hidden gates (ops) and then these
 * pointwise kernels, which read the input and hidden gate pre-activations once and write the
 * new state and the activated gates that backward needs. Gate order is PyTorch's: LSTM i, f,
 * g, o; GRU r, z, n. Every operand is contiguous; rows (the batch) are split over the threads.
 * bfloat16 and float16 compute in float32 and round what they store (LD_/ST_ below).
 *
 * LSTM (a = input gates + hidden gates, each (B,4H)):
 *   i = sig(a_i), f = sig(a_f), g = tanh(a_g), o = sig(a_o)
 *   c = f c_prev + i g,  h = o tanh(c)
 *   backward, with dh, dc the incoming gradients of h and c:
 *   dc' = dc + dh o (1 - tanh(c)^2); da_i = dc' g i(1-i); da_f = dc' c_prev f(1-f);
 *   da_g = dc' i (1-g^2); da_o = dh tanh(c) o(1-o); dc_prev = dc' f
 * GRU (x = input gates (B,3H) with b_ih, s = hidden gates (B,3H) with b_hh):
 *   r = sig(x_r + s_r), z = sig(x_z + s_z), n = tanh(x_n + r s_n), h = (1-z) n + z h_prev
 *   backward: dn' = dh (1-z) (1-n^2); dz' = dh (h_prev - n) z(1-z); dr' = dn' s_n r(1-r);
 *   dx = (dr', dz', dn'), ds = (dr', dz', dn' r), dh_prev = dh z (plus the path through s,
 *   which autograd adds). */
#include <math.h>

#include "cpu_iter.h"
#include "cpu_loops.h"
#include "cpu_math.h"
#include "cpu_rnn.h"

/* float32 (and the 16-bit dtypes, which compute in float32) through the vectorisable
 * cpu_expf/cpu_tanhf (cpu_math.h), float64 through libm */
#define R_EXP(a)     _Generic((a), float : cpu_expf, default : exp)(a)
#define R_TANH(a)    _Generic((a), float : cpu_tanhf, default : tanh)(a)
#define R_SIGMOID(a) (1 / (1 + R_EXP(-(a))))

/* Element load (storage -> compute type A) and store (A -> storage). The 16-bit dtypes compute
 * each cell in float32 and round every value they store once: the new state, the activations
 * backward reads, the gradients. */
#define LD_SAME(v) (v)
#define ST_SAME(v) (v)
#define LD_BF16(v) ddpl_bf16_to_float(v)
#define ST_BF16(v) ddpl_float_to_bf16(v)
#define LD_F16(v)  ddpl_half_to_float(v)
#define ST_F16(v)  ddpl_float_to_half(v)

typedef struct {
    int64_t H; /* the hidden size */
    const char *in[5];
    char *out[3];
} rnn_job;

/* The backward loops over one row's H units, with the optional store of the previous state's
 * gradient as STORE_PREV: two copies of the loop (with and without it) rather than a branch
 * inside, which would keep the compiler from vectorising. */
#define LSTM_BWD_LOOP(T, A, LD, ST, STORE_PREV)                                                    \
    _Pragma("omp simd") for (int64_t k = 0; k < H; k++)                                            \
    {                                                                                              \
        A i = LD(act[k]), f = LD(act[H + k]), g = LD(act[2 * H + k]);                              \
        A o = LD(act[3 * H + k]), dhk = LD(dh[k]);                                                 \
        A tc = R_TANH((A)LD(c[k]));                                                                \
        A dct = (A)LD(dc[k]) + dhk * o * (1 - tc * tc);                                            \
        da[k] = ST(dct * g * i * (1 - i));                                                         \
        da[H + k] = ST(dct * (A)LD(cp[k]) * f * (1 - f));                                          \
        da[2 * H + k] = ST(dct * i * (1 - g * g));                                                 \
        da[3 * H + k] = ST(dhk * tc * o * (1 - o));                                                \
        STORE_PREV;                                                                                \
    }
#define GRU_BWD_LOOP(T, A, LD, ST, STORE_PREV)                                                     \
    _Pragma("omp simd") for (int64_t k = 0; k < H; k++)                                            \
    {                                                                                              \
        A r = LD(act[k]), z = LD(act[H + k]), n = LD(act[2 * H + k]);                              \
        A sn = LD(act[3 * H + k]), dhk = LD(dh[k]);                                                \
        A dn = dhk * (1 - z) * (1 - n * n);                                                        \
        A dz = dhk * ((A)LD(hp[k]) - n) * z * (1 - z);                                             \
        A dr = dn * sn * r * (1 - r);                                                              \
        T dr_s = ST(dr), dz_s = ST(dz);                                                            \
        dx[k] = dr_s, dx[H + k] = dz_s, dx[2 * H + k] = ST(dn);                                    \
        ds[k] = dr_s, ds[H + k] = dz_s, ds[2 * H + k] = ST(dn * r);                                \
        STORE_PREV;                                                                                \
    }

/* One cell's four kernels for storage type T computing in A, compiled for AVX-512 too
 * (CPU_LOOP_CLONES, cpu_loops.h): a few exponentials per element. */
#define DEFINE_RNN_CELLS(T, A, LD, ST, SUFFIX)                                                     \
    CPU_LOOP_CLONES static void lstm_fwd_##SUFFIX(int64_t begin, int64_t end, void *ctx)           \
    {                                                                                              \
        const rnn_job *j = ctx;                                                                    \
        int64_t H = j->H, B4 = 4 * H;                                                              \
        for (int64_t b = begin; b < end; b++) {                                                    \
            const T *x = (const T *)j->in[0] + b * B4, *s = (const T *)j->in[1] + b * B4;          \
            const T *cp = (const T *)j->in[2] + b * H;                                             \
            T *h = (T *)j->out[0] + b * H, *c = (T *)j->out[1] + b * H;                            \
            T *act = (T *)j->out[2] + b * B4;                                                      \
            _Pragma("omp simd") for (int64_t k = 0; k < H; k++)                                    \
            {                                                                                      \
                A i = R_SIGMOID((A)LD(x[k]) + (A)LD(s[k]));                                        \
                A f = R_SIGMOID((A)LD(x[H + k]) + (A)LD(s[H + k]));                                \
                A g = R_TANH((A)LD(x[2 * H + k]) + (A)LD(s[2 * H + k]));                           \
                A o = R_SIGMOID((A)LD(x[3 * H + k]) + (A)LD(s[3 * H + k]));                        \
                A cn = f * (A)LD(cp[k]) + i * g;                                                   \
                act[k] = ST(i), act[H + k] = ST(f), act[2 * H + k] = ST(g);                        \
                act[3 * H + k] = ST(o);                                                            \
                c[k] = ST(cn);                                                                     \
                h[k] = ST(o * R_TANH(cn));                                                         \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    CPU_LOOP_CLONES static void lstm_bwd_##SUFFIX(int64_t begin, int64_t end, void *ctx)           \
    {                                                                                              \
        const rnn_job *j = ctx;                                                                    \
        int64_t H = j->H, B4 = 4 * H;                                                              \
        for (int64_t b = begin; b < end; b++) {                                                    \
            const T *dh = (const T *)j->in[0] + b * H, *dc = (const T *)j->in[1] + b * H;          \
            const T *act = (const T *)j->in[2] + b * B4, *cp = (const T *)j->in[3] + b * H;        \
            const T *c = (const T *)j->in[4] + b * H;                                              \
            T *da = (T *)j->out[0] + b * B4;                                                       \
            T *dcp = j->out[1] ? (T *)j->out[1] + b * H : NULL;                                    \
            if (dcp) {                                                                             \
                LSTM_BWD_LOOP(T, A, LD, ST, dcp[k] = ST(dct * f))                                  \
            } else {                                                                               \
                LSTM_BWD_LOOP(T, A, LD, ST, (void)0)                                               \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    CPU_LOOP_CLONES static void gru_fwd_##SUFFIX(int64_t begin, int64_t end, void *ctx)            \
    {                                                                                              \
        const rnn_job *j = ctx;                                                                    \
        int64_t H = j->H, B3 = 3 * H, B4 = 4 * H;                                                  \
        for (int64_t b = begin; b < end; b++) {                                                    \
            const T *x = (const T *)j->in[0] + b * B3, *s = (const T *)j->in[1] + b * B3;          \
            const T *hp = (const T *)j->in[2] + b * H;                                             \
            T *h = (T *)j->out[0] + b * H, *act = (T *)j->out[1] + b * B4;                         \
            _Pragma("omp simd") for (int64_t k = 0; k < H; k++)                                    \
            {                                                                                      \
                A r = R_SIGMOID((A)LD(x[k]) + (A)LD(s[k]));                                        \
                A z = R_SIGMOID((A)LD(x[H + k]) + (A)LD(s[H + k]));                                \
                A sn = LD(s[2 * H + k]);                                                           \
                A n = R_TANH((A)LD(x[2 * H + k]) + r * sn);                                        \
                act[k] = ST(r), act[H + k] = ST(z), act[2 * H + k] = ST(n);                        \
                act[3 * H + k] = s[2 * H + k];                                                     \
                h[k] = ST((1 - z) * n + z * (A)LD(hp[k]));                                         \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    CPU_LOOP_CLONES static void gru_bwd_##SUFFIX(int64_t begin, int64_t end, void *ctx)            \
    {                                                                                              \
        const rnn_job *j = ctx;                                                                    \
        int64_t H = j->H, B3 = 3 * H, B4 = 4 * H;                                                  \
        for (int64_t b = begin; b < end; b++) {                                                    \
            const T *dh = (const T *)j->in[0] + b * H, *act = (const T *)j->in[1] + b * B4;        \
            const T *hp = (const T *)j->in[2] + b * H;                                             \
            T *dx = (T *)j->out[0] + b * B3, *ds = (T *)j->out[1] + b * B3;                        \
            T *dhp = j->out[2] ? (T *)j->out[2] + b * H : NULL;                                    \
            if (dhp) {                                                                             \
                GRU_BWD_LOOP(T, A, LD, ST, dhp[k] = ST(dhk * z))                                   \
            } else {                                                                               \
                GRU_BWD_LOOP(T, A, LD, ST, (void)0)                                                \
            }                                                                                      \
        }                                                                                          \
    }

DEFINE_RNN_CELLS(float, float, LD_SAME, ST_SAME, f32)
DEFINE_RNN_CELLS(double, double, LD_SAME, ST_SAME, f64)
DEFINE_RNN_CELLS(uint16_t, float, LD_BF16, ST_BF16, bf16)
DEFINE_RNN_CELLS(uint16_t, float, LD_F16, ST_F16, f16)

typedef void (*rnn_rows_fn)(int64_t, int64_t, void *);

/* One kernel per storage dtype, in the order float32, float64, bfloat16, float16. */
typedef struct {
    rnn_rows_fn f32, f64, bf16, f16;
} rnn_kernels;

/* Splits the B rows over the threads; each row touches about 12 H elements. */
static void run_rows(const ddpl_tensor *rows_of, int64_t H, rnn_job *j, rnn_kernels k)
{
    int64_t B = rows_of->sizes[0];
    j->H = H;
    if (B == 0 || H == 0) return;
    rnn_rows_fn fn = rows_of->dtype == DDPL_FLOAT32    ? k.f32
                     : rows_of->dtype == DDPL_FLOAT64  ? k.f64
                     : rows_of->dtype == DDPL_BFLOAT16 ? k.bf16
                                                       : k.f16;
    cpu_parallel_for(B, CPU_GRAIN / (12 * H) + 1, fn, j);
}

#define RNN_KERNELS(name) ((rnn_kernels){name##_f32, name##_f64, name##_bf16, name##_f16})

/* out[0] h, out[1] c (B,H), out[2] act (B,4H); in[0] input gates, in[1] hidden gates (B,4H),
 * in[2] c_prev (B,H). */
int cpu_lstm_cell(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    (void)params;
    rnn_job j = {.in = {ddpl_data_ptr(in[0]), ddpl_data_ptr(in[1]), ddpl_data_ptr(in[2])},
                 .out = {ddpl_data_ptr(out[0]), ddpl_data_ptr(out[1]), ddpl_data_ptr(out[2])}};
    run_rows(in[2], in[2]->sizes[1], &j, RNN_KERNELS(lstm_fwd));
    return 0;
}

/* out[0] dgates (B,4H), out[1] dc_prev (B,H) or NULL; in[0] dh, in[1] dc (B,H), in[2] act
 * (B,4H), in[3] c_prev, in[4] c (B,H). */
int cpu_lstm_cell_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    (void)params;
    rnn_job j = {.in = {ddpl_data_ptr(in[0]), ddpl_data_ptr(in[1]), ddpl_data_ptr(in[2]),
                        ddpl_data_ptr(in[3]), ddpl_data_ptr(in[4])},
                 .out = {ddpl_data_ptr(out[0]), out[1] ? ddpl_data_ptr(out[1]) : NULL}};
    run_rows(in[3], in[3]->sizes[1], &j, RNN_KERNELS(lstm_bwd));
    return 0;
}

/* out[0] h (B,H), out[1] act (B,4H); in[0] input gates, in[1] hidden gates (B,3H), in[2]
 * h_prev (B,H). */
int cpu_gru_cell(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    (void)params;
    rnn_job j = {.in = {ddpl_data_ptr(in[0]), ddpl_data_ptr(in[1]), ddpl_data_ptr(in[2])},
                 .out = {ddpl_data_ptr(out[0]), ddpl_data_ptr(out[1])}};
    run_rows(in[2], in[2]->sizes[1], &j, RNN_KERNELS(gru_fwd));
    return 0;
}

/* out[0] d input gates, out[1] d hidden gates (B,3H), out[2] dh_prev (B,H) or NULL; in[0]
 * grad (B,H), in[1] act (B,4H), in[2] h_prev (B,H). */
int cpu_gru_cell_backward(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    (void)params;
    rnn_job j = {.in = {ddpl_data_ptr(in[0]), ddpl_data_ptr(in[1]), ddpl_data_ptr(in[2])},
                 .out = {ddpl_data_ptr(out[0]), ddpl_data_ptr(out[1]),
                         out[2] ? ddpl_data_ptr(out[2]) : NULL}};
    run_rows(in[2], in[2]->sizes[1], &j, RNN_KERNELS(gru_bwd));
    return 0;
}
