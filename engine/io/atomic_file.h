/* io/atomic_file.h: a file written whole or not at all: its bytes go to a temporary in the same
 * folder, which replaces PATH by rename() only once it is complete and on disk. A reader sees the
 * old file or the new one, never half of one, whatever happens to the writer.
 * defines: ddpl_atomic_file, ddpl_atomic_open, ddpl_atomic_commit, ddpl_atomic_abort.
 *
 * No debris either. Where the file system has O_TMPFILE the temporary has no name until the
 * very end (linked under PATH.tmp.* just before the rename), so a writer killed while writing
 * leaves nothing behind; one killed in the instant between the link and the rename leaves a
 * whole temporary, removed like the named ones below. Elsewhere it is named PATH.tmp.<host>.<pid>.<n> from the start, and
 * every open of the same PATH removes the ones whose writer, on this host, is no longer
 * running (a temporary of a live process, or of another host sharing the folder, is left
 * alone). DDPLUA_SAVE_NAMED_TEMP=1 names the temporary from the start everywhere. Errors read
 * "save: PATH: <what>". */
#ifndef DDPL_IO_ATOMIC_FILE_H
#define DDPL_IO_ATOMIC_FILE_H

#include <limits.h>
#include <stdbool.h>

typedef struct ddpl_atomic_file {
    int fd;             /* write the contents here */
    const char *path;   /* the file to replace (borrowed) */
    bool named;         /* the temporary has a name (tmp) while it is written */
    char tmp[PATH_MAX]; /* its name once it has one */
} ddpl_atomic_file;

/* Opens the temporary for path: 0, or -1 with the error set. */
int ddpl_atomic_open(ddpl_atomic_file *f, const char *path);
/* fsync, then puts the temporary in place of path: 0, or -1 with the error set (path is then
 * as it was, and the temporary gone). */
int ddpl_atomic_commit(ddpl_atomic_file *f);
/* Closes and removes the temporary; path stays as it was. */
void ddpl_atomic_abort(ddpl_atomic_file *f);

#endif
