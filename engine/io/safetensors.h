/* io/safetensors.h: reading and writing safetensors files (the format of Hugging Face's
 * `safetensors` package: https://github.com/huggingface/safetensors, "Format").
 * defines: ddpl_st_file, ddpl_safetensors_save, ddpl_safetensors_load, ddpl_st_file_clear,
 *          ddpl_st_find, ddpl_st_dtype_code.
 *
 * Layout: 8 bytes little-endian u64 N; N bytes of UTF-8 JSON
 *   {"__metadata__": {str: str}, "name": {"dtype": "F32", "shape": [2, 3],
 *    "data_offsets": [begin, end]}, ...}
 * padded with spaces to a multiple of 8; then the data section: each tensor's elements,
 * row-major, little-endian, at [begin, end) relative to the section's start. */
#ifndef DDPL_IO_SAFETENSORS_H
#define DDPL_IO_SAFETENSORS_H

#include "core/core.h"

/* A file's contents: tensors in the order of their data offsets, and the metadata. */
typedef struct ddpl_st_file {
    int n;
    char **names;          /* in strcmp order (ddpl_st_find bisects them) */
    ddpl_tensor **tensors; /* owned references, CPU; tensors[i] is named names[i] */
    int nmeta;
    char **meta_keys;
    char **meta_values;
    size_t *meta_lens;
} ddpl_st_file;

/* Writes n tensors (any device, any strides) under names, with nmeta metadata string pairs,
 * to path atomically: a temporary file in the same directory, fsync, rename. On any error
 * path is untouched, the temporary file removed, and -1 returned with an error
 * "save: <path>: <what>". Names must be distinct, non-empty UTF-8, not "__metadata__". */
int ddpl_safetensors_save(const char *path, int n, const char *const *names,
                          ddpl_tensor *const *tensors, int nmeta, const char *const *meta_keys,
                          const char *const *meta_values, const size_t *meta_lens);

/* Reads path into *out (cleared first), validating the whole header against the file: header
 * length, JSON syntax, dtype names, shapes against offsets, offsets within the data section and
 * not overlapping. Returns 0, or -1 with "load: <path>: <what>" and *out empty. */
int ddpl_safetensors_load(const char *path, ddpl_st_file *out);
void ddpl_st_file_clear(ddpl_st_file *f);
/* The index of the tensor called name in a loaded file, or -1: O(log n). */
int ddpl_st_find(const ddpl_st_file *f, const char *name);

/* "F32" for DDPL_FLOAT32, ...; NULL for none. */
const char *ddpl_st_dtype_code(ddpl_dtype dt);

#endif
