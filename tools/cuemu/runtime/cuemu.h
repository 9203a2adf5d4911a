/* tools/cuemu/runtime/cuemu.h: the device side of the CUDA emulation, force-included (g++
 * -include) into every engine .cu file after tools/cuemu/rewrite.lua has rewritten it.
 * defines: threadIdx, blockIdx, blockDim, gridDim, warpSize, __syncthreads, __shfl_sync,
 *          __shfl_xor_sync, __shfl_down_sync, __shfl_up_sync, atomicAdd, atomicCAS, atomicMin,
 *          atomicMax, min, max, normcdf(f), erfinv(f), __launch_bounds__, and the cuemu:: launch
 *          and shared-memory calls the rewriter emits.
 *
 * Model: every CUDA thread of a block is a fiber (tools/cuemu/runtime/cuemu_sched.cpp); the
 * blocks of a grid run one after another on the host thread that launched them, so a launch
 * returns when the kernel is done (streams are trivially in order). Device memory is host
 * memory. The CUDA headers are NVIDIA's own, compiled for the host (no __CUDACC__): __half and
 * __nv_bfloat16 round exactly as on the device, and __global__/__device__ expand to nothing. */
#ifndef DDPL_CUEMU_H
#define DDPL_CUEMU_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cuemu
{

/* What one CUDA thread sees of itself and its launch (the built-in variables). */
struct thread_view {
    uint3 thread_idx, block_idx;
    dim3 block_dim, grid_dim;
};

/* The CUDA thread the calling host code runs as (set by the scheduler for each fiber). */
extern thread_local const thread_view *self;

/* A launch's configuration and where it was written (for error messages). */
struct launch_config {
    dim3 grid, block;
    size_t dynamic_smem;
    cudaStream_t stream;
    const void *kernel; /* the kernel's address: cudaFuncSetAttribute is keyed by it */
    const char *file;
    int line;
};

/* Validates cfg as cudaLaunchKernel would (a failure sets the thread's last error and returns
 * false), then runs body(ctx) once per CUDA thread of every block. */
bool launch_check(const launch_config &cfg);
void launch_run(const launch_config &cfg, void (*body)(void *), void *ctx);

/* Called first by every kernel body (the rewriter inserts it): records `name` for
 * DDPL_CUEMU_COVERAGE, and returns false when the block is larger than the kernel's
 * __launch_bounds__ (max_threads; 0: none), which fails the launch as the hardware would. */
bool kernel_entry(const char *name, int max_threads);

void syncthreads();
/* One warp-synchronous exchange: every lane of `mask` publishes `value` (at most 8 bytes) and
 * gets the value of lane `src` (an absolute lane 0..31) in `out`. */
void warp_exchange(unsigned mask, const void *value, size_t size, int src, void *out);
/* The block's dynamic shared memory (launch argument 3), 16-byte aligned. */
void *dynamic_shared();
/* The block's instance of a static __shared__ variable, keyed by its declaration (`key` is the
 * address of a per-declaration static): fresh and poisoned in every block. */
void *static_shared(const void *key, size_t size, size_t align);

template <typename T> struct shared_ref {
    static T &get(const void *key)
    {
        return *static_cast<T *>(static_shared(key, sizeof(T), alignof(T)));
    }
};

/* `kern<<<g, b, s, st>>>(args)` is rewritten to `cuemu::launch(kern, g, b, s, st)(args)`: the
 * arguments are converted to the kernel's parameter types once, as a real launch copies them,
 * and every thread gets its own copy (kernels may modify their parameters). */
template <typename... P> struct launcher {
    void (*kernel)(P...);
    launch_config cfg;

    /* by value, as the kernel declares them: NULL and integer arguments convert as in a call */
    void operator()(P... a)
    {
        if (!launch_check(cfg)) return;
        std::tuple<typename std::decay<P>::type...> args(a...);
        struct frame {
            void (*kernel)(P...);
            std::tuple<typename std::decay<P>::type...> *args;
        } f = {kernel, &args};
        launch_run(
            cfg,
            [](void *p) {
                frame *fr = static_cast<frame *>(p);
                std::tuple<typename std::decay<P>::type...> copy = *fr->args;
                std::apply(fr->kernel, copy);
            },
            &f);
    }
};

template <typename... P>
launcher<P...> launch(void (*kernel)(P...), const char *file, int line, dim3 grid, dim3 block,
                      size_t smem = 0, cudaStream_t stream = 0)
{
    return launcher<P...>{kernel, {grid, block, smem, stream, (const void *)kernel, file, line}};
}

inline unsigned lane_id()
{
    const thread_view *t = self;
    unsigned linear =
        t->thread_idx.x + t->block_dim.x * (t->thread_idx.y + t->block_dim.y * t->thread_idx.z);
    return linear % 32u;
}

template <typename T> T shuffle(unsigned mask, T v, int src)
{
    static_assert(sizeof(T) <= 8, "cuemu: __shfl of a type wider than 8 bytes");
    T out;
    warp_exchange(mask, &v, sizeof v, src, &out);
    return out;
}

/* Atomics. Blocks run one at a time on the launching host thread and fibers are never
 * preempted, so within a launch any read-modify-write is atomic; __atomic builtins keep the
 * 4- and 8-byte ones atomic against a kernel launched at the same time from another host thread
 * as well. */
template <typename T, typename F> T atomic_update(T *p, F f)
{
    if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
        typedef typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type W;
        W *w = reinterpret_cast<W *>(p);
        W old = __atomic_load_n(w, __ATOMIC_RELAXED), next;
        T o;
        do {
            memcpy(&o, &old, sizeof o);
            T n = f(o);
            memcpy(&next, &n, sizeof next);
        } while (
            !__atomic_compare_exchange_n(w, &old, next, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
        return o;
    } else {
        T o = *p;
        *p = f(o);
        return o;
    }
}

} // namespace cuemu

#define threadIdx (::cuemu::self->thread_idx)
#define blockIdx  (::cuemu::self->block_idx)
#define blockDim  (::cuemu::self->block_dim)
#define gridDim   (::cuemu::self->grid_dim)
#ifndef warpSize
#define warpSize 32
#endif
#define __launch_bounds__(...)

static inline void __syncthreads()
{
    ::cuemu::syncthreads();
}

template <typename T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32)
{
    int lane = (int)::cuemu::lane_id();
    return ::cuemu::shuffle(mask, v, (lane / width) * width + ((src % width) + width) % width);
}
template <typename T> static inline T __shfl_xor_sync(unsigned mask, T v, int lm, int width = 32)
{
    int lane = (int)::cuemu::lane_id(), src = lane ^ lm;
    return ::cuemu::shuffle(mask, v, src / width == lane / width ? src : lane);
}
template <typename T>
static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    int lane = (int)::cuemu::lane_id();
    return ::cuemu::shuffle(mask, v, lane % width + (int)delta < width ? lane + (int)delta : lane);
}
template <typename T>
static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32)
{
    int lane = (int)::cuemu::lane_id();
    return ::cuemu::shuffle(mask, v, lane % width >= (int)delta ? lane - (int)delta : lane);
}

template <typename T> static inline T atomicAdd(T *p, T v)
{
    return ::cuemu::atomic_update(p, [v](T o) { return (T)(o + v); });
}
template <typename T> static inline T atomicMin(T *p, T v)
{
    return ::cuemu::atomic_update(p, [v](T o) { return v < o ? v : o; });
}
template <typename T> static inline T atomicMax(T *p, T v)
{
    return ::cuemu::atomic_update(p, [v](T o) { return v > o ? v : o; });
}
template <typename T> static inline T atomicCAS(T *p, T compare, T v)
{
    return ::cuemu::atomic_update(p, [compare, v](T o) { return o == compare ? v : o; });
}

/* CUDA's integer and floating min/max overloads (the device library's, minus the vector ones). */
#define CUEMU_MINMAX(T)                                                                            \
    static inline T min(T a, T b)                                                                  \
    {                                                                                              \
        return a < b ? a : b;                                                                      \
    }                                                                                              \
    static inline T max(T a, T b)                                                                  \
    {                                                                                              \
        return a > b ? a : b;                                                                      \
    }
CUEMU_MINMAX(int)
CUEMU_MINMAX(unsigned)
CUEMU_MINMAX(long)
CUEMU_MINMAX(unsigned long)
CUEMU_MINMAX(long long)
CUEMU_MINMAX(unsigned long long)
#undef CUEMU_MINMAX
static inline float min(float a, float b)
{
    return fminf(a, b);
}
static inline float max(float a, float b)
{
    return fmaxf(a, b);
}
static inline double min(double a, double b)
{
    return fmin(a, b);
}
static inline double max(double a, double b)
{
    return fmax(a, b);
}

/* Standard normal CDF: CUDA's device library has it, glibc does not. */
static inline double normcdf(double x)
{
    return 0.5 * erfc(-x * M_SQRT1_2);
}
static inline float normcdff(float x)
{
    return 0.5f * erfcf(-x * (float)M_SQRT1_2);
}

/* Inverse error function: CUDA's device library has it, glibc does not. Winitzki's closed-form
 * guess, then Newton steps on erf (whose derivative is 2/sqrt(pi) exp(-x^2)) to full double
 * precision; +-1 give +-inf and |y| > 1 NaN, as CUDA's. */
static inline double erfinv(double y)
{
    if (!(fabs(y) <= 1)) return NAN;
    if (fabs(y) == 1) return copysign(INFINITY, y);
    const double a = 0.147, two_over_pi_a = 2 / (M_PI * a);
    double l = log((1 - y) * (1 + y));
    double t = two_over_pi_a + 0.5 * l;
    double x = copysign(sqrt(sqrt(t * t - l / a) - t), y);
    double tail = 1 - fabs(y); /* exact: in the tails step on log erfc, where erf(x) - y cancels */
    for (int i = 0; i < 4; i++) {
        double slope = M_2_SQRTPI * exp(-x * x), e = erfc(fabs(x));
        x += tail < 0.5 ? (y < 0 ? -1 : 1) * log(e / tail) * e / slope : -(erf(x) - y) / slope;
    }
    return x;
}
static inline float erfinvf(float y)
{
    return (float)erfinv(y);
}

#endif
