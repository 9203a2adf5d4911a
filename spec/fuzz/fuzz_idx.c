/* spec/fuzz/fuzz_idx.c: fuzzes the IDX reader (engine/io/idx.c) on plain and gzip input: magic,
 * rank, sizes, the data length against the header, gzip streams and what follows them.
 * Property: any input gives a tensor of the announced shape or NULL with an error that starts
 * with "read_idx: "; never a crash or a sanitizer report.
 * defines: LLVMFuzzerTestOneInput. */
#include <string.h>

#include "ddpl/ops.h"
#include "io/idx.h"
#include "ddpl/tensor.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file_of(data, size);
    ddpl_tensor *t = ddpl_read_idx(path);
    if (!t) {
        const char *msg = ddpl_last_error();
        if (strncmp(msg, "read_idx: ", 10) != 0) {
            fprintf(stderr, "fuzz_idx: an error that does not name read_idx: %s\n", msg);
            abort();
        }
        return 0;
    }
    /* the whole tensor is readable: a sum visits every element */
    ddpl_tensor *s = ddpl_sum(t);
    if (!s) {
        fprintf(stderr, "fuzz_idx: summing what was read failed: %s\n", ddpl_last_error());
        abort();
    }
    ddpl_tensor_release(s);
    ddpl_tensor_release(t);
    return 0;
}
