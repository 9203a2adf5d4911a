/* cli/options.c: the ddplua command line.
 * defines: cli_parse, cli_usage.
 *
 *   ddplua [options] [launcher flags] [script [launcher flags] [--] [args...]]
 *   ddplua COMMAND [args...]
 *
 * A subcommand (COMMANDS below: plot) is recognised only as the very first argument, and wins
 * over a script of the same name in the current directory, as git's and cargo's do: such a
 * script runs as `ddplua ./plot` or `ddplua -- plot`. Scripts are normally *.lua, so the clash
 * needs a file named exactly like a command; a command then still does what its help says
 * whatever directory it is run from.
 *
 * Lua's options (-e -l -i -v -E -W -h, "-" for stdin, "--" to stop) as lua.c has them, plus the
 * launcher flags of API.md (--nproc, --nnodes, --node-rank, --master-addr, --master-port, and
 * --log-dir, --prefix-output; torchrun's --nproc-per-node, --standalone, --max-restarts; the
 * store's --store-token-file and --no-store-auth; also as --flag=value), accepted before the
 * script and right after it,
 * as torchrun users write them. After the script the first argument that is not a launcher flag, or
 * "--", starts the script's own arguments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* the subcommands, each a Lua tool ddplua.tools.<name> with main(args) -> exit status */
static const char *const COMMANDS[] = {"plot", NULL};

void cli_usage(const char *badoption)
{
    if (badoption) {
        if (badoption[1] == 'e' || badoption[1] == 'l')
            fprintf(stderr, "%s: '%s' needs argument\n", CLI_PROGNAME, badoption);
        else
            fprintf(stderr, "%s: unrecognized option '%s'\n", CLI_PROGNAME, badoption);
    }
    fprintf(stderr,
            "usage: %s [options] [script [args]]\n"
            "       %s plot FILE.jsonl... [-o OUT.svg] [--x FIELD] [--y A,B,...]\n"
            "Available options are:\n"
            "  -e stat   execute string 'stat'\n"
            "  -i        enter interactive mode after executing 'script'\n"
            "  -l mod    require library 'mod' into global 'mod'\n"
            "  -v        show version information\n"
            "  -E        ignore environment variables\n"
            "  -W        turn warnings on\n"
            "  -h        show this help\n"
            "  --        stop handling options\n"
            "  -         stop handling options and execute stdin\n"
            "Launcher flags (before or right after the script):\n"
            "  --nproc N            worker processes on this machine (or --nproc-per-node N)\n"
            "  --nnodes M           number of machines (MIN:MAX: elastic, runs on MIN to MAX)\n"
            "  --node-rank K        rank of this machine (0-based)\n"
            "  --master-addr HOST   address of the rank-0 machine\n"
            "  --master-port P      port of the rendezvous store\n"
            "  --log-dir DIR        also write each rank's output to DIR/rank<N>.stdout|stderr\n"
            "  --prefix-output      prefix each line of output with \"[rank<N>]: \"\n"
            "  --standalone         one machine, rendezvous on a free local port (torchrun's)\n"
            "  --max-restarts N     when a worker fails, stop all and start them again, up to N\n"
            "                       times (TORCHELASTIC_RESTART_COUNT tells them which start)\n"
            "  --store-token-file F the store's shared secret, from a file only its owner can\n"
            "                       read (or DDPLUA_STORE_TOKEN); needed with --nnodes > 1\n"
            "  --no-store-auth      --nnodes > 1 with a store anyone who reaches it can use\n"
            "Commands (first argument only; './plot' or '-- plot' runs a script of that name):\n"
            "  plot FILE.jsonl...   draw training metrics (JSON lines) as an SVG chart; one\n"
            "                       curve per series and file (ddplua plot --help)\n"
            "With no script and no -e, ddplua starts a REPL with 'ddpl' preloaded.\n",
            CLI_PROGNAME, CLI_PROGNAME);
    fflush(stderr);
}

static int int_value(const char *flag, const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || v < lo || v > hi) {
        fprintf(stderr, "%s: %s expects an integer from %d to %d, got '%s'\n", CLI_PROGNAME, flag,
                lo, hi, s ? s : "");
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* --nnodes M, or MIN:MAX (torchrun's elastic range: the job runs on as few as MIN machines). */
static int nodes_value(const char *s, cli_launch *l)
{
    const char *colon = strchr(s, ':');
    if (!colon) {
        if (int_value("--nnodes", s, 1, 65536, &l->nnodes) < 0) return -1;
        l->min_nodes = l->nnodes;
        return 1;
    }
    char min[16];
    if ((size_t)(colon - s) >= sizeof min) {
        fprintf(stderr, "%s: --nnodes expects M or MIN:MAX, got '%s'\n", CLI_PROGNAME, s);
        return -1;
    }
    memcpy(min, s, (size_t)(colon - s));
    min[colon - s] = '\0';
    if (int_value("--nnodes", min, 1, 65536, &l->min_nodes) < 0 ||
        int_value("--nnodes", colon + 1, 1, 65536, &l->nnodes) < 0)
        return -1;
    if (l->min_nodes > l->nnodes) {
        fprintf(stderr, "%s: --nnodes %s: MIN is larger than MAX\n", CLI_PROGNAME, s);
        return -1;
    }
    return 1;
}

/* Launcher flag at argv[*i] (value in the same argument after '=' or in the next one).
 * Returns 1 when consumed (advancing *i), 0 when argv[*i] is not a launcher flag, -1 on error. */
static int launcher_flag(int argc, char **argv, int *i, cli_launch *l)
{
    /* the flags that take no value come last (from FIRST_SWITCH on) */
    enum {
        NPROC,
        NNODES,
        NODE_RANK,
        MASTER_ADDR,
        MASTER_PORT,
        LOG_DIR,
        NPROC_PER_NODE,
        MAX_RESTARTS,
        STORE_TOKEN_FILE,
        FIRST_SWITCH,
        PREFIX_OUTPUT = FIRST_SWITCH,
        STANDALONE,
        NO_STORE_AUTH
    };
    static const char *const names[] = {[NPROC] = "--nproc",
                                        [NNODES] = "--nnodes",
                                        [NODE_RANK] = "--node-rank",
                                        [MASTER_ADDR] = "--master-addr",
                                        [MASTER_PORT] = "--master-port",
                                        [LOG_DIR] = "--log-dir",
                                        [NPROC_PER_NODE] =
                                            "--nproc-per-node", /* torchrun's name for --nproc */
                                        [MAX_RESTARTS] = "--max-restarts",
                                        [STORE_TOKEN_FILE] = "--store-token-file",
                                        [PREFIX_OUTPUT] = "--prefix-output",
                                        [STANDALONE] = "--standalone",
                                        [NO_STORE_AUTH] = "--no-store-auth",
                                        NULL};
    const char *arg = argv[*i];
    int which = -1;
    size_t len = 0;
    for (int k = 0; names[k]; k++) {
        len = strlen(names[k]);
        if (strncmp(arg, names[k], len) == 0 && (arg[len] == '\0' || arg[len] == '=')) {
            which = k;
            break;
        }
    }
    if (which < 0) return 0;
    if (which >= FIRST_SWITCH) {
        if (arg[len] == '=') {
            fprintf(stderr, "%s: %s takes no value\n", CLI_PROGNAME, names[which]);
            return -1;
        }
        (*i)++;
        l->given = true;
        if (which == PREFIX_OUTPUT)
            l->prefix_output = true;
        else if (which == STANDALONE)
            l->standalone = true;
        else
            l->no_store_auth = true;
        return 1;
    }
    const char *value;
    if (arg[len] == '=') {
        value = arg + len + 1;
    } else if (*i + 1 < argc) {
        value = argv[++*i];
    } else {
        fprintf(stderr, "%s: %s needs a value\n", CLI_PROGNAME, names[which]);
        return -1;
    }
    (*i)++;
    l->given = true;
    switch (which) {
    case NPROC:
    case NPROC_PER_NODE:
        return int_value(names[which], value, 1, 4096, &l->nproc) < 0 ? -1 : 1;
    case NNODES:
        return nodes_value(value, l);
    case NODE_RANK:
        return int_value("--node-rank", value, 0, 65535, &l->node_rank) < 0 ? -1 : 1;
    case MASTER_ADDR:
        l->master_addr = value;
        return 1;
    case MASTER_PORT:
        return int_value("--master-port", value, 1, 65535, &l->master_port) < 0 ? -1 : 1;
    case MAX_RESTARTS:
        return int_value("--max-restarts", value, 0, 1000000, &l->max_restarts) < 0 ? -1 : 1;
    case STORE_TOKEN_FILE:
        l->store_token_file = value;
        return 1;
    default:
        l->log_dir = value;
        return 1;
    }
}

int cli_parse(int argc, char **argv, cli_options *o)
{
    memset(o, 0, sizeof *o);
    o->launch.nproc = 1;
    o->launch.nnodes = 1;
    o->launch.min_nodes = 1;
    o->actions = calloc((size_t)argc + 1, sizeof *o->actions);
    if (!o->actions) return -1;
    for (int k = 0; argc > 1 && COMMANDS[k]; k++) {
        if (strcmp(argv[1], COMMANDS[k]) == 0) {
            o->command = COMMANDS[k];
            o->script_args = argv + 2;
            o->n_script_args = argc - 2;
            return 0;
        }
    }
    int i = 1;
    while (i < argc) {
        const char *a = argv[i];
        int rc = launcher_flag(argc, argv, &i, &o->launch);
        if (rc < 0) return -1;
        if (rc > 0) continue;
        if (a[0] != '-') break; /* the script */
        if (strcmp(a, "-") == 0) break;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            cli_usage(NULL);
            exit(EXIT_SUCCESS);
        }
        switch (a[1]) {
        case 'i':
            if (a[2]) goto bad;
            o->interactive = true; /* the REPL prints the version on a terminal */
            break;
        case 'v':
            if (a[2]) goto bad;
            o->version = true;
            break;
        case 'E':
            if (a[2]) goto bad;
            o->no_env = true;
            break;
        case 'W':
            if (a[2]) goto bad;
            o->warnings = true;
            break;
        case 'e':
        case 'l': {
            const char *value = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
            if (!value || (!a[2] && value[0] == '-')) { /* as lua.c: no value, or an option */
                cli_usage(a);
                return -1;
            }
            o->actions[o->n_actions++] = (cli_action){a[1], value};
            break;
        }
        default:
            goto bad;
        }
        i++;
        continue;
    bad:
        cli_usage(a);
        return -1;
    }
    if (i < argc) {
        o->script = i++;
        /* launcher flags may follow the script; "--" ends them */
        while (i < argc) {
            if (strcmp(argv[i], "--") == 0) {
                i++;
                break;
            }
            int rc = launcher_flag(argc, argv, &i, &o->launch);
            if (rc < 0) return -1;
            if (rc == 0) break;
        }
    }
    o->script_args = argv + i;
    o->n_script_args = argc - i;
    return 0;
}
