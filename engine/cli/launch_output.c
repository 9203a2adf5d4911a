/* cli/launch_output.c: the workers' output seen through the launcher: each line prefixed with its
 * rank ("[rank1]: ", --prefix-output) and/or copied to per-rank files (--log-dir DIR:
 * DIR/rank1.stdout and DIR/rank1.stderr, unprefixed), while the console still gets everything (as
 * torchrun --tee). defines: launch_out_new, launch_out_child_fds, launch_out_parent_ready,
 * launch_out_pollfds, launch_out_pump, launch_out_free.
 *
 * A worker writes to pipes; the launcher's poll loop calls launch_out_pump. Prefixed lines are
 * written whole, one write() per batch, so lines of different ranks do not mix mid-line. */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launch.h"

#define CHUNK       65536 /* bytes read per call */
#define MAX_PARTIAL 65536 /* a line longer than this is passed on in pieces */

typedef struct stream {
    int rfd, wfd; /* pipe ends; -1 once closed */
    int console;  /* 1 or 2 */
    int log_fd;   /* -1 without --log-dir */
    int rank;
    char *partial; /* the unfinished last line (prefix mode) */
    size_t len;
} stream;

struct launch_out {
    int n; /* 2 * nproc streams: [2 * local] stdout, [2 * local + 1] stderr */
    bool prefix;
    stream *s;
};

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return; /* a closed console or a full disk: the job goes on regardless */
        p += w;
        n -= (size_t)w;
    }
}

static int open_log(const char *dir, int rank, const char *which, bool append)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.%s", dir, rank, which);
    int fd = open(path, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC) | O_CLOEXEC, 0644);
    if (fd < 0) fprintf(stderr, "%s: cannot write %s (%s)\n", CLI_PROGNAME, path, strerror(errno));
    return fd;
}

launch_out *launch_out_new(int nproc, int first_rank, const char *log_dir, bool prefix, bool append)
{
    if (log_dir && mkdir(log_dir, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "%s: cannot create the log directory %s (%s)\n", CLI_PROGNAME, log_dir,
                strerror(errno));
        return NULL;
    }
    launch_out *o = calloc(1, sizeof *o);
    stream *s = calloc(2 * (size_t)nproc, sizeof *s);
    if (!o || !s) {
        free(o);
        free(s);
        fprintf(stderr, "%s: out of memory\n", CLI_PROGNAME);
        return NULL;
    }
    *o = (launch_out){2 * nproc, prefix, s};
    for (int i = 0; i < o->n; i++)
        s[i] = (stream){-1, -1, 1 + i % 2, -1, first_rank + i / 2, NULL, 0};
    for (int i = 0; i < o->n; i++) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) {
            fprintf(stderr, "%s: cannot create a pipe for rank %d (%s)\n", CLI_PROGNAME, s[i].rank,
                    strerror(errno));
            launch_out_free(o);
            return NULL;
        }
        fcntl(p[0], F_SETFL, O_NONBLOCK);
        s[i].rfd = p[0];
        s[i].wfd = p[1];
        if (log_dir &&
            (s[i].log_fd = open_log(log_dir, s[i].rank, i % 2 ? "stderr" : "stdout", append)) < 0) {
            launch_out_free(o);
            return NULL;
        }
    }
    return o;
}

void launch_out_child_fds(const launch_out *o, int local, int *out_fd, int *err_fd)
{
    *out_fd = o->s[2 * local].wfd;
    *err_fd = o->s[2 * local + 1].wfd;
}

void launch_out_parent_ready(launch_out *o)
{
    for (int i = 0; i < o->n; i++) {
        if (o->s[i].wfd >= 0) close(o->s[i].wfd);
        o->s[i].wfd = -1; /* so EOF comes when the worker (and its children) are gone */
    }
}

int launch_out_pollfds(const launch_out *o, struct pollfd *pfds, int max)
{
    int k = 0;
    for (int i = 0; i < o->n && k < max; i++)
        if (o->s[i].rfd >= 0) pfds[k++] = (struct pollfd){.fd = o->s[i].rfd, .events = POLLIN};
    return k;
}

/* Appends data to the stream's partial line and writes every complete line, prefixed. At EOF
 * (n == 0 and eof) the rest goes out with a newline added. */
static void prefixed(stream *s, const char *data, size_t n, bool eof)
{
    char prefix[32];
    int plen = snprintf(prefix, sizeof prefix, "[rank%d]: ", s->rank);
    char *p = realloc(s->partial, s->len + n + 1);
    if (!p) return;
    s->partial = p;
    memcpy(p + s->len, data, n);
    s->len += n;
    size_t lines = 1;
    for (size_t i = 0; i < s->len; i++) lines += p[i] == '\n';
    size_t cap = s->len + lines * (size_t)plen + 2, used = 0, start = 0;
    char *out = malloc(cap);
    if (!out) return;
    for (size_t i = 0; i < s->len; i++) {
        if (p[i] != '\n') continue;
        memcpy(out + used, prefix, (size_t)plen);
        memcpy(out + used + plen, p + start, i + 1 - start);
        used += (size_t)plen + i + 1 - start;
        start = i + 1;
    }
    if ((eof || s->len - start > MAX_PARTIAL) && start < s->len) {
        memcpy(out + used, prefix, (size_t)plen);
        memcpy(out + used + plen, p + start, s->len - start);
        used += (size_t)plen + s->len - start;
        out[used++] = '\n';
        start = s->len;
    }
    write_all(s->console, out, used);
    free(out);
    memmove(p, p + start, s->len - start);
    s->len -= start;
}

static void close_stream(launch_out *o, stream *s)
{
    if (o->prefix) prefixed(s, "", 0, true);
    close(s->rfd);
    s->rfd = -1;
}

bool launch_out_pump(launch_out *o, const struct pollfd *pfds, int n)
{
    static char buf[CHUNK];
    int k = 0;
    for (int i = 0; i < o->n && k < n; i++) {
        stream *s = &o->s[i];
        if (s->rfd < 0 || pfds[k].fd != s->rfd) continue;
        short ev = pfds[k++].revents;
        if (!(ev & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t r = read(s->rfd, buf, sizeof buf);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (r <= 0) {
            close_stream(o, s);
            continue;
        }
        if (s->log_fd >= 0) write_all(s->log_fd, buf, (size_t)r);
        if (o->prefix)
            prefixed(s, buf, (size_t)r, false);
        else
            write_all(s->console, buf, (size_t)r);
    }
    for (int i = 0; i < o->n; i++)
        if (o->s[i].rfd >= 0) return true;
    return false;
}

void launch_out_free(launch_out *o)
{
    if (!o) return;
    for (int i = 0; i < o->n; i++) {
        stream *s = &o->s[i];
        if (s->rfd >= 0) close_stream(o, s);
        if (s->wfd >= 0) close(s->wfd);
        if (s->log_fd >= 0) close(s->log_fd);
        free(s->partial);
    }
    free(o->s);
    free(o);
}
