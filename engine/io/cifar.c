/* io/cifar.c: a native reader of CIFAR-10's binary version (data_batch_*.bin, test_batch.bin).
 * defines: ddpl_read_cifar10.
 *
 * The files hold fixed-size records (io/cifar.h), so the sizes alone say how many images a split
 * has: they are checked first, the two output tensors are allocated once for all files, and the
 * records are read in blocks straight into them, the label byte going to the int64 labels and the
 * 3072 pixel bytes to the uint8 images. One pass over the data and one copy: reading the files
 * into Lua strings and converting them cost four copies and several seconds per split. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/core.h"
#include "io/cifar.h"

#define PIXELS        (DDPL_CIFAR10_RECORD - 1)
#define NUM_CLASSES   10
#define BLOCK_RECORDS 256 /* records per read: 786 KB */

/* The record count of the file at path, or -1 with the error set. */
static int64_t count_records(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return ddpl_error("read_cifar10: %s: cannot open: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return ddpl_error("read_cifar10: %s: is a directory, not a CIFAR-10 file", path);
    if (st.st_size == 0 || st.st_size % DDPL_CIFAR10_RECORD != 0)
        return ddpl_error("read_cifar10: %s: %lld bytes is not a whole number of %d-byte records "
                          "(1 label byte + %d pixel bytes): the file is truncated or not from the "
                          "binary version",
                          path, (long long)st.st_size, DDPL_CIFAR10_RECORD, PIXELS);
    return st.st_size / DDPL_CIFAR10_RECORD;
}

/* Reads the count records of path into images (count * PIXELS bytes) and labels; 0 or -1. */
static int read_file(const char *path, int64_t count, unsigned char *block, uint8_t *images,
                     int64_t *labels)
{
    FILE *f = fopen(path, "rb");
    if (!f) return ddpl_error("read_cifar10: %s: cannot open: %s", path, strerror(errno));
    int rc = 0;
    for (int64_t done = 0; done < count && rc == 0;) {
        int64_t want = count - done < BLOCK_RECORDS ? count - done : BLOCK_RECORDS;
        size_t got = fread(block, DDPL_CIFAR10_RECORD, (size_t)want, f);
        if ((int64_t)got != want) {
            rc = ddpl_error("read_cifar10: %s: %s after %lld of %lld records", path,
                            ferror(f) ? strerror(errno) : "the file shrank while being read",
                            (long long)(done + (int64_t)got), (long long)count);
            break;
        }
        for (int64_t r = 0; r < want; r++) {
            const unsigned char *rec = block + r * DDPL_CIFAR10_RECORD;
            if (rec[0] >= NUM_CLASSES) {
                rc = ddpl_error("read_cifar10: %s: record %lld has label %d; labels are 0 to %d: "
                                "not a CIFAR-10 file (CIFAR-100 records have 2 label bytes)",
                                path, (long long)(done + r), rec[0], NUM_CLASSES - 1);
                break;
            }
            labels[done + r] = rec[0];
            memcpy(images + (done + r) * PIXELS, rec + 1, PIXELS);
        }
        done += want;
    }
    fclose(f);
    return rc;
}

int ddpl_read_cifar10(const char *const *paths, int n, ddpl_tensor **images, ddpl_tensor **labels)
{
    *images = *labels = NULL;
    if (n < 1) return ddpl_error("read_cifar10: expected at least one file");
    int64_t *counts = malloc((size_t)n * sizeof *counts);
    unsigned char *block = malloc((size_t)BLOCK_RECORDS * DDPL_CIFAR10_RECORD);
    ddpl_tensor *img = NULL, *lab = NULL;
    int rc = -1;
    if (!counts || !block) {
        ddpl_error("read_cifar10: out of memory for the read buffer");
        goto done;
    }
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        counts[k] = count_records(paths[k]);
        if (counts[k] < 0) goto done;
        if (total > INT64_MAX / PIXELS - counts[k]) {
            ddpl_error("read_cifar10: %s: the files hold too many records", paths[k]);
            goto done;
        }
        total += counts[k];
    }
    int64_t image_sizes[4] = {total, 3, 32, 32};
    img = ddpl_tensor_new(4, image_sizes, DDPL_UINT8, ddpl_cpu());
    lab = img ? ddpl_tensor_new(1, &total, DDPL_INT64, ddpl_cpu()) : NULL;
    if (!lab) goto done;
    uint8_t *pix = ddpl_tensor_data(img);
    int64_t *lbl = ddpl_tensor_data(lab);
    int64_t at = 0;
    rc = 0;
    for (int k = 0; k < n && rc == 0; k++) {
        rc = read_file(paths[k], counts[k], block, pix + at * PIXELS, lbl + at);
        at += counts[k];
    }
done:
    free(counts);
    free(block);
    if (rc != 0) {
        ddpl_tensor_release(img);
        ddpl_tensor_release(lab);
        return -1;
    }
    *images = img;
    *labels = lab;
    return 0;
}
