/* io/safetensors.c: safetensors files, written atomically and read with full validation.
 * defines: ddpl_safetensors_save, ddpl_safetensors_load, ddpl_st_file_clear,
 *          ddpl_st_dtype_code.
 *
 * A save replaces its file whole, leaving no temporary behind (atomic_file.h).
 * Tensor bytes go to disk as they are in memory: this engine only builds for little-endian
 * hosts, which is the file's byte order. A load reads each tensor straight into its new
 * storage with pread, so a checkpoint is never held twice in memory. */
#define _GNU_SOURCE /* O_CLOEXEC, pread */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "json.h"
#include "ops/op_util.h" /* ddpl_tensor_host_copy */

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c writes host memory as little-endian data: port it for big-endian hosts"
#endif

/* The reference implementation refuses larger headers; so do we (a corrupt length could
 * otherwise ask for a huge allocation). */
#define ST_MAX_HEADER 100000000ull

static const char *const st_codes[DDPL_DTYPE_COUNT] = {
    [DDPL_FLOAT32] = "F32",   [DDPL_FLOAT64] = "F64", [DDPL_FLOAT16] = "F16",
    [DDPL_BFLOAT16] = "BF16", [DDPL_INT64] = "I64",   [DDPL_INT32] = "I32",
    [DDPL_UINT8] = "U8",      [DDPL_BOOL] = "BOOL",   [DDPL_INT8] = "I8",
    [DDPL_INT16] = "I16",
};

const char *ddpl_st_dtype_code(ddpl_dtype dt)
{
    return (unsigned)dt < DDPL_DTYPE_COUNT ? st_codes[dt] : NULL;
}

static int st_dtype_from_code(const char *code)
{
    for (int d = 0; d < DDPL_DTYPE_COUNT; d++)
        if (st_codes[d] && strcmp(st_codes[d], code) == 0) return d;
    return -1;
}

/* ---- writing ---- */

static int write_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t k = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Writes t's elements (row-major) to fd. */
static int write_tensor(int fd, const ddpl_tensor *t, const char *path, const char *name)
{
    size_t nbytes = (size_t)ddpl_tensor_numel(t) * ddpl_dtype_size((ddpl_dtype)t->dtype);
    if (nbytes == 0) return 0;
    bool direct = t->device.type == DDPL_CPU && ddpl_tensor_is_contiguous(t);
    void *buf = direct ? ddpl_data_ptr(t) : ddpl_tensor_host_copy(t);
    if (!buf)
        return ddpl_error("save: %s: cannot copy tensor '%s' to the host: %s", path, name,
                          ddpl_last_error());
    int rc = write_all(fd, buf, nbytes);
    int err = errno;
    if (!direct) free(buf);
    if (rc < 0) return ddpl_error("save: %s: write failed: %s", path, strerror(err));
    return 0;
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A name that names[0..n) holds twice, or NULL: sorted, so a file of 200k tensors takes
 * milliseconds rather than the minutes comparing every pair took (issue 32). */
static const char *repeated_name(const char *const *names, size_t n)
{
    if (n < 2) return NULL;
    const char **sorted = ddpl_xmalloc(n * sizeof *sorted);
    memcpy(sorted, names, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_str_ptr);
    const char *dup = NULL;
    for (size_t i = 1; i < n && !dup; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0) dup = sorted[i];
    free(sorted);
    return dup;
}

/* The JSON header (padded to a multiple of 8) for the tensors in order. */
static int build_header(ddpl_buf *h, const char *path, int n, const char *const *names,
                        ddpl_tensor *const *tensors, int nmeta, const char *const *meta_keys,
                        const char *const *meta_values, const size_t *meta_lens)
{
    ddpl_buf_puts(h, "{");
    if (nmeta > 0) {
        ddpl_buf_puts(h, "\"__metadata__\":{");
        for (int i = 0; i < nmeta; i++) {
            if (!ddpl_utf8_valid(meta_keys[i], strlen(meta_keys[i])) ||
                !ddpl_utf8_valid(meta_values[i], meta_lens[i]))
                return ddpl_error("save: %s: metadata entry '%s' is not valid UTF-8", path,
                                  meta_keys[i]);
            if (i) ddpl_buf_puts(h, ",");
            ddpl_buf_json_string(h, meta_keys[i], strlen(meta_keys[i]));
            ddpl_buf_puts(h, ":");
            ddpl_buf_json_string(h, meta_values[i], meta_lens[i]);
        }
        ddpl_buf_puts(h, "}");
    }
    const char *dup = repeated_name(names, (size_t)n);
    if (dup) return ddpl_error("save: %s: two tensors are named '%s'", path, dup);
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        const ddpl_tensor *t = tensors[i];
        size_t len = strlen(names[i]);
        if (len == 0) return ddpl_error("save: %s: a tensor has an empty name", path);
        if (!ddpl_utf8_valid(names[i], len))
            return ddpl_error("save: %s: tensor name '%s' is not valid UTF-8", path, names[i]);
        if (strcmp(names[i], "__metadata__") == 0)
            return ddpl_error("save: %s: '__metadata__' cannot name a tensor", path);
        const char *code = ddpl_st_dtype_code((ddpl_dtype)t->dtype);
        if (!code)
            return ddpl_error("save: %s: tensor '%s' has a dtype safetensors cannot store", path,
                              names[i]);
        uint64_t nbytes = (uint64_t)ddpl_tensor_numel(t) * ddpl_dtype_size((ddpl_dtype)t->dtype);
        ddpl_buf_puts(h, i || nmeta > 0 ? "," : "");
        ddpl_buf_json_string(h, names[i], len);
        ddpl_buf_printf(h, ":{\"dtype\":\"%s\",\"shape\":[", code);
        for (int d = 0; d < t->ndim; d++)
            ddpl_buf_printf(h, "%s%lld", d ? "," : "", (long long)t->sizes[d]);
        ddpl_buf_printf(h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                        (unsigned long long)(offset + nbytes));
        offset += nbytes;
    }
    ddpl_buf_puts(h, "}");
    while (h->len % 8) ddpl_buf_puts(h, " ");
    if (h->failed) return ddpl_error("save: %s: out of memory building the header", path);
    if (h->len > ST_MAX_HEADER)
        return ddpl_error("save: %s: the header would be %zu bytes, over the format's limit of "
                          "%llu",
                          path, h->len, ST_MAX_HEADER);
    return 0;
}

int ddpl_safetensors_save(const char *path, int n, const char *const *names,
                          ddpl_tensor *const *tensors, int nmeta, const char *const *meta_keys,
                          const char *const *meta_values, const size_t *meta_lens)
{
    ddpl_buf h = {0};
    if (build_header(&h, path, n, names, tensors, nmeta, meta_keys, meta_values, meta_lens) < 0) {
        ddpl_buf_free(&h);
        return -1;
    }
    ddpl_atomic_file f;
    if (ddpl_atomic_open(&f, path) < 0) {
        ddpl_buf_free(&h);
        return -1;
    }
    unsigned char len8[8];
    for (int k = 0; k < 8; k++) len8[k] = (unsigned char)((uint64_t)h.len >> (8 * k));
    int rc = 0;
    if (write_all(f.fd, len8, 8) < 0 || write_all(f.fd, h.data, h.len) < 0)
        rc = ddpl_error("save: %s: write failed: %s", path, strerror(errno));
    for (int i = 0; i < n && rc == 0; i++) rc = write_tensor(f.fd, tensors[i], path, names[i]);
    ddpl_buf_free(&h);
    if (rc < 0) {
        ddpl_atomic_abort(&f);
        return -1;
    }
    return ddpl_atomic_commit(&f);
}

/* ---- reading ---- */

typedef struct entry {
    const char *name;
    int dtype;
    int ndim;
    int64_t sizes[DDPL_MAX_DIMS];
    uint64_t begin, end;
} entry;

/* A non-negative JSON integer, else -1. */
static int64_t json_uint(const ddpl_json *j)
{
    return j && j->type == DDPL_JSON_NUMBER && j->is_int && j->integer >= 0 ? j->integer : -1;
}

/* Checks one tensor entry of the header and fills e. */
static int parse_entry(const char *path, const char *name, const ddpl_json *v, uint64_t data_size,
                       entry *e)
{
    if (v->type != DDPL_JSON_OBJECT)
        return ddpl_error("load: %s: header entry '%s' is not an object", path, name);
    const ddpl_json *dt = ddpl_json_get(v, "dtype"), *shape = ddpl_json_get(v, "shape"),
                    *offs = ddpl_json_get(v, "data_offsets");
    if (!dt || dt->type != DDPL_JSON_STRING)
        return ddpl_error("load: %s: tensor '%s' has no dtype string", path, name);
    e->name = name;
    e->dtype = st_dtype_from_code(dt->str);
    if (e->dtype < 0)
        return ddpl_error("load: %s: tensor '%s' has dtype '%s', which is not one of F32 F64 "
                          "F16 BF16 I64 I32 U8 BOOL",
                          path, name, dt->str);
    if (!shape || shape->type != DDPL_JSON_ARRAY)
        return ddpl_error("load: %s: tensor '%s' has no shape list", path, name);
    if (shape->len > DDPL_MAX_DIMS)
        return ddpl_error("load: %s: tensor '%s' has %zu dimensions, more than the %d supported",
                          path, name, shape->len, DDPL_MAX_DIMS);
    e->ndim = (int)shape->len;
    uint64_t numel = 1;
    bool overflow = false;
    for (int d = 0; d < e->ndim; d++) {
        int64_t s = json_uint(&shape->items[d]);
        if (s < 0)
            return ddpl_error("load: %s: tensor '%s' has a shape entry that is not a "
                              "non-negative integer",
                              path, name);
        e->sizes[d] = s;
        if (s != 0 && numel > UINT64_MAX / 16 / (uint64_t)s) overflow = true;
        numel *= (uint64_t)s;
    }
    if (!offs || offs->type != DDPL_JSON_ARRAY || offs->len != 2 ||
        json_uint(&offs->items[0]) < 0 || json_uint(&offs->items[1]) < 0)
        return ddpl_error("load: %s: tensor '%s' needs data_offsets [begin, end] of "
                          "non-negative integers",
                          path, name);
    e->begin = (uint64_t)offs->items[0].integer;
    e->end = (uint64_t)offs->items[1].integer;
    if (e->begin > e->end)
        return ddpl_error("load: %s: tensor '%s' has data_offsets [%llu,%llu] that end before "
                          "they begin",
                          path, name, (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end > data_size)
        return ddpl_error("load: %s: tensor '%s' has data_offsets [%llu,%llu] beyond the data "
                          "section of %llu bytes (truncated file?)",
                          path, name, (unsigned long long)e->begin, (unsigned long long)e->end,
                          (unsigned long long)data_size);
    uint64_t need = numel * ddpl_dtype_size((ddpl_dtype)e->dtype);
    if (overflow || need != e->end - e->begin) {
        char buf[160];
        return ddpl_error("load: %s: tensor '%s' of dtype %s and shape %s needs %llu bytes but "
                          "its data_offsets [%llu,%llu] hold %llu",
                          path, name, dt->str, ddpl_sizes_str(e->ndim, e->sizes, buf, sizeof buf),
                          (unsigned long long)need, (unsigned long long)e->begin,
                          (unsigned long long)e->end, (unsigned long long)(e->end - e->begin));
    }
    return 0;
}

static int read_metadata(const char *path, const ddpl_json *meta, ddpl_st_file *out)
{
    if (meta->type != DDPL_JSON_OBJECT)
        return ddpl_error("load: %s: __metadata__ is not an object", path);
    out->meta_keys = ddpl_xcalloc(meta->len + 1, sizeof(char *));
    out->meta_values = ddpl_xcalloc(meta->len + 1, sizeof(char *));
    out->meta_lens = ddpl_xcalloc(meta->len + 1, sizeof(size_t));
    for (size_t i = 0; i < meta->len; i++) {
        if (meta->items[i].type != DDPL_JSON_STRING)
            return ddpl_error("load: %s: __metadata__ entry '%s' is not a string", path,
                              meta->keys[i].str);
        if (strlen(meta->keys[i].str) != meta->keys[i].len)
            return ddpl_error("load: %s: a __metadata__ key contains a NUL byte ('%s...')", path,
                              meta->keys[i].str);
        out->meta_keys[i] = strdup(meta->keys[i].str);
        out->meta_values[i] = ddpl_xmalloc(meta->items[i].len + 1);
        memcpy(out->meta_values[i], meta->items[i].str, meta->items[i].len + 1);
        out->meta_lens[i] = meta->items[i].len;
        out->nmeta++;
    }
    return 0;
}

/* Reads [off, off+n) of fd into dst; -1 on a short read. */
static int read_at(int fd, void *dst, size_t n, uint64_t off)
{
    char *p = dst;
    while (n > 0) {
        ssize_t k = pread(fd, p, n > (1u << 30) ? (1u << 30) : n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

static int cmp_entry_name(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

/* Where entry idx's bytes lie: the file order of the tensors. */
typedef struct span {
    uint64_t begin, end;
    int idx;
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->begin < y->begin   ? -1
           : x->begin > y->begin ? 1
                                 : (x->end > y->end) - (x->end < y->end);
}

enum { READ_CHUNK = 1 << 20 }; /* bytes of small tensors read with one pread */

/* Reads the bytes of every tensor, in file order: runs of small tensors that lie within
 * READ_CHUNK bytes of each other with one pread into a bounce buffer (a file of 200k tiny tensors
 * is not 200k system calls), a larger one straight into its storage (never held twice). */
static int read_all_tensors(int fd, const char *path, const entry *es, const span *order, int n,
                            ddpl_tensor *const *ts, uint64_t data_start)
{
    unsigned char *buf = NULL;
    int rc = 0;
    for (int i = 0; i < n && rc == 0;) {
        const span *first = &order[i];
        int k = i + 1;
        while (k < n && order[k].end - first->begin <= READ_CHUNK) k++;
        if (k - i == 1) { /* alone (or large): straight into its storage */
            if (read_at(fd, ddpl_data_ptr(ts[first->idx]), first->end - first->begin,
                        data_start + first->begin) < 0)
                rc = -1;
        } else {
            if (!buf && !(buf = malloc(READ_CHUNK)))
                return ddpl_error("load: %s: out of memory for a read buffer", path);
            if (read_at(fd, buf, order[k - 1].end - first->begin, data_start + first->begin) < 0)
                rc = -1;
            for (int j = i; j < k && rc == 0; j++)
                if (order[j].end > order[j].begin)
                    memcpy(ddpl_data_ptr(ts[order[j].idx]), buf + (order[j].begin - first->begin),
                           order[j].end - order[j].begin);
        }
        if (rc < 0)
            rc = ddpl_error("load: %s: cannot read the data of tensor '%s' (the file changed or "
                            "is unreadable)",
                            path, es[first->idx].name);
        i = k;
    }
    free(buf);
    return rc;
}

/* Validates the parsed header and reads every tensor; the tensors come out in name order
 * (ddpl_st_find bisects them). One sort by name finds a name given twice too. */
static int load_tensors(int fd, const char *path, const ddpl_json *hdr, uint64_t data_start,
                        uint64_t data_size, ddpl_st_file *out)
{
    if (hdr->type != DDPL_JSON_OBJECT)
        return ddpl_error("load: %s: the header is not a JSON object", path);
    entry *es = ddpl_xcalloc(hdr->len + 1, sizeof *es);
    int n = 0, rc = 0, metadata = 0;
    for (size_t i = 0; i < hdr->len && rc == 0; i++) {
        const char *name = hdr->keys[i].str;
        /* a JSON name may spell a NUL (\u0000); as a C string it would be cut there, and two
         * different names could come out the same */
        if (strlen(name) != hdr->keys[i].len) {
            rc = ddpl_error("load: %s: a tensor name contains a NUL byte ('%s...')", path, name);
            break;
        }
        if (strcmp(name, "__metadata__") != 0)
            rc = parse_entry(path, name, &hdr->items[i], data_size, &es[n++]);
        else if (metadata++)
            rc = ddpl_error("load: %s: the header names '__metadata__' twice", path);
        else
            rc = read_metadata(path, &hdr->items[i], out);
    }
    if (rc == 0) {
        qsort(es, (size_t)n, sizeof *es, cmp_entry_name);
        for (int i = 1; i < n && rc == 0; i++)
            if (strcmp(es[i - 1].name, es[i].name) == 0)
                rc = ddpl_error("load: %s: the header names '%s' twice", path, es[i].name);
    }
    span *order = rc == 0 ? ddpl_xmalloc(((size_t)n + 1) * sizeof *order) : NULL;
    if (rc == 0) {
        for (int i = 0; i < n; i++) order[i] = (span){es[i].begin, es[i].end, i};
        qsort(order, (size_t)n, sizeof *order, cmp_span);
        for (int i = 1; i < n && rc == 0; i++) {
            const entry *a = &es[order[i - 1].idx], *b = &es[order[i].idx];
            if (b->begin < a->end)
                rc = ddpl_error("load: %s: tensors '%s' [%llu,%llu] and '%s' [%llu,%llu] "
                                "overlap in the data section",
                                path, a->name, (unsigned long long)a->begin,
                                (unsigned long long)a->end, b->name, (unsigned long long)b->begin,
                                (unsigned long long)b->end);
        }
    }
    if (rc == 0) {
        out->names = ddpl_xcalloc((size_t)n + 1, sizeof(char *));
        out->tensors = ddpl_xcalloc((size_t)n + 1, sizeof(ddpl_tensor *));
    }
    for (int i = 0; i < n && rc == 0; i++) {
        ddpl_tensor *t =
            ddpl_tensor_new(es[i].ndim, es[i].sizes, (ddpl_dtype)es[i].dtype, ddpl_cpu());
        if (!t) {
            rc = ddpl_error("load: %s: cannot allocate tensor '%s': %s", path, es[i].name,
                            ddpl_last_error());
            break;
        }
        out->names[out->n] = strdup(es[i].name);
        out->tensors[out->n++] = t;
    }
    if (rc == 0) rc = read_all_tensors(fd, path, es, order, n, out->tensors, data_start);
    free(order);
    free(es);
    return rc;
}

int ddpl_st_find(const ddpl_st_file *f, const char *name)
{
    int lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(f->names[mid], name);
        if (c == 0) return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

int ddpl_safetensors_load(const char *path, ddpl_st_file *out)
{
    memset(out, 0, sizeof *out);
    /* O_NONBLOCK: opening a FIFO would otherwise wait for a writer, for ever (issue 32); it
     * changes nothing for the regular file that is all this accepts */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return ddpl_error("load: %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return ddpl_error("load: %s: not a regular file", path);
    }
    uint64_t size = (uint64_t)st.st_size;
    unsigned char len8[8];
    if (size < 8 || read_at(fd, len8, 8, 0) < 0) {
        close(fd);
        return ddpl_error("load: %s: the file is %llu bytes, too short for a safetensors header",
                          path, (unsigned long long)size);
    }
    uint64_t hlen = 0;
    for (int k = 7; k >= 0; k--) hlen = hlen << 8 | len8[k];
    if (hlen > size - 8) {
        close(fd);
        return ddpl_error("load: %s: header length %llu exceeds the file size %llu", path,
                          (unsigned long long)hlen, (unsigned long long)size);
    }
    if (hlen > ST_MAX_HEADER) {
        close(fd);
        return ddpl_error("load: %s: header length %llu is over the format's limit of %llu", path,
                          (unsigned long long)hlen, ST_MAX_HEADER);
    }
    char *text = malloc(hlen ? hlen : 1);
    if (!text || read_at(fd, text, hlen, 8) < 0) {
        free(text);
        close(fd);
        return ddpl_error("load: %s: cannot read the %llu-byte header", path,
                          (unsigned long long)hlen);
    }
    ddpl_json hdr;
    const char *err;
    size_t pos;
    int rc = 0;
    if (ddpl_json_parse(text, hlen, &hdr, &err, &pos) < 0) {
        rc = ddpl_error("load: %s: the header is not valid JSON: %s at byte %zu", path, err, pos);
    } else {
        rc = load_tensors(fd, path, &hdr, 8 + hlen, size - 8 - hlen, out);
        ddpl_json_free(&hdr);
    }
    free(text);
    close(fd);
    if (rc < 0) {
        char *msg = strdup(ddpl_last_error());
        ddpl_st_file_clear(out);
        ddpl_error("%s", msg ? msg : "load: out of memory");
        free(msg);
    }
    return rc;
}

void ddpl_st_file_clear(ddpl_st_file *f)
{
    for (int i = 0; i < f->n; i++) {
        free(f->names[i]);
        ddpl_tensor_release(f->tensors[i]);
    }
    if (f->meta_keys)
        for (int i = 0; i < f->nmeta; i++) {
            free(f->meta_keys[i]);
            free(f->meta_values[i]);
        }
    free(f->names);
    free(f->tensors);
    free(f->meta_keys);
    free(f->meta_values);
    free(f->meta_lens);
    memset(f, 0, sizeof *f);
}
