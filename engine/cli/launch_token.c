/* cli/launch_token.c: the rendezvous store's shared secret for a job.
 * defines: launch_store_token.
 *
 * Anyone who can reach MASTER_ADDR:MASTER_PORT can talk to the store, and the store is how ranks
 * find each other: an open store on a network lets a stranger read the job's addresses or feed it
 * false ones. So a store is never open by default:
 *   - one machine: the launcher makes a random token of its own (nobody else needs to know it);
 *   - several machines: every launcher must hold the same secret, which they cannot invent
 *     alike, so the user gives it: DDPLUA_STORE_TOKEN in the environment, or --store-token-file
 *     PATH, a file only its owner may read or write (as ssh insists of its keys). Without either
 *     the launcher refuses to start and says how to give one; --no-store-auth runs with an open
 *     store on purpose (torchrun's behaviour, which has no authentication at all). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launch.h"

/* Reads the token from path into job->token: 0, or -1 with a message printed. */
static int token_from_file(launch_job *job, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        fprintf(stderr, "%s: --store-token-file %s: %s\n", CLI_PROGNAME, path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    const char *bad = NULL;
    char mode[64];
    if (!S_ISREG(st.st_mode)) {
        bad = "is not a regular file";
    } else if (st.st_mode & 077) {
        snprintf(mode, sizeof mode, "can be read or written by others (mode %04o; chmod 600 it)",
                 (unsigned)(st.st_mode & 07777));
        bad = mode;
    }
    char buf[sizeof job->token + 1];
    ssize_t n = bad ? 0 : read(fd, buf, sizeof buf);
    close(fd);
    if (!bad && n < 0) bad = strerror(errno);
    while (!bad && n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ')) n--;
    if (!bad && n == 0) bad = "is empty";
    if (!bad && (size_t)n >= sizeof job->token) bad = "holds more than 71 bytes";
    if (!bad && memchr(buf, '\0', (size_t)n)) bad = "holds a NUL byte";
    if (bad) {
        fprintf(stderr, "%s: --store-token-file %s %s\n", CLI_PROGNAME, path, bad);
        return -1;
    }
    memcpy(job->token, buf, (size_t)n);
    job->token[n] = '\0';
    return 0;
}

int launch_store_token(launch_job *job, const cli_launch *l)
{
    job->token[0] = '\0';
    if (l->store_token_file) return token_from_file(job, l->store_token_file);
    const char *env = getenv("DDPLUA_STORE_TOKEN");
    if (env && *env) return 0; /* the workers inherit it */
    if (l->nnodes == 1) {
        /* a stray client (another job given the same port) is refused, not let in */
        if (!launch_random_hex(job->token, 16)) job->token[0] = '\0';
        return 0;
    }
    if (l->no_store_auth) return 0;
    fprintf(stderr,
            "%s: --nnodes %d: the rendezvous store would be open to anyone who can reach "
            "%s:%d. Give every node the same secret: DDPLUA_STORE_TOKEN=<secret> in the "
            "environment, or --store-token-file FILE (a file only its owner can read); or pass "
            "--no-store-auth to run with an open store\n",
            CLI_PROGNAME, l->nnodes, l->master_addr ? l->master_addr : "127.0.0.1",
            l->master_port ? l->master_port : 29500);
    return -1;
}
