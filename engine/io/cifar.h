/* io/cifar.h: reading CIFAR-10's binary files, internal to the engine.
 * defines: ddpl_read_cifar10, DDPL_CIFAR10_RECORD. */
#ifndef DDPL_IO_CIFAR_H
#define DDPL_IO_CIFAR_H

#include "ddpl/tensor.h"

/* A record: 1 label byte, then the 32x32 red, green and blue planes (row-major). */
#define DDPL_CIFAR10_RECORD (1 + 3 * 32 * 32)

/* Reads the records of the n files at paths, in order, into two new CPU tensors: *images uint8
 * (N, 3, 32, 32) and *labels int64 (N). Every file's size is checked before anything is
 * allocated (non-empty, a whole number of records), and every label must be 0..9. Returns 0, or
 * -1 with "read_cifar10: <path>: <what was wrong>" set and both outputs NULL. */
int ddpl_read_cifar10(const char *const *paths, int n, ddpl_tensor **images, ddpl_tensor **labels);

#endif
