/* cpu/cpu_attention.h: the CPU fused scaled dot-product attention kernels (cpu_attention.c),
 * registered in cpu_backend.c for the ATTENTION and ATTENTION_BACKWARD slots.
 * defines: cpu_attention, cpu_attention_backward. */
#ifndef DDPL_CPU_ATTENTION_H
#define DDPL_CPU_ATTENTION_H

#include "cpu_kernels.h"

DDPL_CPU_KERNEL(cpu_attention);
DDPL_CPU_KERNEL(cpu_attention_backward);

#endif
