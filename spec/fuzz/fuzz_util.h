/* spec/fuzz/fuzz_util.h: what the fuzz targets share.
 * defines: fuzz_file_of (a fuzzer input as a file path, for readers that take paths).
 *
 * Each target is one LLVMFuzzerTestOneInput (libFuzzer's entry point). Built with clang and
 * -fsanitize=fuzzer it is a fuzzer; built with replay_main.c (any compiler) it replays the files
 * it is given, which is how the seed corpora and the regressions run in every build. */
#ifndef DDPL_FUZZ_UTIL_H
#define DDPL_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Writes data to one anonymous in-memory file, reused across inputs (truncated each time), and
 * returns a path that opens it ("/proc/self/fd/N"): the readers under test take paths, and a
 * memfd keeps a million inputs off the disk. */
static const char *fuzz_file_of(const uint8_t *data, size_t n)
{
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("ddplua-fuzz", 0);
        if (fd < 0) {
            perror("fuzz: memfd_create");
            abort();
        }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, n, 0) != (ssize_t)n) {
        perror("fuzz: writing the input");
        abort();
    }
    return path;
}

#endif
