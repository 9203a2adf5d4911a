/* io/idx.c: a native reader of IDX files, the format of MNIST and Fashion-MNIST.
 * defines: ddpl_read_idx.
 *
 * An IDX file is a big-endian header, the magic 0x0000TTRR (TT the element type, RR the rank),
 * then RR 32-bit sizes, then the elements in row-major order. Data sets ship it gzip-compressed;
 * io/gz_source.c reads plain and gzip files alike (and refuses bytes after the gzip stream), and
 * the gzip magic is only looked at to word errors and to bound what a compressed file can hold.
 * Every size is checked against the file before the tensor is allocated, so a corrupt header cannot
 * ask for gigabytes, and the element count must match the file exactly (PyTorch's reader does the
 * same). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/core.h"
#include "io/gz_source.h"
#include "io/idx.h"

/* deflate expands at most about 1032:1 (zlib's FAQ); a header announcing more than that from a
 * gzip file is corrupt, and refusing it early avoids a huge allocation. */
#define DEFLATE_MAX_RATIO 1032

typedef struct idx_type {
    unsigned code;    /* the type byte */
    size_t file_size; /* bytes per element in the file */
    ddpl_dtype dtype; /* tensor dtype */
} idx_type;

static const idx_type idx_types[] = {
    {0x08, 1, DDPL_UINT8},   /* unsigned byte */
    {0x09, 1, DDPL_INT8},    /* signed byte */
    {0x0B, 2, DDPL_INT16},   /* short */
    {0x0C, 4, DDPL_INT32},   /* int */
    {0x0D, 4, DDPL_FLOAT32}, /* float */
    {0x0E, 8, DDPL_FLOAT64}, /* double */
};

static const idx_type *find_type(unsigned code)
{
    for (size_t i = 0; i < sizeof idx_types / sizeof *idx_types; i++)
        if (idx_types[i].code == code) return &idx_types[i];
    return NULL;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Big-endian file elements (raw) into native tensor elements (out), n of them; raw is out
 * (the bytes are swapped in place). */
static void convert(const idx_type *ty, const unsigned char *raw, void *out, int64_t n)
{
    switch (ty->code) {
    case 0x08:
    case 0x09:
        break;   /* bytes: read straight into the tensor */
    case 0x0B: { /* same size: swap in place */
        uint16_t *o = out;
        for (int64_t i = 0; i < n; i++) o[i] = (uint16_t)(raw[2 * i] << 8 | raw[2 * i + 1]);
        break;
    }
    case 0x0C:
    case 0x0D: { /* same size: swap in place through uint32 (float bits included) */
        uint32_t *o = out;
        for (int64_t i = 0; i < n; i++) o[i] = be32(raw + 4 * i);
        break;
    }
    case 0x0E: {
        uint64_t *o = out;
        for (int64_t i = 0; i < n; i++)
            o[i] = (uint64_t)be32(raw + 8 * i) << 32 | be32(raw + 8 * i + 4);
        break;
    }
    }
}

ddpl_tensor *ddpl_read_idx(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        ddpl_error("read_idx: %s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (S_ISDIR(st.st_mode)) {
        ddpl_error("read_idx: %s: is a directory, not an IDX file", path);
        return NULL;
    }
    bool gz = false;
    gz_source *f = gz_source_open(path, &gz);
    if (!f) {
        ddpl_error("read_idx: %s: cannot open: %s", path, strerror(errno));
        return NULL;
    }

    ddpl_tensor *t = NULL;
    const char *why = NULL;
    const char *kind = gz ? "gzip " : "";
    unsigned char head[4 + 4 * DDPL_MAX_DIMS];
    int64_t got = gz_source_read(f, head, 4, &why);
    if (got < 0) {
        ddpl_error("read_idx: %s: %s: %s", path, gz ? "corrupt gzip data" : "read error", why);
        goto done;
    }
    if (got < 4) {
        ddpl_error("read_idx: %s: %sfile too short for an IDX header (%lld bytes)", path, kind,
                   (long long)got);
        goto done;
    }
    uint32_t magic = be32(head);
    const idx_type *ty = find_type(head[2]);
    int rank = head[3];
    if (head[0] != 0 || head[1] != 0 || !ty) {
        ddpl_error("read_idx: %s: bad magic number 0x%08x: not an IDX file (expected 0x0000TTRR "
                   "with element type TT one of 08 09 0B 0C 0D 0E and rank RR)",
                   path, (unsigned)magic);
        goto done;
    }
    if (rank < 1 || rank > DDPL_MAX_DIMS) {
        ddpl_error("read_idx: %s: rank %d in the magic number 0x%08x is not supported (1 to %d)",
                   path, rank, (unsigned)magic, DDPL_MAX_DIMS);
        goto done;
    }
    got = gz_source_read(f, head + 4, 4 * (int64_t)rank, &why);
    if (got < 0) {
        ddpl_error("read_idx: %s: %s: %s", path, gz ? "corrupt gzip data" : "read error", why);
        goto done;
    }
    if (got < 4 * rank) {
        ddpl_error("read_idx: %s: truncated header: rank %d needs %d bytes of sizes, got %lld",
                   path, rank, 4 * rank, (long long)got);
        goto done;
    }
    int64_t sizes[DDPL_MAX_DIMS], numel = 1;
    for (int d = 0; d < rank; d++) {
        sizes[d] = be32(head + 4 + 4 * d);
        /* each size < 2^32, so the running product only overflows past 2^62 / element size */
        if (sizes[d] && numel > ((int64_t)1 << 62) / (int64_t)ty->file_size / sizes[d]) {
            ddpl_error("read_idx: %s: sizes in the header are too large", path);
            goto done;
        }
        numel *= sizes[d];
    }
    /* a zero size keeps numel at 0 above, but the others must still make a shape a tensor may
     * have (found by spec/fuzz/fuzz_idx.c: [1644167168, 0, 4253024007]) */
    if (ddpl_check_shape("the header", rank, sizes, NULL) < 0) {
        ddpl_error("read_idx: %s: %s", path, ddpl_last_error());
        goto done;
    }
    int64_t header_bytes = 4 + 4 * (int64_t)rank;
    int64_t expected = numel * (int64_t)ty->file_size;
    if (!gz && st.st_size - header_bytes != expected) {
        int64_t have = st.st_size - header_bytes;
        if (have < expected)
            ddpl_error("read_idx: %s: truncated: expected %lld bytes of data, got %lld", path,
                       (long long)expected, (long long)have);
        else
            ddpl_error("read_idx: %s: %lld bytes after the %lld bytes of data that the header "
                       "announces",
                       path, (long long)(have - expected), (long long)expected);
        goto done;
    }
    if (gz && expected / DEFLATE_MAX_RATIO > (int64_t)st.st_size) {
        ddpl_error("read_idx: %s: truncated or corrupt: the header announces %lld bytes of data, "
                   "more than a gzip file of %lld bytes can hold",
                   path, (long long)expected, (long long)st.st_size);
        goto done;
    }

    t = ddpl_tensor_new(rank, sizes, ty->dtype, ddpl_cpu());
    if (!t) goto done;
    void *out = ddpl_tensor_data(t);
    /* every element type has a dtype of its size (idx_types): read in place, then swap */
    unsigned char *raw = out;
    got = gz_source_read(f, raw, expected, &why);
    if (got < 0) {
        ddpl_error("read_idx: %s: %s: %s", path, gz ? "corrupt gzip data" : "read error", why);
        goto fail;
    }
    if (got < expected) {
        const char *note = gz_source_note(f);
        ddpl_error("read_idx: %s: truncated: expected %lld bytes of data, got %lld%s%s%s", path,
                   (long long)expected, (long long)got, note ? " (gzip: " : "", note ? note : "",
                   note ? ")" : "");
        goto fail;
    }
    /* One more read: it must find the end of the data, and for gzip it also checks the stream's
     * CRC and length trailer and what follows the stream. */
    unsigned char extra[4096];
    int64_t more = 0, r;
    while ((r = gz_source_read(f, extra, sizeof extra, &why)) > 0) more += r;
    if (r < 0) {
        ddpl_error("read_idx: %s: %s: %s", path, gz ? "corrupt gzip data" : "read error", why);
        goto fail;
    }
    if (more > 0) {
        ddpl_error("read_idx: %s: %lld bytes after the %lld bytes of data that the header "
                   "announces",
                   path, (long long)more, (long long)expected);
        goto fail;
    }
    if (gz && gz_source_note(f)) {
        ddpl_error("read_idx: %s: truncated gzip stream: %s", path, gz_source_note(f));
        goto fail;
    }
    convert(ty, raw, out, numel);
    goto done;

fail:
    ddpl_tensor_release(t);
    t = NULL;
done:
    gz_source_close(f);
    return t;
}
