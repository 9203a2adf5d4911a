/* cpu/cpu_rnn.c: the fused LSTM and GRU cell kernels on the CPU, forward and backward.
 * defines: cpu_lstm_cell, cpu_lstm_cell_backward, cpu_gru_cell, cpu_gru_cell_backward.
 *
 * One time step of a recurrent layer is one GEMM for the hidden gates (ops) and then these
 * pointwise kernels, which read the input and hidden gate pre-activations once and write the
 * new state and the activated gates that backward needs. Gate order is PyTorch's: LSTM i, f,
 * g, o; GRU r, z, n. Every operand is contiguous; rows (the batch) are split over the threads.
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
#include "cpu_math.h"
#include "cpu_rnn.h"

/* float32 through the vectorisable cpu_expf/cpu_tanhf (cpu_math.h), float64 through libm */
#define R_EXP(a)     _Generic((a), float : cpu_expf, default : exp)(a)
#define R_TANH(a)    _Generic((a), float : cpu_tanhf, default : tanh)(a)
#define R_SIGMOID(a) (1 / (1 + R_EXP(-(a))))

typedef struct {
    int64_t H; /* the hidden size */
    const char *in[5];
    char *out[3];
} rnn_job;

#define DEFINE_RNN_CELLS(T, SUFFIX)                                                                \
    static void lstm_fwd_##SUFFIX(int64_t begin, int64_t end, void *ctx)                           \
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
                T i = R_SIGMOID(x[k] + s[k]);                                                      \
                T f = R_SIGMOID(x[H + k] + s[H + k]);                                              \
                T g = R_TANH(x[2 * H + k] + s[2 * H + k]);                                         \
                T o = R_SIGMOID(x[3 * H + k] + s[3 * H + k]);                                      \
                T cn = f * cp[k] + i * g;                                                          \
                act[k] = i, act[H + k] = f, act[2 * H + k] = g, act[3 * H + k] = o;                \
                c[k] = cn;                                                                         \
                h[k] = o * R_TANH(cn);                                                             \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void lstm_bwd_##SUFFIX(int64_t begin, int64_t end, void *ctx)                           \
    {                                                                                              \
        const rnn_job *j = ctx;                                                                    \
        int64_t H = j->H, B4 = 4 * H;                                                              \
        for (int64_t b = begin; b < end; b++) {                                                    \
            const T *dh = (const T *)j->in[0] + b * H, *dc = (const T *)j->in[1] + b * H;          \
            const T *act = (const T *)j->in[2] + b * B4, *cp = (const T *)j->in[3] + b * H;        \
            const T *c = (const T *)j->in[4] + b * H;                                              \
            T *da = (T *)j->out[0] + b * B4;                                                       \
            T *dcp = j->out[1] ? (T *)j->out[1] + b * H : NULL;                                    \
            _Pragma("omp simd") for (int64_t k = 0; k < H; k++)                                    \
            {                                                                                      \
                T i = act[k], f = act[H + k], g = act[2 * H + k], o = act[3 * H + k];              \
                T tc = R_TANH(c[k]);                                                               \
                T dct = dc[k] + dh[k] * o * (1 - tc * tc);                                         \
                da[k] = dct * g * i * (1 - i);                                                     \
                da[H + k] = dct * cp[k] * f * (1 - f);                                             \
                da[2 * H + k] = dct * i * (1 - g * g);                                             \
                da[3 * H + k] = dh[k] * tc * o * (1 - o);                                          \
                if (dcp) dcp[k] = dct * f;                                                         \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void gru_fwd_##SUFFIX(int64_t begin, int64_t end, void *ctx)                            \
    {                                                                                              \
        const rnn_job *j = ctx;                                                                    \
        int64_t H = j->H, B3 = 3 * H, B4 = 4 * H;                                                  \
        for (int64_t b = begin; b < end; b++) {                                                    \
            const T *x = (const T *)j->in[0] + b * B3, *s = (const T *)j->in[1] + b * B3;          \
            const T *hp = (const T *)j->in[2] + b * H;                                             \
            T *h = (T *)j->out[0] + b * H, *act = (T *)j->out[1] + b * B4;                         \
            _Pragma("omp simd") for (int64_t k = 0; k < H; k++)                                    \
            {                                                                                      \
                T r = R_SIGMOID(x[k] + s[k]);                                                      \
                T z = R_SIGMOID(x[H + k] + s[H + k]);                                              \
                T sn = s[2 * H + k];                                                               \
                T n = R_TANH(x[2 * H + k] + r * sn);                                               \
                act[k] = r, act[H + k] = z, act[2 * H + k] = n, act[3 * H + k] = sn;               \
                h[k] = (1 - z) * n + z * hp[k];                                                    \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void gru_bwd_##SUFFIX(int64_t begin, int64_t end, void *ctx)                            \
    {                                                                                              \
        const rnn_job *j = ctx;                                                                    \
        int64_t H = j->H, B3 = 3 * H, B4 = 4 * H;                                                  \
        for (int64_t b = begin; b < end; b++) {                                                    \
            const T *dh = (const T *)j->in[0] + b * H, *act = (const T *)j->in[1] + b * B4;        \
            const T *hp = (const T *)j->in[2] + b * H;                                             \
            T *dx = (T *)j->out[0] + b * B3, *ds = (T *)j->out[1] + b * B3;                        \
            T *dhp = j->out[2] ? (T *)j->out[2] + b * H : NULL;                                    \
            _Pragma("omp simd") for (int64_t k = 0; k < H; k++)                                    \
            {                                                                                      \
                T r = act[k], z = act[H + k], n = act[2 * H + k], sn = act[3 * H + k];             \
                T dn = dh[k] * (1 - z) * (1 - n * n);                                              \
                T dz = dh[k] * (hp[k] - n) * z * (1 - z);                                          \
                T dr = dn * sn * r * (1 - r);                                                      \
                dx[k] = dr, dx[H + k] = dz, dx[2 * H + k] = dn;                                    \
                ds[k] = dr, ds[H + k] = dz, ds[2 * H + k] = dn * r;                                \
                if (dhp) dhp[k] = dh[k] * z;                                                       \
            }                                                                                      \
        }                                                                                          \
    }

DEFINE_RNN_CELLS(float, f32)
DEFINE_RNN_CELLS(double, f64)

/* Splits the B rows over the threads; each row touches about 12 H elements. */
static void run_rows(const ddpl_tensor *rows_of, int64_t H, rnn_job *j,
                     void (*f32)(int64_t, int64_t, void *), void (*f64)(int64_t, int64_t, void *))
{
    int64_t B = rows_of->sizes[0];
    j->H = H;
    if (B == 0 || H == 0) return;
    cpu_parallel_for(B, CPU_GRAIN / (12 * H) + 1, rows_of->dtype == DDPL_FLOAT32 ? f32 : f64, j);
}

/* out[0] h, out[1] c (B,H), out[2] act (B,4H); in[0] input gates, in[1] hidden gates (B,4H),
 * in[2] c_prev (B,H). */
int cpu_lstm_cell(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    (void)params;
    rnn_job j = {.in = {ddpl_data_ptr(in[0]), ddpl_data_ptr(in[1]), ddpl_data_ptr(in[2])},
                 .out = {ddpl_data_ptr(out[0]), ddpl_data_ptr(out[1]), ddpl_data_ptr(out[2])}};
    run_rows(in[2], in[2]->sizes[1], &j, lstm_fwd_f32, lstm_fwd_f64);
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
    run_rows(in[3], in[3]->sizes[1], &j, lstm_bwd_f32, lstm_bwd_f64);
    return 0;
}

/* out[0] h (B,H), out[1] act (B,4H); in[0] input gates, in[1] hidden gates (B,3H), in[2]
 * h_prev (B,H). */
int cpu_gru_cell(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    (void)params;
    rnn_job j = {.in = {ddpl_data_ptr(in[0]), ddpl_data_ptr(in[1]), ddpl_data_ptr(in[2])},
                 .out = {ddpl_data_ptr(out[0]), ddpl_data_ptr(out[1])}};
    run_rows(in[2], in[2]->sizes[1], &j, gru_fwd_f32, gru_fwd_f64);
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
    run_rows(in[2], in[2]->sizes[1], &j, gru_bwd_f32, gru_bwd_f64);
    return 0;
}
