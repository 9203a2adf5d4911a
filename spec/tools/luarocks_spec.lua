-- spec/tools/luarocks_spec.lua: the rock (ddplua-dev-1.rockspec): `luarocks make --tree DIR`
-- installs the C module and the Lua files into DIR, from which a stock lua5.4 with the paths of
-- `luarocks path` requires ddplua and computes (a matmul and its backward), and `luarocks
-- remove` takes them away again. To take seconds, not a second full compile of the engine, the
-- rock builds its module in this build's folder (DDPLUA_CMAKE_BUILD_DIR: there the target is
-- already up to date); the rockspec's own CPU-only build in build.luarocks/ is the same CMake
-- target (docs/guide/tools.md).
local S = require 'shell_util'

local build = os.getenv('DDPLUA_BUILD_DIR') or 'build'
local tree = S.new_tmpdir() .. '/tree'
-- the specs' own LUA_PATH points into the source tree: nothing of it may help here
local clean = 'env -u LUA_PATH -u LUA_CPATH -u LUA_PATH_5_4 -u LUA_CPATH_5_4 '
local luarocks = clean .. 'luarocks --lua-version 5.4 '

local function resolved(path) return (S.sh('realpath -m ' .. S.q(path)):gsub('\n$', '')) end
local function exists(path) return os.execute('test -e ' .. S.q(path)) == true end

teardown(function() os.execute('rm -rf ' .. S.q(tree:gsub('/tree$', ''))) end)

describe('luarocks', function()
    it('lint accepts the rockspec (but for the license field: the project names none yet)',
        function()
        local out, code = S.sh(('cd %s && %s lint ddplua-dev-1.rockspec'):format(S.q(S.src),
            luarocks))
        if code ~= 0 then
            local complaints = out:gsub('Rockspec has no license field%.', '')
                :gsub('Error: ddplua%-dev%-1%.rockspec failed consistency checks%.', '')
            assert.are.equal('', (complaints:gsub('%s', '')), out)
        end
    end)

    it('make --tree DIR installs the C module and the Lua files', function()
        local out, code = S.sh(('cd %s && DDPLUA_CMAKE_BUILD_DIR=%s %s make --tree %s '
            .. 'ddplua-dev-1.rockspec'):format(S.q(S.src), S.q(resolved(build)), luarocks, S.q(tree)))
        assert.are.equal(0, code, out)
        assert.is_truthy(out:find('ddplua dev%-1 is now installed in'), out)
        for _, rel in ipairs({ 'lib/lua/5.4/ddplua.so', 'share/lua/5.4/ddplua/init.lua',
            'share/lua/5.4/ddplua/nn/Linear.lua', 'share/lua/5.4/ddplua/tools/plot.lua' }) do
            assert.is_true(exists(tree .. '/' .. rel), rel .. ' not in the tree')
        end
    end)

    it('a stock lua5.4 with `luarocks path` requires ddplua from the tree and computes', function()
        local script = [[
            local ddpl = require 'ddplua'
            local a = ddpl.tensor({{1., 2.}, {3., 4.}}, {requires_grad = true})
            local b = ddpl.tensor({{1., 0.}, {1., 1.}})
            a:matmul(b):sum():backward()
            -- d/da sum(a b) = 1 b^T: every row is b's row sums (1, 2)
            print(table.concat(a.grad:tolist()[2], ' '))
            print(package.searchpath('ddplua.init', package.path))
            print(package.searchpath('ddplua', package.cpath))]]
        local out, code = S.sh(('eval "$(%s --tree %s path)" && lua5.4 -e %s'):format(luarocks,
            S.q(tree), S.q(script)))
        assert.are.equal(0, code, out)
        local grad, init, so = out:match('^([^\n]+)\n(%S+)\n(%S+)\n$')
        assert.are.equal('1.0 2.0', grad, out)
        assert.are.equal(tree .. '/share/lua/5.4/ddplua/init.lua', resolved(init))
        assert.are.equal(tree .. '/lib/lua/5.4/ddplua.so', resolved(so))
    end)

    it('remove takes the files away', function()
        local out, code = S.sh(('%s remove --tree %s ddplua'):format(luarocks, S.q(tree)))
        assert.are.equal(0, code, out)
        assert.is_false(exists(tree .. '/lib/lua/5.4/ddplua.so'))
        assert.is_false(exists(tree .. '/share/lua/5.4/ddplua/init.lua'))
    end)
end)
