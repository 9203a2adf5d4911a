/* cli/repl.c: the interactive loop of ddplua (lua.c's doREPL, with readline and Ctrl-C).
 * defines: cli_repl.
 *
 * Each input is first tried as `return <line>`, so an expression's values are printed (through
 * the global print, hence tostring: tensors pretty-print; several values are tab-separated);
 * otherwise it is a statement, continued over more lines while the syntax error ends in
 * "<eof>". On a terminal, GNU readline edits lines and keeps the history in ~/.ddplua_history
 * (not when HOME is unset); Ctrl-C at the prompt discards the pending input and gives a fresh
 * prompt, Ctrl-C while a statement runs interrupts it (cli_docall), Ctrl-D exits. From a pipe,
 * lines are read plainly and no prompt is printed, so `printf 'x + 1\n' | ddplua` prints only
 * results. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include "cli.h"
#include "ddpl/config.h"

#define PROMPT       "> "
#define PROMPT2      ">> "
#define HISTORY_FILE ".ddplua_history"
#define HISTORY_MAX  1000
#define EOFMARK      "<eof>"

enum { READ_EOF, READ_LINE, READ_INTERRUPTED };
enum { STATUS_EOF = -1, STATUS_SKIP = -2 };

static bool tty;
static char history_path[4096];

/* ---- reading lines ---- */

static volatile sig_atomic_t got_sigint;
static char *rl_result;
static bool rl_have;

static void on_sigint(int sig)
{
    (void)sig;
    got_sigint = 1;
}

static void on_line(char *line)
{
    rl_result = line;
    rl_have = true;
    rl_callback_handler_remove();
}

/* readline's callback interface: we wait in select(), which Ctrl-C interrupts (no SA_RESTART),
 * so the pending line can be dropped cleanly instead of the signal killing the process. */
static int read_tty(const char *prompt, char **out)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    got_sigint = 0;
    rl_have = false;
    rl_result = NULL;
    rl_callback_handler_install(prompt, on_line);
    int rc = READ_LINE, fd = fileno(rl_instream ? rl_instream : stdin);
    while (!rl_have) {
        fd_set fds;
        FD_ZERO(&fds);
        FD_SET(fd, &fds);
        int n = select(fd + 1, &fds, NULL, NULL, NULL);
        if (got_sigint) {
            got_sigint = 0;
            rl_free_line_state();
            rl_callback_sigcleanup();
            rl_replace_line("", 0);
            rl_callback_handler_remove();
            fputc('\n', rl_outstream ? rl_outstream : stdout);
            rc = READ_INTERRUPTED;
            break;
        }
        if (n < 0 && errno != EINTR) {
            rl_callback_handler_remove();
            break;
        }
        if (n > 0) rl_callback_read_char();
    }
    sigaction(SIGINT, &old, NULL);
    if (rc == READ_LINE && !rl_result) rc = READ_EOF;
    *out = rc == READ_LINE ? rl_result : NULL;
    return rc;
}

static int read_pipe(char **out)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len = getline(&line, &cap, stdin);
    if (len < 0) {
        free(line);
        return READ_EOF;
    }
    if (len > 0 && line[len - 1] == '\n') line[len - 1] = '\0';
    *out = line;
    return READ_LINE;
}

/* Pushes the next line (lua.c's pushline, with _PROMPT/_PROMPT2 honoured). */
static int pushline(lua_State *L, bool first)
{
    char *line = NULL;
    int rc;
    if (tty) {
        lua_getglobal(L, first ? "_PROMPT" : "_PROMPT2");
        const char *prompt = lua_tostring(L, -1);
        rc = read_tty(prompt ? prompt : first ? PROMPT : PROMPT2, &line);
        lua_pop(L, 1);
    } else {
        rc = read_pipe(&line);
    }
    if (rc != READ_LINE) return rc;
    if (first && line[0] == '=') /* "=expr" is "return expr", as in Lua 5.1 */
        lua_pushfstring(L, "return %s", line + 1);
    else
        lua_pushstring(L, line);
    free(line);
    return READ_LINE;
}

static void saveline(const char *line)
{
    if (tty && line[0]) add_history(line);
}

/* ---- compiling ---- */

static bool incomplete(lua_State *L, int status)
{
    if (status != LUA_ERRSYNTAX) return false;
    size_t len;
    const char *msg = lua_tolstring(L, -1, &len);
    size_t mark = sizeof EOFMARK - 1;
    if (len >= mark && strcmp(msg + len - mark, EOFMARK) == 0) {
        lua_pop(L, 1);
        return true;
    }
    return false;
}

/* The line as `return <line>;` (an expression); leaves the chunk on success. */
static int addreturn(lua_State *L)
{
    const char *line = lua_tostring(L, -1);
    const char *retline = lua_pushfstring(L, "return %s;", line);
    int status = luaL_loadbuffer(L, retline, strlen(retline), "=stdin");
    if (status == LUA_OK) {
        lua_remove(L, -2);
        saveline(line);
    } else {
        lua_pop(L, 2);
    }
    return status;
}

/* A statement, reading continuation lines while it is incomplete. */
static int multiline(lua_State *L)
{
    for (;;) {
        size_t len;
        const char *line = lua_tolstring(L, 1, &len);
        int status = luaL_loadbuffer(L, line, len, "=stdin");
        if (!incomplete(L, status)) {
            saveline(line);
            return status;
        }
        int rc = pushline(L, false);
        if (rc == READ_INTERRUPTED) return STATUS_SKIP;
        if (rc == READ_EOF) { /* the statement stays incomplete: report its error */
            saveline(line);
            return luaL_loadbuffer(L, line, len, "=stdin");
        }
        lua_pushliteral(L, "\n");
        lua_insert(L, -2);
        lua_concat(L, 3);
    }
}

/* One chunk on the stack (status LUA_OK), an error, STATUS_EOF or STATUS_SKIP. */
static int loadline(lua_State *L)
{
    lua_settop(L, 0);
    int rc = pushline(L, true);
    if (rc == READ_EOF) return STATUS_EOF;
    if (rc == READ_INTERRUPTED) return STATUS_SKIP;
    int status = addreturn(L);
    if (status != LUA_OK) status = multiline(L);
    if (status == STATUS_SKIP) {
        lua_settop(L, 0);
        return status;
    }
    lua_remove(L, 1);
    return status;
}

/* Prints the values on the stack with the global print. */
static void print_results(lua_State *L)
{
    int n = lua_gettop(L);
    if (n == 0) return;
    luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
    lua_getglobal(L, "print");
    lua_insert(L, 1);
    if (lua_pcall(L, n, 0, 0) != LUA_OK)
        cli_message(lua_pushfstring(L, "error calling 'print' (%s)", lua_tostring(L, -1)));
    fflush(stdout);
}

/* ---- history ---- */

static void save_history(void)
{
    if (!history_path[0]) return;
    write_history(history_path);
    history_truncate_file(history_path, HISTORY_MAX);
}

static void init_readline(void)
{
    rl_readline_name = "ddplua";
    rl_catch_signals = 0;         /* Ctrl-C is ours (read_tty, cli_docall) */
    rl_bind_key('\t', rl_insert); /* no file-name completion of Lua code */
    using_history();
    stifle_history(HISTORY_MAX);
    const char *home = getenv("HOME");
    if (home && home[0] &&
        snprintf(history_path, sizeof history_path, "%s/%s", home, HISTORY_FILE) <
            (int)sizeof history_path) {
        read_history(history_path);
        atexit(save_history); /* os.exit() leaves through exit() too */
    } else {
        history_path[0] = '\0';
    }
}

void cli_repl(lua_State *L)
{
    tty = isatty(STDIN_FILENO);
    if (tty) {
        init_readline();
        printf("ddplua %s (%s) -- `ddpl` is loaded; Ctrl-D exits\n", DDPL_VERSION, LUA_RELEASE);
        fflush(stdout);
    }
    int status;
    while ((status = loadline(L)) != STATUS_EOF) {
        if (status == STATUS_SKIP) continue;
        if (status == LUA_OK) status = cli_docall(L, 0, LUA_MULTRET);
        if (status == LUA_OK)
            print_results(L);
        else
            cli_report(L, status);
    }
    lua_settop(L, 0);
    if (tty) {
        fputc('\n', stdout);
        fflush(stdout);
    }
}
