-- ddplua-dev-1.rockspec: ddplua as a LuaRocks rock, built from this checkout:
--   luarocks --lua-version 5.4 make --tree DIR      (or without --tree: the user's default tree)
--   eval "$(luarocks --lua-version 5.4 --tree DIR path)"; lua5.4 -e "print(require('ddplua').ones(2))"
-- It installs the Lua C module (ddplua.so, the library a stock lua5.4 loads with
-- `require 'ddplua'`) and the Lua files (lua/ddplua/**), nothing else: the `ddplua` command,
-- libddplua and its headers come from `cmake --install` or the Debian package
-- (docs/guide/tools.md).
-- The build is the project's CMake build in build.luarocks/, CPU only (DDPL_CUDA=OFF): a rock
-- should build the same on every machine, and the CUDA build needs a toolkit and minutes of
-- nvcc. DDPLUA_CUDA=AUTO (or ON) in the environment passes through to DDPL_CUDA. With
-- DDPLUA_CMAKE_BUILD_DIR naming an existing configured build folder, the module is built there
-- (usually a no-op) instead: the specs use it to test the rock without a second full compile.
-- Needs cmake, a C/C++ compiler and the -dev packages of tools/install-deps.sh.
rockspec_format = '3.0'
package = 'ddplua'
version = 'dev-1'
source = {
    url = 'git+file://.',
}
description = {
    summary = 'An embeddable Lua-scripted training engine with PyTorch-style DDP',
    detailed = [[
ddplua is a C training engine (tensors, CPU/CUDA kernels, autograd, a DDP gradient reducer)
scripted in Lua 5.4 with a PyTorch-shaped API: require 'ddplua'.]],
}
dependencies = {
    'lua >= 5.4, < 5.5',
}
build = {
    type = 'command',
    build_command = [[
set -e
dir="${DDPLUA_CMAKE_BUILD_DIR:-build.luarocks}"
if [ -z "$DDPLUA_CMAKE_BUILD_DIR" ]; then
    $(CMAKE) -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DDDPL_BUILD_TESTS=OFF \
        -DDDPL_CUDA="${DDPLUA_CUDA:-OFF}"
fi
$(CMAKE) --build "$dir" --target ddplua_module -j "${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
]],
    install_command = [[
set -e
dir="${DDPLUA_CMAKE_BUILD_DIR:-build.luarocks}"
mkdir -p "$(LIBDIR)" "$(LUADIR)"
cp "$dir/ddplua.so" "$(LIBDIR)/ddplua.so"
cp -R lua/ddplua "$(LUADIR)/"
]],
}
