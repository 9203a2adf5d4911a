-- spec/support/api_surface.lua: the public names the library exports, found by walking its tables,
-- for spec/tools/docs_reference_spec.lua (every one is in docs/reference/lua.md).
-- defines: surface() -> list of {table = 'data', name = 'transform_rng', doc = {'data.'},
--          sections = {...}}, one per public name, sorted by table then name; doc lists the
--          prefixes the name may be written with in the docs.
--
-- Each walked table has the prefixes its names are written with in the docs (`data.`, `x:` for
-- tensor methods, `m:` or `nn.Module.` for module methods; DDP, ZeRO, the LR schedulers (through
-- StepLR), GradScaler and SummaryWriter by their methods) and the API.md sections that describe
-- it. A name is
-- public when it does not start with '_' and is not class machinery (`super`, `__name`).
-- Lazy tables (data, transforms, datasets, utils, nn) load their entries on first read, so
-- pairs() sees only what is loaded: the names they can load are taken from the tables their
-- __index closes over (lazy.lua's `names`, utils' `fields`, nn's own lists) and from the files
-- of lua/ddplua/nn (nn.<Name> loads nn/<Name>.lua); each candidate is then read, so only names
-- that really resolve count. Lower-case files of lua/ddplua/nn are the classes' helpers
-- (conv_common, rnn_base, ...), reachable but not API: they are left out.
local ddpl = require 'ddplua'

local M = {}

local source_dir = os.getenv('DDPLUA_SOURCE_DIR') or '.'

-- names worth a look in t: its own keys and the string keys of tables its __index closes over
local function candidates(t)
    local set = {}
    for k in pairs(t) do
        if type(k) == 'string' then set[k] = true end
    end
    local mt = getmetatable(t)
    local index = type(mt) == 'table' and rawget(mt, '__index')
    if type(index) == 'table' then
        for k in pairs(index) do
            if type(k) == 'string' then set[k] = true end
        end
    elseif type(index) == 'function' then
        for i = 1, 255 do
            local name, v = debug.getupvalue(index, i)
            if not name then break end
            if type(v) == 'table' and v ~= ddpl then
                for k in pairs(v) do
                    if type(k) == 'string' then set[k] = true end
                end
            end
        end
    end
    return set
end

local MACHINERY = {super = true, extend = true, is_instance_of = true, init = true}

local function is_public(name)
    return name:match('^[%a][%w_]*$') ~= nil and not MACHINERY[name]
end

-- the files lua/ddplua/nn/<Upper>.lua: nn.<Upper> loads each
local function nn_class_files()
    local out = {}
    local p = io.popen('ls ' .. source_dir .. '/lua/ddplua/nn')
    for f in p:lines() do
        local name = f:match('^(%u[%w_]*)%.lua$')
        if name then out[name] = true end
    end
    p:close()
    return out
end

-- A class's methods: its own and its parents' (class.lua chains them through `super`), minus
-- metamethods.
local function class_methods(cls)
    local set = {}
    local c = cls
    while c do
        for k, v in pairs(c) do
            if type(k) == 'string' and type(v) == 'function' and not k:match('^__') then
                set[k] = true
            end
        end
        c = rawget(c, 'super')
    end
    return set
end

-- The methods a class adds to base's (nn.Module's for DDP: those are walked with nn.Module).
local function methods_beyond(cls, base)
    local set, inherited = class_methods(cls), base and class_methods(base) or {}
    for k in pairs(inherited) do set[k] = nil end
    return set
end

local function tensor_methods()
    local index = getmetatable(ddpl.zeros(1)).__index
    for i = 1, 255 do
        local name, v = debug.getupvalue(index, i)
        if not name then break end
        if type(v) == 'table' and v.add and v.view then
            local set = {}
            for k in pairs(v) do set[k] = true end
            return set
        end
    end
    error('api_surface: the tensor methods table was not found among __index upvalues')
end

-- {label, table or name set, doc prefix, sections}
local function walked()
    local nn = ddpl.nn
    local nn_names = candidates(nn)
    for k in pairs(nn_class_files()) do nn_names[k] = true end
    for k in pairs(nn_names) do
        if not (k:match('^%u') or k == 'functional' or k == 'utils' or k == 'init' or
                k == 'parallel') then
            nn_names[k] = nil
        end
    end
    local all = {
        'tensors', 'autograd', 'conventions', 'nn', 'optim', 'data', 'distributed',
        'distributeddataparallel', 'cuda', 'saving', 'utilities', 'the-ddplua-command',
    }
    return {
        {'ddpl', ddpl, 'ddpl.', all},
        {'tensor', tensor_methods(), 'x:', {'tensors', 'autograd', 'conventions'}, methods = true},
        {'ddpl.nn', nn, 'nn.', {'nn', 'distributeddataparallel', 'conventions'}, nn_names},
        {'ddpl.nn.functional', nn.functional, 'F.', {'nn', 'conventions'}},
        {'ddpl.nn.init', nn.init, 'nn.init.', {'nn'}},
        {'ddpl.nn.utils', nn.utils, 'nn.utils.', {'nn'}},
        {'nn.Module', class_methods(nn.Module), {'m:', 'nn.Module.'}, {'nn', 'autograd'}, methods = true},
        {'ddpl.optim', ddpl.optim, 'optim.', {'optim'}},
        {'optim.Optimizer', class_methods(ddpl.optim.Optimizer), {'opt:', 'optim.Optimizer.'}, {'optim'}, methods = true},
        {'ddpl.optim.lr_scheduler', ddpl.optim.lr_scheduler, 'lr_scheduler.', {'optim'}},
        {'ddpl.amp', ddpl.amp, 'amp.', {'optim'}},
        {'ddpl.data', ddpl.data, 'data.', {'data'}},
        {'data.DataLoader', class_methods(ddpl.data.DataLoader), {'loader:', 'data.DataLoader.'}, {'data'}, methods = true},
        {'ddpl.data.transforms', ddpl.data.transforms, 'transforms.', {'data'}},
        {'ddpl.data.datasets', ddpl.data.datasets, 'datasets.', {'data'}},
        {'ddpl.distributed', ddpl.distributed, 'dist.', {'distributed'}},
        {'ddpl.multiprocessing', ddpl.multiprocessing, 'multiprocessing.', {'distributed'}},
        {'ddpl.utils', ddpl.utils, 'utils.', {'utilities'}},
        {'ddpl.cuda', ddpl.cuda, 'cuda.', {'cuda', 'saving', 'utilities'}},
        {'ddpl.autograd', ddpl.autograd, 'autograd.', {'autograd'}},
        {'DistributedDataParallel', methods_beyond(nn.parallel.DistributedDataParallel, nn.Module),
         {'model:', 'DDP.'}, {'distributeddataparallel', 'nn'}, methods = true},
        {'optim.ZeroRedundancyOptimizer', methods_beyond(ddpl.optim.ZeroRedundancyOptimizer),
         {'zero:', 'opt:', 'optim.ZeroRedundancyOptimizer.'}, {'optim', 'distributed'}, methods = true},
        {'lr_scheduler.LRScheduler', methods_beyond(ddpl.optim.lr_scheduler.StepLR),
         {'scheduler:', 'sched:', 'lr_scheduler.LRScheduler.'}, {'optim'}, methods = true},
        {'amp.GradScaler', methods_beyond(ddpl.amp.GradScaler), {'scaler:', 'amp.GradScaler.'},
         {'optim'}, methods = true},
        {'utils.tensorboard.SummaryWriter', methods_beyond(ddpl.utils.tensorboard.SummaryWriter),
         {'writer:', 'SummaryWriter.'}, {'utilities'}, methods = true},
    }
end

function M.surface()
    local out = {}
    for _, w in ipairs(walked()) do
        local label, t, doc, sections, names = w[1], w[2], w[3], w[4], w[5]
        local resolved = w.methods -- a set of method names, nothing to read
        local list = {}
        for k in pairs(names or (resolved and t) or candidates(t)) do
            if is_public(k) and (resolved or t[k] ~= nil) then list[#list + 1] = k end
        end
        table.sort(list)
        for _, k in ipairs(list) do
            out[#out + 1] = {table = label, name = k, doc = type(doc) == 'table' and doc or {doc},
                              sections = sections}
        end
    end
    return out
end

return M
