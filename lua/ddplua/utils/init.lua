-- lua/ddplua/utils/init.lua: ddpl.utils (also require 'ddplua.utils'): what a training script
-- needs around the training itself.
-- defines: utils.tensorboard (SummaryWriter), utils.progress(n [, opts]) (a progress bar),
--          utils.Progress (its class), utils.MetricsLogger(path [, opts]) (JSON lines),
--          utils.checkpoint(fn, ...), utils.checkpoint_sequential(seq, segments, x) and
--          utils.checkpoint_wrapper(module) (activation checkpointing); each loaded on first use.
--
-- All three write once per distributed job by default: on rank 0 only (lua/ddplua/utils/rank.lua),
-- {all_ranks = true} to write on every rank. docs/internals/utils.md has the formats.
local utils = {}

-- field -> module, and the module's field (nil: the module itself)
local fields = {
    tensorboard = {'ddplua.utils.tensorboard'},
    progress = {'ddplua.utils.progress', 'progress'},
    Progress = {'ddplua.utils.progress', 'Progress'},
    MetricsLogger = {'ddplua.utils.metrics_logger', 'MetricsLogger'},
    checkpoint = {'ddplua.utils.checkpoint', 'checkpoint'},
    checkpoint_sequential = {'ddplua.utils.checkpoint', 'checkpoint_sequential'},
    checkpoint_wrapper = {'ddplua.utils.checkpoint', 'checkpoint_wrapper'},
}

return setmetatable(utils, {
    __index = function(t, key)
        local where = fields[key]
        if not where then return nil end
        local mod = require(where[1])
        local value = where[2] and mod[where[2]] or mod
        rawset(t, key, value)
        return value
    end,
})
