/* io/idx.h: reading IDX files (the MNIST family's format), internal to the engine.
 * defines: ddpl_read_idx. */
#ifndef DDPL_IO_IDX_H
#define DDPL_IO_IDX_H

#include "ddpl/tensor.h"

/* Reads the IDX file at path, gzip-compressed or plain (told apart by the gzip magic), into a
 * new CPU tensor with the file's shape. Element types: 0x08 unsigned byte -> uint8, 0x0D float
 * -> float32, 0x0E double -> float64, 0x0C int -> int32, and 0x09 signed byte and 0x0B short
 * widened to int32 (the engine has no int8/int16). Big-endian values become native ones.
 * NULL on failure, with "read_idx: <path>: <what was wrong>" set. */
ddpl_tensor *ddpl_read_idx(const char *path);

#endif
