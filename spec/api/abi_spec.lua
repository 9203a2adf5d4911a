-- spec/api/abi_spec.lua: libddplua.so exports the public API and nothing else (issue 33). The
-- public API is every function declared in engine/include/ddpl/*.h; the engine is built with hidden
-- visibility and those headers make their declarations visible (#pragma GCC visibility), so an
-- internal function never becomes part of the ABI by accident, and a public one never goes
-- missing. Read with `nm -D --defined-only`.
local S = require 'shell_util'

local build = os.getenv('DDPLUA_BUILD_DIR') or 'build'

-- Function names declared in the public headers: `name(` at the start of a declaration's name,
-- after a return type, outside comments.
local function public_names()
    local names = {}
    local p = assert(io.popen(("ls %s/engine/include/ddpl/*.h"):format(S.q(S.src))))
    for path in p:lines() do
        local text = S.slurp(path):gsub('/%*.-%*/', ''):gsub('//[^\n]*', '')
        for name in text:gmatch('[%w_%*]%s+%**([%a_][%w_]*)%s*%(') do
            if not name:match('^__') then names[name] = true end
        end
    end
    p:close()
    return names
end

-- Functions and data the library defines and exports: {name = demangled, mangled = as linked}.
local function exported(lib)
    local function read(flags)
        local out, code = S.sh('nm -D --defined-only ' .. flags .. ' ' .. S.q(lib))
        assert(code == 0, out)
        local syms = {}
        for kind, name in out:gmatch('%x+ (%a) ([^\n]+)') do
            if kind:match('[TtWDdBbRrVvui]') then syms[#syms + 1] = name:gsub('@.*$', '') end
        end
        return syms
    end
    local plain, demangled = read(''), read('-C') -- the same symbols in the same order
    assert(#plain == #demangled, 'nm gave different lists with and without -C')
    local syms = {}
    for i = 1, #plain do syms[i] = {name = demangled[i], mangled = plain[i]} end
    return syms
end

-- What a library exports whatever its visibility: libstdc++'s headers give namespace std
-- default visibility, so its template instances (vector growth, shared_ptr counts, std::apply)
-- are exported where the engine's C++ (Gloo's glue, the CUDA emulation) instantiates them
-- (mangled _ZNSt..., _ZSt..., _ZTISt...); type information the compiler emits with vague
-- linkage for plain function types (clang's UBSan checks of calls through function pointers);
-- the bounds of sections the linker makes (__start_/__stop_, e.g. the fuzzers' coverage
-- counters); the ELF's _init and _fini.
local function unavoidable(sym)
    return sym.mangled:match('^_Z%u*St') or sym.name:match('^typeinfo ')
        or sym.name:match('^__start_') or sym.name:match('^__stop_')
        or sym.name == '_init' or sym.name == '_fini'
end

describe('the ABI of libddplua.so', function()
    local lib = build .. '/libddplua.so'
    local public = public_names()

    it('exports only what the public headers declare', function()
        local extra = {}
        for _, sym in ipairs(exported(lib)) do
            if not public[sym.name] and not unavoidable(sym) then extra[#extra + 1] = sym.name end
        end
        table.sort(extra)
        assert(#extra == 0, ('%d symbols exported beyond include/ddpl: %s'):format(#extra,
            table.concat(extra, ' ', 1, math.min(#extra, 40))))
    end)

    it('exports every function the public headers declare that the library defines', function()
        local have = {}
        for _, sym in ipairs(exported(lib)) do have[sym.name] = true end
        local defined = {}
        local out = S.sh('nm --defined-only ' .. S.q(build .. '/libddplua.a') .. ' 2>/dev/null')
        for name in out:gmatch('%x+ [TW] ([%w_]+)') do defined[name] = true end
        local missing = {}
        for name in pairs(public) do
            if defined[name] and not have[name] then missing[#missing + 1] = name end
        end
        table.sort(missing)
        assert(#missing == 0, 'public but not exported: ' .. table.concat(missing, ' '))
        assert(have.ddpl_last_error and have.luaopen_ddplua, 'the C API and the Lua entry point')
    end)
end)
