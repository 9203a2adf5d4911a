/* spec/fuzz/fuzz_safetensors.c: fuzzes checkpoint loading end to end: the input is a file that
 * `ddpl.load` reads (engine/io/safetensors.c: header length, JSON header, dtypes, shapes, data
 * offsets; engine/io/json.c; the metadata tree rebuilt in engine/lua/bind_io.c).
 * Property: any input either loads (and every tensor's data can be read) or raises a Lua error
 * whose message starts with "load: " (after Lua's "chunk:line: " position of the caller); never
 * a crash, a sanitizer report or another message.
 * defines: LLVMFuzzerTestOneInput. */
#include <lauxlib.h>
#include <lualib.h>
#include <string.h>

#include "ddpl/lua.h"
#include "fuzz_util.h"

/* One Lua state for the whole run (starting the library per input would dominate), with
 * `check(path)` defined once: loads, then sums every tensor found in the returned tree. */
static lua_State *state(void)
{
    static lua_State *L;
    if (L) return L;
    L = luaL_newstate();
    luaL_openlibs(L);
    ddpl_lua_open(L);
    const char *code = "local ddpl = require 'ddplua'\n"
                       "local function touch(v, depth)\n"
                       "  if ddpl.is_tensor(v) then v:double():sum():item()\n"
                       "  elseif type(v) == 'table' and depth < 100 then\n"
                       "    for _, w in pairs(v) do touch(w, depth + 1) end end\n"
                       "end\n"
                       "return function(path) touch(ddpl.load(path), 0) end\n";
    if (luaL_dostring(L, code) != LUA_OK) {
        fprintf(stderr, "fuzz_safetensors: setup failed: %s\n", lua_tostring(L, -1));
        abort();
    }
    lua_setglobal(L, "check");
    return L;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lua_State *L = state();
    const char *path = fuzz_file_of(data, size);
    lua_getglobal(L, "check");
    lua_pushstring(L, path);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        const char *at = msg ? strstr(msg, "load: ") : NULL;
        if (!at || !(at == msg || (at - msg >= 2 && at[-1] == ' ' && at[-2] == ':'))) {
            fprintf(stderr, "fuzz_safetensors: an error that does not name load: %s\n",
                    msg ? msg : "(not a string)");
            abort();
        }
        lua_pop(L, 1);
    }
    lua_gc(L, LUA_GCCOLLECT);
    return 0;
}
