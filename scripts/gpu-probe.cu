/* scripts/gpu-probe.cu: can this machine run ddplua's CUDA kernels? Built and run by
 * scripts/gpu-check.sh before anything else, so an unusable GPU (no driver, a driver older than
 * the toolkit, a device held elsewhere, a GPU the build's architectures do not cover) stops the
 * check in seconds with CUDA's own reason instead of after a build and a suite of skipped specs.
 *
 * Prints the driver's and the runtime's CUDA versions, then per device its name, compute
 * capability and memory, and runs one tiny kernel on each (the kernel image must load and its
 * result must come back). Exit status 0 when every device passes, 1 otherwise; every failure is
 * printed as "probe: FAILED: <step>: <cudaGetErrorString> (<error name>)".
 *
 * usage: nvcc -gencode ... scripts/gpu-probe.cu -o gpu-probe && ./gpu-probe */
#include <cstdio>

#include <cuda_runtime.h>

static int failed(const char *step, cudaError_t e)
{
    std::printf("probe: FAILED: %s: %s (%s)\n", step, cudaGetErrorString(e), cudaGetErrorName(e));
    return 1;
}

static void print_version(const char *what, int v)
{
    if (v == 0)
        std::printf("probe: %s: none (0)\n", what);
    else
        std::printf("probe: %s: CUDA %d.%d\n", what, v / 1000, v % 1000 / 10);
}

__global__ void write_answer(int *out, int value)
{
    out[threadIdx.x] = value + (int)threadIdx.x;
}

/* One kernel, one copy back: proves the context, the kernel image and memory all work. */
static int check_device(int dev)
{
    cudaError_t e = cudaSetDevice(dev);
    if (e != cudaSuccess) return failed("cudaSetDevice", e);
    cudaDeviceProp p;
    e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess) return failed("cudaGetDeviceProperties", e);
    size_t free_b = 0, total_b = 0;
    e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess) return failed("cudaMemGetInfo (creating the context)", e);
    std::printf("probe: device %d: %s, compute capability %d.%d, %.1f of %.1f GiB free\n", dev,
                p.name, p.major, p.minor, free_b / 1073741824.0, total_b / 1073741824.0);
    enum { N = 32 };
    int *d = nullptr;
    e = cudaMalloc(&d, N * sizeof(int));
    if (e != cudaSuccess) return failed("cudaMalloc", e);
    write_answer<<<1, N>>>(d, 42);
    e = cudaGetLastError();
    if (e != cudaSuccess) {
        cudaFree(d);
        return failed("kernel launch (is the GPU's architecture among --arch?)", e);
    }
    int h[N] = {0};
    e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    cudaFree(d);
    if (e != cudaSuccess) return failed("kernel run and copy back", e);
    for (int i = 0; i < N; i++)
        if (h[i] != 42 + i) {
            std::printf("probe: FAILED: kernel result: element %d is %d, not %d\n", i, h[i],
                        42 + i);
            return 1;
        }
    std::printf("probe: device %d: kernel ok\n", dev);
    return 0;
}

int main()
{
    int driver = 0, runtime = 0;
    cudaError_t e = cudaDriverGetVersion(&driver);
    if (e != cudaSuccess) return failed("cudaDriverGetVersion", e);
    e = cudaRuntimeGetVersion(&runtime);
    if (e != cudaSuccess) return failed("cudaRuntimeGetVersion", e);
    print_version("driver supports", driver);
    print_version("runtime", runtime);
    if (driver != 0 && driver < runtime)
        std::printf("probe: note: the driver is older than the runtime (works only through "
                    "CUDA's minor-version compatibility)\n");
    int n = 0;
    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        if (driver == 0) std::printf("probe: no NVIDIA driver is loaded (libcuda.so.1)\n");
        return failed("cudaGetDeviceCount", e);
    }
    std::printf("probe: %d device%s\n", n, n == 1 ? "" : "s");
    if (n == 0) {
        std::printf("probe: FAILED: CUDA sees no device\n");
        return 1;
    }
    int rc = 0;
    for (int dev = 0; dev < n; dev++) rc |= check_device(dev);
    return rc;
}
