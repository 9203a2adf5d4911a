/* tools/cuemu/runtime/cuemu_fiber.h: user-space fibers, one per emulated CUDA thread.
 * defines: cuemu::fiber_stack, fiber_stack_take, fiber_stack_give, fiber_start, fiber_switch,
 *          fiber_entered.
 *
 * A switch saves the callee-saved registers and the floating-point control words on the
 * current stack and loads the other stack's (x86-64 System V; ~10 ns, where ucontext's
 * swapcontext makes a sigprocmask system call each time). Under AddressSanitizer each switch is
 * announced to it, so stack accesses on fibers are checked like any other. */
#ifndef DDPL_CUEMU_FIBER_H
#define DDPL_CUEMU_FIBER_H

#include <stddef.h>

namespace cuemu
{

struct fiber_stack {
    char *base;  /* lowest usable byte (a guard page lies below) */
    size_t size; /* usable bytes */
};

/* A stack from this host thread's pool (mapped on first need, reused after). */
fiber_stack fiber_stack_take();
void fiber_stack_give(fiber_stack s);

/* Prepares `stack` so that the first switch to *sp calls entry(arg); entry must never return
 * (it switches away for the last time instead). */
void fiber_start(void **sp, fiber_stack stack, void (*entry)(void *), void *arg);

/* Saves the current context into *save and resumes the one in `to`. `to_stack` is the stack
 * being switched to ({NULL, 0}: the host thread's own) and `leaving_for_good` says the current
 * fiber will never run again (both for AddressSanitizer's bookkeeping). */
void fiber_switch(void **save, void *to, fiber_stack to_stack, bool leaving_for_good);

/* Called first by a fiber's entry function (AddressSanitizer's half of the first switch). */
void fiber_entered();

} // namespace cuemu

#endif
