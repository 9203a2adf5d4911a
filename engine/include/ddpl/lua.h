/* ddpl/lua.h: the engine inside a Lua 5.4 state (embedding and C extensions of the bindings).
 * defines: luaopen_ddplua, luaopen_ddplua_core, ddpl_lua_open, ddpl_lua_push_tensor,
 *          ddpl_lua_check_tensor, ddpl_lua_test_tensor.
 *
 * Embedding:
 *     lua_State *L = luaL_newstate();
 *     luaL_openlibs(L);
 *     ddpl_lua_open(L);                      // now `require 'ddplua'` works in L
 *     luaL_dostring(L, "local ddpl = require 'ddplua'; print(ddpl.ones(2, 2) + 1)");
 *
 * The Lua part of the library (the .lua files under lua/ddplua) is found through package.path; when
 * it is not there, the directories this build was configured with (source tree, install prefix) and
 * the share/lua/5.4 folder next to the running executable are tried. */
#ifndef DDPL_LUA_H
#define DDPL_LUA_H

#include <lua.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* public: exported from libddplua.so, which is otherwise built with hidden visibility (the
 * ABI is what include/ddpl declares; spec/api/abi_spec.lua) */
#pragma GCC visibility push(default)

/* `require 'ddplua'` from a C searcher: the whole library (C core plus its Lua files). */
int luaopen_ddplua(lua_State *L);
/* `require 'ddplua.core'`: the C functions alone (tensors, ops, autograd, F.*). */
int luaopen_ddplua_core(lua_State *L);
/* Registers both modules in package.preload of L, so `require 'ddplua'` uses the engine linked
 * into this program (never a second copy loaded from package.cpath). Returns 0. */
int ddpl_lua_open(lua_State *L);

/* Pushes t as a ddplua.Tensor userdata; the userdata takes its own reference (t stays yours).
 * t may be NULL: then nil is pushed. */
void ddpl_lua_push_tensor(lua_State *L, ddpl_tensor *t);
/* The tensor at idx (borrowed; valid while the userdata is alive), or a Lua error naming the
 * argument. A closed tensor raises "attempt to use a closed tensor". */
ddpl_tensor *ddpl_lua_check_tensor(lua_State *L, int idx);
/* As ddpl_lua_check_tensor, but NULL instead of an error when idx is not a tensor. */
ddpl_tensor *ddpl_lua_test_tensor(lua_State *L, int idx);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
