/* spec/c/test_nn.c: conv2d, the pools and the normalisations against naive reference loops
 * (a direct 7-loop convolution with stride/padding/dilation/groups, window-by-window pools,
 * batch-norm running statistics), float64 gradient checks, and error messages. The remaining
 * nn functions are in test_nn_func.c. */
#include "ref_util.h"

/* ---- conv2d ---- */
typedef struct {
    int64_t N, C, H, W, O, kh, kw;
    int stride[2], pad[2], dil[2], groups;
    bool bias;
} conv_case;

static int64_t conv_out(int64_t in, int k, int s, int p, int d)
{
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* y (N,O,OH,OW) by the definition: seven nested loops, padding read as zero. */
static void ref_conv(const conv_case *c, const double *x, const double *w, const double *b,
                     double *y)
{
    int64_t OH = conv_out(c->H, (int)c->kh, c->stride[0], c->pad[0], c->dil[0]);
    int64_t OW = conv_out(c->W, (int)c->kw, c->stride[1], c->pad[1], c->dil[1]);
    int64_t Cg = c->C / c->groups, Og = c->O / c->groups;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t o = 0; o < c->O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double s = b ? b[o] : 0;
                    int64_t g = o / Og;
                    for (int64_t ci = 0; ci < Cg; ci++)
                        for (int64_t ki = 0; ki < c->kh; ki++)
                            for (int64_t kj = 0; kj < c->kw; kj++) {
                                int64_t ih = oh * c->stride[0] - c->pad[0] + ki * c->dil[0];
                                int64_t iw = ow * c->stride[1] - c->pad[1] + kj * c->dil[1];
                                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                                s += x[((n * c->C + g * Cg + ci) * c->H + ih) * c->W + iw] *
                                     w[((o * Cg + ci) * c->kh + ki) * c->kw + kj];
                            }
                    y[((n * c->O + o) * OH + oh) * OW + ow] = s;
                }
}

static void check_conv_case(const conv_case *c, ddpl_dtype dt, double tol)
{
    ddpl_tensor *x = t_rand(4, (int64_t[]){c->N, c->C, c->H, c->W}, dt);
    ddpl_tensor *w = t_rand(4, (int64_t[]){c->O, c->C / c->groups, c->kh, c->kw}, dt);
    ddpl_tensor *b = c->bias ? t_rand(1, &c->O, dt) : NULL;
    ddpl_tensor *y = ddpl_conv2d(x, w, b, c->stride, c->pad, c->dil, c->groups);
    int64_t OH = conv_out(c->H, (int)c->kh, c->stride[0], c->pad[0], c->dil[0]);
    int64_t OW = conv_out(c->W, (int)c->kw, c->stride[1], c->pad[1], c->dil[1]);
    CHECK(y && ddpl_tensor_size(y, 1) == c->O && ddpl_tensor_size(y, 2) == OH &&
          ddpl_tensor_size(y, 3) == OW);
    double *xv = t_vals(x), *wv = t_vals(w), *bv = b ? t_vals(b) : NULL;
    double *ref = calloc((size_t)(c->N * c->O * OH * OW), sizeof *ref);
    ref_conv(c, xv, wv, bv, ref);
    CHECK_VALUES(y, ref, tol);
    free(xv);
    free(wv);
    free(bv);
    free(ref);
    RELEASE(x, w, b, y);
}

static const conv_case conv_cases[] = {
    {2, 4, 7, 6, 6, 3, 2, {2, 1}, {1, 2}, {1, 2}, 2, true},  /* everything at once */
    {3, 3, 8, 8, 5, 3, 3, {1, 1}, {1, 1}, {1, 1}, 1, false}, /* the common 3x3 "same" */
    {2, 6, 5, 5, 6, 1, 1, {1, 1}, {0, 0}, {1, 1}, 3, true},  /* 1x1: x read in place */
    {1, 2, 9, 7, 4, 2, 3, {3, 2}, {0, 1}, {2, 1}, 1, true},  /* N=1: threaded BLAS path */
    {4, 4, 6, 6, 4, 3, 3, {1, 1}, {1, 1}, {1, 1}, 4, true},  /* depthwise */
};

static void test_conv2d_values(void)
{
    for (size_t i = 0; i < sizeof conv_cases / sizeof *conv_cases; i++) {
        check_conv_case(&conv_cases[i], DDPL_FLOAT32, 1e-4);
        check_conv_case(&conv_cases[i], DDPL_FLOAT64, 1e-12);
    }
    /* an unbatched (C,H,W) input gives (O,OH,OW) */
    ddpl_tensor *x = t_rand(3, (int64_t[]){2, 5, 5}, DDPL_FLOAT32);
    ddpl_tensor *w = t_rand(4, (int64_t[]){3, 2, 3, 3}, DDPL_FLOAT32);
    ddpl_tensor *y = ddpl_conv2d(x, w, NULL, (int[]){1, 1}, (int[]){0, 0}, (int[]){1, 1}, 1);
    CHECK(y && ddpl_tensor_ndim(y) == 3 && ddpl_tensor_size(y, 0) == 3 &&
          ddpl_tensor_size(y, 2) == 3);
    RELEASE(x, w, y);
}

static ddpl_tensor *f_conv(ddpl_tensor **in, void *ctx)
{
    const conv_case *c = ctx;
    return ddpl_conv2d(in[0], in[1], c->bias ? in[2] : NULL, c->stride, c->pad, c->dil, c->groups);
}

static void test_conv2d_gradients(void)
{
    const conv_case cases[] = {
        {2, 4, 5, 4, 4, 3, 2, {2, 1}, {1, 1}, {1, 2}, 2, true},
        {2, 2, 4, 4, 3, 1, 1, {1, 1}, {0, 0}, {1, 1}, 1, true},
        {1, 3, 5, 5, 2, 3, 3, {1, 2}, {1, 0}, {1, 1}, 1, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const conv_case *c = &cases[i];
        ddpl_tensor *in[3] = {gc_input(4, (int64_t[]){c->N, c->C, c->H, c->W}, 1, 0),
                              gc_input(4, (int64_t[]){c->O, c->C / c->groups, c->kh, c->kw}, 1, 0),
                              gc_input(1, &c->O, 1, 0)};
        CHECK(gradcheck("conv2d", f_conv, c->bias ? 3 : 2, in, (void *)c, 1e-6, 1e-7, 1e-6));
        /* only the weight needs a gradient: dx is skipped */
        ddpl_tensor_set_requires_grad(in[0], false);
        CHECK(gradcheck("conv2d weight only", f_conv, c->bias ? 3 : 2, in, (void *)c, 1e-6, 1e-7,
                        1e-6));
        RELEASE(in[0], in[1], in[2]);
    }
}

static void test_conv2d_errors(void)
{
    int one[2] = {1, 1}, zero[2] = {0, 0};
    ddpl_tensor *x = ddpl_zeros(4, (int64_t[]){2, 3, 8, 8}, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *w = ddpl_zeros(4, (int64_t[]){4, 2, 3, 3}, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *w3 = ddpl_zeros(4, (int64_t[]){4, 3, 3, 3}, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *wbig = ddpl_zeros(4, (int64_t[]){4, 3, 9, 9}, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *xi = ddpl_zeros(4, (int64_t[]){2, 3, 8, 8}, DDPL_INT64, ddpl_cpu());
    ddpl_tensor *wd = ddpl_zeros(4, (int64_t[]){4, 3, 3, 3}, DDPL_FLOAT64, ddpl_cpu());
    ddpl_tensor *b5 = ddpl_zeros(1, (int64_t[]){5}, DDPL_FLOAT32, ddpl_cpu());
    CHECK_ERROR(ddpl_conv2d(x, w, NULL, one, zero, one, 1) == NULL,
                "conv2d: input of shape [2,3,8,8] has 3 channels but weight [4,2,3,3] expects 2 "
                "(groups=1)",
                "");
    CHECK_ERROR(ddpl_conv2d(xi, w3, NULL, one, zero, one, 1) == NULL,
                "conv2d: expected float32 or float64 input, got int64", "");
    CHECK_ERROR(ddpl_conv2d(x, wd, NULL, one, zero, one, 1) == NULL, "conv2d:", "same dtype");
    CHECK_ERROR(ddpl_conv2d(x, wbig, NULL, one, zero, one, 1) == NULL, "conv2d:", "smaller");
    CHECK_ERROR(ddpl_conv2d(x, w3, b5, one, zero, one, 1) == NULL, "conv2d:", "bias");
    CHECK_ERROR(ddpl_conv2d(x, w3, NULL, zero, zero, one, 1) == NULL, "conv2d:", "stride");
    CHECK_ERROR(ddpl_conv2d(x, w3, NULL, one, zero, one, 3) == NULL, "conv2d:", "groups=3");
    RELEASE(x, w, w3, wbig, xi, wd, b5);
}

/* ---- pools ---- */
/* One output of a window over plane p (H,W): max (NaN wins), or the average with divisor
 * `div` (0: the number of in-bounds elements). */
static double ref_window(const double *p, int64_t H, int64_t W, int64_t h0, int64_t h1, int64_t w0,
                         int64_t w1, bool max, double div)
{
    double m = -INFINITY, s = 0;
    int64_t cnt = 0;
    for (int64_t h = h0; h < h1; h++)
        for (int64_t w = w0; w < w1; w++) {
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            double v = p[h * W + w];
            if (v > m || isnan(v)) m = isnan(m) ? m : v;
            s += v;
            cnt++;
        }
    return max ? m : s / (div > 0 ? div : (double)cnt);
}

static void test_pools(void)
{
    int64_t N = 2, C = 3, H = 7, W = 6;
    ddpl_tensor *x = t_rand(4, (int64_t[]){N, C, H, W}, DDPL_FLOAT64);
    double *xv = t_vals(x);
    int k[2] = {3, 2}, s[2] = {2, 2}, p[2] = {1, 1};
    int64_t OH = (H + 2 - 3) / 2 + 1, OW = (W + 2 - 2) / 2 + 1;
    double refmax[2 * 3 * 4 * 4], refavg[2 * 3 * 4 * 4], refavg_nopad[2 * 3 * 4 * 4];
    for (int64_t pl = 0; pl < N * C; pl++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                int64_t h0 = oh * 2 - 1, w0 = ow * 2 - 1, h1 = h0 + 3, w1 = w0 + 2;
                /* count_include_pad: the window clipped to the padded input */
                double padded =
                    (double)((h1 < H + 1 ? h1 : H + 1) - h0) * ((w1 < W + 1 ? w1 : W + 1) - w0);
                int64_t o = (pl * OH + oh) * OW + ow;
                refmax[o] = ref_window(xv + pl * H * W, H, W, h0, h1, w0, w1, true, 0);
                refavg[o] = ref_window(xv + pl * H * W, H, W, h0, h1, w0, w1, false, padded);
                refavg_nopad[o] = ref_window(xv + pl * H * W, H, W, h0, h1, w0, w1, false, 0);
            }
    ddpl_tensor *ym = ddpl_max_pool2d(x, k, s, p);
    CHECK(ym && ddpl_tensor_size(ym, 2) == OH && ddpl_tensor_size(ym, 3) == OW);
    CHECK_VALUES(ym, refmax, 0);
    ddpl_tensor *ya = ddpl_avg_pool2d(x, k, s, p, true);
    CHECK_VALUES(ya, refavg, 1e-12);
    ddpl_tensor *yn = ddpl_avg_pool2d(x, k, s, p, false);
    CHECK_VALUES(yn, refavg_nopad, 1e-12);

    /* adaptive 7x6 -> 3x4 (overlapping windows) and -> 1x1 (global average) */
    ddpl_tensor *yad = ddpl_adaptive_avg_pool2d(x, 3, 4);
    double refad[2 * 3 * 3 * 4], refg[6];
    for (int64_t pl = 0; pl < N * C; pl++) {
        for (int64_t oh = 0; oh < 3; oh++)
            for (int64_t ow = 0; ow < 4; ow++)
                refad[(pl * 3 + oh) * 4 + ow] =
                    ref_window(xv + pl * H * W, H, W, oh * H / 3, ((oh + 1) * H + 2) / 3,
                               ow * W / 4, ((ow + 1) * W + 3) / 4, false, 0);
        refg[pl] = ref_window(xv + pl * H * W, H, W, 0, H, 0, W, false, 0);
    }
    CHECK_VALUES(yad, refad, 1e-12);
    ddpl_tensor *yg = ddpl_adaptive_avg_pool2d(x, 1, 1);
    CHECK_VALUES(yg, refg, 1e-12);

    /* the 2x2 stride-2 fast path (no argmax) agrees with the general one, NaN included */
    ddpl_tensor *x2 = t_rand(4, (int64_t[]){2, 2, 6, 8}, DDPL_FLOAT32);
    ((float *)ddpl_tensor_data(x2))[9] = NAN;
    int k2[2] = {2, 2}, p0[2] = {0, 0};
    ddpl_tensor *fast = ddpl_max_pool2d(x2, k2, k2, p0);
    ddpl_tensor_set_requires_grad(x2, true);
    ddpl_tensor *slow = ddpl_max_pool2d(x2, k2, k2, p0);
    double *sv = t_vals(slow);
    CHECK(sv && isnan(sv[0])); /* input (0,0,1,1) lies in window (0,0) */
    CHECK_VALUES(fast, sv, 0);
    free(sv);
    free(xv);
    RELEASE(x, ym, ya, yn, yad, yg, x2, fast, slow);
}

typedef struct {
    int kind; /* 0 max, 1 avg with pad, 2 avg without, 3 adaptive */
} pool_case;

static ddpl_tensor *f_pool(ddpl_tensor **in, void *ctx)
{
    int k[2] = {3, 2}, s[2] = {2, 1}, p[2] = {1, 1};
    switch (((pool_case *)ctx)->kind) {
    case 0:
        return ddpl_max_pool2d(in[0], k, s, p);
    case 1:
        return ddpl_avg_pool2d(in[0], k, s, p, true);
    case 2:
        return ddpl_avg_pool2d(in[0], k, s, p, false);
    default:
        return ddpl_adaptive_avg_pool2d(in[0], 3, 2);
    }
}

static void test_pool_gradients_errors(void)
{
    const char *names[] = {"max_pool2d", "avg_pool2d pad", "avg_pool2d nopad",
                           "adaptive_avg_pool2d"};
    for (int kind = 0; kind < 4; kind++) {
        ddpl_tensor *x = gc_input(4, (int64_t[]){2, 2, 5, 4}, 1, 0);
        pool_case c = {kind};
        CHECK(gradcheck(names[kind], f_pool, 1, &x, &c, 1e-6, 1e-8, 1e-6));
        RELEASE(x);
    }
    ddpl_tensor *x = ddpl_zeros(4, (int64_t[]){1, 1, 4, 4}, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *xi = ddpl_zeros(4, (int64_t[]){1, 1, 4, 4}, DDPL_INT64, ddpl_cpu());
    ddpl_tensor *x2 = ddpl_zeros(2, (int64_t[]){4, 4}, DDPL_FLOAT32, ddpl_cpu());
    int k3[2] = {3, 3}, k5[2] = {5, 5}, s1[2] = {1, 1}, p0[2] = {0, 0}, p2[2] = {2, 2};
    CHECK_ERROR(ddpl_max_pool2d(x, k3, s1, p2) == NULL, "max_pool2d:", "half of the kernel");
    CHECK_ERROR(ddpl_max_pool2d(x, k5, s1, p0) == NULL, "max_pool2d:", "smaller than the kernel");
    CHECK_ERROR(ddpl_avg_pool2d(xi, k3, s1, p0, true) == NULL, "avg_pool2d:", "int64");
    CHECK_ERROR(ddpl_max_pool2d(x2, k3, s1, p0) == NULL, "max_pool2d:", "[4,4]");
    CHECK_ERROR(ddpl_adaptive_avg_pool2d(x, 0, 2) == NULL, "adaptive_avg_pool2d:", "(0, 2)");
    RELEASE(x, xi, x2);
}

/* ---- batch_norm ---- */
static void test_batch_norm(void)
{
    int64_t N = 4, C = 3, S = 5;
    ddpl_tensor *x = t_rand(3, (int64_t[]){N, C, S}, DDPL_FLOAT64);
    ddpl_tensor *w = t_from(1, &C, (double[]){1.5, -0.5, 2}, DDPL_FLOAT64);
    ddpl_tensor *b = t_from(1, &C, (double[]){0.1, 0.2, -0.3}, DDPL_FLOAT64);
    ddpl_tensor *rm = t_from(1, &C, (double[]){0.5, -1, 0}, DDPL_FLOAT64);
    ddpl_tensor *rv = t_from(1, &C, (double[]){2, 1, 0.5}, DDPL_FLOAT64);
    double *xv = t_vals(x), ref[60], mean[3], var[3];
    double wv[3] = {1.5, -0.5, 2}, bv[3] = {0.1, 0.2, -0.3};
    double eps = 1e-5, mom = 0.1;
    for (int c = 0; c < C; c++) {
        double s = 0, ss = 0;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < S; i++) s += xv[(n * C + c) * S + i];
        mean[c] = s / (double)(N * S);
        for (int n = 0; n < N; n++)
            for (int i = 0; i < S; i++) ss += pow(xv[(n * C + c) * S + i] - mean[c], 2);
        var[c] = ss / (double)(N * S); /* biased: what normalises */
        for (int n = 0; n < N; n++)
            for (int i = 0; i < S; i++) {
                int o = (n * C + c) * S + i;
                ref[o] = (xv[o] - mean[c]) / sqrt(var[c] + eps) * wv[c] + bv[c];
            }
    }
    ddpl_tensor *y = ddpl_batch_norm(x, rm, rv, w, b, true, mom, eps);
    CHECK_VALUES(y, ref, 1e-12);
    /* running stats: momentum towards the batch mean and the UNBIASED variance */
    double rm_ref[3], rv_ref[3], rm0[3] = {0.5, -1, 0}, rv0[3] = {2, 1, 0.5};
    for (int c = 0; c < C; c++) {
        rm_ref[c] = (1 - mom) * rm0[c] + mom * mean[c];
        rv_ref[c] = (1 - mom) * rv0[c] + mom * var[c] * (N * S) / (N * S - 1);
    }
    CHECK_VALUES(rm, rm_ref, 1e-12);
    CHECK_VALUES(rv, rv_ref, 1e-12);
    /* evaluation: the running stats normalise and stay as they are */
    double *rm_trained = t_vals(rm);
    ddpl_tensor *ye = ddpl_batch_norm(x, rm, rv, w, b, false, mom, eps);
    for (int c = 0; c < C; c++)
        for (int n = 0; n < N; n++)
            for (int i = 0; i < S; i++) {
                int o = (n * C + c) * S + i;
                ref[o] = (xv[o] - rm_ref[c]) / sqrt(rv_ref[c] + eps) * wv[c] + bv[c];
            }
    CHECK_VALUES(ye, ref, 1e-12);
    CHECK_VALUES(rm, rm_trained, 0);
    free(rm_trained);
    /* (N,C) input without affine parameters or running stats */
    ddpl_tensor *x2 = t_from(2, (int64_t[]){2, 2}, (double[]){1, 10, 3, 30}, DDPL_FLOAT32);
    ddpl_tensor *y2 = ddpl_batch_norm(x2, NULL, NULL, NULL, NULL, true, 0.1, 0);
    CHECK_VALUES(y2, ((double[]){-1, -1, 1, 1}), 1e-6);

    ddpl_tensor *one = ddpl_zeros(2, (int64_t[]){1, 3}, DDPL_FLOAT64, ddpl_cpu());
    ddpl_tensor *w4 = ddpl_ones(1, (int64_t[]){4}, DDPL_FLOAT64, ddpl_cpu());
    CHECK_ERROR(ddpl_batch_norm(one, NULL, NULL, NULL, NULL, true, 0.1, 1e-5) == NULL,
                "batch_norm:", "more than 1 value per channel");
    CHECK_ERROR(ddpl_batch_norm(x, NULL, NULL, NULL, NULL, false, 0.1, 1e-5) == NULL,
                "batch_norm:", "required in evaluation");
    CHECK_ERROR(ddpl_batch_norm(x, NULL, NULL, w4, NULL, true, 0.1, 1e-5) == NULL,
                "batch_norm:", "weight of shape [4]");
    free(xv);
    RELEASE(x, w, b, rm, rv, y, ye, x2, y2, one, w4);
}

typedef struct {
    bool training;
    ddpl_tensor *rm, *rv;
} bn_case;

static ddpl_tensor *f_bn(ddpl_tensor **in, void *ctx)
{
    bn_case *c = ctx;
    return ddpl_batch_norm(in[0], c->rm, c->rv, in[1], in[2], c->training, 0.1, 1e-5);
}

static ddpl_tensor *f_ln(ddpl_tensor **in, void *ctx)
{
    return ddpl_layer_norm(in[0], 2, in[1], in[2], 1e-5);
}

static void test_norm_gradients(void)
{
    for (int training = 1; training >= 0; training--) {
        ddpl_tensor *in[3] = {gc_input(4, (int64_t[]){3, 2, 2, 2}, 1, 0.5),
                              gc_input(1, (int64_t[]){2}, 1, 1), gc_input(1, (int64_t[]){2}, 1, 0)};
        bn_case c = {training, ddpl_zeros(1, (int64_t[]){2}, DDPL_FLOAT64, ddpl_cpu()),
                     ddpl_ones(1, (int64_t[]){2}, DDPL_FLOAT64, ddpl_cpu())};
        CHECK(gradcheck(training ? "batch_norm train" : "batch_norm eval", f_bn, 3, in, &c, 1e-6,
                        1e-7, 1e-5));
        RELEASE(in[0], in[1], in[2], c.rm, c.rv);
    }
    ddpl_tensor *in[3] = {gc_input(3, (int64_t[]){2, 3, 4}, 1, 0.3),
                          gc_input(2, (int64_t[]){3, 4}, 1, 1),
                          gc_input(2, (int64_t[]){3, 4}, 1, 0)};
    CHECK(gradcheck("layer_norm", f_ln, 3, in, NULL, 1e-6, 1e-7, 1e-5));
    RELEASE(in[0], in[1], in[2]);
}

static void test_layer_norm(void)
{
    int64_t M = 3, N = 8;
    ddpl_tensor *x = t_rand(3, (int64_t[]){M, 2, 4}, DDPL_FLOAT32);
    ddpl_tensor *w = t_rand(2, (int64_t[]){2, 4}, DDPL_FLOAT32),
                *b = t_rand(2, (int64_t[]){2, 4}, DDPL_FLOAT32);
    double *xv = t_vals(x), *wv = t_vals(w), *bv = t_vals(b), ref[24];
    for (int r = 0; r < M; r++) {
        double s = 0, ss = 0;
        for (int i = 0; i < N; i++) s += xv[r * N + i];
        double mean = s / N;
        for (int i = 0; i < N; i++) ss += pow(xv[r * N + i] - mean, 2);
        for (int i = 0; i < N; i++)
            ref[r * N + i] = (xv[r * N + i] - mean) / sqrt(ss / N + 1e-5) * wv[i] + bv[i];
    }
    ddpl_tensor *y = ddpl_layer_norm(x, 2, w, b, 1e-5);
    CHECK(y && ddpl_tensor_ndim(y) == 3);
    CHECK_VALUES(y, ref, 1e-5);
    ddpl_tensor *w5 = ddpl_ones(1, (int64_t[]){5}, DDPL_FLOAT32, ddpl_cpu());
    CHECK_ERROR(ddpl_layer_norm(x, 1, w5, NULL, 1e-5) == NULL, "layer_norm:",
                "weight of shape [5] does not match the normalized shape [4] of input [3,2,4]");
    CHECK_ERROR(ddpl_layer_norm(x, 4, NULL, NULL, 1e-5) == NULL, "layer_norm:", "last 4");
    free(xv);
    free(wv);
    free(bv);
    RELEASE(x, w, b, y, w5);
}

int main(void)
{
    ddpl_manual_seed(3);
    test_conv2d_values();
    test_conv2d_gradients();
    test_conv2d_errors();
    test_pools();
    test_pool_gradients_errors();
    test_batch_norm();
    test_layer_norm();
    test_norm_gradients();
    CHECK(ddpl_memory_allocated(DDPL_CPU) == 0); /* everything released */
    return check_finish();
}
