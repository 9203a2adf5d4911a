-- spec/tools/package_spec.lua: the Debian package (cmake/packaging.cmake): `cpack -G DEB` in the
-- build folder makes a .deb whose Depends name the Debian packages the binaries need, and whose
-- files, unpacked anywhere with `dpkg -x`, work from there: the ddplua command runs a script
-- with the packaged Lua files, a stock lua5.4 loads the packaged C module (which finds its Lua
-- files relative to itself), and pkg-config and find_package(ddplua) point into the tree.
-- SLOW: about a minute on a busy 2-core machine (cpack compresses ~8 MB; its "preinstall" step
-- checks that the build is up to date). One package is built, in a temporary folder, and every
-- case reads it.
local S = require 'shell_util'

local build = os.getenv('DDPLUA_BUILD_DIR') or 'build'

-- a build setting from CMakeCache.txt
local function cache(name)
    return S.slurp(build .. '/CMakeCache.txt'):match('\n' .. name .. ':[%w]+=([^\n]*)')
end

local function exists(path) return os.execute('test -e ' .. S.q(path)) == true end

local tmp = S.new_tmpdir()
local root = tmp .. '/root'
local libdir = cache('CMAKE_INSTALL_LIBDIR') or 'lib'
local deb, cpack_out, cpack_code, control
local cuda_built = S.sh(S.q(S.bin) .. ' -v -e ""'):find('CUDA built in') ~= nil

-- runs `cmd` with the environment's own Lua search paths removed, so nothing outside the
-- unpacked tree (the source tree, /usr) can supply ddplua's files
local function clean_env(cmd)
    return 'env -u LUA_PATH -u LUA_CPATH -u LUA_PATH_5_4 -u LUA_CPATH_5_4 ' .. cmd
end

-- the path with ./ and ../ resolved (the command and the module name their Lua folder as
-- bin/../share/lua/5.4)
local function resolved(path) return (S.sh('realpath -m ' .. S.q(path)):gsub('\n$', '')) end

describe('cpack -G DEB', function()
setup(function()
    cpack_out, cpack_code = S.sh(('cd %s && cpack -G DEB -B %s'):format(S.q(build), S.q(tmp)))
    deb = S.sh('ls ' .. S.q(tmp) .. '/*.deb'):match('[^\n]+%.deb')
    if deb then
        control = S.sh('dpkg-deb -I ' .. S.q(deb))
        S.sh(('dpkg -x %s %s'):format(S.q(deb), S.q(root)))
    end
end)

teardown(function() os.execute('rm -rf ' .. S.q(tmp)) end)

    it('makes ddplua_<version>_<arch>.deb', function()
        assert.are.equal(0, cpack_code, cpack_out)
        assert.is_truthy(deb, 'no .deb in ' .. tmp .. ':\n' .. cpack_out)
        assert.is_truthy(deb:match('/ddplua_%d+%.%d+%.%d+_[%w]+%.deb$'), deb)
        assert.is_truthy(control:match('\n Package: ddplua\n'), control)
    end)

    it('Depends names the Debian packages of the libraries the binaries link', function()
        local depends = control:match('\n Depends: ([^\n]*)')
        assert.is_truthy(depends, control)
        -- from dpkg-shlibdeps: what `objdump -p` lists as NEEDED, by owning package
        for _, pkg in ipairs({ 'libc6', 'liblua5.4%-0', 'libopenblas0', 'libgloo0', 'zlib1g',
            'libreadline8', 'libstdc%+%+6' }) do
            assert.is_truthy(depends:find(pkg), pkg .. ' missing from Depends: ' .. depends)
        end
        if cuda_built then -- NVIDIA's runtime package, which dpkg-shlibdeps cannot name
            assert.is_truthy(depends:find('cuda%-cudart%-%d+%-%d+'), depends)
        else
            assert.is_falsy(depends:find('cuda'), depends)
        end
        assert.is_truthy(control:match('\n Recommends: lua5%.4'), control)
    end)

    it('holds the command, libraries, headers, pkg-config and CMake files, Lua modules', function()
        for _, rel in ipairs({ 'usr/bin/ddplua', 'usr/include/ddpl/ddpl.h',
            'usr/include/ddpl/config.h', 'usr/' .. libdir .. '/libddplua.so.0',
            'usr/' .. libdir .. '/libddplua.a', 'usr/' .. libdir .. '/lua/5.4/ddplua.so',
            'usr/' .. libdir .. '/pkgconfig/ddplua.pc',
            'usr/' .. libdir .. '/cmake/ddplua/ddpluaConfig.cmake',
            'usr/share/lua/5.4/ddplua/init.lua', 'usr/share/lua/5.4/ddplua/tools/plot.lua' }) do
            assert.is_true(exists(root .. '/' .. rel), rel .. ' is not in the package')
        end
    end)

    it('the unpacked ddplua runs a script with the Lua files beside it', function()
        local out, code = S.sh(clean_env(S.q(root .. '/usr/bin/ddplua') .. ' -e ' .. S.q([[
            local x = ddpl.ones(2, 2, {requires_grad = true})
            x:matmul(x):sum():backward()
            print(x.grad:sum():item())
            print(package.searchpath('ddplua.tools.plot', package.path))]])))
        assert.are.equal(0, code, out)
        -- d/dX sum(X X) = 1 X^T + X^T 1: every entry 4 for the 2x2 ones, 16 in all
        local total, found = out:match('^(%S+)\n(%S+)\n$')
        assert.are.equal(16, tonumber(total), out)
        assert.are.equal(root .. '/usr/share/lua/5.4/ddplua/tools/plot.lua', resolved(found))
    end)

    it('a stock lua5.4 loads the unpacked C module, which finds its Lua files', function()
        local cpath = root .. '/usr/' .. libdir .. '/lua/5.4/?.so'
        local out, code = S.sh(('env -u LUA_PATH -u LUA_PATH_5_4 LUA_CPATH=%s lua5.4 -e %s')
            :format(S.q(cpath .. ';;'), S.q([[
                local ddpl = require 'ddplua'
                print(ddpl.tensor({{1., 2.}, {3., 4.}}):matmul(ddpl.ones(2)):sum():item())
                print(package.searchpath('ddplua.init', package.path))]])))
        assert.are.equal(0, code, out)
        local total, found = out:match('^(%S+)\n(%S+)\n$')
        assert.are.equal(10, tonumber(total), out)
        assert.are.equal(root .. '/usr/share/lua/5.4/ddplua/init.lua', resolved(found))
    end)

    it('pkg-config and find_package(ddplua) point into the unpacked tree', function()
        local pc = root .. '/usr/' .. libdir .. '/pkgconfig'
        local out, code = S.sh(('PKG_CONFIG_PATH=%s pkg-config --cflags --libs ddplua')
            :format(S.q(pc)))
        assert.are.equal(0, code, out)
        -- the .pc's prefix is relative to its own folder (${pcfiledir}/../..)
        local inc = out:match('%-I(%S+)')
        local lib = out:match('%-L(%S+)')
        assert.is_truthy(inc and lib, out)
        assert.are.equal(root .. '/usr/include', resolved(inc))
        assert.are.equal(root .. '/usr/' .. libdir, resolved(lib))
        assert.is_true(exists(inc .. '/ddpl/ddpl.h'), out)
        assert.is_true(exists(lib .. '/libddplua.so'), out)

        local proj = tmp .. '/consumer'
        os.execute('mkdir -p ' .. S.q(proj))
        S.write(proj .. '/CMakeLists.txt', [[
cmake_minimum_required(VERSION 3.20)
project(consumer LANGUAGES C CXX)
find_package(ddplua REQUIRED)
get_target_property(loc ddplua::ddplua_shared IMPORTED_LOCATION_RELEASE)
get_target_property(inc ddplua::ddplua_shared INTERFACE_INCLUDE_DIRECTORIES)
message(STATUS "ddplua-lib=${loc}")
message(STATUS "ddplua-inc=${inc}")
]])
        out, code = S.sh(('cmake -S %s -B %s -DCMAKE_PREFIX_PATH=%s'):format(S.q(proj),
            S.q(proj .. '/build'), S.q(root .. '/usr')))
        assert.are.equal(0, code, out)
        local loc = out:match('ddplua%-lib=(%S+)')
        assert.is_truthy(loc, out)
        assert.is_true(exists(loc), loc)
        assert.are.equal(root .. '/usr/' .. libdir .. '/', loc:match('^(.*/)[^/]+$'))
        assert.are.equal(root .. '/usr/include', out:match('ddplua%-inc=(%S+)'))
    end)
end)
