/* io/gz_source.h: reads a file that may be gzip-compressed, knowing exactly where its gzip
 * stream ends (zlib's gzread silently ignores whatever follows the last member).
 * defines: gz_source, gz_source_open, gz_source_read, gz_source_note, gz_source_close. */
#ifndef DDPL_IO_GZ_SOURCE_H
#define DDPL_IO_GZ_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct gz_source gz_source;

/* Opens path; *is_gzip tells whether it starts with the gzip magic (then it is inflated, else
 * read as is). NULL with errno set when the file cannot be opened (ENOMEM: out of memory). */
gz_source *gz_source_open(const char *path, bool *is_gzip);

/* Reads up to n bytes of content into buf; returns the count (less than n only at the end of
 * the content), or -1 with *why set when the gzip data is corrupt: a zlib message ("incorrect
 * data check"), or "N bytes after the gzip stream that are not a gzip member" (several members
 * and zero padding after the last one are accepted, as gzip(1) and Python's gzip do). */
int64_t gz_source_read(gz_source *s, void *buf, int64_t n, const char **why);

/* After a short read: why the gzip stream ended early ("unexpected end of file" when the file
 * stops inside a member), or NULL when it ended cleanly (or the file is not gzip). */
const char *gz_source_note(const gz_source *s);

void gz_source_close(gz_source *s);

#endif
