/* cli/cli.h: what the files of the ddplua command share.
 * defines: cli_options (parsed command line, launcher flags and subcommands included), cli_parse,
 *          cli_usage,
 *          cli_docall, cli_report, cli_message, cli_repl, CLI_PROGNAME. */
#ifndef DDPL_CLI_H
#define DDPL_CLI_H

#include <lauxlib.h>
#include <lua.h>
#include <stdbool.h>

#define CLI_PROGNAME "ddplua"

/* -e code and -l name, run in command-line order before the script */
typedef struct cli_action {
    char kind; /* 'e' or 'l' */
    const char *value;
} cli_action;

typedef struct cli_launch {
    bool given; /* any launcher flag was present */
    int nproc, nnodes, node_rank, master_port;
    int min_nodes; /* --nnodes MIN:MAX (nnodes is MAX); MIN = MAX for a plain --nnodes M */
    const char *master_addr;
    const char *log_dir;          /* --log-dir: per-rank stdout/stderr files there */
    bool prefix_output;           /* --prefix-output: "[rank1]: " before each line */
    bool standalone;              /* --standalone: one machine, a free local port (torchrun's) */
    int max_restarts;             /* --max-restarts: gang restarts after a failure (torchrun's) */
    const char *store_token_file; /* --store-token-file: the store's token, from a private file */
    bool no_store_auth; /* --no-store-auth: several machines with an open store, on purpose */
} cli_launch;

typedef struct cli_options {
    /* a subcommand given as the first argument ("plot"): runs the Lua tool
     * ddplua.tools.<command> with the remaining arguments (script_args) instead of a script */
    const char *command;
    int script; /* argv index of the script ("-" is stdin), 0 when none */
    int n_actions;
    cli_action *actions; /* argc entries at most */
    bool interactive, version, no_env, warnings;
    /* the script's own arguments (launcher flags after the script removed) */
    int n_script_args;
    char **script_args;
    cli_launch launch;
} cli_options;

/* Parses argv; on a usage error prints the message and usage to stderr and returns -1. */
int cli_parse(int argc, char **argv, cli_options *o);
void cli_usage(const char *badoption);
/* Prints "ddplua: msg" to stderr. */
void cli_message(const char *msg);
/* lua_pcall with a traceback handler and Ctrl-C turned into the error "interrupted!". */
int cli_docall(lua_State *L, int narg, int nres);
/* Prints the error on top of the stack (if status is not LUA_OK) and pops it. */
int cli_report(lua_State *L, int status);
/* The read-eval-print loop (readline on a terminal, plain lines from a pipe). */
void cli_repl(lua_State *L);

#endif
