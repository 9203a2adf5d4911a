-- examples/char_lstm.lua: a character-level LSTM language model (nn.Embedding -> nn.LSTM ->
-- nn.Linear) trained on a small text that ships with the repo, showing the loss fall, then
-- sampling some text from it.
--
--   ddplua examples/char_lstm.lua [--text examples/data/lighthouse.txt] [--steps 400]
--       [--batch 32] [--seq-len 64] [--embed 32] [--hidden 128] [--layers 1] [--dropout 0.3]
--       [--lr 5e-3] [--print-every 50] [--sample 200] [--seed 0] [--threads 1]
--
-- examples/data/lighthouse.txt (about 7.5 KB) was written for this repository and is in the
-- public domain. Its distinct bytes are the vocabulary (42 characters); the first 90% trains, the
-- last 10% validates. Each step draws `batch` random windows of seq-len characters (targets: the
-- same windows shifted by one) and takes one Adam step with the gradient norm clipped at 1.
-- Dropout applies to the LSTM's outputs (and between its layers): the text is small enough that
-- without it the model memorises it, and the validation loss turns up after about 150 steps.
-- The data helpers are examples/char_text.lua (shared with gpt_tiny.lua).
-- Every --print-every steps it prints the mean training loss since the last report and the
-- validation loss on 4 fixed batches; the last line is "loss first X last Y", the first and
-- last validation losses, for scripts (spec/examples/char_lstm_spec.lua) to read. A uniform guess
-- scores ln(vocab) ~ 3.7; the default 400 steps (about 15 s of one core) take the training loss
-- to about 1.
local ddpl = require 'ddplua'
local nn, optim, F = ddpl.nn, ddpl.optim, ddpl.F

local root = (arg[0]:match('^(.*)/[^/]*$') or '.') .. '/..'
local defaults = { text = root .. '/examples/data/lighthouse.txt', batch = 32, ['seq-len'] = 64,
    embed = 32, hidden = 128, layers = 1, dropout = 0.3, lr = 5e-3, steps = 400,
    ['print-every'] = 50, sample = 200, seed = 0, threads = 1 }
local opt = dofile(root .. '/examples/lm_options.lua')('char_lstm.lua', arg, defaults)

---------------------------------------------------------------------------------------------------
-- data: bytes -> token ids (their rank among the distinct bytes), as one int64 tensor

local T, B = math.tointeger(opt['seq-len']), math.tointeger(opt.batch)
local data = dofile(root .. '/examples/char_text.lua')(opt.text, T, B, 'char_lstm.lua', 20)
local text, chars, id_of, get_batch = data.text, data.chars, data.id_of, data.get_batch

local val_batches = {}
for i = 1, 4 do val_batches[i] = { get_batch('val') } end

---------------------------------------------------------------------------------------------------
-- model: characters (B, T) -> embeddings (B, T, E) -> LSTM outputs (B, T, H) -> logits (B, T, V)

local CharLSTM = nn.Module:extend('CharLSTM')

function CharLSTM:init(vocab, embed, hidden, layers, dropout)
    self.embed = nn.Embedding(vocab, embed)
    -- dropout between layers only where there are several (PyTorch warns otherwise)
    self.lstm = nn.LSTM(embed, hidden, { num_layers = layers, batch_first = true,
                                         dropout = layers > 1 and dropout or 0 })
    self.drop = nn.Dropout(dropout) -- the text is small: without it the model soon memorises
    self.head = nn.Linear(hidden, vocab)
end

-- x (B, T) int64, state {h, c} or nil -> logits (B, T, V), the final state
function CharLSTM:forward(x, state)
    local out, new_state = self.lstm(self.embed(x), state)
    return self.head(self.drop(out)), new_state
end

local V = #chars
local model = CharLSTM(V, math.tointeger(opt.embed), math.tointeger(opt.hidden),
                       math.tointeger(opt.layers), opt.dropout)
local optimizer = optim.Adam(model:parameters(), { lr = opt.lr })

local function loss_of(x, y)
    local logits = model(x)
    return F.cross_entropy(logits:view(B * T, V), y:view(B * T))
end

local function val_loss()
    model:eval()
    local sum = 0
    ddpl.no_grad(function()
        for _, b in ipairs(val_batches) do sum = sum + loss_of(b[1], b[2]):item() end
    end)
    model:train()
    return sum / #val_batches
end

print(('char_lstm: %s, %d characters, vocabulary %d; %s, %d parameters; batch %d x %d, ' ..
    '%d steps, %d threads'):format(opt.text, #text, V, tostring(model.lstm),
    model:num_parameters(), B, T, opt.steps, ddpl.get_num_threads()))

local first = val_loss()
print(('step %5d  val loss %.4f  (uniform guess %.4f)'):format(0, first, math.log(V)))
local last, loss_sum, loss_n, t0 = first, 0, 0, ddpl.time()
for step = 1, opt.steps do
    local loss = loss_of(get_batch('train'))
    optimizer:zero_grad()
    loss:backward()
    nn.utils.clip_grad_norm_(model:parameters(), 1.0)
    optimizer:step()
    loss_sum, loss_n = loss_sum + loss:item(), loss_n + 1
    if step % opt['print-every'] == 0 or step == opt.steps then
        last = val_loss()
        print(('step %5d  train loss %.4f  val loss %.4f  %.0f chars/s'):format(step,
            loss_sum / loss_n, last, loss_n * B * T / (ddpl.time() - t0)))
        loss_sum, loss_n, t0 = 0, 0, ddpl.time()
    end
end

---------------------------------------------------------------------------------------------------
-- sampling: feed a prompt, then one character at a time, carrying the LSTM state along

if opt.sample > 0 then
    model:eval()
    local prompt = 'The keeper'
    local out = { prompt }
    ddpl.no_grad(function()
        local ids = {}
        for c in prompt:gmatch('.') do ids[#ids + 1] = (id_of[c] or '\0'):byte() end
        local logits, state = model(ddpl.tensor({ ids }, { dtype = 'int64' }))
        local last_logits = logits[0][#ids - 1]
        for _ = 1, opt.sample do
            local probs = F.softmax(last_logits / 0.8, -1):tolist() -- temperature 0.8
            local r, id = math.random(), #probs
            for i, p in ipairs(probs) do
                r = r - p
                if r <= 0 then id = i; break end
            end
            out[#out + 1] = chars[id]
            logits, state = model(ddpl.tensor({ { id - 1 } }, { dtype = 'int64' }), state)
            last_logits = logits[0][0]
        end
    end)
    print('sample: ' .. table.concat(out))
end
print(('loss first %.4f last %.4f'):format(first, last))
