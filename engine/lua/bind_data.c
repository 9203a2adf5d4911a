/* lua/bind_data.c: the data-loading functions of the C core, used by lua/ddplua/data.
 * defines: lb_data_functions (ddpl.read_idx).
 *
 * ddpl.read_idx(path) returns the IDX file's contents (gzip or plain) as a CPU tensor with the
 * file's shape (uint8 for MNIST-style files); errors read "read_idx: <path>: <problem>". */
#include "binding.h"
#include "io/idx.h"

static int f_read_idx(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TSTRING) return lb_argerror(L, 1, "read_idx", "a file path");
    const char *path = lua_tostring(L, 1);
    lb_box *box = lb_newbox(L);
    box->t = ddpl_read_idx(path);
    return lb_finish_in(L, box, "read_idx");
}

const luaL_Reg lb_data_functions[] = {
    {"read_idx", f_read_idx},
    {NULL, NULL},
};
