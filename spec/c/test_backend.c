/* spec/c/test_backend.c: the backend registry of ops/dispatch.h: a device type without a
 * backend gives a clear error, supports_op answers from the table, and a backend registered from
 * here (a fake "cuda" over host memory, in builds with and without CUDA) starts once on first
 * use, provides the memory, runs its kernels under its device guard and reports what it lacks.
 * defines: main. */
#include "check.h"
#include "ops/dispatch.h"
#include "kernel_abi/kernel_params.h"

static bool has(const char *s, const char *part)
{
    return s && strstr(s, part) != NULL;
}

/* ---- the fake backend: host memory, one kernel, two devices with a current one ---- */

static int starts, fills, current = 0, switches;

static void *fake_alloc(size_t nbytes, ddpl_device dev)
{
    return ddpl_host_allocator.alloc(nbytes, dev);
}

static void fake_free(void *p, size_t nbytes, ddpl_device dev)
{
    ddpl_host_allocator.free(p, nbytes, dev);
}

static int fake_copy(void *dst, ddpl_device dd, const void *src, ddpl_device sd, size_t n)
{
    memcpy(dst, src, n);
    return 0;
}

static const ddpl_allocator fake_allocator = {fake_alloc, fake_free, fake_copy};

/* out float32; records the device it ran on in the values (value + 10 * current device) */
static int fake_fill(ddpl_tensor **out, ddpl_tensor **in, const void *params)
{
    const ddpl_fill_params *p = params;
    float *d = ddpl_tensor_data(out[0]);
    for (int64_t i = 0; i < ddpl_tensor_numel(out[0]); i++) d[i] = (float)(p->value + 10 * current);
    fills++;
    return 0;
}

static int fake_start(void)
{
    starts++;
    return 0;
}

static int fake_current_device(void)
{
    return current;
}

static int fake_set_device(int index)
{
    current = index;
    switches++;
    return 0;
}

static const struct ddpl_backend fake = {
    .name = "fake",
    .kernels = {[DDPL_OP_FILL] = fake_fill},
    .allocator = &fake_allocator,
    .start = fake_start,
    .current_device = fake_current_device,
    .set_device = fake_set_device,
};

int main(void)
{
    ddpl_device cpu = ddpl_cpu(), cuda0 = {DDPL_CUDA, 0}, cuda1 = {DDPL_CUDA, 1};
    int64_t n3[1] = {3};

    /* the CPU backend answers supports_op from its table */
    CHECK(ddpl_backend_supports(cpu, DDPL_OP_FILL));
    CHECK(ddpl_backend_supports(cpu, DDPL_OP_ATTENTION));

    /* gemm_native: float32/64 natively, float16 widened, bfloat16 natively with AVX512-BF16
     * (DDPLUA_CPU_BF16_GEMM=0 forces widening) */
    CHECK(ddpl_backend_gemm_native(cpu, DDPL_FLOAT32) &&
          ddpl_backend_gemm_native(cpu, DDPL_FLOAT64));
    CHECK(!ddpl_backend_gemm_native(cpu, DDPL_FLOAT16));
    const char *bf16_env = getenv("DDPLUA_CPU_BF16_GEMM");
    if (bf16_env && strcmp(bf16_env, "0") == 0)
        CHECK(!ddpl_backend_gemm_native(cpu, DDPL_BFLOAT16));

    /* without a GPU, CUDA (built in or not) is refused with a clear error */
    if (!ddpl_cuda_is_available()) {
        CHECK(!ddpl_zeros(1, n3, DDPL_FLOAT32, cuda0) && has(ddpl_last_error(), "not available"));
        CHECK(!ddpl_backend_supports(cuda0, DDPL_OP_FILL));
    }

    /* no backend registered for a device type */
    ddpl_backend_register(DDPL_CUDA, NULL);
    CHECK(ddpl_backend_find(DDPL_CUDA) == NULL);
    CHECK(!ddpl_zeros(1, n3, DDPL_FLOAT32, cuda0));
    CHECK(
        has(ddpl_last_error(), "device cuda:0 is not available in this build or on this machine"));
    ddpl_tensor *host = ddpl_zeros(1, n3, DDPL_FLOAT32, cpu);
    ddpl_fill_params p = {1};
    CHECK(ddpl_run_kernel(DDPL_OP_FILL, cuda0, &host, NULL, &p) < 0);
    CHECK(has(ddpl_last_error(), "fill: device cuda:0 is not available"));
    CHECK(ddpl_backend_start(cuda0) < 0 && has(ddpl_last_error(), "not available"));
    CHECK(!ddpl_backend_supports(cuda0, DDPL_OP_FILL));
    ddpl_tensor_release(host);

    /* a registered backend starts on first use, once, and runs its kernels */
    ddpl_backend_register(DDPL_CUDA, &fake);
    CHECK(ddpl_backend_find(DDPL_CUDA) == &fake && !ddpl_backend_started(DDPL_CUDA));
    CHECK(starts == 0);
    ddpl_tensor *t = ddpl_full(1, n3, 2.0, DDPL_FLOAT32, cuda0);
    CHECK(t && starts == 1 && fills == 1 && ddpl_backend_started(DDPL_CUDA) == &fake);
    double v[3] = {0};
    CHECK(t && ddpl_tensor_to_doubles(t, v) == 0 && v[0] == 2 && v[2] == 2);
    CHECK(ddpl_memory_allocated(DDPL_CUDA) == 3 * 4);
    CHECK(ddpl_backend_supports(cuda0, DDPL_OP_FILL) && !ddpl_backend_supports(cuda0, DDPL_OP_ADD));
    /* a table without gemm_native multiplies every dtype natively */
    CHECK(ddpl_backend_gemm_native(cuda0, DDPL_BFLOAT16) &&
          ddpl_backend_gemm_native(cuda0, DDPL_FLOAT16));

    /* what the table lacks is reported, not crashed on */
    CHECK(t && !ddpl_add(t, t) && has(ddpl_last_error(), "add: not supported on device cuda:0"));

    /* the device guard: a kernel for cuda:1 runs with cuda:1 current, then cuda:0 again */
    ddpl_tensor *u = ddpl_full(1, n3, 1.0, DDPL_FLOAT32, cuda1);
    CHECK(u && ddpl_tensor_to_doubles(u, v) == 0 && v[1] == 11);
    CHECK(current == 0 && switches == 2 && starts == 1);
    ddpl_tensor_release(t);
    ddpl_tensor_release(u);
    CHECK(ddpl_memory_allocated(DDPL_CUDA) == 0);
    return check_finish();
}
