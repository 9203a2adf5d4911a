/* tools/cuemu/runtime/cuemu_fiber.cpp: the fiber switch and the stacks (see cuemu_fiber.h).
 * defines: cuemu::fiber_stack_take, fiber_stack_give, fiber_start, fiber_switch,
 *          fiber_entered. */
#include "cuemu_fiber.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define CUEMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUEMU_ASAN 1
#endif
#endif
#ifdef CUEMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#error "cuemu's fiber switch is written for x86-64 (System V); port cuemu_switch_context"
#endif

/* cuemu_switch_context(void **save, void *to): pushes rbp, rbx, r12-r15 and the MXCSR / x87
 * control words, stores rsp in *save, then pops the same from `to`. A new fiber's first `ret`
 * lands in cuemu_fiber_trampoline with r12 = arg and r13 = entry. */
asm(R"(
    .pushsection .text
    .p2align 4
    .type cuemu_switch_context, @function
cuemu_switch_context:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cuemu_switch_context, .-cuemu_switch_context

    .p2align 4
    .type cuemu_fiber_trampoline, @function
cuemu_fiber_trampoline:
    movq %r12, %rdi
    andq $-16, %rsp
    callq *%r13
    ud2
    .size cuemu_fiber_trampoline, .-cuemu_fiber_trampoline
    .popsection
)");

extern "C" void cuemu_switch_context(void **save, void *to);
extern "C" void cuemu_fiber_trampoline(void);

namespace cuemu
{

/* 256 KiB: the deepest kernel frames (double-precision generic paths) use a few KiB; ASan's
 * redzones multiply that. Pages are touched only as used (MAP_NORESERVE). */
enum { STACK_BYTES = 256 << 10 };

namespace
{
struct stack_pool {
    std::vector<fiber_stack> free_stacks;
    ~stack_pool()
    {
        long page = sysconf(_SC_PAGESIZE);
        for (fiber_stack s : free_stacks) munmap(s.base - page, s.size + (size_t)page);
    }
};
thread_local stack_pool pool;
#ifdef CUEMU_ASAN
/* the host thread's own stack, learnt on the first switch into a fiber */
thread_local const void *host_bottom;
thread_local size_t host_size;
#endif
} // namespace

fiber_stack fiber_stack_take()
{
    if (!pool.free_stacks.empty()) {
        fiber_stack s = pool.free_stacks.back();
        pool.free_stacks.pop_back();
        return s;
    }
    long page = sysconf(_SC_PAGESIZE);
    size_t total = STACK_BYTES + (size_t)page;
    void *m = mmap(NULL, total, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED) {
        perror("cuemu: mapping a fiber stack");
        abort();
    }
    mprotect(m, (size_t)page, PROT_NONE); /* guard: an overflow faults instead of corrupting */
    return fiber_stack{(char *)m + page, STACK_BYTES};
}

void fiber_stack_give(fiber_stack s)
{
    pool.free_stacks.push_back(s);
}

void fiber_start(void **sp, fiber_stack stack, void (*entry)(void *), void *arg)
{
    uintptr_t top = ((uintptr_t)(stack.base + stack.size)) & ~(uintptr_t)15;
    uint64_t *p = (uint64_t *)top;
    *--p = 0;                                /* keeps the frame 16-byte aligned */
    *--p = (uint64_t)cuemu_fiber_trampoline; /* ret target */
    *--p = 0;                                /* rbp */
    *--p = 0;                                /* rbx */
    *--p = (uint64_t)arg;                    /* r12 */
    *--p = (uint64_t)entry;                  /* r13 */
    *--p = 0;                                /* r14 */
    *--p = 0;                                /* r15 */
    uint32_t mxcsr;
    uint16_t fpucw;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpucw));
    --p;
    memcpy((char *)p, &mxcsr, 4);
    memcpy((char *)p + 4, &fpucw, 2);
    *sp = p;
}

void fiber_switch(void **save, void *to, fiber_stack to_stack, bool leaving_for_good)
{
#ifdef CUEMU_ASAN
    void *fake = NULL;
    const void *bottom = to_stack.base ? (const void *)to_stack.base : host_bottom;
    size_t size = to_stack.base ? to_stack.size : host_size;
    __sanitizer_start_switch_fiber(leaving_for_good ? NULL : &fake, bottom, size);
    cuemu_switch_context(save, to);
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#else
    (void)to_stack;
    (void)leaving_for_good;
    cuemu_switch_context(save, to);
#endif
}

/* The first thing a new fiber runs (see cuemu_sched.cpp): completes ASan's switch and learns
 * the host stack it came from. */
void fiber_entered()
{
#ifdef CUEMU_ASAN
    const void *from_bottom;
    size_t from_size;
    __sanitizer_finish_switch_fiber(NULL, &from_bottom, &from_size);
    if (!host_bottom) {
        host_bottom = from_bottom;
        host_size = from_size;
    }
#endif
}

} // namespace cuemu
