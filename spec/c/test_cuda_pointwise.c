/* spec/c/test_cuda_pointwise.c: the host-side parts of the elementwise CUDA kernels, which run
 * without a GPU: the collapsed operand geometry (cuda/cuda_pointwise.h) against direct stride
 * arithmetic over broadcast, transposed, sliced and 0-dim operands, and the Philox block
 * function (core/philox.h) against the published known answer, with the CUDA random kernels'
 * element layout against the CPU rand/randn kernels, element for element. */
#include <string.h>

#include "check.h"
#include "core/core.h"
#include "core/philox.h"
#include "cuda/cuda_pointwise.h"

/* Offset of out index i in an operand (nd, sizes, strides) right-aligned to out's shape. */
static int64_t naive_offset(int ond, const int64_t *osz, int nd, const int64_t *sz,
                            const int64_t *st, int64_t i)
{
    int64_t off = 0;
    for (int d = ond - 1; d >= 0; d--) {
        int64_t c = i % osz[d];
        i /= osz[d];
        int td = d - (ond - nd);
        if (td >= 0 && sz[td] != 1) off += c * st[td];
    }
    return off;
}

typedef struct {
    int nd;
    int64_t sz[DDPL_MAX_DIMS], st[DDPL_MAX_DIMS];
} operand;

/* Builds the geometry for ops[0] (output) .. ops[nops-1] and checks every element's offset. */
static int geometry_matches(int nops, const operand *ops, int want_ndim, int want_flat)
{
    int nd[CUDA_PW_MAX_OPS];
    const int64_t *sz[CUDA_PW_MAX_OPS], *st[CUDA_PW_MAX_OPS];
    for (int k = 0; k < nops; k++) {
        nd[k] = ops[k].nd;
        sz[k] = ops[k].sz;
        st[k] = ops[k].st;
    }
    cuda_pw_geom g = {0};
    cuda_pw_geom_init(&g, nops, ops[0].nd, ops[0].sz, nd, sz, st);
    int64_t n = 1;
    for (int d = 0; d < ops[0].nd; d++) n *= ops[0].sz[d];
    int ok = g.n == n && g.ndim >= 1;
    if (want_ndim > 0 && g.ndim != want_ndim) {
        fprintf(stderr, "collapsed to %d dims, expected %d\n", g.ndim, want_ndim);
        ok = 0;
    }
    if (want_flat >= 0 && cuda_pw_geom_is_flat(&g) != (want_flat != 0)) ok = 0;
    for (int k = 0; ok && k < nops; k++)
        for (int64_t i = 0; i < n; i++)
            if (cuda_pw_geom_offset(&g, k, i) !=
                naive_offset(ops[0].nd, ops[0].sz, ops[k].nd, ops[k].sz, ops[k].st, i)) {
                fprintf(stderr, "operand %d element %lld: offset differs\n", k, (long long)i);
                ok = 0;
                break;
            }
    return ok;
}

static void test_geometry(void)
{
    /* all contiguous (2,3,4): flat */
    operand c = {3, {2, 3, 4}, {12, 4, 1}};
    CHECK(geometry_matches(3, (operand[]){c, c, c}, 1, 1));
    /* row broadcast (4) and column broadcast (3,1) against (3,4) */
    operand o = {2, {3, 4}, {4, 1}}, row = {1, {4}, {1}}, col = {2, {3, 1}, {1, 1}};
    CHECK(geometry_matches(3, (operand[]){o, row, col}, 2, 0));
    /* a 0-dim scalar against (2,3,4): one dim, stride 0 for the scalar */
    operand s = {0, {0}, {0}};
    CHECK(geometry_matches(2, (operand[]){c, s}, 1, 0));
    /* transposed input (4,3) viewed as (3,4) */
    operand t = {2, {3, 4}, {1, 3}};
    CHECK(geometry_matches(2, (operand[]){o, t}, 2, 0));
    /* a slice: every other column of a (3,8) buffer merges to one dim of stride 2; every other
     * column of a (3,9) buffer does not; size-1 dims in the middle are dropped */
    operand sl = {2, {3, 4}, {8, 2}}, sl9 = {2, {3, 4}, {9, 2}};
    CHECK(geometry_matches(2, (operand[]){o, sl}, 1, 0));
    CHECK(geometry_matches(2, (operand[]){o, sl9}, 2, 0));
    operand o5 = {5, {2, 1, 3, 1, 4}, {12, 12, 4, 4, 1}};
    operand i5 = {5, {2, 1, 3, 1, 4}, {12, 7, 4, 9, 1}};
    CHECK(geometry_matches(2, (operand[]){o5, i5}, 1, 1));
    /* a single element (0-dim output) */
    CHECK(geometry_matches(2, (operand[]){s, s}, 1, 1));
    /* where: cond (3,1), x (4), y (3,4) transposed */
    CHECK(geometry_matches(4, (operand[]){o, col, row, t}, 2, 0));
    /* inner dims merge, the broadcast outer dim stays: (5,2,3) + (2,3) */
    operand o3 = {3, {5, 2, 3}, {6, 3, 1}}, b2 = {2, {2, 3}, {3, 1}};
    CHECK(geometry_matches(3, (operand[]){o3, o3, b2}, 2, 0));

    /* 32-bit index math: fits for small operands, not past 2^31 elements or offsets */
    cuda_pw_geom g = {.ndim = 1, .nops = 2, .n = 1000, .sizes = {1000}, .strides = {{1}, {3}}};
    CHECK(cuda_pw_geom_fits_i32(&g));
    g.strides[1][0] = (int64_t)1 << 22; /* offsets up to 999 * 2^22 > 2^31 */
    CHECK(!cuda_pw_geom_fits_i32(&g));
    g.strides[1][0] = 1;
    g.n = g.sizes[0] = (int64_t)1 << 31;
    CHECK(!cuda_pw_geom_fits_i32(&g));
}

/* Random123's known-answer vector for Philox4x32-10 with counter and key zero (kat_vectors). */
static void test_philox(void)
{
    const uint32_t want[4] = {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u};
    uint32_t got[4];
    ddpl_philox4x32(0, 0, got);
    CHECK(memcmp(want, got, sizeof want) == 0);
}

/* rand/randn right after manual_seed draw (seed, offset 0): the CUDA kernels' element
 * formula must give the CPU tensor exactly. */
static void check_random(ddpl_dtype dt, bool normal, int64_t n)
{
    const uint64_t seed = 1234;
    ddpl_manual_seed(seed);
    ddpl_tensor *t = normal ? ddpl_randn(1, &n, dt, ddpl_cpu()) : ddpl_rand(1, &n, dt, ddpl_cpu());
    CHECK(t != NULL);
    if (!t) return;
    double *got = malloc((size_t)n * sizeof *got);
    CHECK(ddpl_tensor_to_doubles(t, got) == 0);
    int bad = 0;
    for (int64_t i = 0; i < n && !bad; i++) {
        uint32_t u[4];
        double v;
        if (normal) {
            ddpl_philox4x32(seed, (uint64_t)i / 2, u);
            int w = (int)(i % 2) * 2;
            v = ddpl_philox_normal(u[w], u[w + 1], 0.0, 1.0);
        } else {
            ddpl_philox4x32(seed, (uint64_t)i / 4, u);
            v = ddpl_philox_uniform(u[i % 4], 0.0, 1.0, dt == DDPL_FLOAT64, dt == DDPL_FLOAT32);
        }
        double want = dt == DDPL_FLOAT32 ? (double)(float)v : v;
        if (got[i] != want) {
            fprintf(stderr, "%s %s element %lld: cpu %.17g, cuda formula %.17g\n",
                    normal ? "randn" : "rand", ddpl_dtype_name(dt), (long long)i, got[i], want);
            bad = 1;
        }
    }
    CHECK(!bad);
    free(got);
    ddpl_tensor_release(t);
}

static void test_random(void)
{
    check_random(DDPL_FLOAT32, false, 1001);
    check_random(DDPL_FLOAT64, false, 1001);
    check_random(DDPL_FLOAT32, true, 1001);
    check_random(DDPL_FLOAT64, true, 999);
    /* the upper bound is excluded even where float32 rounding reaches it */
    double v = ddpl_philox_uniform(0xFFFFFFFFu, 0.0, 1.0, 0, 1);
    CHECK((float)v < 1.0f);
}

int main(void)
{
    test_geometry();
    test_philox();
    test_random();
    return check_finish();
}
