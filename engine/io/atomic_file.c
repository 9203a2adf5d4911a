/* io/atomic_file.c: files replaced whole (atomic_file.h).
 * defines: ddpl_atomic_open, ddpl_atomic_commit, ddpl_atomic_abort. */
#define _GNU_SOURCE /* O_TMPFILE, linkat */
#include "atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ddpl/tensor.h" /* ddpl_error */

/* The folder and the file name of path, as two strings in the caller's buffers. */
static void split_path(const char *path, char *dir, char *base, size_t n)
{
    char a[PATH_MAX], b[PATH_MAX];
    snprintf(a, sizeof a, "%s", path);
    snprintf(b, sizeof b, "%s", path);
    snprintf(dir, n, "%s", dirname(a));
    snprintf(base, n, "%s", basename(b));
}

static void this_host(char *host, size_t n)
{
    if (gethostname(host, n) != 0) snprintf(host, n, "localhost");
    host[n - 1] = '\0';
    for (char *c = host; *c; c++)
        if (*c == '/') *c = '_';
}

/* Removes base.tmp.<host>.<pid>.<n> in dir for this host's pids that no longer run: what a
 * killed writer of a named temporary left. Best effort: a folder that cannot be read is left. */
static void remove_stale(const char *dir, const char *base)
{
    char host[256], prefix[PATH_MAX];
    this_host(host, sizeof host);
    int plen = snprintf(prefix, sizeof prefix, "%s.tmp.%s.", base, host);
    if (plen < 0 || (size_t)plen >= sizeof prefix) return;
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, (size_t)plen) != 0) continue;
        char *end;
        long pid = strtol(e->d_name + plen, &end, 10);
        if (end == e->d_name + plen || *end != '.' || pid <= 0 || pid == (long)getpid()) continue;
        strtoul(end + 1, &end, 10);
        if (*end != '\0') continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive (or not ours to judge) */
        unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

/* A fresh name base.tmp.<host>.<pid>.<n> for path into f->tmp: 0, or -1 (too long). */
static int temp_name(ddpl_atomic_file *f)
{
    static atomic_uint counter;
    char host[256];
    this_host(host, sizeof host);
    int n = snprintf(f->tmp, sizeof f->tmp, "%s.tmp.%s.%d.%u", f->path, host, (int)getpid(),
                     atomic_fetch_add(&counter, 1));
    if (n < 0 || (size_t)n >= sizeof f->tmp) return ddpl_error("save: %s: path too long", f->path);
    return 0;
}

int ddpl_atomic_open(ddpl_atomic_file *f, const char *path)
{
    *f = (ddpl_atomic_file){.fd = -1, .path = path};
    char dir[PATH_MAX], base[PATH_MAX];
    split_path(path, dir, base, sizeof dir);
    remove_stale(dir, base);
    /* unnamed until complete, where the kernel and file system can, and /proc names it then;
     * DDPLUA_SAVE_NAMED_TEMP=1 takes the other way (file systems without O_TMPFILE; specs) */
    const char *named = getenv("DDPLUA_SAVE_NAMED_TEMP");
    if (!(named && strcmp(named, "1") == 0) && access("/proc/self/fd", X_OK) == 0) {
        f->fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
        if (f->fd >= 0) return 0;
    }
    f->named = true;
    for (int attempt = 0; attempt < 100; attempt++) {
        if (temp_name(f) < 0) return -1;
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (f->fd >= 0) return 0;
        if (errno != EEXIST) break;
    }
    return ddpl_error("save: %s: cannot create a file there: %s", path, strerror(errno));
}

/* fsync of the folder holding path, so the rename itself is durable (best effort). */
static void sync_dir(const char *path)
{
    char dir[PATH_MAX], base[PATH_MAX];
    split_path(path, dir, base, sizeof dir);
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    fsync(fd);
    close(fd);
}

/* Gives the unnamed temporary the name f->tmp (the moment before its rename). */
static int name_it(ddpl_atomic_file *f)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", f->fd);
    for (int attempt = 0; attempt < 100; attempt++) {
        if (temp_name(f) < 0) return -1;
        if (linkat(AT_FDCWD, proc, AT_FDCWD, f->tmp, AT_SYMLINK_FOLLOW) == 0) {
            f->named = true;
            return 0;
        }
        if (errno != EEXIST) break;
    }
    return ddpl_error("save: %s: cannot name the new file: %s", f->path, strerror(errno));
}

int ddpl_atomic_commit(ddpl_atomic_file *f)
{
    int rc = 0;
    if (fsync(f->fd) < 0) rc = ddpl_error("save: %s: fsync failed: %s", f->path, strerror(errno));
    /* naming and rename back to back: the name exists for as short a time as can be (a writer
     * killed in between leaves a whole temporary, which the next save of PATH removes) */
    if (rc == 0 && !f->named) rc = name_it(f);
    if (rc == 0 && rename(f->tmp, f->path) < 0)
        rc = ddpl_error("save: %s: cannot replace the file: %s", f->path, strerror(errno));
    if (close(f->fd) < 0 && rc == 0)
        rc = ddpl_error("save: %s: close failed: %s", f->path, strerror(errno));
    f->fd = -1;
    if (rc < 0) {
        if (f->named) unlink(f->tmp);
        return -1;
    }
    sync_dir(f->path);
    return 0;
}

void ddpl_atomic_abort(ddpl_atomic_file *f)
{
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    if (f->named) unlink(f->tmp);
}
