/* lua/bind_data.c: the data-loading functions of the C core, used by lua/ddplua/data.
 * defines: lb_data_functions (ddpl.read_idx, ddpl.read_cifar10).
 *
 * ddpl.read_idx(path) returns the IDX file's contents (gzip or plain) as a CPU tensor with the
 * file's shape (uint8 for MNIST-style files); errors read "read_idx: <path>: <problem>".
 * ddpl.read_cifar10({path, ...}) returns the records of CIFAR-10 binary files, in order, as
 * uint8 images (N, 3, 32, 32) and int64 labels (N); errors read "read_cifar10: <path>: ...". */
#include "binding.h"
#include "io/cifar.h"
#include "io/idx.h"

static int f_read_idx(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TSTRING) return lb_argerror(L, 1, "read_idx", "a file path");
    const char *path = lua_tostring(L, 1);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_read_idx(path);
    return lb_finish_in(L, box, "read_idx");
}

static int f_read_cifar10(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TTABLE) return lb_argerror(L, 1, "read_cifar10", "a list of paths");
    lua_Integer n = luaL_len(L, 1);
    if (n < 1 || n > 1024)
        return luaL_error(L, "read_cifar10: expected a list of 1 to 1024 paths, got %I", n);
    /* the boxes first, so nothing can fail after the engine call; then the paths (their strings
     * stay alive in the table at index 1) */
    lb_box *images = lb_newbox(L);
    lb_box *labels = lb_newbox(L);
    const char **paths = lua_newuserdatauv(L, (size_t)n * sizeof *paths, 0);
    for (lua_Integer k = 1; k <= n; k++) {
        if (lua_geti(L, 1, k) != LUA_TSTRING)
            return luaL_error(L, "read_cifar10: path %I is a %s, not a string", k,
                              luaL_typename(L, -1));
        paths[k - 1] = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    if (ddpl_read_cifar10(paths, (int)n, &images->t, &labels->t) != 0)
        lb_error_in(L, "read_cifar10");
    lua_pop(L, 1); /* the path array: the two boxes are on top */
    lb_gc_account(L);
    return 2;
}

const luaL_Reg lb_data_functions[] = {
    {"read_idx", f_read_idx},
    {"read_cifar10", f_read_cifar10},
    {NULL, NULL},
};
