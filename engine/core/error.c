/* core/error.c: the thread-local "last error" message of the C API, and the metadata allocators
 * that abort when memory is out. defines: ddpl_error, ddpl_last_error, ddpl_xmalloc,
 *          ddpl_xcalloc, ddpl_xstrdup. */
#include <stdarg.h>

#include "core.h"

static _Thread_local char last_error[1024];

int ddpl_error(const char *fmt, ...)
{
    /* formatted aside first: callers prefix the previous error, ddpl_error("f: %s",
     * ddpl_last_error()), and vsnprintf into the buffer it reads from garbles the text */
    char msg[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(last_error, msg, sizeof msg);
    return -1;
}

const char *ddpl_last_error(void)
{
    return last_error[0] ? last_error : "unknown error";
}

void *ddpl_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        /* Engine metadata is tiny; failing to get it means the process is out of memory and no
         * state we could return to is consistent. */
        fprintf(stderr, "ddplua: out of memory allocating %zu bytes of metadata\n", n);
        abort();
    }
    return p;
}

char *ddpl_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(ddpl_xmalloc(n), s, n);
}

void *ddpl_xcalloc(size_t count, size_t n)
{
    void *p = calloc(count ? count : 1, n ? n : 1);
    if (!p) {
        fprintf(stderr, "ddplua: out of memory allocating %zu bytes of metadata\n", count * n);
        abort();
    }
    return p;
}
