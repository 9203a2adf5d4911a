-- tools/cuemu/kernel_coverage.lua: fails unless every kernel of the CUDA backend was launched by
-- the emulation suite (ctest -L cuda-emu), so no kernel is left that has never executed.
--
-- Usage: lua5.4 tools/cuemu/kernel_coverage.lua COVERAGE KERNELS...
--   COVERAGE  the file the suite's processes appended launched kernel names to
--             (DDPL_CUEMU_COVERAGE, tools/cuemu/runtime/cuemu_sched.cpp)
--   KERNELS   the .kernels lists tools/cuemu/rewrite.lua wrote for engine/cuda's .cu files
local coverage = arg[1]
if not coverage or not arg[2] then
    io.stderr:write('usage: lua5.4 tools/cuemu/kernel_coverage.lua COVERAGE KERNELS...\n')
    os.exit(2)
end

local launched = {}
local f = io.open(coverage, 'r')
if f then
    for line in f:lines() do launched[line] = true end
    f:close()
end

local total, missing = 0, {}
for i = 2, #arg do
    local file = arg[i]
    local source = file:match('([^/]+)%.cpp%.kernels$') or file
    for name in io.lines(file) do
        total = total + 1
        if not launched[name] then missing[#missing + 1] = source .. ': ' .. name end
    end
end
table.sort(missing)
for _, m in ipairs(missing) do print('never launched: ' .. m) end
print(string.format('%d passed, %d failed', total - #missing, #missing))
os.exit(#missing == 0 and 0 or 1)
