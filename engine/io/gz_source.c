/* io/gz_source.c: plain or gzip file contents through zlib's inflate (see gz_source.h).
 * defines: gz_source_open, gz_source_read, gz_source_note, gz_source_close.
 *
 * gzread would do for the content, but after the last member it takes anything for "trailing
 * garbage" and stops without a word, so a file with junk appended loads as if it were whole.
 * Driving inflate directly, the reader sees each member's end (Z_STREAM_END, its CRC and length
 * checked) and what follows it: another member (inflated in turn), zero padding (skipped), end
 * of file (the content ends), or anything else (an error naming the byte count). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "io/gz_source.h"

/* Compressed input read per refill: 64 KiB, or the file's size when smaller (a fuzzer's inputs
 * are bytes long). Until session 25 this was 1 MiB, a stopgap: a block that large is mmap'd by
 * glibc, and freeing it raised glibc's dynamic mmap threshold, which kept the training that
 * followed from paying a fresh mmap and its page faults for each ~1 MB buffer (64 KiB blocks
 * then cost bench/train's mlp a quarter of its speed). The host caching allocator
 * (core/host_cache.c) now serves those buffers whatever the threshold is. Measured on a shared
 * 2-core machine (load 6), alternating fresh processes: three read_idx of Fashion-MNIST's
 * training images took a median 0.745 s of CPU with 64 KiB blocks against 0.758 s with 1 MiB
 * (9 runs each), and bench/train's mlp worker afterwards had 0.04 minor page faults per step
 * with either (3 runs each). */
#define IN_BYTES ((size_t)64 << 10)

struct gz_source {
    FILE *f;
    bool gzip;
    bool member_open; /* inside a gzip member (between its header and its trailer) */
    bool done;        /* the content has ended (cleanly or not) */
    bool eof;         /* the file has no more bytes to give */
    const char *note; /* why a gzip stream ended early */
    char junk_msg[96];
    z_stream z;
    size_t in_bytes;   /* the size of in */
    unsigned char *in; /* compressed input */
};

gz_source *gz_source_open(const char *path, bool *is_gzip)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    gz_source *s = calloc(1, sizeof *s);
    if (!s) {
        fclose(f);
        errno = ENOMEM;
        return NULL;
    }
    s->f = f;
    struct stat st;
    size_t file_bytes = fstat(fileno(f), &st) == 0 && st.st_size > 0 ? (size_t)st.st_size : 0;
    s->in_bytes = file_bytes < 2 ? 2 : file_bytes < IN_BYTES ? file_bytes : IN_BYTES;
    s->in = malloc(s->in_bytes);
    if (!s->in) {
        fclose(f);
        free(s);
        errno = ENOMEM;
        return NULL;
    }
    unsigned char magic[2];
    size_t got = fread(magic, 1, 2, f);
    s->gzip = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    rewind(f);
    /* 16 + MAX_WBITS: a gzip wrapper (header, CRC-32 and length trailer), largest window */
    if (s->gzip && inflateInit2(&s->z, 16 + MAX_WBITS) != Z_OK) {
        fclose(f);
        free(s->in);
        free(s);
        errno = ENOMEM;
        return NULL;
    }
    s->member_open = s->gzip;
    *is_gzip = s->gzip;
    return s;
}

/* Fills the input buffer when it is empty; false at the end of the file. */
static bool refill(gz_source *s)
{
    if (s->z.avail_in > 0) return true;
    if (s->eof) return false;
    size_t got = fread(s->in, 1, s->in_bytes, s->f);
    if (got < s->in_bytes) s->eof = true;
    s->z.next_in = s->in;
    s->z.avail_in = (uInt)got;
    return got > 0;
}

/* Whether a gzip member starts at the input (1f 8b); a lone byte left at the end of the buffer
 * moves to its front so the next block can complete the magic. */
static bool starts_member(gz_source *s)
{
    if (s->z.avail_in == 1 && !s->eof) {
        s->in[0] = s->z.next_in[0];
        size_t got = fread(s->in + 1, 1, s->in_bytes - 1, s->f);
        if (got < s->in_bytes - 1) s->eof = true;
        s->z.next_in = s->in;
        s->z.avail_in = (uInt)(1 + got);
    }
    return s->z.avail_in > 1 && s->z.next_in[0] == 0x1f && s->z.next_in[1] == 0x8b;
}

/* Between members: skips zero padding, then finds another member, the end of the file, or junk
 * (counted to the end of the file for the message). Returns false with *why set on junk. */
static bool next_member(gz_source *s, const char **why)
{
    for (;;) {
        while (s->z.avail_in > 0 && s->z.next_in[0] == 0) {
            s->z.next_in++;
            s->z.avail_in--;
        }
        if (s->z.avail_in > 0 || !refill(s)) break;
    }
    if (s->z.avail_in == 0) { /* only padding (or nothing) after the last member */
        s->done = true;
        return true;
    }
    if (starts_member(s)) {
        inflateReset(&s->z);
        s->member_open = true;
        return true;
    }
    long long junk = s->z.avail_in;
    s->z.avail_in = 0;
    while (!s->eof) {
        size_t got = fread(s->in, 1, s->in_bytes, s->f);
        if (got < s->in_bytes) s->eof = true;
        junk += (long long)got;
    }
    snprintf(s->junk_msg, sizeof s->junk_msg,
             "%lld bytes after the gzip stream that are not a gzip member", junk);
    *why = s->junk_msg;
    s->done = true;
    return false;
}

static int64_t read_plain(gz_source *s, void *buf, int64_t n, const char **why)
{
    int64_t got = 0;
    while (got < n) {
        size_t r = fread((char *)buf + got, 1, (size_t)(n - got), s->f);
        if (r == 0) {
            if (ferror(s->f)) {
                *why = strerror(errno ? errno : EIO);
                return -1;
            }
            break;
        }
        got += (int64_t)r;
    }
    return got;
}

int64_t gz_source_read(gz_source *s, void *buf, int64_t n, const char **why)
{
    if (!s->gzip) return read_plain(s, buf, n, why);
    int64_t got = 0;
    while (got < n && !s->done) {
        if (!s->member_open) {
            if (!next_member(s, why)) return -1;
            continue;
        }
        if (!refill(s)) { /* the file ends inside a member */
            s->note = "unexpected end of file";
            s->done = true;
            break;
        }
        int64_t want = n - got;
        s->z.next_out = (unsigned char *)buf + got;
        s->z.avail_out = want > (int64_t)UINT32_MAX ? UINT32_MAX : (uInt)want;
        uInt before = s->z.avail_out;
        int rc = inflate(&s->z, Z_NO_FLUSH);
        got += (int64_t)(before - s->z.avail_out);
        if (rc == Z_STREAM_END) {
            s->member_open = false;
        } else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) {
            *why = s->z.msg ? s->z.msg : "invalid compressed data";
            s->done = true;
            return -1;
        } else if (rc == Z_MEM_ERROR) {
            *why = "out of memory";
            s->done = true;
            return -1;
        }
        /* Z_OK or Z_BUF_ERROR: more input or more room; the loop provides either */
    }
    return got;
}

const char *gz_source_note(const gz_source *s)
{
    return s->note;
}

void gz_source_close(gz_source *s)
{
    if (!s) return;
    if (s->gzip) inflateEnd(&s->z);
    fclose(s->f);
    free(s->in);
    free(s);
}
