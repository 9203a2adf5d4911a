/* spec/c/test_autocast.c: the autocast C API (ops/autocast.h) that ops and other helpers call:
 * state set/restore per device type, the lower and float32 casting policies (float64 and
 * integers untouched, casts recorded by autograd), the n-ary helpers, and the float32 matmul
 * precision switch. */
#include "core/matmul_precision.h"
#include "ops/autocast.h"
#include "ref_util.h"

static void test_state(void)
{
    CHECK(!ddpl_autocast_enabled(DDPL_CPU) && !ddpl_autocast_enabled(DDPL_CUDA));
    CHECK(ddpl_autocast_dtype(DDPL_CUDA) == DDPL_BFLOAT16);
    ddpl_autocast_state prev, inner;
    CHECK(ddpl_autocast_set(DDPL_CUDA, (ddpl_autocast_state){true, DDPL_FLOAT16}, &prev) == 0);
    CHECK(!prev.enabled && ddpl_autocast_enabled(DDPL_CUDA) && !ddpl_autocast_enabled(DDPL_CPU));
    CHECK(ddpl_autocast_dtype(DDPL_CUDA) == DDPL_FLOAT16);
    CHECK(ddpl_autocast_set(DDPL_CUDA, (ddpl_autocast_state){false, DDPL_BFLOAT16}, &inner) == 0);
    CHECK(inner.enabled && inner.dtype == DDPL_FLOAT16);
    CHECK(ddpl_autocast_set(DDPL_CUDA, inner, NULL) == 0);
    CHECK(ddpl_autocast_set(DDPL_CUDA, prev, NULL) == 0);
    CHECK(!ddpl_autocast_enabled(DDPL_CUDA));
    /* float16 on the CPU too (PyTorch 1.13 refuses it there) */
    CHECK(ddpl_autocast_set(DDPL_CPU, (ddpl_autocast_state){true, DDPL_FLOAT16}, &prev) == 0);
    CHECK(ddpl_autocast_enabled(DDPL_CPU) && ddpl_autocast_dtype(DDPL_CPU) == DDPL_FLOAT16);
    CHECK(ddpl_autocast_set(DDPL_CPU, prev, NULL) == 0);
    CHECK_ERROR(ddpl_autocast_set(DDPL_CUDA, (ddpl_autocast_state){true, DDPL_FLOAT32}, NULL) < 0,
                "autocast:", "float32");
    CHECK(!ddpl_autocast_enabled(DDPL_CPU));
}

static void test_policies(void)
{
    int64_t s[2] = {2, 3};
    ddpl_tensor *f32 = t_rand(2, s, DDPL_FLOAT32), *f64 = t_rand(2, s, DDPL_FLOAT64);
    ddpl_tensor *i64 = ddpl_zeros(2, s, DDPL_INT64, ddpl_cpu());
    ddpl_tensor *h16 = ddpl_to(f32, DDPL_FLOAT16, ddpl_cpu());
    ddpl_tensor_set_requires_grad(f32, true);

    /* off: everything passes through retained */
    ddpl_tensor *r = ddpl_autocast_lower(f32);
    CHECK(r == f32);
    ddpl_tensor_release(r);
    r = ddpl_autocast_upcast(h16);
    CHECK(r == h16);
    ddpl_tensor_release(r);

    CHECK(ddpl_autocast_set(DDPL_CPU, (ddpl_autocast_state){true, DDPL_BFLOAT16}, NULL) == 0);
    ddpl_tensor *lo[4];
    CHECK(ddpl_autocast_lower_n(4, (ddpl_tensor *[]){f32, f64, i64, NULL}, lo) == 0);
    CHECK(ddpl_tensor_dtype(lo[0]) == DDPL_BFLOAT16);
    CHECK(lo[1] == f64 && lo[2] == i64 && lo[3] == NULL);
    r = ddpl_autocast_lower(h16); /* the other 16-bit dtype is cast too, as PyTorch does */
    CHECK(ddpl_tensor_dtype(r) == DDPL_BFLOAT16);
    ddpl_tensor_release(r);
    ddpl_tensor *up[2];
    CHECK(ddpl_autocast_upcast_n(2, (ddpl_tensor *[]){lo[0], f64}, up) == 0);
    CHECK(ddpl_tensor_dtype(up[0]) == DDPL_FLOAT32 && up[1] == f64);
    CHECK(ddpl_autocast_set(DDPL_CPU, (ddpl_autocast_state){false, DDPL_BFLOAT16}, NULL) == 0);

    /* the casts are recorded: the gradient reaches the float32 leaf in float32 */
    ddpl_tensor *loss = ddpl_sum(up[0]);
    CHECK(loss && ddpl_backward(loss, NULL, false) == 0);
    ddpl_tensor *g = ddpl_tensor_grad(f32);
    CHECK(g && ddpl_tensor_dtype(g) == DDPL_FLOAT32);
    ddpl_autocast_release_n(4, lo);
    ddpl_autocast_release_n(2, up);
    RELEASE(loss, f32, f64, i64, h16);
}

/* The cast cache: inside a region a float32 leaf parameter is cast once (the same tensor comes
 * back), cast again after an in-place write, never cached outside a region, for non-leaves, with
 * the cache off or under no_grad; the outermost region's end empties it; and the gradient of a
 * parameter used twice through one cached cast is the sum of both uses. */
static void test_cast_cache(void)
{
    int64_t s[2] = {3, 4};
    ddpl_tensor *w = t_rand(2, s, DDPL_FLOAT32), *x = t_rand(2, s, DDPL_FLOAT32);
    ddpl_tensor_set_requires_grad(w, true);
    ddpl_tensor *nonleaf = ddpl_mul(w, x);
    ddpl_autocast_state prev;
    CHECK(ddpl_autocast_set(DDPL_CPU, (ddpl_autocast_state){true, DDPL_BFLOAT16}, &prev) == 0);

    /* enabled state alone (no region: the C API without the binding) caches nothing */
    ddpl_tensor *a = ddpl_autocast_lower(w), *b = ddpl_autocast_lower(w);
    CHECK(a != b && ddpl_autocast_cache_size() == 0);
    RELEASE(a, b);

    bool outer = ddpl_autocast_enter(true);
    a = ddpl_autocast_lower(w);
    b = ddpl_autocast_lower(w);
    CHECK(a == b && ddpl_autocast_cache_size() == 1);
    ddpl_tensor *c = ddpl_autocast_lower(nonleaf), *d = ddpl_autocast_lower(x);
    CHECK(ddpl_autocast_cache_size() == 1); /* a non-leaf, and a tensor without grad: not kept */
    RELEASE(c, d);
    bool grad = ddpl_set_grad_enabled(false);
    c = ddpl_autocast_lower(w);
    CHECK(c != a && ddpl_autocast_cache_size() == 1);
    ddpl_tensor_release(c);
    ddpl_set_grad_enabled(grad);

    /* a nested region with the cache off casts anew and keeps the outer entries */
    bool inner = ddpl_autocast_enter(false);
    c = ddpl_autocast_lower(w);
    CHECK(c != a && ddpl_autocast_cache_size() == 1);
    ddpl_tensor_release(c);
    ddpl_autocast_leave(inner);
    CHECK(ddpl_autocast_cache_size() == 1);

    /* both uses reach w's gradient through the one cast */
    ddpl_tensor *sa = ddpl_sum(a), *sb = ddpl_sum(b), *loss = ddpl_add(sa, sb);
    CHECK(loss && ddpl_backward(loss, NULL, false) == 0);
    ddpl_tensor *g = ddpl_tensor_grad(w);
    double *gv = g ? t_vals(g) : NULL;
    bool all_two = gv != NULL;
    for (int i = 0; gv && i < 12; i++) all_two = all_two && gv[i] == 2.0;
    CHECK(all_two);
    free(gv);

    /* an in-place write moves the version: the next lower casts the new values */
    bool g2 = ddpl_set_grad_enabled(false);
    CHECK(ddpl_fill_(w, 0.5) == 0);
    ddpl_set_grad_enabled(g2);
    c = ddpl_autocast_lower(w);
    double *cv = c ? t_vals(c) : NULL;
    CHECK(c && c != a && cv && cv[0] == 0.5 && ddpl_autocast_cache_size() == 1);
    free(cv);
    ddpl_autocast_leave(outer);
    CHECK(ddpl_autocast_cache_size() == 0);
    CHECK(ddpl_autocast_set(DDPL_CPU, prev, NULL) == 0);
    RELEASE(a, b, c, sa, sb, loss, nonleaf, w, x);
}

static void test_precision(void)
{
    CHECK(strcmp(ddpl_get_float32_matmul_precision(), "highest") == 0 && !ddpl_allow_tf32());
    CHECK(ddpl_set_float32_matmul_precision("high") == 0 && ddpl_allow_tf32());
    CHECK(ddpl_set_float32_matmul_precision("medium") == 0 && ddpl_allow_tf32());
    CHECK_ERROR(ddpl_set_float32_matmul_precision("low") < 0,
                "set_float32_matmul_precision:", "'low'");
    CHECK(strcmp(ddpl_get_float32_matmul_precision(), "medium") == 0);
    CHECK(ddpl_set_float32_matmul_precision("highest") == 0 && !ddpl_allow_tf32());
}

int main(void)
{
    ddpl_manual_seed(5);
    test_state();
    test_policies();
    test_cast_cache();
    test_precision();
    CHECK(ddpl_memory_allocated(DDPL_CPU) == 0); /* everything released */
    return check_finish();
}
