-- lua/ddplua/nn/parallel/fsdp_timeline.lua: the DDPLUA_FSDP_TIMELINE trace of
-- FullyShardedDataParallel (rank 0 of its group), in the DDP timeline's format
-- (ddp_timeline.lua beside this file): a Chrome trace (chrome://tracing, Perfetto) of every step.
-- defines: timeline.new(path, world, backend) -> tl, tl:forward_begins(), tl:forward_ends(),
--          tl:span(name, tid, t1, t2 [, args]), tl:backward_event(t), tl:backward_done(t1, t2),
--          tl:write().
--
-- Per step (args.step numbers it: one per forward of the wrapper; times are microseconds from
-- the first traced forward). Rows: tid 0 the training thread's compute, tid 1 all-gathers,
-- tid 2 reductions, so a collective's span beside compute spans is overlap:
--   "step"                     forward start to the next forward's start; the last step has none
--   "forward"                  the wrapper's forward
--   "forward <unit>"           one unit's forward, from its parameters in place to its end
--   "all_gather <unit>"        tid 1: issue to completion seen; args.prefetch 1 for a gather
--                              started ahead (forward_prefetch, backward_prefetch), args.phase
--                              'forward' or 'backward', args.bytes the gathered buffer's size
--   "reduce_scatter <unit>"    tid 2 (all_reduce under NO_SHARD): issue to completion seen
--   "backward"                 the first FSDP event of the backward pass to its last reduction
--   "final wait"               the end of the pass: waiting for the reductions in flight
-- "<unit>" is the unit's module path, "(root)" for the wrapped module. The file is rewritten
-- every 50 steps, by fsdp:write_timeline(), and at exit (a finalizer, as the DDP timeline's).
local ddpl = require 'ddplua'

local timeline = {}
local Timeline = {}
Timeline.__index = Timeline

function timeline.new(path, world, backend)
    local tl = setmetatable({path = path, world = world, backend = backend, events = {},
                             step = 0, t0 = nil, t_forward = nil, bwd_start = nil}, Timeline)
    tl.sentinel = setmetatable({}, {__gc = function() tl:write() end})
    return tl
end

local function us(tl, t) return (t - tl.t0) * 1e6 end

-- args: numbers and strings only
local function encode_args(step, args)
    local parts = {('"step":%d'):format(step)}
    local keys = {}
    for k in pairs(args or {}) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do
        local v = args[k]
        if type(v) == 'number' then
            parts[#parts + 1] = ('"%s":%s'):format(k, math.type(v) == 'integer' and
                tostring(v) or ('%.17g'):format(v))
        else
            parts[#parts + 1] = ('"%s":"%s"'):format(k, tostring(v))
        end
    end
    return '{' .. table.concat(parts, ',') .. '}'
end

function Timeline:span(name, tid, t1, t2, args)
    if not self.t0 or not t1 then return end -- nothing before the first traced forward
    local d = self.events
    d[#d + 1] = ('{"name":"%s","ph":"X","pid":0,"tid":%d,"ts":%.1f,"dur":%.1f,"args":%s}')
        :format(name, tid, us(self, t1), (t2 - t1) * 1e6, encode_args(self.step, args))
end

function Timeline:forward_begins()
    local now = ddpl.time()
    self.t0 = self.t0 or now
    if self.t_forward then self:span('step', 0, self.t_forward, now) end
    if self.step > 0 and self.step % 50 == 0 then self:write() end
    self.step = self.step + 1
    self.t_forward = now
    self.bwd_start = nil
end

function Timeline:forward_ends() self:span('forward', 0, self.t_forward, ddpl.time()) end

-- The first call of a backward pass marks its start.
function Timeline:backward_event(t) self.bwd_start = self.bwd_start or t end

function Timeline:backward_done(t1, t2)
    self:span('backward', 0, self.bwd_start or t1, t2)
    self:span('final wait', 0, t1, t2)
    self.bwd_start = nil
end

function Timeline:write_file()
    local f, err = io.open(self.path, 'w')
    if not f then
        if not self.warned then
            io.stderr:write(('ddplua: DDPLUA_FSDP_TIMELINE: cannot write the trace: %s\n')
                :format(err))
            self.warned = true
        end
        return
    end
    f:write(('{"otherData":{"world_size":%d,"backend":"%s"},\n"traceEvents":[\n'):format(
        self.world, self.backend), table.concat(self.events, ',\n'), '\n]}\n')
    f:close()
end

-- Writes the trace now; never raises (it also runs as a finalizer): a failure goes to stderr.
function Timeline:write()
    if #self.events == 0 then return end
    local ok, err = pcall(self.write_file, self)
    if not ok then
        io.stderr:write(('ddplua: DDPLUA_FSDP_TIMELINE: writing %s: %s\n'):format(self.path,
                                                                                 tostring(err)))
    end
end

return timeline
