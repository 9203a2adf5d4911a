-- lua/ddplua/optim/ZeroRedundancyOptimizer.lua: optim.ZeroRedundancyOptimizer, ZeRO stage 1
--   (PyTorch's torch.distributed.optim.ZeroRedundancyOptimizer).
-- defines: ZeroRedundancyOptimizer(params, {optimizer_class = optim.AdamW, process_group = nil,
--          parameters_as_bucket_view = false, overlap_with_ddp = false, bucket_cap_mb = 25,
--          ...the wrapped optimizer's options (lr, betas, ...)}), an Optimizer with
--          step([closure]), zero_grad, add_param_group(group), consolidate_state_dict([to=0]), state_dict(),
--          load_state_dict(sd), the fields param_groups (every parameter, as the plain
--          optimizer's), optim (the wrapped optimizer over this rank's shard), state (that
--          optimizer's state: the shard's only), rank, world_size, process_group.
--
-- Partition (PyTorch's _partition_parameters): group by group, parameters sorted by numel,
-- largest first (ties in list order), each given to the group rank with the fewest elements so
-- far (the lowest rank on a tie); the totals carry over from one group to the next. The same
-- computation on every rank, so every rank knows every parameter's owner without talking.
-- Each rank builds optimizer_class over its shard only, with one group per parameter group
-- (possibly empty), so Adam's exp_avg/exp_avg_sq exist for about 1/N of the elements, and the
-- class's fused step (ddpl._fused_adam_, ...) runs on the shard unchanged.
--
-- step(): the wrapped optimizer steps the shard, then every parameter is broadcast from its
-- owner. Parameters of one owner, dtype and device are packed into flat buckets of at most
-- bucket_cap_mb (a ddplua addition: PyTorch broadcasts parameter by parameter unless
-- parameters_as_bucket_view) and every broadcast is issued asynchronously before the first is
-- waited for, so they run back to back on the group's worker. A bucket of one parameter is
-- broadcast in place; a larger one is copied into a flat buffer on the owner and out of it on
-- the others, and freed after the step (no persistent second copy of the parameters).
--
-- Options: optimizer_class is required (an Optimizer class, not an instance); every option the
-- class knows goes to it; anything else is an error. parameters_as_bucket_view = true and
-- overlap_with_ddp = true are refused with the reason (docs/internals/zero.md): ddplua's `p.data =
-- view` makes a new leaf, so DDP's gradient hooks would stay on the old tensor; and DDP has no
-- per-bucket optimizer hook to overlap with.
--
-- State dicts use the plain optimizer's layout (parameters numbered across every group):
-- consolidate_state_dict(to) (collective) gathers each rank's shard state to group rank `to`,
-- whose state_dict() then equals the plain optimizer's; state_dict() elsewhere, or after a step
-- since the last consolidation, is an error (PyTorch's rule, plus no stale snapshot).
-- load_state_dict(sd) takes such a full state dict on every rank and keeps the shard's part.
local ddpl = require 'ddplua'
local Optimizer = require 'ddplua.optim.Optimizer'
local Cdist = require 'ddplua.core.dist'

local NAME = 'ZeroRedundancyOptimizer'

local ZeRO = Optimizer:extend(NAME, {})

-- ZeRO's own options; every other key must be an option of optimizer_class.
local OWN = {optimizer_class = true, process_group = true, parameters_as_bucket_view = true,
    overlap_with_ddp = true, bucket_cap_mb = true}

local function fail(level, fmt, ...) error(NAME .. ': ' .. fmt:format(...), level + 1) end

-- an error message without the "file.lua:12: " position in front
local function bare(err) return (tostring(err):gsub('^[^\n]-%.lua:%d+: ', '')) end

-- an option value (betas is a table) copied, so groups do not share it
local copy = Optimizer._copy_option

-- cls must be a subclass of Optimizer with an update (not Optimizer itself, not ZeRO).
local function check_class(cls, level)
    if cls == nil then
        fail(level, 'optimizer_class is required (e.g. {optimizer_class = optim.AdamW, lr = 1e-3})')
    end
    if type(cls) == 'table' and type(cls.param_groups) == 'table' then
        fail(level, 'optimizer_class must be an optimizer class such as optim.AdamW, got an '
            .. 'optimizer instance (%s)', tostring(getmetatable(cls) and cls.__name))
    end
    if type(cls) == 'table' and cls._zero then
        fail(level, 'optimizer_class cannot be ZeroRedundancyOptimizer itself')
    end
    local c = type(cls) == 'table' and rawget(cls, 'super')
    while c and c ~= Optimizer do c = rawget(c, 'super') end
    if not c or type(cls.defaults) ~= 'table' or cls._update == nil then
        fail(level, 'optimizer_class must be an optimizer class such as optim.AdamW, got %s',
            type(cls) == 'table' and tostring(rawget(cls, '__name') or 'a table') or type(cls))
    end
end

-- The parameters of each group of every rank: shards[r + 1][gi] = list of tensors, in the
-- order the partition assigned them.
local function partition(groups, world)
    local shards, sizes = {}, {}
    for r = 1, world do
        shards[r] = {}
        sizes[r] = 0
    end
    for gi, g in ipairs(groups) do
        for r = 1, world do shards[r][gi] = {} end
        local order = {}
        for i, p in ipairs(g.params) do order[i] = {p = p, i = i, n = p:numel()} end
        table.sort(order, function(a, b)
            if a.n ~= b.n then return a.n > b.n end
            return a.i < b.i
        end)
        for _, e in ipairs(order) do
            local best = 1
            for r = 2, world do if sizes[r] < sizes[best] then best = r end end
            local list = shards[best][gi]
            list[#list + 1] = e.p
            sizes[best] = sizes[best] + e.n
        end
    end
    return shards
end

-- The local optimizer's groups: each of self's groups with this rank's parameters.
local function local_groups(self)
    local out = {}
    for gi, g in ipairs(self.param_groups) do
        local lg = {}
        for k, v in pairs(g) do if k ~= 'params' then lg[k] = copy(v) end end
        lg.params = self._shards[self.rank + 1][gi]
        out[gi] = lg
    end
    return out
end

-- Broadcast buckets: for each owner in rank order, its parameters in partition order, cut when
-- the dtype or device changes or the bucket would pass cap bytes: {owner (group rank), params,
-- numel, bytes, dtype, device}. A bucket of one contiguous parameter is broadcast in place.
local function make_buckets(self)
    local buckets = {}
    local cap = self._bucket_bytes
    for r = 1, self.world_size do
        local cur
        for _, list in ipairs(self._shards[r]) do
            for _, p in ipairs(list) do
                local n, dtype, device = p:numel(), p.dtype, p.device
                local bytes = n * p:element_size()
                local alone = not p:is_contiguous() -- in a flat buffer even when alone
                if not cur or cur.dtype ~= dtype or cur.device ~= device
                    or cur.bytes + bytes > cap then
                    cur = {owner = r - 1, params = {}, numel = 0, bytes = 0, dtype = dtype,
                        device = device, in_place = true}
                    buckets[#buckets + 1] = cur
                end
                cur.params[#cur.params + 1] = p
                cur.numel, cur.bytes = cur.numel + n, cur.bytes + bytes
                cur.in_place = #cur.params == 1 and not alone
            end
        end
    end
    self._buckets = buckets
end

-- Every rank's parameters from their owner (see the file's comment). Collective.
function ZeRO:_sync_params()
    local pg, works, flats = self.process_group, {}, {}
    ddpl.no_grad(function()
        for i, b in ipairs(self._buckets) do
            local src = self._global_rank_of[b.owner]
            local t
            if b.in_place then
                t = b.params[1]
            elseif b.owner == self.rank then
                local parts = {}
                for j, p in ipairs(b.params) do parts[j] = p:reshape(p:numel()) end
                t = ddpl.cat(parts, 0)
            else
                t = ddpl.empty(b.numel, {dtype = b.dtype, device = b.device})
            end
            flats[i] = t
            works[i] = ddpl.distributed.broadcast(t, src, {async_op = true, group = pg})
        end
    end)
    ddpl.no_grad(function()
        for i, b in ipairs(self._buckets) do
            works[i]:wait()
            if not b.in_place and b.owner ~= self.rank then
                local off = 0
                for _, p in ipairs(b.params) do
                    local n = p:numel()
                    local d <close> = p:detach()
                    d:copy_(flats[i]:narrow(0, off, n):view(p:shape()))
                    off = off + n
                end
            end
            if not b.in_place then getmetatable(flats[i]).__close(flats[i]) end
        end
    end)
end

-- The ranks must agree on the parameters (count and each numel, in order), or the partition
-- differs and the broadcasts would not match: one all_gather of a small signature, named error.
local function check_same_params(self)
    local sig = {}
    for _, g in ipairs(self.param_groups) do
        sig[#sig + 1] = #g.params
        for _, p in ipairs(g.params) do sig[#sig + 1] = p:numel() end
    end
    local dev = self.param_groups[1].params[1] and self.param_groups[1].params[1].device or 'cpu'
    local n = ddpl.tensor({#sig}, {dtype = 'int64', device = dev})
    local ns = {}
    for r = 1, self.world_size do ns[r] = ddpl.zeros(1, {dtype = 'int64', device = dev}) end
    ddpl.distributed.all_gather(ns, n, {group = self.process_group})
    local longest = 0
    for r = 1, self.world_size do longest = math.max(longest, math.tointeger(ns[r]:item())) end
    local mine = ddpl.zeros(longest, {dtype = 'int64', device = dev})
    mine:narrow(0, 0, #sig):copy_(ddpl.tensor(sig, {dtype = 'int64', device = dev}))
    local all = {}
    for r = 1, self.world_size do all[r] = ddpl.zeros(longest, {dtype = 'int64', device = dev}) end
    ddpl.distributed.all_gather(all, mine, {group = self.process_group})
    for r = 1, self.world_size do
        local theirs = all[r]:tolist()
        for k = 1, longest do
            if theirs[k] ~= (sig[k] or 0) then
                fail(3, 'group rank %d has other parameters than group rank %d (parameter '
                    .. 'groups and element counts must be the same on every rank, in the same '
                    .. 'order)', r - 1, self.rank)
            end
        end
    end
end

-- (Re)computes the partition and the buckets from self.param_groups.
function ZeRO:_repartition()
    self._shards = partition(self.param_groups, self.world_size)
    make_buckets(self)
    self._consolidated = nil
end

-- Errors name the caller's line: construction reaches here by tail calls (class.lua's
-- construct), so the caller is level 2.
function ZeRO.new(cls, params, opts)
    if opts ~= nil and type(opts) ~= 'table' then
        fail(2, 'expected an options table as argument 2, got %s', type(opts))
    end
    opts = opts or {}
    local oc = opts.optimizer_class
    check_class(oc, 3)
    local inner = {}
    for k, v in pairs(opts) do
        if not OWN[k] then
            if oc.defaults[k] == nil then
                fail(2, "unknown option '%s' (neither %s's nor %s's)", tostring(k), NAME,
                    oc.__name)
            end
            inner[k] = v
        end
    end
    if opts.overlap_with_ddp then
        fail(2, 'overlap_with_ddp = true is not supported: ddplua\'s DDP has no hook that runs '
            .. 'the optimizer step per bucket (docs/internals/zero.md); the broadcasts of step() '
            .. 'overlap each other')
    end
    if opts.parameters_as_bucket_view then
        fail(2, 'parameters_as_bucket_view = true is not supported: `p.data = view` makes a '
            .. 'new leaf in ddplua, so DDP\'s gradient hooks would stay on the old tensor '
            .. '(docs/internals/zero.md); step() packs small parameters into flat buckets instead')
    end
    local cap = opts.bucket_cap_mb
    if cap == nil then cap = 25 end
    if type(cap) ~= 'number' or not (cap > 0) or cap == math.huge then
        fail(2, 'bucket_cap_mb must be a positive number, got %s', tostring(cap))
    end
    local dist = ddpl.distributed
    if not dist.is_initialized() then
        fail(2, 'the default process group is not initialized (call '
            .. 'ddpl.distributed.init_process_group first)')
    end
    local pg = opts.process_group
    if pg == nil then pg = dist.default_group() end
    if not Cdist.is_group(pg) then
        fail(2, 'process_group must be a process group (dist.new_group), got %s', type(pg))
    end
    local rank = dist.get_rank(pg)
    if rank < 0 then
        fail(2, 'rank %d is not a member of process_group (ranks %s)', dist.get_rank(),
            table.concat(dist.get_process_group_ranks(pg), ', '))
    end

    -- self's groups hold every parameter with the wrapped optimizer's defaults (Optimizer.new
    -- checks params, groups and option values as the plain optimizer would)
    local ok, probe = pcall(oc, params, inner)
    if not ok then error(NAME .. ': ' .. bare(probe), 2) end
    local self = setmetatable({param_groups = probe.param_groups, defaults = probe.defaults},
        cls)
    self.optimizer_class = oc
    self.process_group = pg
    self.rank, self.world_size = rank, dist.get_world_size(pg)
    self._bucket_bytes = cap * 1024 * 1024
    self._global_rank_of = {}
    for r, g in ipairs(dist.get_process_group_ranks(pg)) do self._global_rank_of[r - 1] = g end
    check_same_params(self)
    self:_repartition()
    self.optim = oc(local_groups(self))
    self.state = self.optim.state
    return self
end

-- A group appended to every rank's parameters (collective in effect: every rank must add the
-- same group). The partition of the earlier groups is unchanged (sizes only grow), so the
-- wrapped optimizer keeps its state and only gains this rank's part of the new group.
function ZeRO:add_param_group(group)
    local before = #self.param_groups
    local ok, err = pcall(Optimizer.add_param_group, self, group, 2)
    if not ok then error(bare(err), 2) end
    if #self.param_groups == before then return end
    self:_repartition()
    local lg = local_groups(self)
    self.optim:add_param_group(lg[#lg])
end

-- The wrapped class's checks on a group's options (add_param_group above).
function ZeRO:_check_group(g, level)
    local f = self.optimizer_class and self.optimizer_class._check_group
    if f then f(self, g, level + 1) end
end

-- Hyperparameters (lr, betas, ...; everything but params) from one list of groups to the other.
local function sync_groups(from, to)
    for gi, g in ipairs(from) do
        for k, v in pairs(g) do if k ~= 'params' then to[gi][k] = copy(v) end end
    end
end

function ZeRO:step(closure)
    local loss
    if closure ~= nil then loss = ddpl.enable_grad(closure) end
    sync_groups(self.param_groups, self.optim.param_groups) -- a scheduler's lr, for instance
    self.optim:step()
    self._consolidated = nil
    self:_sync_params()
    return loss
end

-- Collective over the group: every rank's shard state, in the plain optimizer's numbering,
-- gathered to group rank `to` (default 0), where state_dict() then returns the whole.
function ZeRO:consolidate_state_dict(to)
    if to == nil then to = 0 end
    if math.type(to) ~= 'integer' or to < 0 or to >= self.world_size then
        fail(2, 'consolidate_state_dict: to must be a rank of the process group (0 to %d), got %s',
            self.world_size - 1, tostring(to))
    end
    local index, next_index = {}, 0
    for _, g in ipairs(self.param_groups) do
        for _, p in ipairs(g.params) do
            index[p] = next_index
            next_index = next_index + 1
        end
    end
    local mine = {}
    for p, s in pairs(self.optim.state) do
        if index[p] ~= nil then mine[index[p]] = s end
    end
    local list = self.rank == to and {} or nil
    local ok, err = pcall(ddpl.distributed.gather_object, mine, list, self._global_rank_of[to],
        {group = self.process_group})
    if not ok then error(NAME .. ': consolidate_state_dict: ' .. bare(err), 2) end
    self._consolidated = nil
    if list then
        local all = {}
        for r = 1, self.world_size do
            for i, s in pairs(list[r] or {}) do all[i] = s end
        end
        self._consolidated = all
    end
end

-- The full state dict (plain optimizer's layout) on the rank that consolidate_state_dict chose.
function ZeRO:state_dict()
    if self._consolidated == nil then
        fail(2, 'state_dict: optimizer state has not been consolidated on this rank (group rank '
            .. '%d) since the last step; call consolidate_state_dict(to) on every rank first, '
            .. 'then state_dict() on rank `to`', self.rank)
    end
    local sd = Optimizer.state_dict({param_groups = self.param_groups, state = {}})
    sd.state = self._consolidated
    return sd
end

-- sd: a full state dict (the plain optimizer's, or a consolidated one) on every rank. Checked
-- here entirely on every rank, so every rank fails alike; the wrapped optimizer then loads the
-- shard's part (its own copies of the tensors).
function ZeRO:load_state_dict(sd)
    local f = 'load_state_dict'
    if type(sd) ~= 'table' or type(sd.param_groups) ~= 'table' then
        fail(2, '%s: expected a table with param_groups and state', f)
    end
    local groups = sd.param_groups
    if #groups ~= #self.param_groups then
        fail(2, '%s: loaded state dict has %d parameter groups, the optimizer has %d', f,
            #groups, #self.param_groups)
    end
    local by_index = {}
    for gi, g in ipairs(self.param_groups) do
        local saved = groups[gi]
        if type(saved) ~= 'table' or type(saved.params) ~= 'table'
            or #saved.params ~= #g.params then
            fail(2, '%s: parameter group %d has %d parameters in the state dict but %d in the '
                .. 'optimizer', f, gi - 1, type(saved) == 'table' and type(saved.params) == 'table'
                and #saved.params or 0, #g.params)
        end
        for i, p in ipairs(g.params) do by_index[saved.params[i]] = p end
    end
    for idx, s in pairs(sd.state or {}) do
        local p = by_index[idx]
        if p == nil then
            fail(2, '%s: state for parameter %s, which no group lists', f, tostring(idx))
        end
        for k, v in pairs(s) do
            if ddpl.is_tensor(v) and k ~= 'step' and v:numel() ~= p:numel() then
                fail(2, '%s: state %s of parameter %s has %d elements, the parameter %d', f, k,
                    tostring(idx), v:numel(), p:numel())
            end
        end
    end
    -- the shard's part, numbered as the wrapped optimizer numbers its own parameters
    local local_sd, local_index, next_index = {state = {}, param_groups = {}}, {}, 0
    for gi, list in ipairs(self._shards[self.rank + 1]) do
        local lg = {}
        for k, v in pairs(groups[gi]) do if k ~= 'params' then lg[k] = copy(v) end end
        lg.params = {}
        for i, p in ipairs(list) do
            local_index[p] = next_index
            lg.params[i] = next_index
            next_index = next_index + 1
        end
        local_sd.param_groups[gi] = lg
    end
    for idx, s in pairs(sd.state or {}) do
        local li = local_index[by_index[idx]]
        if li ~= nil then local_sd.state[li] = s end
    end
    local ok, err = pcall(self.optim.load_state_dict, self.optim, local_sd)
    if not ok then error(NAME .. ': ' .. bare(err), 2) end
    self.state = self.optim.state
    sync_groups(self.optim.param_groups, self.param_groups)
    self._consolidated = nil
end

-- Marks the class, so that check_class refuses it and its subclasses as optimizer_class.
ZeRO._zero = true

return ZeRO
