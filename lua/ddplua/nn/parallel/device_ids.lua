-- lua/ddplua/nn/parallel/device_ids.lua: DistributedDataParallel's device_ids and output_device,
-- as PyTorch checks and uses them.
-- defines: check(device_ids, output_device, params) -> the module's device ('cuda:N') when
--          device_ids names it, else nil; to_device(device, ...) -> the arguments with every
--          tensor in them (also inside plain tables) on that device.
--
-- PyTorch's rules: the parameters must all be on one type of device; device_ids and
-- output_device are only for a module on one CUDA device (a CPU module or one spread over
-- several devices takes neither) and device_ids holds a single device, given as an index N,
-- 'cuda:N' or 'cuda' (the current device). PyTorch does not move the module; neither do we, and
-- where PyTorch would silently run a module whose parameters live elsewhere we raise an error
-- naming both devices. output_device, if given, must be that same device (PyTorch uses it only
-- for modules spread over several devices). With device_ids, forward moves the tensors it is
-- given to the device first, as PyTorch's DDP does with its inputs.
local ddpl = require 'ddplua'

local M = {}

local function fail(fmt, ...) error('DistributedDataParallel: ' .. fmt:format(...), 0) end

local function show(v)
    if not v then return 'nil' end -- DDP's defaults are false
    if type(v) ~= 'table' then return tostring(v) end
    local parts = {}
    for i, x in ipairs(v) do parts[i] = type(x) == 'string' and ("'" .. x .. "'") or tostring(x) end
    return '{' .. table.concat(parts, ', ') .. '}'
end

-- An index N, 'cuda:N' or 'cuda' as 'cuda:N'; what in a message says where it came from.
local function cuda_device(v, what)
    local index
    if math.type(v) == 'integer' or (type(v) == 'number' and math.tointeger(v)) then
        index = math.tointeger(v)
    elseif v == 'cuda' then
        index = ddpl.cuda.current_device()
    elseif type(v) == 'string' and v:match('^cuda:%d+$') then
        index = math.tointeger(tonumber(v:match('%d+')))
    end
    if not index or index < 0 then
        fail("%s must be a CUDA device index N, 'cuda:N' or 'cuda', got %s", what, show(v))
    end
    return 'cuda:' .. index
end

function M.check(device_ids, output_device, params)
    if device_ids ~= false and device_ids ~= nil and type(device_ids) ~= 'table' then
        fail('device_ids must be nil or a list holding one device (e.g. {0}), got %s',
            show(device_ids))
    end
    local ids = device_ids or {}
    local devices, seen, types = {}, {}, {}
    for _, p in ipairs(params) do
        if not seen[p.device] then
            seen[p.device] = true
            devices[#devices + 1] = p.device
            types[p.device:match('^%a+')] = true
        end
    end
    table.sort(devices)
    if types.cpu and types.cuda then
        fail("the module's parameters must be on one type of device, but they are on %s",
            table.concat(devices, ', '))
    end
    local on_cpu = #devices == 0 or types.cpu
    if (#ids > 0 or output_device) and (on_cpu or #devices > 1) then
        fail('device_ids and output_device only work with a module on one CUDA device (for a '
            .. 'CPU module or one spread over several devices they must be nil), but got '
            .. 'device_ids %s, output_device %s and module parameters on %s', show(device_ids),
            show(output_device), #devices > 0 and table.concat(devices, ', ') or 'no device')
    end
    if #ids == 0 then return nil end
    if #ids > 1 then
        fail('device_ids can only be nil or contain a single element, got %s', show(device_ids))
    end
    local device = cuda_device(ids[1], 'device_ids[1]')
    if device ~= devices[1] then
        fail("device_ids %s names %s but the module's parameters are on %s (move the module "
            .. "there first: module:to('%s'))", show(device_ids), device, devices[1], device)
    end
    if output_device and cuda_device(output_device, 'output_device') ~= device then
        fail("output_device %s is not the module's device %s", show(output_device), device)
    end
    return device
end

local function move(device, v, seen)
    if ddpl.is_tensor(v) then
        return v.device == device and v or v:to(device)
    elseif type(v) == 'table' and getmetatable(v) == nil then
        if seen[v] then return seen[v] end
        local out = {}
        seen[v] = out
        for k, x in pairs(v) do out[k] = move(device, x, seen) end
        return out
    end
    return v
end

function M.to_device(device, ...)
    if not device then return ... end
    local args = table.pack(...)
    local seen = {}
    for i = 1, args.n do args[i] = move(device, args[i], seen) end
    return table.unpack(args, 1, args.n)
end

return M
