/* cli/main.c: the ddplua command (modelled on lua.c): runs scripts, -e and -l, then the REPL;
 * with launcher flags it hands over to cli/launch.c instead, and a subcommand (`ddplua plot`)
 * runs its Lua tool (lua/ddplua/tools/).
 * defines: main, cli_docall, cli_report, cli_message.
 *
 * Everything runs under lua_pcall with a traceback handler, so an error prints
 * "ddplua: <message>" and a traceback, and a script that fails exits with status 1. While Lua
 * code runs, Ctrl-C does not kill the process: as in lua.c, the signal handler only sets a
 * count hook, and the hook raises "interrupted!" at the next Lua instruction. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lualib.h>

#include "cli.h"
#include "launch.h"
#include "ddpl/config.h"
#include "ddpl/lua.h"

static lua_State *globalL;
static int launch_status = -1;  /* the launcher's exit status, when it ran */
static int command_status = -1; /* a subcommand's exit status, when one ran */

/* ---- Ctrl-C while Lua runs ---- */

static void lstop(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted!");
}

/* A signal handler may not touch the Lua state beyond lua_sethook, which is signal-safe by
 * design; a second Ctrl-C before the hook runs gets the default action (the process stops). */
static void laction(int sig)
{
    int flag = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
    signal(sig, SIG_DFL);
    lua_sethook(globalL, lstop, flag, 1);
}

static int msghandler(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) { /* an error object that is not a string */
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

int cli_docall(lua_State *L, int narg, int nres)
{
    int base = lua_gettop(L) - narg;
    lua_pushcfunction(L, msghandler);
    lua_insert(L, base);
    globalL = L;
    signal(SIGINT, laction);
    int status = lua_pcall(L, narg, nres, base);
    signal(SIGINT, SIG_DFL);
    lua_sethook(L, NULL, 0, 0); /* a Ctrl-C that came as the call ended must not leak out */
    lua_remove(L, base);
    return status;
}

void cli_message(const char *msg)
{
    fprintf(stderr, "%s: %s\n", CLI_PROGNAME, msg);
    fflush(stderr);
}

int cli_report(lua_State *L, int status)
{
    if (status != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        cli_message(msg ? msg : "(error object is not a string)");
        lua_pop(L, 1);
    }
    return status;
}

/* ---- running things ---- */

static void print_version(void)
{
    printf("ddplua %s (%s, CUDA %s)\n", DDPL_VERSION, LUA_RELEASE,
           DDPL_CUDA_EMU    ? "emulated on the CPU"
           : DDPL_HAVE_CUDA ? "built in"
                            : "not built");
    fflush(stdout);
}

/* arg as lua.c makes it: arg[0] the script, arg[1..] its arguments, negative indices for the
 * interpreter and the options before the script. */
static void create_arg_table(lua_State *L, char **argv, const cli_options *o)
{
    int script = o->script;
    lua_createtable(L, o->n_script_args, script + 1);
    for (int i = 0; i <= script; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    for (int i = 0; i < o->n_script_args; i++) {
        lua_pushstring(L, o->script_args[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setglobal(L, "arg");
}

static int dochunk(lua_State *L, int status)
{
    if (status == LUA_OK) status = cli_docall(L, 0, 0);
    return cli_report(L, status);
}

static int dostring(lua_State *L, const char *s, const char *name)
{
    return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* -l mod: require 'mod' into global mod; -l g=mod: into global g (as Lua 5.4.6) */
static int dolibrary(lua_State *L, const char *spec)
{
    const char *eq = strchr(spec, '=');
    lua_getglobal(L, "require");
    if (eq) {
        lua_pushstring(L, eq + 1);
    } else {
        lua_pushstring(L, spec);
    }
    int status = cli_docall(L, 1, 1);
    if (status == LUA_OK) {
        if (eq)
            lua_pushlstring(L, spec, (size_t)(eq - spec));
        else
            lua_pushstring(L, spec);
        lua_insert(L, -2);
        lua_setglobal(L, lua_tostring(L, -2));
        lua_pop(L, 1);
    }
    return cli_report(L, status);
}

/* `ddpl` as a global, from the engine linked into this executable */
static int preload_ddpl(lua_State *L)
{
    ddpl_lua_open(L);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "ddplua");
    int status = cli_docall(L, 1, 1);
    if (status == LUA_OK) lua_setglobal(L, "ddpl");
    return cli_report(L, status);
}

static int handle_script(lua_State *L, char **argv, const cli_options *o)
{
    const char *fname = argv[o->script];
    if (strcmp(fname, "-") == 0 && strcmp(argv[o->script - 1], "--") != 0) fname = NULL; /* stdin */
    int status = luaL_loadfile(L, fname);
    if (status == LUA_OK) {
        luaL_checkstack(L, o->n_script_args + 3, "too many arguments to script");
        for (int i = 0; i < o->n_script_args; i++) lua_pushstring(L, o->script_args[i]);
        status = cli_docall(L, o->n_script_args, LUA_MULTRET);
    }
    return cli_report(L, status);
}

/* require('ddplua.tools.<command>').main({args...}): the tool prints its own messages and
 * returns the exit status (0 done, 1 failed, 2 bad usage). */
static int run_command(lua_State *L, const cli_options *o)
{
    lua_getglobal(L, "require");
    lua_pushfstring(L, "ddplua.tools.%s", o->command);
    int status = cli_docall(L, 1, 1);
    if (status == LUA_OK) {
        lua_getfield(L, -1, "main");
        lua_remove(L, -2);
        lua_createtable(L, o->n_script_args, 0);
        for (int i = 0; i < o->n_script_args; i++) {
            lua_pushstring(L, o->script_args[i]);
            lua_rawseti(L, -2, i + 1);
        }
        status = cli_docall(L, 1, 1);
        if (status == LUA_OK) {
            int isnum;
            lua_Integer rc = lua_tointegerx(L, -1, &isnum);
            command_status = (isnum && rc >= 0 && rc <= 255) ? (int)rc : EXIT_FAILURE;
            lua_pop(L, 1);
        }
    }
    return cli_report(L, status);
}

static int pmain(lua_State *L)
{
    int argc = (int)lua_tointeger(L, 1);
    char **argv = lua_touserdata(L, 2);
    cli_options o;
    if (cli_parse(argc, argv, &o) < 0) {
        free(o.actions);
        return 0;
    }
    if (cli_launch_wanted(&o)) { /* this process only supervises the workers (launch.c) */
        launch_status = cli_launch_run(argv, &o);
        free(o.actions);
        lua_pushboolean(L, launch_status == 0);
        return 1;
    }
    cli_cluster_env(&o.launch);
    luaL_checkversion(L);
    if (o.no_env) { /* as lua -E: the standard libraries then ignore LUA_PATH and LUA_CPATH */
        lua_pushboolean(L, 1);
        lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
    }
    luaL_openlibs(L);
    create_arg_table(L, argv, &o);
    lua_gc(L, LUA_GCRESTART);
    lua_gc(L, LUA_GCGEN, 0, 0); /* as lua.c */
    if (o.warnings) lua_warning(L, "@on", 0);
    if (o.version) print_version();
    bool ok = preload_ddpl(L) == LUA_OK;
    if (o.command) {
        ok = ok && run_command(L, &o) == LUA_OK;
        free(o.actions);
        lua_pushboolean(L, ok);
        return 1;
    }
    for (int i = 0; ok && i < o.n_actions; i++) {
        const cli_action *a = &o.actions[i];
        ok = (a->kind == 'e' ? dostring(L, a->value, "=(command line)") : dolibrary(L, a->value)) ==
             LUA_OK;
    }
    if (ok && o.script) ok = handle_script(L, argv, &o) == LUA_OK;
    if (ok && (o.interactive || (!o.script && o.n_actions == 0 && !o.version))) cli_repl(L);
    free(o.actions);
    lua_pushboolean(L, ok);
    return 1;
}

int main(int argc, char **argv)
{
    lua_State *L = luaL_newstate();
    if (!L) {
        cli_message("cannot create state: not enough memory");
        return EXIT_FAILURE;
    }
    lua_gc(L, LUA_GCSTOP); /* stop the GC while building the state */
    lua_pushcfunction(L, pmain);
    lua_pushinteger(L, argc);
    lua_pushlightuserdata(L, argv);
    int status = lua_pcall(L, 2, 1, 0);
    int result = lua_toboolean(L, -1);
    cli_report(L, status);
    lua_close(L);
    if (launch_status >= 0 && status == LUA_OK) return launch_status;
    if (command_status >= 0 && status == LUA_OK) return command_status;
    return (result && status == LUA_OK) ? EXIT_SUCCESS : EXIT_FAILURE;
}
