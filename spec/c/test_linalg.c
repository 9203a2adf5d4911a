/* spec/c/test_linalg.c: matmul, mm, bmm and addmm against naive loops (contiguous, transposed
 * and strided operands, every rank combination of matmul, several dtypes), float64 gradient
 * checks, and error messages. */
#include "ref_util.h"

/* ref (n,m) = a (n,k) @ b (k,m) with element strides (as, bs) in elements: a[i*as0 + l*as1]. */
static void ref_mm(const double *a, int64_t as0, int64_t as1, const double *b, int64_t bs0,
                   int64_t bs1, int64_t n, int64_t k, int64_t m, double *out)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) {
            double s = 0;
            for (int64_t l = 0; l < k; l++) s += a[i * as0 + l * as1] * b[l * bs0 + j * bs1];
            out[i * m + j] = s;
        }
}

/* mm on every layout the kernel distinguishes: row-major, transposed (CblasTrans), strided
 * in both dims (packed copy), and a transposed output. */
static void test_mm_layouts(ddpl_dtype dt, double tol)
{
    int64_t n = 7, k = 5, m = 6;
    ddpl_tensor *a = t_rand(2, (int64_t[]){n, k}, dt), *b = t_rand(2, (int64_t[]){k, m}, dt);
    double *av = t_vals(a), *bv = t_vals(b), ref[7 * 6];
    ref_mm(av, k, 1, bv, m, 1, n, k, m, ref);
    ddpl_tensor *c = ddpl_mm(a, b);
    CHECK_VALUES(c, ref, tol);

    /* a^T^T: the same values through transposed views of transposed copies */
    ddpl_tensor *at = ddpl_t(a), *atc = ddpl_contiguous(at), *att = ddpl_t(atc);
    ddpl_tensor *bt = ddpl_t(b), *btc = ddpl_contiguous(bt), *btt = ddpl_t(btc);
    ddpl_tensor *c2 = ddpl_mm(att, btt);
    CHECK(!ddpl_tensor_is_contiguous(att) && !ddpl_tensor_is_contiguous(btt));
    CHECK_VALUES(c2, ref, tol);

    /* every other column of a (2n, 2k) tensor: strides (2k*2, 2) need a packed copy */
    ddpl_tensor *big = t_rand(2, (int64_t[]){2 * n, 2 * k}, dt);
    ddpl_tensor *s = ddpl_as_strided(big, 2, (int64_t[]){n, k}, (int64_t[]){4 * k, 2}, 1);
    double *sv = t_vals(s), ref2[7 * 6];
    ref_mm(sv, k, 1, bv, m, 1, n, k, m, ref2);
    ddpl_tensor *c3 = ddpl_mm(s, b);
    CHECK_VALUES(c3, ref2, tol);

    /* (b^T @ a^T)^T = a @ b: a transposed result of transposed operands */
    ddpl_tensor *c4 = ddpl_mm(bt, at), *c4t = ddpl_t(c4);
    CHECK_VALUES(c4t, ref, tol);
    free(av);
    free(bv);
    free(sv);
    RELEASE(a, b, c, at, atc, att, bt, btc, btt, c2, big, s, c3, c4, c4t);
}

/* Products large enough to be split over threads (by rows of C, or by columns when C is
 * wide), with transposed operands, and a batch large enough to run batches in parallel. */
static void test_large_products(void)
{
    int64_t n = 150, k = 301, m = 333;
    ddpl_tensor *at = t_rand(2, (int64_t[]){k, n}, DDPL_FLOAT32), *a = ddpl_t(at);
    ddpl_tensor *b = t_rand(2, (int64_t[]){k, m}, DDPL_FLOAT32);
    double *av = t_vals(at), *bv = t_vals(b);
    double *ref = calloc((size_t)(n * m), sizeof *ref),
           *reft = calloc((size_t)(n * m), sizeof *ref);
    ref_mm(av, 1, n, bv, m, 1, n, k, m, ref); /* a = at^T: a[i][l] = at[l][i] */
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) reft[j * n + i] = ref[i * m + j];
    ddpl_tensor *c = ddpl_mm(a, b); /* wide C: split by columns */
    CHECK_VALUES(c, ref, 1e-4);
    ddpl_tensor *bt = ddpl_t(b);
    ddpl_tensor *ct = ddpl_mm(bt, at); /* tall C (m, n): split by rows */
    CHECK_VALUES(ct, reft, 1e-4);
    /* row-major a, transposed b, wide C */
    ddpl_tensor *ac = ddpl_contiguous(a), *btc = ddpl_contiguous(bt), *bb = ddpl_t(btc);
    ddpl_tensor *c2 = ddpl_mm(ac, bb);
    CHECK_VALUES(c2, ref, 1e-4);
    ddpl_tensor *x = t_rand(3, (int64_t[]){64, 20, 30}, DDPL_FLOAT64);
    ddpl_tensor *y = t_rand(3, (int64_t[]){64, 30, 10}, DDPL_FLOAT64);
    ddpl_tensor *yt = ddpl_transpose(y, 1, 2), *ytc = ddpl_contiguous(yt),
                *ytt = ddpl_transpose(ytc, 1, 2);
    ddpl_tensor *z = ddpl_bmm(x, ytt);
    double *xv = t_vals(x), *yv = t_vals(y), *refz = calloc(64 * 200, sizeof *refz);
    for (int i = 0; i < 64; i++)
        ref_mm(xv + i * 600, 30, 1, yv + i * 300, 10, 1, 20, 30, 10, refz + i * 200);
    CHECK_VALUES(z, refz, 1e-12);
    free(av);
    free(bv);
    free(ref);
    free(reft);
    free(xv);
    free(yv);
    free(refz);
    RELEASE(at, a, b, c, bt, ct, ac, btc, bb, c2, x, y, yt, ytc, ytt, z);
}

static void test_matmul_ranks(void)
{
    ddpl_dtype dt = DDPL_FLOAT64;
    /* 1-D . 1-D -> 0-dim */
    ddpl_tensor *u = t_from(1, (int64_t[]){3}, (double[]){1, 2, 3}, dt);
    ddpl_tensor *w = t_from(1, (int64_t[]){3}, (double[]){4, 5, 6}, dt);
    ddpl_tensor *dot = ddpl_matmul(u, w);
    double v;
    CHECK(dot && ddpl_tensor_ndim(dot) == 0 && ddpl_tensor_item(dot, &v) == 0 && v == 32);

    /* (2,3) @ (3) -> (2); (3) @ (3,2) -> (2) */
    ddpl_tensor *A = t_from(2, (int64_t[]){2, 3}, (double[]){1, 2, 3, 4, 5, 6}, dt);
    ddpl_tensor *mv = ddpl_matmul(A, u);
    CHECK(mv && ddpl_tensor_ndim(mv) == 1);
    CHECK_VALUES(mv, ((double[]){14, 32}), 0);
    ddpl_tensor *At = ddpl_t(A);
    ddpl_tensor *vm = ddpl_matmul(u, At);
    CHECK(vm && ddpl_tensor_ndim(vm) == 1);
    CHECK_VALUES(vm, ((double[]){14, 32}), 0);

    /* batched with broadcast: (2,1,3,4) @ (5,4,2) -> (2,5,3,2) */
    ddpl_tensor *x = t_rand(4, (int64_t[]){2, 1, 3, 4}, dt),
                *y = t_rand(3, (int64_t[]){5, 4, 2}, dt);
    ddpl_tensor *z = ddpl_matmul(x, y);
    CHECK(z && ddpl_tensor_ndim(z) == 4 && ddpl_tensor_size(z, 0) == 2 &&
          ddpl_tensor_size(z, 1) == 5 && ddpl_tensor_size(z, 2) == 3 &&
          ddpl_tensor_size(z, 3) == 2);
    double *xv = t_vals(x), *yv = t_vals(y), ref[2 * 5 * 3 * 2];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 5; j++)
            ref_mm(xv + i * 12, 4, 1, yv + j * 8, 2, 1, 3, 4, 2, ref + (i * 5 + j) * 6);
    CHECK_VALUES(z, ref, 1e-12);

    /* (2,3,4) @ (4,2): folded into one GEMM; (2,3,4) @ (4) and (4) @ (5,4,2) */
    ddpl_tensor *x3 = t_rand(3, (int64_t[]){2, 3, 4}, dt), *y2 = t_rand(2, (int64_t[]){4, 2}, dt);
    ddpl_tensor *z2 = ddpl_matmul(x3, y2);
    double *x3v = t_vals(x3), *y2v = t_vals(y2), ref2[12];
    ref_mm(x3v, 4, 1, y2v, 2, 1, 6, 4, 2, ref2);
    CHECK(z2 && ddpl_tensor_ndim(z2) == 3 && ddpl_tensor_size(z2, 2) == 2);
    CHECK_VALUES(z2, ref2, 1e-12);
    ddpl_tensor *v4 = t_from(1, (int64_t[]){4}, (double[]){1, -1, 2, 0.5}, dt);
    ddpl_tensor *z3 = ddpl_matmul(x3, v4);
    double ref3[6];
    ref_mm(x3v, 4, 1, (double[]){1, -1, 2, 0.5}, 1, 1, 6, 4, 1, ref3);
    CHECK(z3 && ddpl_tensor_ndim(z3) == 2 && ddpl_tensor_size(z3, 1) == 3);
    CHECK_VALUES(z3, ref3, 1e-12);
    ddpl_tensor *z4 = ddpl_matmul(v4, y);
    double ref4[10];
    for (int j = 0; j < 5; j++)
        ref_mm((double[]){1, -1, 2, 0.5}, 4, 1, yv + j * 8, 2, 1, 1, 4, 2, ref4 + j * 2);
    CHECK(z4 && ddpl_tensor_ndim(z4) == 2 && ddpl_tensor_size(z4, 0) == 5);
    CHECK_VALUES(z4, ref4, 1e-12);
    free(xv);
    free(yv);
    free(x3v);
    free(y2v);
    RELEASE(u, w, dot, A, mv, At, vm, x, y, z, x3, y2, z2, v4, z3, z4);
}

static void test_bmm_addmm_dtypes(void)
{
    ddpl_tensor *a = t_rand(3, (int64_t[]){3, 2, 4}, DDPL_FLOAT32);
    ddpl_tensor *b = t_rand(3, (int64_t[]){3, 4, 5}, DDPL_FLOAT32);
    ddpl_tensor *c = ddpl_bmm(a, b);
    double *av = t_vals(a), *bv = t_vals(b), ref[30];
    for (int i = 0; i < 3; i++) ref_mm(av + i * 8, 4, 1, bv + i * 20, 5, 1, 2, 4, 5, ref + i * 10);
    CHECK_VALUES(c, ref, 1e-5);

    /* addmm: beta*bias + alpha*a@b with a bias row broadcast over the rows */
    ddpl_tensor *a2 = ddpl_select(a, 0, 0), *b2 = ddpl_select(b, 0, 0);
    ddpl_tensor *bias = t_from(1, (int64_t[]){5}, (double[]){1, 2, 3, 4, 5}, DDPL_FLOAT32);
    ddpl_tensor *r = ddpl_addmm(bias, a2, b2, 0.5, 2.0);
    double ref2[10];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 5; j++) ref2[i * 5 + j] = 0.5 * (j + 1) + 2.0 * ref[i * 5 + j];
    CHECK_VALUES(r, ref2, 1e-5);
    /* beta 0 ignores the bias entirely, even NaN */
    ddpl_tensor *nanb = ddpl_full(1, (int64_t[]){5}, NAN, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *r0 = ddpl_addmm(nanb, a2, b2, 0.0, 1.0);
    CHECK_VALUES(r0, ref, 1e-5);

    /* integer and half-precision products */
    ddpl_tensor *ia = t_from(2, (int64_t[]){2, 2}, (double[]){1, 2, 3, 4}, DDPL_INT64);
    ddpl_tensor *ib = t_from(2, (int64_t[]){2, 2}, (double[]){5, 6, 7, 8}, DDPL_INT64);
    ddpl_tensor *ic = ddpl_matmul(ia, ib);
    CHECK(ic && ddpl_tensor_dtype(ic) == DDPL_INT64);
    CHECK_VALUES(ic, ((double[]){19, 22, 43, 50}), 0);
    ddpl_tensor *ha = ddpl_to(ia, DDPL_FLOAT16, ddpl_cpu()),
                *hb = ddpl_to(ib, DDPL_BFLOAT16, ddpl_cpu());
    ddpl_tensor *hb16 = ddpl_to(ib, DDPL_FLOAT16, ddpl_cpu());
    ddpl_tensor *hc = ddpl_matmul(ha, hb16);
    CHECK(hc && ddpl_tensor_dtype(hc) == DDPL_FLOAT16);
    CHECK_VALUES(hc, ((double[]){19, 22, 43, 50}), 0);
    ddpl_tensor *ha2 = ddpl_to(ia, DDPL_BFLOAT16, ddpl_cpu());
    ddpl_tensor *bc = ddpl_matmul(ha2, hb);
    CHECK_VALUES(bc, ((double[]){19, 22, 43, 50}), 0);

    /* empty inner dimension: the product is zeros */
    ddpl_tensor *e1 = ddpl_empty(2, (int64_t[]){3, 0}, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *e2 = ddpl_empty(2, (int64_t[]){0, 2}, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *ez = ddpl_mm(e1, e2);
    CHECK_VALUES(ez, ((double[]){0, 0, 0, 0, 0, 0}), 0);
    free(av);
    free(bv);
    RELEASE(a, b, c, a2, b2, bias, r, nanb, r0, ia, ib, ic, ha, hb, hb16, hc, ha2, bc, e1, e2, ez);
}

/* ---- gradient checks ---- */
static ddpl_tensor *f_mm(ddpl_tensor **in, void *ctx)
{
    return ddpl_mm(in[0], in[1]);
}
static ddpl_tensor *f_bmm(ddpl_tensor **in, void *ctx)
{
    return ddpl_bmm(in[0], in[1]);
}
static ddpl_tensor *f_matmul(ddpl_tensor **in, void *ctx)
{
    return ddpl_matmul(in[0], in[1]);
}
static ddpl_tensor *f_addmm(ddpl_tensor **in, void *ctx)
{
    return ddpl_addmm(in[2], in[0], in[1], 0.7, -1.3);
}
/* transposed operands: the backward products see transposed views too */
static ddpl_tensor *f_mm_t(ddpl_tensor **in, void *ctx)
{
    ddpl_tensor *a = ddpl_t(in[0]), *b = ddpl_t(in[1]);
    ddpl_tensor *r = ddpl_mm(a, b);
    RELEASE(a, b);
    return r;
}

static void gc2(const char *name, gradcheck_fn f, int na, const int64_t *sa, int nb,
                const int64_t *sb)
{
    ddpl_tensor *in[2] = {gc_input(na, sa, 1, 0), gc_input(nb, sb, 1, 0)};
    CHECK(gradcheck(name, f, 2, in, NULL, 1e-6, 1e-7, 1e-6));
    RELEASE(in[0], in[1]);
}

static void test_gradients(void)
{
    gc2("mm", f_mm, 2, (int64_t[]){3, 4}, 2, (int64_t[]){4, 2});
    gc2("mm transposed", f_mm_t, 2, (int64_t[]){3, 4}, 2, (int64_t[]){2, 3});
    gc2("bmm", f_bmm, 3, (int64_t[]){2, 3, 4}, 3, (int64_t[]){2, 4, 2});
    gc2("matmul dot", f_matmul, 1, (int64_t[]){4}, 1, (int64_t[]){4});
    gc2("matmul mv", f_matmul, 2, (int64_t[]){3, 4}, 1, (int64_t[]){4});
    gc2("matmul vm", f_matmul, 1, (int64_t[]){3}, 2, (int64_t[]){3, 2});
    gc2("matmul folded", f_matmul, 3, (int64_t[]){2, 3, 4}, 2, (int64_t[]){4, 2});
    gc2("matmul broadcast", f_matmul, 4, (int64_t[]){2, 1, 3, 4}, 3, (int64_t[]){3, 4, 2});
    gc2("matmul 2-D @ batched", f_matmul, 2, (int64_t[]){3, 4}, 3, (int64_t[]){2, 4, 2});
    gc2("matmul 1-D @ batched", f_matmul, 1, (int64_t[]){4}, 3, (int64_t[]){2, 4, 2});
    ddpl_tensor *in[3] = {gc_input(2, (int64_t[]){3, 4}, 1, 0),
                          gc_input(2, (int64_t[]){4, 2}, 1, 0), gc_input(1, (int64_t[]){2}, 1, 0)};
    CHECK(gradcheck("addmm", f_addmm, 3, in, NULL, 1e-6, 1e-7, 1e-6));
    RELEASE(in[0], in[1], in[2]);
}

static void test_errors(void)
{
    ddpl_tensor *a = ddpl_zeros(2, (int64_t[]){2, 3}, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *b = ddpl_zeros(2, (int64_t[]){4, 5}, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *d = ddpl_zeros(2, (int64_t[]){3, 5}, DDPL_FLOAT64, ddpl_cpu());
    ddpl_tensor *s = ddpl_scalar(1, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *bl = ddpl_zeros(2, (int64_t[]){3, 3}, DDPL_BOOL, ddpl_cpu());
    ddpl_tensor *b3 = ddpl_zeros(3, (int64_t[]){2, 4, 5}, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *bias = ddpl_zeros(1, (int64_t[]){4}, DDPL_FLOAT32, ddpl_cpu());
    CHECK_ERROR(ddpl_matmul(a, b) == NULL, "matmul: shapes [2,3] and [4,5] do not match", "");
    CHECK_ERROR(ddpl_mm(a, b) == NULL, "mm:", "[2,3] and [4,5]");
    CHECK_ERROR(ddpl_matmul(a, d) == NULL, "matmul:", "float64");
    CHECK_ERROR(ddpl_matmul(a, s) == NULL, "matmul:", "at least 1-D");
    CHECK_ERROR(ddpl_matmul(bl, bl) == NULL, "matmul:", "bool");
    CHECK_ERROR(ddpl_bmm(a, b3) == NULL, "bmm:", "[2,3]");
    CHECK_ERROR(ddpl_matmul(b3, b3) == NULL, "matmul:", "[2,4,5]");
    ddpl_tensor *a35 = ddpl_zeros(2, (int64_t[]){3, 5}, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *b55 = ddpl_zeros(2, (int64_t[]){5, 5}, DDPL_FLOAT32, ddpl_cpu());
    CHECK_ERROR(ddpl_addmm(bias, a35, b55, 1, 1) == NULL, "addmm:", "[4]");
    RELEASE(a, b, d, s, bl, b3, bias, a35, b55);
}

int main(void)
{
    ddpl_manual_seed(42);
    test_mm_layouts(DDPL_FLOAT32, 1e-5);
    test_mm_layouts(DDPL_FLOAT64, 1e-12);
    test_large_products();
    test_matmul_ranks();
    test_bmm_addmm_dtypes();
    test_gradients();
    test_errors();
    CHECK(ddpl_memory_allocated(DDPL_CPU) == 0); /* everything released */
    return check_finish();
}
