-- examples/gpt_tiny.lua: trains the small GPT of models/gpt.lua as a character-level language
-- model on a text file that Debian ships, and shows the loss fall (then samples some text).
--
--   ddplua examples/gpt_tiny.lua [--text /usr/share/common-licenses/GPL-3] [--steps 600]
--       [--batch 16] [--block-size 64] [--n-layer 2] [--n-head 4] [--n-embd 64] [--lr 3e-3]
--       [--eval-every 100] [--sample 200] [--seed 0] [--threads 1]
--
-- The text's distinct bytes are the vocabulary (about 90 for the GPL); the first 90% trains, the
-- last 10% validates. Each step draws `batch` random windows of block-size characters (targets:
-- the same windows shifted by one), and takes one AdamW step (weight decay 0.1, gradient norm
-- clipped at 1, cosine learning-rate decay to lr/10), the usual recipe for small GPTs. Every
-- --eval-every steps it prints the training loss (mean since the last report) and the validation
-- loss on 8 fixed batches; the last line is "loss first X last Y", X and Y being the first and
-- last validation losses, for scripts (spec/examples/models_train_spec.lua) to read. A uniform
-- guess scores ln(vocab) ~ 4.3 (76 distinct bytes in the GPL); 600 steps (about 15 s) reach about
-- 2.3. One thread by default: the matrices are small (16x64 rows by 64 to 256 columns), so a second
-- thread buys little, and on a busy machine spinning OpenMP threads can slow a step 20-fold.
local ddpl = require 'ddplua'
local nn, optim = ddpl.nn, ddpl.optim

-- The directory of this script, to find lm_options.lua and models/ wherever we are run from.
local root = (arg[0]:match('^(.*)/[^/]*$') or '.') .. '/..'
local defaults = { text = '/usr/share/common-licenses/GPL-3', batch = 16,
    ['block-size'] = 64, ['n-layer'] = 2, ['n-head'] = 4, ['n-embd'] = 64, lr = 3e-3, steps = 600,
    ['eval-every'] = 100, sample = 200, seed = 0, threads = 1 }
local opt = dofile(root .. '/examples/lm_options.lua')('gpt_tiny.lua', arg, defaults)

local gpt = assert(loadfile(root .. '/models/gpt.lua'))()

---------------------------------------------------------------------------------------------------
-- data: bytes -> token ids (their rank among the distinct bytes), as one int64 tensor

local T, B = math.tointeger(opt['block-size']), math.tointeger(opt.batch)
local data = dofile(root .. '/examples/char_text.lua')(opt.text, T, B, 'gpt_tiny.lua', 10)
local text, chars, id_of, get_batch = data.text, data.chars, data.id_of, data.get_batch

-- Fixed validation batches, drawn once, so successive reports are comparable.
local val_batches = {}
for i = 1, 8 do val_batches[i] = { get_batch('val') } end

---------------------------------------------------------------------------------------------------
-- model and optimizer

local model = gpt({ vocab_size = #chars, block_size = T, n_layer = opt['n-layer'],
    n_head = opt['n-head'], n_embd = opt['n-embd'] })
-- nanoGPT's rule: weight decay on tensors of 2+ dims (weights, embeddings), not on biases and
-- LayerNorm gains, which decay would pull towards 0 for no regularising benefit.
local decay, no_decay = {}, {}
for _, p in ipairs(model:parameters()) do
    if p:dim() >= 2 then decay[#decay + 1] = p else no_decay[#no_decay + 1] = p end
end
local optimizer = optim.AdamW({ { params = decay, weight_decay = 0.1 },
    { params = no_decay, weight_decay = 0 } }, { lr = opt.lr, betas = { 0.9, 0.95 } })
local scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer,
    { T_max = opt.steps, eta_min = opt.lr / 10 })

local function val_loss()
    model:eval()
    local sum = 0
    ddpl.no_grad(function()
        for _, b in ipairs(val_batches) do
            local _, loss = model(b[1], b[2])
            sum = sum + loss:item()
        end
    end)
    model:train()
    return sum / #val_batches
end

print(('gpt_tiny: %s, %d characters, vocabulary %d; %d layers, %d heads, %d wide, %d parameters; ' ..
    'batch %d x %d, %d steps, %d threads'):format(opt.text, #text, #chars, opt['n-layer'],
    opt['n-head'], opt['n-embd'], model:num_parameters(), B, T, opt.steps, ddpl.get_num_threads()))

local first = val_loss()
print(('step %5d  val loss %.4f  (uniform guess %.4f)'):format(0, first, math.log(#chars)))
local last, loss_sum, loss_n, t0 = first, 0, 0, ddpl.time()
for step = 1, opt.steps do
    local x, y = get_batch('train')
    local _, loss = model(x, y)
    optimizer:zero_grad()
    loss:backward()
    nn.utils.clip_grad_norm_(model:parameters(), 1.0)
    optimizer:step()
    scheduler:step()
    loss_sum, loss_n = loss_sum + loss:item(), loss_n + 1
    if step % opt['eval-every'] == 0 or step == opt.steps then
        last = val_loss()
        print(('step %5d  train loss %.4f  val loss %.4f  lr %.2e  %.0f tokens/s'):format(step,
            loss_sum / loss_n, last, scheduler:get_last_lr()[1],
            loss_n * B * T / (ddpl.time() - t0)))
        loss_sum, loss_n, t0 = 0, 0, ddpl.time()
    end
end

---------------------------------------------------------------------------------------------------
-- sampling: extend a prompt one character at a time from the softmax of the last position

if opt.sample > 0 then
    model:eval()
    local prompt = 'This License'
    local ids = {}
    for c in prompt:gmatch('.') do ids[#ids + 1] = (id_of[c] or '\0'):byte() end
    ddpl.no_grad(function()
        for _ = 1, opt.sample do
            local ctx = {}
            for i = math.max(1, #ids - T + 1), #ids do ctx[#ctx + 1] = ids[i] end
            local logits = model(ddpl.tensor({ ctx }, { dtype = 'int64' }))
            local probs = ddpl.F.softmax(logits[0][#ctx - 1] / 0.8, -1):tolist() -- temperature 0.8
            local r, acc, pick = math.random(), 0, #probs
            for i, p in ipairs(probs) do
                acc = acc + p
                if r <= acc then pick = i break end
            end
            ids[#ids + 1] = pick - 1
        end
    end)
    local out = {}
    for i, id in ipairs(ids) do out[i] = chars[id + 1] end
    print('sample: ' .. table.concat(out))
end
print(('loss first %.4f last %.4f'):format(first, last))
