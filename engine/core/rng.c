/* core/rng.c: the process-wide random generator's state: the seed and the next Philox4x32-10
 * counter (the block function is core/philox.h).
 * defines: ddpl_manual_seed, ddpl_get_rng_state, ddpl_set_rng_state, ddpl_rng_reserve.
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

void ddpl_get_rng_state(uint64_t *seed, uint64_t *offset)
{
    pthread_mutex_lock(&rng_lock);
    *seed = generator.seed;
    *offset = generator.offset;
    pthread_mutex_unlock(&rng_lock);
}

void ddpl_set_rng_state(uint64_t seed, uint64_t offset)
{
    pthread_mutex_lock(&rng_lock);
    generator.seed = seed;
    generator.offset = offset;
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
