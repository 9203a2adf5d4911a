/* core/rng.c: the process-wide random generator (Philox4x32-10, Salmon et al., SC'11).
 * defines: ddpl_manual_seed, ddpl_rng_reserve, ddpl_philox4x32.
 *
 * Counter-based: a kernel that needs n numbers reserves ceil(n/4) blocks and computes block i
 * from (seed, offset + i) alone, so any thread or GPU lane can produce its part of the stream
 * and the values do not depend on the thread count. */
#include <pthread.h>

#include "core.h"

static pthread_mutex_t rng_lock = PTHREAD_MUTEX_INITIALIZER;
static ddpl_philox_state generator = {.seed = 67280421310721ull, .offset = 0};

void ddpl_manual_seed(uint64_t seed)
{
    pthread_mutex_lock(&rng_lock);
    generator.seed = seed;
    generator.offset = 0;
    pthread_mutex_unlock(&rng_lock);
}

ddpl_philox_state ddpl_rng_reserve(uint64_t count)
{
    pthread_mutex_lock(&rng_lock);
    ddpl_philox_state s = generator;
    generator.offset += (count + 3) / 4;
    pthread_mutex_unlock(&rng_lock);
    return s;
}

static inline uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t *hi)
{
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

void ddpl_philox4x32(uint64_t seed, uint64_t block, uint32_t out[4])
{
    uint32_t c0 = (uint32_t)block, c1 = (uint32_t)(block >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int round = 0; round < 10; round++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = mulhilo(0xD2511F53u, c0, &hi0);
        uint32_t lo1 = mulhilo(0xCD9E8D57u, c2, &hi1);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}
