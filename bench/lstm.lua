-- bench/lstm.lua: nn.LSTM forward+backward time on the CPU, one configuration, for bench/lstm
-- (which alternates it with bench/lstm_torch.py, PyTorch's nn.LSTM on the same shapes).
--   ddplua bench/lstm.lua [--seq 64] [--batch 32] [--input 32] [--hidden 128] [--layers 1]
--       [--iters 20] [--threads 1] [--dtype float32|bfloat16]
-- Prints "ddplua lstm fwd+bwd median_ms X" over --iters timed iterations after 3 warm-up ones;
-- an iteration is output = lstm(x), sum(output):backward() with fresh gradients; with --dtype
-- bfloat16 the forward runs under autocast('cpu', bfloat16), so the layer computes in bf16.
local ddpl = require 'ddplua'
local here = arg[0]:match('^(.*)/[^/]*$') or '.'
local util = dofile(here .. '/util.lua')
local o = util.parse_args(arg, {seq = 64, batch = 32, input = 32, hidden = 128, layers = 1,
                                iters = 20, threads = 1, dtype = 'float32'}, 'bench/lstm.lua')
if o.dtype ~= 'float32' and o.dtype ~= 'bfloat16' then
    error('bench/lstm.lua: --dtype must be float32 or bfloat16', 0)
end
ddpl.set_num_threads(math.tointeger(o.threads))
ddpl.manual_seed(0)
local m = ddpl.nn.LSTM(o.input, o.hidden, {num_layers = math.tointeger(o.layers)})
local x = ddpl.randn(o.seq, o.batch, o.input)
x.requires_grad = true
local function step()
    m:zero_grad()
    x.grad = nil
    local out = o.dtype == 'float32' and m(x) or
                ddpl.autocast('cpu', {dtype = o.dtype}, function() return m(x) end)
    out:float():sum():backward()
end
for _ = 1, 3 do step() end
local times = {}
for i = 1, o.iters do
    local t0 = ddpl.time()
    step()
    times[i] = (ddpl.time() - t0) * 1e3
end
print(('ddplua lstm fwd+bwd median_ms %.3f'):format(util.median(times)))
