-- bench/cnn_layers.lua: where a step of the reference cnn (models/lenet.lua) spends its time:
-- each module's forward, the loss, backward and the SGD step, in ms (medians over the steps
-- after warm-up). A sync (a reduction to a Lua number) follows each part, so the parts add up
-- to a little more than an unsynced step; a ReLU followed by a MaxPool2d is one part, run as
-- nn.Sequential runs it (the pool first). One process, one line; compare 1 and 2 threads in
-- alternating processes (bench/README.md, "Session 26").
--
-- usage (paths as bench/train sets them; the build folder chooses the engine):
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build/?.so;;" \
--     lua5.4 bench/cnn_layers.lua [threads=1] [steps=200] [warmup=20]
local ddpl = require 'ddplua'
local F = ddpl.F

local o = { threads = 1, steps = 200, warmup = 20 }
for _, a in ipairs(arg) do
    local k, v = a:match('^(%w+)=(%d+)$')
    if not k or o[k] == nil then error('bench/cnn_layers: unknown argument ' .. a, 0) end
    o[k] = tonumber(v)
end
ddpl.set_num_threads(o.threads)
ddpl.manual_seed(0)
local root = (arg[0]:match('^(.*)/bench/[^/]*$') or '.')
local model = dofile(root .. '/models/lenet.lua')()
local opt = ddpl.optim.SGD(model:parameters(), { lr = 0.01, momentum = 0.9 })
-- the parts: the model's children in order, a ReLU and the MaxPool2d after it as one part (a
-- Sequential of the two, so that it runs them as the model does: the pool first)
local mods, labels, children = {}, {}, {}
for i, m in model:iter() do children[#children + 1] = { i, m } end
local k = 1
while k <= #children do
    local i, m = children[k][1], children[k][2]
    local nxt = children[k + 1] and children[k + 1][2]
    local name = getmetatable(m).__name
    if name == 'ReLU' and nxt and getmetatable(nxt).__name == 'MaxPool2d' then
        mods[#mods + 1] = ddpl.nn.Sequential(m, nxt)
        labels[#labels + 1] = ('%d-%d:ReLU+MaxPool2d'):format(i, i + 1)
        k = k + 2
    else
        mods[#mods + 1] = m
        labels[#labels + 1] = ('%d:%s'):format(i, name)
        k = k + 1
    end
end
for _, name in ipairs({ 'loss', 'backward', 'step', 'total' }) do labels[#labels + 1] = name end

local x, y = ddpl.randn(64, 1, 28, 28), ddpl.randint(0, 10, { 64 })
local first = mods[1].weight
local times = {}
for i = 1, #labels do times[i] = {} end
for s = 1, o.steps + o.warmup do
    local marks, h = { ddpl.time() }, x
    for _, m in ipairs(mods) do
        h = m(h)
        h:sum():item()
        marks[#marks + 1] = ddpl.time()
    end
    local loss = F.cross_entropy(h, y)
    loss:item()
    marks[#marks + 1] = ddpl.time()
    opt:zero_grad()
    loss:backward()
    first.grad:sum():item()
    marks[#marks + 1] = ddpl.time()
    opt:step()
    first:sum():item()
    marks[#marks + 1] = ddpl.time()
    if s > o.warmup then
        for i = 1, #marks - 1 do table.insert(times[i], (marks[i + 1] - marks[i]) * 1e3) end
        table.insert(times[#labels], (marks[#marks] - marks[1]) * 1e3)
    end
end

local util = dofile((arg[0]:match('^(.*)/[^/]*$') or '.') .. '/util.lua')
local out = {}
for i, name in ipairs(labels) do out[i] = ('%s=%.3f'):format(name, util.median(times[i])) end
print(('threads=%d '):format(o.threads) .. table.concat(out, ' '))
