-- spec/tools/docs_reference_spec.lua: the reference pages name every public name. Every public
-- Lua name (found by walking `require 'ddplua'` and its tables: spec/support/api_surface.lua)
-- must be in docs/reference/lua.md, and every public C function (the functions
-- engine/include/ddpl/*.h declare, and, when the build is there, the ddpl_* symbols
-- libddplua.so exports) must be in docs/reference/c.md; neither page may name what does not
-- exist.
local surface = require('api_surface').surface

local source_dir = os.getenv('DDPLUA_SOURCE_DIR') or '.'
local build_dir = os.getenv('DDPLUA_BUILD_DIR') or 'build'

local S = require 'shell_util'
local slurp = S.slurp

local function lines_of(cmd)
    local out = {}
    for line in S.sh(cmd):gmatch('[^\n]+') do out[#out + 1] = line end
    return out
end

-- the doc has `prefix .. name` at the start of a code span, not followed by an identifier char
local function documented(doc, prefixes, name)
    for _, p in ipairs(prefixes) do
        local init = 1
        while true do
            local at, stop = doc:find('`' .. p .. name, init, true)
            if not at then break end
            if not doc:sub(stop + 1, stop + 1):match('[%w_]') then return true end
            init = stop + 1
        end
    end
    return false
end

-- C functions the public headers declare: `name(` after a return type, outside comments (the
-- rule spec/api/abi_spec.lua uses), kept when named ddpl_* or luaopen_*
local function header_functions()
    local names = {}
    for _, path in ipairs(lines_of(('ls %s/engine/include/ddpl/*.h'):format(source_dir))) do
        local text = slurp(path):gsub('/%*.-%*/', ''):gsub('//[^\n]*', '')
        for name in text:gmatch('[%w_%*]%s+%**([%a_][%w_]*)%s*%(') do
            if name:match('^ddpl_') or name:match('^luaopen_') then names[name] = true end
        end
    end
    return names
end

-- functions libddplua.so exports (nil when the library is not built)
local function exported_functions()
    local lib = build_dir .. '/libddplua.so'
    local f = io.open(lib, 'rb')
    if not f then return nil end
    f:close()
    local names = {}
    for _, line in ipairs(lines_of("nm -D --defined-only '" .. lib .. "' 2>/dev/null")) do
        local kind, name = line:match('^%x+ (%a) ([%w_]+)')
        if kind and kind:match('[Tt]') and (name:match('^ddpl_') or name:match('^luaopen_')) then
            names[name] = true
        end
    end
    return names
end

describe('docs/reference', function()
    local lua_doc = slurp(source_dir .. '/docs/reference/lua.md')
    local c_doc = slurp(source_dir .. '/docs/reference/c.md')

    it('finds the tables and names it walks (the walk itself works)', function()
        local seen = {}
        for _, e in ipairs(surface()) do seen[e.table .. ' ' .. e.name] = true end
        -- one known name of each kind: a C function, a lazy entry, a tensor method, an nn class
        -- file, a class method, a utils field
        for _, key in ipairs({'ddpl tensor', 'ddpl.data transform_rng', 'tensor char',
                              'ddpl.nn LSTM', 'ddpl.nn.functional rms_norm',
                              'data.DataLoader close', 'ddpl.utils Progress',
                              'nn.Module state_dict', 'ddpl.data.datasets CIFAR10'}) do
            assert.is_true(seen[key] == true, 'the walk did not find ' .. key)
        end
    end)

    it('lua.md names every public Lua name', function()
        local names = surface()
        assert.is_true(#names > 300, 'the walk found only ' .. #names .. ' names')
        local missing = {}
        for _, e in ipairs(names) do
            if not documented(lua_doc, e.doc, e.name) then missing[#missing + 1] = e.doc[1] .. e.name end
        end
        assert.are.same({}, missing, 'public Lua names missing from docs/reference/lua.md '
                            .. '(add a line `prefix.name(args)`: meaning): '
                            .. table.concat(missing, ', '))
    end)

    it('lua.md names only what the library exports', function()
        local by_prefix, prefixes = {}, {}
        for _, e in ipairs(surface()) do
            for _, p in ipairs(e.doc) do
                if not by_prefix[p] then
                    by_prefix[p] = {}
                    prefixes[#prefixes + 1] = p
                end
                by_prefix[p][e.name] = true
            end
        end
        table.sort(prefixes, function(a, b) return #a > #b end)
        local stale = {}
        for span in lua_doc:gmatch('`([^`]+)`') do
            for _, p in ipairs(prefixes) do
                if span:sub(1, #p) == p then
                    local name = span:sub(#p + 1):match('^[%a][%w_]*')
                    if name and not by_prefix[p][name] then stale[#stale + 1] = p .. name end
                    break
                end
            end
        end
        assert.are.same({}, stale, 'docs/reference/lua.md names what the library does not '
                            .. 'export: ' .. table.concat(stale, ', '))
    end)

    it('c.md names every public C function', function()
        local public = header_functions()
        local n = 0
        for _ in pairs(public) do n = n + 1 end
        assert.is_true(n > 150, 'the public headers gave only ' .. n .. ' functions')
        for name in pairs(exported_functions() or {}) do public[name] = true end
        local missing = {}
        for name in pairs(public) do
            if not documented(c_doc, {''}, name) then missing[#missing + 1] = name end
        end
        table.sort(missing)
        assert.are.same({}, missing, 'public C functions missing from docs/reference/c.md: '
                            .. table.concat(missing, ', '))
    end)

    it('c.md names only functions the public headers declare', function()
        local public = header_functions()
        local stale = {}
        for name in c_doc:gmatch('`(ddpl_[%w_]+)%(') do
            if not public[name] then stale[#stale + 1] = name end
        end
        for name in c_doc:gmatch('`(luaopen_[%w_]+)%(') do
            if not public[name] then stale[#stale + 1] = name end
        end
        assert.are.same({}, stale, 'docs/reference/c.md names functions that are not public: '
                            .. table.concat(stale, ', '))
    end)
end)
