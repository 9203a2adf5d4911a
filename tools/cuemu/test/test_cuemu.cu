/* tools/cuemu/test/test_cuemu.cu: the emulation's own semantics, in CUDA source that goes through
 * tools/cuemu/rewrite.lua like the engine's kernels: barriers (and that a missing one is caught),
 * warp shuffles with their width and mask rules, shared memory (static, dynamic, the opt-in
 * attribute), atomics, launch errors as the real runtime reports them, __launch_bounds__,
 * threads that exit before a barrier, hangs and bad shuffles reported, the seeded schedule,
 * device memory budget and copy checks, streams, events and devices. Prints
 * 'N passed, M failed'. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuemu_check.h"

/* Runs fn in a child process; true when it aborted with `needle` in its stderr. */
static bool aborts_with(void (*fn)(void), const char *needle, const char *env = NULL)
{
    int fd[2];
    if (pipe(fd) != 0) return false;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        if (env) putenv((char *)env);
        fn();
        _exit(0);
    }
    close(fd[1]);
    char buf[4096];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)r;
    buf[n] = '\0';
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    bool ok = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(buf, needle);
    if (!ok) printf("  (child status %d, stderr: %s)\n", status, buf);
    return ok;
}

/* ---- barriers ---- */

/* out[block] = sum of x; the classic warp-shuffle + shared-memory block reduction */
__global__ void block_sum_kernel(const float *x, float *out, int n, bool with_barrier)
{
    __shared__ float part[32];
    float v = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) v += x[i];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    if (with_barrier) __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0) out[blockIdx.x] = v;
    }
}

static float *device_floats(int n, float fill)
{
    float *h = (float *)malloc(sizeof(float) * n), *d = NULL;
    for (int i = 0; i < n; i++) h[i] = fill;
    cudaMalloc((void **)&d, sizeof(float) * n);
    cudaMemcpy(d, h, sizeof(float) * n, cudaMemcpyHostToDevice);
    free(h);
    return d;
}

static void test_barriers()
{
    float *x = device_floats(1000, 1.f), *out = device_floats(2, 0.f), h[2];
    block_sum_kernel<<<2, 256>>>(x, out, 1000, true);
    CHECK(cudaGetLastError() == cudaSuccess, "block_sum launch");
    cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
    CHECK(h[0] == 1000.f && h[1] == 1000.f, "block sum with the barrier: %g %g", h[0], h[1]);
    block_sum_kernel<<<2, 256>>>(x, out, 1000, false);
    cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
    CHECK(h[0] != 1000.f, "without the barrier the block sum must go wrong, got %g", h[0]);
    cudaFree(x);
    cudaFree(out);
}

/* threads that return early leave the barrier (sm_70+): the others are not stuck */
__global__ void early_exit_kernel(int *out)
{
    __shared__ int s[64];
    if (threadIdx.x >= 40) return;
    s[threadIdx.x] = (int)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = s[39 - threadIdx.x];
}

static void test_early_exit()
{
    int *d, h[40];
    cudaMalloc((void **)&d, sizeof h);
    early_exit_kernel<<<1, 64>>>(d);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    bool ok = true;
    for (int i = 0; i < 40; i++) ok = ok && h[i] == 39 - i;
    CHECK(ok, "exited threads must leave the barrier");
    cudaFree(d);
}

/* ---- shuffles ---- */

__global__ void shuffle_kernel(int *out)
{
    int lane = (int)threadIdx.x;
    out[0 * 32 + lane] = __shfl_down_sync(0xffffffffu, lane * 10, 3);
    out[1 * 32 + lane] = __shfl_up_sync(0xffffffffu, lane * 10, 2, 16);
    out[2 * 32 + lane] = __shfl_sync(0xffffffffu, lane * 10, 5, 8);
    out[3 * 32 + lane] = __shfl_xor_sync(0xffffffffu, lane * 10, 1);
    double d = __shfl_sync(0xffffffffu, lane + 0.5, 31);
    out[4 * 32 + lane] = (int)(d * 2);
}

static void test_shuffles()
{
    int *d, h[5 * 32];
    cudaMalloc((void **)&d, sizeof h);
    shuffle_kernel<<<1, 32>>>(d);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    bool down = true, up = true, idx = true, xr = true, dbl = true;
    for (int l = 0; l < 32; l++) {
        down = down && h[l] == (l + 3 < 32 ? l + 3 : l) * 10;
        up = up && h[32 + l] == (l % 16 >= 2 ? l - 2 : l) * 10;
        idx = idx && h[64 + l] == (l / 8 * 8 + 5) * 10;
        xr = xr && h[96 + l] == (l ^ 1) * 10;
        dbl = dbl && h[128 + l] == 63;
    }
    CHECK(down, "__shfl_down_sync keeps the lanes past the end");
    CHECK(up, "__shfl_up_sync within width 16");
    CHECK(idx, "__shfl_sync with width 8 reads within each segment");
    CHECK(xr, "__shfl_xor_sync");
    CHECK(dbl, "__shfl_sync of a double");
    cudaFree(d);
}

__global__ void half_warp_shuffle_kernel(int *out)
{
    int v = (int)threadIdx.x;
    if (threadIdx.x < 16) v = __shfl_xor_sync(0xffffffffu, v, 1); /* lanes 16-31 never come */
    out[threadIdx.x] = v;
}

static void run_half_warp_shuffle()
{
    int *d;
    cudaMalloc((void **)&d, 32 * sizeof(int));
    half_warp_shuffle_kernel<<<1, 32>>>(d);
}

__global__ void barrier_vs_shuffle_kernel(int *out)
{
    if (threadIdx.x == 0)
        __syncthreads(); /* waits for thread 1, which waits for thread 0 */
    else
        out[0] = __shfl_sync(0x3u, 1, 0);
}

static void run_barrier_vs_shuffle()
{
    int *d;
    cudaMalloc((void **)&d, sizeof(int));
    barrier_vs_shuffle_kernel<<<1, 2>>>(d);
}

__global__ void partial_warp_shuffle_kernel(int *out)
{
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
}

static void run_partial_warp_shuffle()
{
    int *d;
    cudaMalloc((void **)&d, 48 * sizeof(int));
    partial_warp_shuffle_kernel<<<1, 48>>>(d); /* the second warp has 16 lanes */
}

static void test_kernel_bugs_reported()
{
    CHECK(aborts_with(run_half_warp_shuffle, "has exited"), "a shuffle naming exited lanes");
    CHECK(aborts_with(run_barrier_vs_shuffle, "hangs"), "a barrier nobody else reaches");
    CHECK(aborts_with(run_partial_warp_shuffle, "does not exist"),
          "a full-mask shuffle in a partial warp");
}

/* ---- shared memory ---- */

__global__ void dynamic_smem_kernel(int *out, int n)
{
    extern __shared__ __align__(16) unsigned char smem[];
    int *s = (int *)smem;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = i * 3;
    __syncthreads();
    int acc = 0;
    for (int i = 0; i < n; i++) acc += s[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

__global__ void poisoned_smem_kernel(float *out)
{
    __shared__ float s[4];
    out[blockIdx.x] = s[blockIdx.x % 4]; /* never written: the poison shows */
    if (threadIdx.x == 0) s[blockIdx.x % 4] = 1.f;
}

static void test_shared_memory()
{
    int *d, h[64];
    cudaMalloc((void **)&d, sizeof h);
    int n = 20000; /* 80000 bytes: above the 48 KiB default */
    dynamic_smem_kernel<<<2, 32, n * sizeof(int)>>>(d, n);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue, "64+ KiB of dynamic shared memory needs "
                                                       "the opt-in attribute");
    CHECK(cudaFuncSetAttribute((const void *)dynamic_smem_kernel,
                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                               300000) == cudaErrorInvalidValue,
          "the attribute is capped at the device's opt-in limit");
    cudaGetLastError();
    CHECK(cudaFuncSetAttribute((const void *)dynamic_smem_kernel,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, n * 4) == cudaSuccess,
          "opt-in");
    dynamic_smem_kernel<<<2, 32, n * sizeof(int)>>>(d, n);
    CHECK(cudaGetLastError() == cudaSuccess, "launch after the opt-in");
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    long long want = 3LL * n * (n - 1) / 2;
    CHECK(h[0] == (int)want && h[63] == (int)want, "dynamic shared memory sums: %d", h[0]);

    float *f, hf[8];
    cudaMalloc((void **)&f, sizeof hf);
    poisoned_smem_kernel<<<8, 1>>>(f);
    cudaMemcpy(hf, f, sizeof hf, cudaMemcpyDeviceToHost);
    bool all_nan = true;
    for (int i = 0; i < 8; i++) all_nan = all_nan && hf[i] != hf[i];
    CHECK(all_nan, "static shared memory is fresh and poisoned (NaN) in every block");
    cudaFree(d);
    cudaFree(f);
}

/* ---- atomics, parameters, indices ---- */

__global__ void atomics_kernel(float *fsum, __half *hsum, unsigned long long *umin, int *cas)
{
    atomicAdd(fsum, 1.f);
    atomicAdd(hsum, __float2half(1.f));
    atomicMin(umin, (unsigned long long)(1000 - blockIdx.x * blockDim.x - threadIdx.x));
    int old = *cas, assumed;
    do {
        assumed = old;
        old = atomicCAS(cas, assumed, assumed + 2);
    } while (old != assumed);
}

__global__ void params_kernel(int *out, int base)
{
    base += (int)threadIdx.x; /* each thread's own copy of the parameter */
    out[threadIdx.x] = base;
}

__global__ void index_kernel(int *out)
{
    int t = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
    int b = (int)(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
    out[b * (int)(blockDim.x * blockDim.y * blockDim.z) + t] = b * 1000 + t;
}

static void test_atomics_params_indices()
{
    float *fs;
    __half *hs;
    unsigned long long *um;
    int *cas;
    cudaMalloc((void **)&fs, 4);
    cudaMalloc((void **)&hs, 4);
    cudaMalloc((void **)&um, 8);
    cudaMalloc((void **)&cas, 4);
    cudaMemset(fs, 0, 4);
    cudaMemset(hs, 0, 4);
    cudaMemset(um, 0xff, 8);
    cudaMemset(cas, 0, 4);
    atomics_kernel<<<3, 100>>>(fs, hs, um, cas);
    float f;
    __half hh;
    unsigned long long u;
    int c;
    cudaMemcpy(&f, fs, 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(&hh, hs, 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(&u, um, 8, cudaMemcpyDeviceToHost);
    cudaMemcpy(&c, cas, 4, cudaMemcpyDeviceToHost);
    CHECK(f == 300.f, "atomicAdd float: %g", f);
    CHECK(__half2float(hh) == 300.f, "atomicAdd __half (integers to 2048 are exact): %g",
          __half2float(hh));
    CHECK(u == 701, "atomicMin: %llu", u);
    CHECK(c == 600, "atomicCAS loop: %d", c);

    int *d, h[64];
    cudaMalloc((void **)&d, sizeof h);
    params_kernel<<<1, 64>>>(d, 7);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    CHECK(h[0] == 7 && h[63] == 70, "parameters are per thread: %d %d", h[0], h[63]);

    int *idx, hi[2 * 3 * 2 * 4 * 2 * 2];
    cudaMalloc((void **)&idx, sizeof hi);
    index_kernel<<<dim3(2, 3, 2), dim3(4, 2, 2)>>>(idx);
    cudaMemcpy(hi, idx, sizeof hi, cudaMemcpyDeviceToHost);
    bool ok = true;
    for (int b = 0; b < 12; b++)
        for (int t = 0; t < 16; t++) ok = ok && hi[b * 16 + t] == b * 1000 + t;
    CHECK(ok, "3-D grids and blocks: built-in indices");
    cudaFree(fs);
    cudaFree(hs);
    cudaFree(um);
    cudaFree(cas);
    cudaFree(d);
    cudaFree(idx);
}

/* ---- launch errors ---- */

__global__ void __launch_bounds__(128) bounded_kernel(int *out)
{
    out[threadIdx.x] = 1;
}

__global__ void noop_kernel(int *out)
{
    if (out) out[0] = 0;
}

static void test_launch_errors()
{
    int *d;
    cudaMalloc((void **)&d, 256 * sizeof(int));
    cudaMemset(d, 0, 256 * sizeof(int));
    noop_kernel<<<1, 1025>>>(d);
    CHECK(cudaPeekAtLastError() == cudaErrorInvalidConfiguration, "1025 threads");
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "peek does not clear");
    CHECK(cudaGetLastError() == cudaSuccess, "get clears");
    noop_kernel<<<dim3(1, 65536), 32>>>(d);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "grid.y 65536");
    noop_kernel<<<0, 32>>>(d);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "an empty grid");
    noop_kernel<<<1, dim3(1, 1, 65)>>>(d);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "block.z 65");
    bounded_kernel<<<1, 256>>>(d);
    CHECK(cudaGetLastError() == cudaErrorLaunchOutOfResources, "over __launch_bounds__");
    int h = -1;
    cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    CHECK(h == 0, "a refused launch runs nothing");
    bounded_kernel<<<1, 128>>>(d);
    CHECK(cudaGetLastError() == cudaSuccess, "within __launch_bounds__");
    cudaFree(d);
}

/* ---- the seeded schedule ---- */

__global__ void order_kernel(int *order, int *counter)
{
    order[atomicAdd(counter, 1)] = (int)threadIdx.x;
}

static void run_order_check()
{
    int *d, *c, h[64];
    cudaMalloc((void **)&d, sizeof h);
    cudaMalloc((void **)&c, sizeof(int));
    cudaMemset(c, 0, sizeof(int));
    order_kernel<<<1, 64>>>(d, c);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    bool ascending = true;
    for (int i = 0; i < 64; i++) ascending = ascending && h[i] == i;
    if (!ascending) {
        fprintf(stderr, "not in thread order\n");
        abort();
    }
    _exit(0);
}

static void test_schedule()
{
    /* the default order is thread order (the child exits 0); a seed shuffles it */
    CHECK(!aborts_with(run_order_check, "not in thread order"), "default schedule");
    CHECK(aborts_with(run_order_check, "not in thread order", "DDPL_CUEMU_SCHEDULE=7"),
          "DDPL_CUEMU_SCHEDULE=7 runs threads in another order");
}

/* ---- memory, streams, events, devices ---- */

static void test_memory()
{
    size_t free0, total, free1;
    CHECK(cudaMemGetInfo(&free0, &total) == cudaSuccess && free0 <= total, "mem info");
    void *p = NULL;
    CHECK(cudaMalloc(&p, 1 << 20) == cudaSuccess && ((uintptr_t)p & 255) == 0, "256-aligned");
    cudaMemGetInfo(&free1, &total);
    CHECK(free0 - free1 == (1 << 20), "mem info counts the allocation");
    void *big = NULL;
    CHECK(cudaMalloc(&big, total + 1) == cudaErrorMemoryAllocation, "over the budget");
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation, "the error is recorded");
    int host[4] = {1, 2, 3, 4};
    CHECK(cudaMemcpy(host, host + 2, 8, cudaMemcpyHostToDevice) == cudaErrorInvalidValue,
          "a host pointer as the device side of a copy");
    CHECK(cudaMemcpy((char *)p + (1 << 20) - 4, host, 8, cudaMemcpyHostToDevice) ==
              cudaErrorInvalidValue,
          "a copy past the end of an allocation");
    CHECK(cudaFree(host) == cudaErrorInvalidValue, "cudaFree of a host pointer");
    cudaPointerAttributes a;
    cudaPointerGetAttributes(&a, (char *)p + 100);
    CHECK(a.type == cudaMemoryTypeDevice && a.device == 0, "device pointer attributes");
    cudaPointerGetAttributes(&a, host);
    CHECK(a.type == cudaMemoryTypeUnregistered, "pageable host memory");
    CHECK(cudaHostRegister(host, sizeof host, cudaHostRegisterPortable) == cudaSuccess, "register");
    cudaPointerGetAttributes(&a, host);
    CHECK(a.type == cudaMemoryTypeHost, "registered host memory is pinned");
    CHECK(cudaHostRegister(host + 1, 4, 0) == cudaErrorHostMemoryAlreadyRegistered,
          "registering twice");
    CHECK(cudaHostUnregister(host) == cudaSuccess, "unregister");
    CHECK(cudaHostUnregister(host) == cudaErrorHostMemoryNotRegistered, "unregister twice");
    cudaGetLastError();
    cudaFree(p);
}

static void test_streams_events_devices()
{
    int n = 0;
    CHECK(cudaGetDeviceCount(&n) == cudaSuccess && n >= 2, "two devices by default: %d", n);
    CHECK(cudaSetDevice(n) == cudaErrorInvalidDevice, "device %d does not exist", n);
    cudaGetLastError();
    cudaStream_t s0, s1;
    cudaEvent_t e0;
    cudaSetDevice(1);
    cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
    cudaSetDevice(0);
    cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&e0, cudaEventDisableTiming);
    int *d;
    cudaMalloc((void **)&d, 4);
    noop_kernel<<<1, 1, 0, s1>>>(d);
    CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle,
          "a launch on another device's stream");
    noop_kernel<<<1, 1, 0, s0>>>(d);
    CHECK(cudaGetLastError() == cudaSuccess, "a launch on the current device's stream");
    CHECK(cudaEventRecord(e0, s0) == cudaSuccess && cudaEventQuery(e0) == cudaSuccess,
          "an event after finished work is complete");
    CHECK(cudaEventRecord(e0, s1) == cudaErrorInvalidResourceHandle,
          "an event recorded on another device's stream");
    CHECK(cudaStreamWaitEvent(s0, e0, 0) == cudaSuccess, "stream waits on an event");
    CHECK(cudaEventDestroy(e0) == cudaSuccess, "destroy event");
    CHECK(cudaEventQuery(e0) == cudaErrorInvalidResourceHandle, "a destroyed event");
    CHECK(cudaStreamDestroy(s0) == cudaSuccess && cudaStreamDestroy(s1) == cudaSuccess, "destroy");
    CHECK(cudaStreamSynchronize(s0) == cudaErrorInvalidResourceHandle, "a destroyed stream");
    cudaGetLastError();
    cudaFree(d);
}

int main()
{
    test_barriers();
    test_early_exit();
    test_shuffles();
    test_kernel_bugs_reported();
    test_shared_memory();
    test_atomics_params_indices();
    test_launch_errors();
    test_schedule();
    test_memory();
    test_streams_events_devices();
    return cuemu_check_finish();
}
