/* tools/cuemu/runtime/cuemu_internal.h: what the emulation's runtime files share (never seen by
 * the engine's code).
 * defines: cuemu::set_last_error, fatal, stream_device, stream_valid, func_max_dynamic_smem,
 *          env_u64, MAX_THREADS_PER_BLOCK, DEFAULT_SMEM, MAX_SMEM_OPTIN. */
#ifndef DDPL_CUEMU_INTERNAL_H
#define DDPL_CUEMU_INTERNAL_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

namespace cuemu
{

/* The limits of the device the emulation stands for (an H100/H200, compute capability 9.0). */
enum : size_t {
    MAX_THREADS_PER_BLOCK = 1024,
    DEFAULT_SMEM = 48 << 10, /* dynamic shared memory without cudaFuncSetAttribute */
    MAX_SMEM_OPTIN = 232448, /* cudaDevAttrMaxSharedMemoryPerBlockOptin on sm_90 */
};

/* Records e as the calling host thread's last error (cudaGetLastError clears it). */
void set_last_error(cudaError_t e);
/* A bug in a kernel that a GPU would hang or fault on (a barrier nobody reaches, a shuffle with
 * an exited lane): says so on stderr and aborts, as compute-sanitizer stops the program. */
[[noreturn]] void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The device a stream belongs to (0 and the per-thread/legacy handles: the current device),
 * or -1 when `s` is not a live stream. */
int stream_device(cudaStream_t s);
/* cudaFuncSetAttribute(kernel, MaxDynamicSharedMemorySize) as last set (0: never). */
size_t func_max_dynamic_smem(const void *kernel);
/* The environment variable as an unsigned number, or `fallback` when unset or malformed. */
uint64_t env_u64(const char *name, uint64_t fallback);

} // namespace cuemu

#endif
