-- lua/ddplua/nn/parallel/ddp_timeline.lua: the DDPLUA_DDP_TIMELINE trace of
-- DistributedDataParallel (rank 0 of the DDP's group): a Chrome trace (chrome://tracing,
-- Perfetto) of every synchronised step, which tools/ddp_predict.lua reads to predict scaling.
-- defines: timeline.new(reducer, path, world, backend) -> tl, tl:forward_begins(),
--          tl:step_prepared(step, sync), tl:write().
--
-- Per synchronised step (args.step numbers it; times are microseconds from the first traced
-- forward; rows: tid 0 the training thread, tid b bucket b's allreduce):
--   "step"                           forward start to the next forward's start (the whole
--                                    iteration: forward, backward, optimizer, next batch); the
--                                    last step of a run has none
--   "forward"                        forward start to the end of the module's forward
--   "forward end to first gradient"  then to the first gradient ready
--   "backward"                       first gradient ready to the last (and the final wait's start)
--   "bucket b ready" (instant)       args.bytes: the bucket's size; args.copied_bytes: gradient
--                                    bytes copied into it in this backward
--   "allreduce bucket b"             launch to completion seen (tid b)
--   "final wait"                     waiting for every bucket and writing the averages to .grad
-- The file's "otherData" holds world_size and backend. It is rewritten every 50 steps, by
-- model:write_timeline(), and when the timeline is collected: when the Lua state closes at the
-- end of a `ddplua` run, whether the script ended normally or with an error (the ddplua command
-- always closes its state; os.exit(code) without its second argument `true` does not, as for
-- every Lua finalizer).
local ddpl = require 'ddplua'

local timeline = {}
local Timeline = {}
Timeline.__index = Timeline

-- path: the trace file; reducer: the DDP's C reducer (its timeline() holds the last step).
function timeline.new(reducer, path, world, backend)
    local tl = setmetatable({reducer = reducer, path = path, world = world,
        backend = backend, events = {}, pending = nil, t_forward = nil, t0 = nil,
        bytes = nil, bytes_rebuilt = nil}, Timeline)
    -- Written at exit: a finalizer on a sentinel only the timeline holds. It was made after the
    -- reducer, so at lua_close it runs before the reducer's own (Lua finalizes in the reverse
    -- order of creation) and the last step's reducer timeline can still be read.
    tl.sentinel = setmetatable({}, {__gc = function() tl:write() end})
    return tl
end

-- each bucket's size in bytes, in reduction order; read again after the rebuild that follows
-- the first iteration
function Timeline:bucket_bytes()
    local rebuilt = self.reducer:rebuilt()
    if self.bytes_rebuilt ~= rebuilt then
        self.bytes, self.bytes_rebuilt = {}, rebuilt
        for b, idx in ipairs(self.reducer:buckets()) do self.bytes[b] = idx.bytes end
    end
    return self.bytes
end

-- Adds the pending step from the reducer's timeline; step_end: the next forward's start, or nil.
function Timeline:append(step_end)
    local p = self.pending
    if not p then return end
    self.pending = nil
    local d = self.events
    local tl = self.reducer:timeline()
    local bytes = self:bucket_bytes()
    local t0 = self.t0
    local function us(t) return (t - t0) * 1e6 end
    local function span(name, tid, t1, t2)
        d[#d + 1] = ('{"name":"%s","ph":"X","pid":0,"tid":%d,"ts":%.1f,"dur":%.1f,'
            .. '"args":{"step":%d}}'):format(name, tid, us(t1), us(t2) - us(t1), p.step)
    end
    if step_end then span('step', 0, p.t_forward, step_end) end
    for _, ev in ipairs(tl) do
        if ev.name == 'backward' and ev.start > 0 and ev['end'] > 0 then
            span('forward', 0, p.t_forward, ev.ready)
            span('forward end to first gradient', 0, ev.ready, ev.start)
            span('backward', 0, ev.start, ev['end'])
        elseif ev.name == 'bucket' and ev.start > 0 then
            d[#d + 1] = ('{"name":"bucket %d ready","ph":"i","s":"t","pid":0,"tid":0,'
                .. '"ts":%.1f,"args":{"step":%d,"copied_bytes":%d,"bytes":%d}}'):format(ev.bucket,
                us(ev.ready), p.step, ev.copied_bytes or 0, bytes[ev.bucket] or 0)
            span('allreduce bucket ' .. ev.bucket, ev.bucket, ev.start, ev['end'])
        elseif ev.name == 'wait' and ev['end'] > 0 then
            span('final wait', 0, ev.start, ev['end'])
        end
    end
    if p.step % 50 == 0 then self:write_file() end
end

-- At the start of every forward (training or not): closes the pending step before a rebuild
-- drops its reducer timeline.
function Timeline:forward_begins()
    local now = ddpl.time()
    self.t0 = self.t0 or now
    self:append(now)
    self.t_forward = now
end

-- After a forward with autograd on: the coming backward is step `step`, traced when sync.
function Timeline:step_prepared(step, sync)
    if sync then self.pending = {step = step, t_forward = self.t_forward} end
end

function Timeline:write_file()
    local f, err = io.open(self.path, 'w')
    if not f then
        if not self.warned then
            io.stderr:write(('ddplua: DDPLUA_DDP_TIMELINE: cannot write the trace: %s\n')
                :format(err))
            self.warned = true
        end
        return
    end
    f:write(('{"otherData":{"world_size":%d,"backend":"%s"},\n"traceEvents":[\n'):format(
        self.world, self.backend), table.concat(self.events, ',\n'), '\n]}\n')
    f:close()
end

-- Writes the trace now, the pending step included (without its "step" span: it has not ended);
-- nothing for a DDP that never ran a synchronised step (so that a second, unused DDP in the
-- process does not overwrite the trace at exit: every traced DDP of a process writes the same
-- file). Never raises (it also runs as a finalizer): a failure is reported on stderr.
function Timeline:write()
    if #self.events == 0 and not self.pending then return end
    local function report(err)
        io.stderr:write(('ddplua: DDPLUA_DDP_TIMELINE: writing %s: %s\n'):format(self.path, err))
    end
    if self.pending then
        local ok, err = pcall(self.append, self, nil)
        if not ok then report('the last step is left out: ' .. tostring(err)) end
    end
    local ok, err = pcall(self.write_file, self)
    if not ok then report(tostring(err)) end
end

return timeline
