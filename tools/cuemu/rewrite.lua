-- tools/cuemu/rewrite.lua: turns one CUDA source (.cu/.cuh) into C++ the host compiler builds
-- against tools/cuemu/runtime/cuemu.h, for the emulation build (-DDDPL_CUDA_EMU=ON).
--
-- Usage: lua5.4 tools/cuemu/rewrite.lua IN OUT [SHOWN]   (SHOWN: the path #line names; IN)
--
-- Three rewrites, each keeping the line count, so the `#line 1` at the top makes every compiler
-- error and __LINE__ point at the original file:
--   kern<<<g, b, s, st>>>(args)       ->  ::cuemu::launch(kern, __FILE__, __LINE__, g, b, s, st)(args)
--   __global__ ... name(params) {     ->  the same, then `if (!::cuemu::kernel_entry("name", B)) return;`
--                                         (B: the __launch_bounds__ value, or 0)
--   extern __shared__ T name[];       ->  T *const name = (T *)::cuemu::dynamic_shared();
--   __shared__ T a[N], b[M];          ->  per-block instances: T (&a)[N] = ...static_shared(...)
-- It also writes OUT.kernels, the names of the kernels OUT defines. Comments and string literals
-- are left alone. Anything it cannot parse stops the build with the
-- file and line, rather than producing code that would fail obscurely.

local IN, OUT, SHOWN = arg[1], arg[2], arg[3] or arg[1]
if not IN or not OUT then
    io.stderr:write('usage: lua5.4 tools/cuemu/rewrite.lua IN OUT [SHOWN]\n')
    os.exit(2)
end

local f = assert(io.open(IN, 'rb'))
local src = f:read('a')
f:close()

local function line_of(pos)
    local _, n = src:sub(1, pos):gsub('\n', '')
    return n + 1
end

local function fail(pos, msg)
    io.stderr:write(string.format('%s:%d: cuemu rewrite: %s\n', SHOWN, line_of(pos), msg))
    os.exit(1)
end

-- code[i] is true where byte i is code (not inside a comment, string or character literal).
local function code_mask(s)
    local mask, i, n = {}, 1, #s
    while i <= n do
        local c, c2 = s:sub(i, i), s:sub(i, i + 1)
        local stop
        if c2 == '//' then
            stop = s:find('\n', i, true) or n + 1
            stop = stop - 1
        elseif c2 == '/*' then
            local e = s:find('*/', i + 2, true)
            stop = e and e + 1 or n
        elseif c == '"' or c == "'" then
            local j = i + 1
            while j <= n and s:sub(j, j) ~= c do j = j + (s:sub(j, j) == '\\' and 2 or 1) end
            stop = j
        end
        if stop then
            for k = i, stop do mask[k] = false end
            i = stop + 1
        else
            mask[i] = true
            i = i + 1
        end
    end
    return mask
end

-- Finds the next occurrence of plain `pat` at or after init that lies in code.
local function find_code(s, mask, pat, init)
    local p = init
    while true do
        local a, b = s:find(pat, p, true)
        if not a then return nil end
        if mask[a] then return a, b end
        p = a + 1
    end
end

-- The closing bracket matching the opening one at pos (code only).
local function match_forward(s, mask, pos, open, close)
    local depth = 0
    for i = pos, #s do
        if mask[i] then
            local c = s:sub(i, i)
            if c == open then
                depth = depth + 1
            elseif c == close then
                depth = depth - 1
                if depth == 0 then return i end
            end
        end
    end
    fail(pos, 'no closing ' .. close)
end

-- Only the newlines of text (so a replacement keeps the file's line count).
local function newlines_of(text)
    return (text:gsub('[^\n]', ''))
end

-- Applies edits {from, to, text} (non-overlapping) to s.
local function apply(s, edits)
    table.sort(edits, function(a, b) return a[1] < b[1] end)
    local out, at = {}, 1
    for _, e in ipairs(edits) do
        if e[1] < at then fail(e[1], 'overlapping rewrites') end
        out[#out + 1] = s:sub(at, e[1] - 1)
        out[#out + 1] = e[3]
        at = e[2] + 1
    end
    out[#out + 1] = s:sub(at)
    return table.concat(out)
end

---------------------------------------------------------------------------------------------
-- 1. launches: scan back from `<<<` over `name` or `name<targs>` (and the blanks before <<<).

local function rewrite_launches(s)
    local mask, edits, p = code_mask(s), {}, 1
    while true do
        local a = find_code(s, mask, '<<<', p)
        if not a then break end
        local b = find_code(s, mask, '>>>', a + 3)
        if not b then fail(a, '<<< without >>>') end
        local cfg = s:sub(a + 3, b - 1)
        -- kernel expression: back over blanks (and macro line continuations)
        local k = a - 1
        while k > 0 and s:sub(k, k):match('[%s\\]') do k = k - 1 end
        local kend = k
        if s:sub(k, k) == '>' then -- template arguments
            local depth = 0
            while k > 0 do
                local c = s:sub(k, k)
                if c == '>' then depth = depth + 1 elseif c == '<' then depth = depth - 1 end
                if depth == 0 then break end
                k = k - 1
            end
            k = k - 1
            while k > 0 and s:sub(k, k):match('%s') do k = k - 1 end
        end
        local kstart = k
        while kstart > 0 and s:sub(kstart, kstart):match('[%w_:]') do kstart = kstart - 1 end
        kstart = kstart + 1
        if kstart > k then fail(a, 'cannot find the kernel name before <<<') end
        local kernel = s:sub(kstart, kend)
        local gap = s:sub(kend + 1, a - 1)
        -- the argument list must follow
        local q = b + 3
        while s:sub(q, q):match('[%s\\]') do q = q + 1 end
        if s:sub(q, q) ~= '(' then fail(b, 'expected ( after >>>') end
        local gap2 = s:sub(b + 3, q - 1)
        edits[#edits + 1] = {
            kstart, q,
            '::cuemu::launch(' .. kernel .. gap .. ', __FILE__, __LINE__, ' .. cfg .. ')' ..
                gap2 .. '(',
        }
        p = q + 1
    end
    return apply(s, edits)
end

---------------------------------------------------------------------------------------------
-- 2. kernel entries: after `__global__`, the identifier before the first `(` that is not
-- __launch_bounds__'s is the kernel's name; its body's `{` gets the entry check.

local kernels = {} -- the names of the kernels defined here, for the coverage check

local function rewrite_kernels(s)
    local mask, edits, p = code_mask(s), {}, 1
    while true do
        local a, b = find_code(s, mask, '__global__', p)
        if not a then break end
        p = b + 1
        local bound, i, name = '0', b + 1, nil
        while not name do
            local lp = find_code(s, mask, '(', i)
            if not lp then fail(a, '__global__ without a parameter list') end
            local before = s:sub(i, lp - 1)
            local ident = before:match('([%w_]+)%s*$')
            if not ident then fail(lp, 'cannot find the kernel name after __global__') end
            local rp = match_forward(s, mask, lp, '(', ')')
            if ident == '__launch_bounds__' then
                bound = s:sub(lp + 1, rp - 1):match('^([^,]+)')
                i = rp + 1
            else
                name = ident
                i = rp + 1
            end
        end
        local q = i
        while s:sub(q, q):match('%s') do q = q + 1 end
        if s:sub(q, q) == '{' then
            kernels[#kernels + 1] = name
            edits[#edits + 1] = {
                q, q,
                '{ if (!::cuemu::kernel_entry("' .. name .. '", (int)(' .. bound ..
                    '))) return;',
            }
        elseif s:sub(q, q) ~= ';' then
            fail(q, 'expected { or ; after the parameters of kernel ' .. name)
        end
    end
    return apply(s, edits)
end

---------------------------------------------------------------------------------------------
-- 3. shared memory declarations.

local function split_top(text) -- on commas outside brackets
    local parts, depth, at = {}, 0, 1
    for i = 1, #text do
        local c = text:sub(i, i)
        if c == '[' or c == '(' or c == '<' then
            depth = depth + 1
        elseif c == ']' or c == ')' or c == '>' then
            depth = depth - 1
        elseif c == ',' and depth == 0 then
            parts[#parts + 1] = text:sub(at, i - 1)
            at = i + 1
        end
    end
    parts[#parts + 1] = text:sub(at)
    return parts
end

local function rewrite_shared(s)
    local mask, edits, p, n = code_mask(s), {}, 1, 0
    while true do
        local a, b = find_code(s, mask, '__shared__', p)
        if not a then break end
        local semi = find_code(s, mask, ';', b)
        if not semi then fail(a, '__shared__ declaration without ;') end
        local stmt = s:sub(b + 1, semi - 1):gsub('__align__%s*%b()', '')
        -- an `extern` just before makes it the dynamic array
        local ext_from = a
        local before = s:sub(1, a - 1)
        local ext = before:match('extern%s+$')
        if ext then ext_from = a - #ext end
        local decls = split_top(stmt)
        local first = decls[1]
        local type_, name1, dims1 = first:match('^%s*(.-)%s*([%w_]+)%s*(%b[].*)$')
        if not type_ or type_ == '' then
            fail(a, 'cannot parse the __shared__ declaration "' .. stmt .. '"')
        end
        local out = {}
        if ext then
            if #decls > 1 or dims1 ~= '[]' then fail(a, 'extern __shared__ must be one T name[]') end
            out[1] = string.format('%s *const %s = (%s *)::cuemu::dynamic_shared();', type_,
                                   name1, type_)
        else
            for k, d in ipairs(decls) do
                local name, dims
                if k == 1 then
                    name, dims = name1, dims1
                else
                    name, dims = d:match('^%s*([%w_]+)%s*(%b[].*)$')
                end
                if not name then fail(a, 'cannot parse __shared__ declarator "' .. d .. '"') end
                dims = dims:gsub('%s+$', '')
                n = n + 1
                local key = string.format('cuemu_shared_key_%d', n)
                out[#out + 1] = string.format(
                    'static char %s; %s (&%s)%s = ::cuemu::shared_ref<%s %s>::get(&%s);', key,
                    type_, name, dims, type_, dims, key)
            end
        end
        local replaced = s:sub(ext_from, semi)
        edits[#edits + 1] = {ext_from, semi, table.concat(out, ' ') .. newlines_of(replaced)}
        p = semi + 1
    end
    return apply(s, edits)
end

local text = rewrite_shared(rewrite_kernels(rewrite_launches(src)))
local o = assert(io.open(OUT .. '.tmp', 'wb'))
o:write(string.format('#line 1 "%s"\n', SHOWN), text)
o:close()
assert(os.rename(OUT .. '.tmp', OUT))
-- OUT.kernels: one kernel name a line (tools/cuemu/kernel_coverage.lua reads them)
local k = assert(io.open(OUT .. '.kernels', 'wb'))
k:write(table.concat(kernels, '\n'), #kernels > 0 and '\n' or '')
k:close()
