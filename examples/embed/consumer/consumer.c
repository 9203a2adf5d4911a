/* examples/embed/consumer/consumer.c: the smallest application of an installed ddplua: one op
 * through the C API and one through a Lua state. Exits non-zero on any failure.
 * defines: main. */
#include <stdio.h>

#include <lauxlib.h>
#include <lualib.h>

#include "ddpl/ddpl.h"
#include "ddpl/lua.h"

int main(void)
{
    ddpl_tensor *a = ddpl_ones(1, (int64_t[]){3}, DDPL_FLOAT32, ddpl_cpu());
    ddpl_tensor *s = a ? ddpl_sum(a) : NULL;
    double v = 0;
    if (!s || ddpl_tensor_item(s, &v) < 0 || v != 3.0) {
        fprintf(stderr, "consumer: C API failed: %s\n", ddpl_last_error());
        return 1;
    }
    ddpl_tensor_release(s);
    ddpl_tensor_release(a);

    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    ddpl_lua_open(L);
    if (luaL_dostring(L, "return (require 'ddplua').arange(4):sum():item()") != LUA_OK ||
        lua_tointeger(L, -1) != 6) {
        fprintf(stderr, "consumer: Lua failed: %s\n", lua_tostring(L, -1));
        return 1;
    }
    lua_close(L);
    printf("consumer: ok (version %s)\n", DDPL_VERSION);
    return 0;
}
