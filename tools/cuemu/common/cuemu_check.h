/* tools/cuemu/common/cuemu_check.h: the CHECK of the emulation's own tests (test_cuemu and the
 * cuBLAS and cuDNN stand-ins'), which link nothing of the engine (spec/c/check.h needs it).
 * defines: CHECK, cuemu_check_passed, cuemu_check_failed, cuemu_check_finish. */
#ifndef CUEMU_CHECK_H
#define CUEMU_CHECK_H

#include <stdio.h>

static int cuemu_check_passed, cuemu_check_failed;

/* CHECK(cond, fmt, ...): counts the check; a failure prints its place and the message. */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            cuemu_check_passed++;                                                                  \
        } else {                                                                                   \
            cuemu_check_failed++;                                                                  \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

/* Prints "N passed, M failed" (the line ctest's log readers look for); the exit status. */
static inline int cuemu_check_finish(void)
{
    printf("%d passed, %d failed\n", cuemu_check_passed, cuemu_check_failed);
    return cuemu_check_failed ? 1 : 0;
}

#endif
