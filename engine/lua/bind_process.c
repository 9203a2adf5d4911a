/* lua/bind_process.c: the POSIX process calls that ddpl.multiprocessing.spawn is built on.
 * defines: lb_process_functions (package.loaded['ddplua.core.process']): fork, pipe, close,
 *          write, read, waitpid, kill, sleep, setenv, exit, free_port, getpid, isatty,
 *          hostname, wall_time (the last three for lua/ddplua/utils: progress bars, TensorBoard
 *          event files).
 *
 *   fork() -> pid (0 in the child)   stdio is flushed first, so buffered output is not written
 *                                    twice; the child leads a new process group (so that kill
 *                                    also stops the programs it started) and gets SIGKILL when
 *                                    the parent dies (PR_SET_PDEATHSIG): no orphans
 *   pipe() -> rfd, wfd               close-on-exec; the read end is non-blocking
 *   close(fd); write(fd, s) -> true  (all of s, retrying on EINTR)
 *   read(fd) -> string               what is there now ('' when nothing), never blocks
 *   waitpid(pid) -> nil | 'exit', code | 'signal', signo, name      never blocks (WNOHANG)
 *   kill(pid, 'TERM' | 'KILL')        to the child's process group; sleep(seconds); setenv(name,
 * value); getpid() exit(code)                       flushes stdio and _exits: no atexit handlers,
 * no Lua close (a forked child must not run the parent's cleanup) free_port() -> port a TCP port on
 * 127.0.0.1 that the kernel just had free Failures raise "spawn: <call>: <strerror>". Threads: a
 * forked child has only the calling thread; the CPU pool restarts its workers on first use
 * (engine/cpu/cpu_threads.c, pthread_atfork) and OpenBLAS's pthread build shuts its pool down
 * around fork by itself.
 *   isatty(file | fd) -> boolean     a Lua file handle (io.stdout) or a descriptor number
 *   hostname() -> string             gethostname(2)
 *   wall_time() -> seconds           since the Unix epoch, with the fraction (CLOCK_REALTIME)
 *   gang(n) -> gang                  room for n children that stand or fall together: the
 *                                    engine's one supervisor (distributed/gang.h), whose rules
 *                                    the launcher follows too. Methods: add(pid, rank);
 *                                    reap() -> nil | rank, exit_code, how ("failed with exit
 *                                    code 1", "was killed by signal SIGKILL"): the gang's first
 *                                    failure, when it happened in this call (the others are
 *                                    then being stopped); stop() (SIGTERM now, SIGKILL once
 *                                    overdue); overdue(); kill(); alive() -> count. Signals go to
 *                                    each child's process group (fork made one). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "binding.h"
#include "distributed/gang.h"

static LB_NORETURN sys_error(lua_State *L, const char *call)
{
    luaL_error(L, "spawn: %s: %s", call, strerror(errno));
    __builtin_unreachable();
}

static int p_fork(lua_State *L)
{
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return sys_error(L, "fork");
    if (pid == 0) {
        setpgid(0, 0); /* its own process group: kill reaches what it starts, too */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1); /* the parent died before prctl took effect */
    }
    lua_pushinteger(L, pid);
    return 1;
}

static int p_pipe(lua_State *L)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) return sys_error(L, "pipe");
    fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    lua_pushinteger(L, fds[0]);
    lua_pushinteger(L, fds[1]);
    return 2;
}

static int p_close(lua_State *L)
{
    close((int)luaL_checkinteger(L, 1));
    return 0;
}

static int p_write(lua_State *L)
{
    int fd = (int)luaL_checkinteger(L, 1);
    size_t n;
    const char *s = luaL_checklstring(L, 2, &n);
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return sys_error(L, "write");
        s += w;
        n -= (size_t)w;
    }
    lua_pushboolean(L, 1);
    return 1;
}

static int p_read(lua_State *L)
{
    int fd = (int)luaL_checkinteger(L, 1);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (;;) {
        char *at = luaL_prepbuffer(&b);
        ssize_t r = read(fd, at, LUAL_BUFFERSIZE);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break; /* EOF, or EAGAIN: nothing more now */
        luaL_addsize(&b, (size_t)r);
    }
    luaL_pushresult(&b);
    return 1;
}

static int p_waitpid(lua_State *L)
{
    pid_t pid = (pid_t)luaL_checkinteger(L, 1);
    int status;
    pid_t r;
    do r = waitpid(pid, &status, WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r < 0) return sys_error(L, "waitpid");
    if (r == 0) return 0;
    if (WIFEXITED(status)) {
        lua_pushliteral(L, "exit");
        lua_pushinteger(L, WEXITSTATUS(status));
        return 2;
    }
    int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    lua_pushliteral(L, "signal");
    lua_pushinteger(L, sig);
    const char *abbrev = sigabbrev_np(sig);
    lua_pushfstring(L, "SIG%s", abbrev ? abbrev : "?");
    return 3;
}

static int p_kill(lua_State *L)
{
    pid_t pid = (pid_t)luaL_checkinteger(L, 1);
    static const char *const names[] = {"TERM", "KILL", NULL};
    static const int signals[] = {SIGTERM, SIGKILL};
    int sig = signals[luaL_checkoption(L, 2, NULL, names)];
    if (pid <= 0) return luaL_error(L, "spawn: kill: refusing pid %d", (int)pid);
    /* the child's process group (fork made one), then the child itself should it have left it */
    if (kill(-pid, sig) < 0 && errno != ESRCH && errno != EPERM) return sys_error(L, "kill");
    if (kill(pid, sig) < 0 && errno != ESRCH) return sys_error(L, "kill");
    return 0;
}

static int p_sleep(lua_State *L)
{
    double s = luaL_checknumber(L, 1);
    if (s <= 0) return 0;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
    return 0;
}

static int p_setenv(lua_State *L)
{
    if (setenv(luaL_checkstring(L, 1), luaL_checkstring(L, 2), 1) < 0)
        return sys_error(L, "setenv");
    return 0;
}

static int p_exit(lua_State *L)
{
    int code = (int)luaL_optinteger(L, 1, 0);
    fflush(NULL);
    _exit(code);
}

static int p_free_port(lua_State *L)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return sys_error(L, "socket");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return sys_error(L, "bind");
    }
    close(fd);
    lua_pushinteger(L, ntohs(a.sin_port));
    return 1;
}

static int p_getpid(lua_State *L)
{
    lua_pushinteger(L, getpid());
    return 1;
}

/* Whether a Lua file (io.stdout) or a descriptor number refers to a terminal: progress bars
 * redraw in place only there (Lua's io library cannot tell). A closed file is an error. */
static int p_isatty(lua_State *L)
{
    int fd;
    if (lua_isinteger(L, 1)) {
        fd = (int)lua_tointeger(L, 1);
    } else {
        luaL_Stream *stream = (luaL_Stream *)luaL_testudata(L, 1, LUA_FILEHANDLE);
        if (!stream) return luaL_error(L, "isatty: expected a file or a descriptor number");
        if (!stream->closef) return luaL_error(L, "isatty: attempt to use a closed file");
        fd = fileno(stream->f);
    }
    lua_pushboolean(L, fd >= 0 && isatty(fd));
    return 1;
}

/* This machine's name, as TensorBoard and PyTorch put it into event file names. */
static int p_hostname(lua_State *L)
{
    char name[256];
    if (gethostname(name, sizeof name) != 0) return sys_error(L, "gethostname");
    name[sizeof name - 1] = '\0'; /* POSIX leaves truncation unterminated */
    lua_pushstring(L, name);
    return 1;
}

/* Seconds since the Unix epoch with their fraction: event files stamp every record so (os.time
 * has whole seconds only, ddpl.time counts from an arbitrary origin). */
static int p_wall_time(lua_State *L)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
    return 1;
}

#define GANG_MT "ddplua.gang"

static ddpl_gang *check_gang(lua_State *L)
{
    return luaL_checkudata(L, 1, GANG_MT);
}

static int gang_gc(lua_State *L)
{
    ddpl_gang_free(check_gang(L));
    return 0;
}

static int gang_add(lua_State *L)
{
    ddpl_gang *g = check_gang(L);
    pid_t pid = (pid_t)luaL_checkinteger(L, 2);
    if (pid <= 0) return luaL_error(L, "spawn: gang: refusing pid %d", (int)pid);
    if (ddpl_gang_add(g, pid, (int)luaL_checkinteger(L, 3)) < 0) return lb_error(L);
    return 0;
}

static int gang_reap(lua_State *L)
{
    ddpl_gang *g = check_gang(L);
    int i = ddpl_gang_reap(g);
    if (i < 0) return 0;
    char how[96];
    lua_pushinteger(L, g->m[i].rank);
    lua_pushinteger(L, ddpl_gang_exit_code(g->m[i].status));
    lua_pushstring(L, ddpl_exit_text(g->m[i].status, how, sizeof how));
    return 3;
}

static int gang_stop(lua_State *L)
{
    ddpl_gang_stop(check_gang(L), SIGTERM);
    return 0;
}

static int gang_overdue(lua_State *L)
{
    lua_pushboolean(L, ddpl_gang_overdue(check_gang(L)));
    return 1;
}

static int gang_kill(lua_State *L)
{
    ddpl_gang_enforce(check_gang(L));
    return 0;
}

static int gang_alive(lua_State *L)
{
    lua_pushinteger(L, check_gang(L)->alive);
    return 1;
}

static int p_gang(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    if (n < 1 || n > 1000000) return luaL_error(L, "spawn: gang: %I processes", n);
    ddpl_gang *g = lua_newuserdatauv(L, sizeof *g, 0);
    memset(g, 0, sizeof *g);
    if (luaL_newmetatable(L, GANG_MT)) {
        static const luaL_Reg methods[] = {{"add", gang_add},   {"reap", gang_reap},
                                           {"stop", gang_stop}, {"overdue", gang_overdue},
                                           {"kill", gang_kill}, {"alive", gang_alive},
                                           {NULL, NULL}};
        luaL_newlib(L, methods);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, gang_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    if (ddpl_gang_init(g, (int)n, true) < 0) return lb_error(L);
    return 1;
}

/* a table, three calls a row */
/* clang-format off */
const luaL_Reg lb_process_functions[] = {
    {"fork", p_fork},     {"pipe", p_pipe},           {"close", p_close},
    {"write", p_write},   {"read", p_read},           {"waitpid", p_waitpid},
    {"kill", p_kill},     {"sleep", p_sleep},         {"setenv", p_setenv},
    {"exit", p_exit},     {"free_port", p_free_port}, {"getpid", p_getpid},
    {"isatty", p_isatty}, {"hostname", p_hostname},   {"wall_time", p_wall_time},
    {"gang", p_gang},     {NULL, NULL},
};
/* clang-format on */
