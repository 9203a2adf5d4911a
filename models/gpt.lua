-- models/gpt.lua: a small GPT (decoder-only transformer language model).
-- defines: a constructor gpt(cfg) -> nn.Module with forward(idx [, targets]) -> logits [, loss];
--          cfg: vocab_size (required), block_size (context length, required), n_layer (4),
--          n_head (4), n_embd (128), dropout (0).
--
-- GPT-2's layout (Radford et al. 2019; the structure of karpathy/nanoGPT's model.py): token and
-- learned position embeddings, n_layer pre-LayerNorm blocks of causal self-attention
-- (F.scaled_dot_product_attention with is_causal) and a 4x GELU MLP, a final LayerNorm, and an
-- output head tied to the token embedding (logits = h @ wte^T, no separate weight). Weights are
-- initialised as GPT-2's: N(0, 0.02), residual output projections N(0, 0.02/sqrt(2*n_layer)) so
-- the residual stream's variance does not grow with depth, zero biases.
-- Shapes: B batch, T time (<= block_size), C = n_embd, nh heads of hs = C/nh.
local ddpl = require 'ddplua'
local nn, F = ddpl.nn, ddpl.F

local CausalSelfAttention = nn.Module:extend('CausalSelfAttention')

function CausalSelfAttention:init(cfg)
    self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd) -- q, k, v for all heads in one GEMM
    self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
    self.resid_drop = nn.Dropout(cfg.dropout)
    self.n_head = cfg.n_head
end

-- x (B, T, C) -> (B, T, C)
function CausalSelfAttention:forward(x)
    local B, T, C = x:size(0), x:size(1), x:size(2)
    local nh = self.n_head
    local qkv = self.c_attn(x):split(C, 2)
    -- (B, T, C) -> (B, nh, T, hs): heads become a batch dimension for the attention
    local function heads(t) return t:view(B, T, nh, C // nh):transpose(1, 2) end
    local y = F.scaled_dot_product_attention(heads(qkv[1]), heads(qkv[2]), heads(qkv[3]),
        { is_causal = true })
    y = y:transpose(1, 2):contiguous():view(B, T, C) -- heads side by side again
    return self.resid_drop(self.c_proj(y))
end

local MLP = nn.Module:extend('MLP')

function MLP:init(cfg)
    self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
    self.gelu = nn.GELU()
    self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)
    self.drop = nn.Dropout(cfg.dropout)
end

function MLP:forward(x)
    return self.drop(self.c_proj(self.gelu(self.c_fc(x))))
end

local Block = nn.Module:extend('Block')

function Block:init(cfg)
    self.ln_1 = nn.LayerNorm(cfg.n_embd)
    self.attn = CausalSelfAttention(cfg)
    self.ln_2 = nn.LayerNorm(cfg.n_embd)
    self.mlp = MLP(cfg)
end

function Block:forward(x)
    x = x + self.attn(self.ln_1(x))
    return x + self.mlp(self.ln_2(x))
end

local GPT = nn.Module:extend('GPT')

function GPT:init(cfg)
    cfg = cfg or {}
    local c = {
        vocab_size = cfg.vocab_size, block_size = cfg.block_size, n_layer = cfg.n_layer or 4,
        n_head = cfg.n_head or 4, n_embd = cfg.n_embd or 128, dropout = cfg.dropout or 0,
    }
    if type(c.vocab_size) ~= 'number' or type(c.block_size) ~= 'number' then
        error('gpt: cfg.vocab_size and cfg.block_size are required numbers', 3)
    end
    if c.n_embd % c.n_head ~= 0 then
        error(('gpt: n_embd %d is not divisible by n_head %d'):format(c.n_embd, c.n_head), 3)
    end
    self.cfg = c
    self.wte = nn.Embedding(c.vocab_size, c.n_embd)
    self.wpe = nn.Embedding(c.block_size, c.n_embd)
    self.drop = nn.Dropout(c.dropout)
    local blocks = {}
    for i = 1, c.n_layer do blocks[i] = Block(c) end
    self.h = nn.ModuleList(blocks)
    self.ln_f = nn.LayerNorm(c.n_embd)

    local resid_std = 0.02 / math.sqrt(2 * c.n_layer)
    ddpl.no_grad(function()
        for name, p in self:named_parameters() do
            if name:match('bias$') then
                p:zero_()
            elseif name:match('^h%.%d+%.ln_') or name:match('^ln_f') then
                p:fill_(1) -- LayerNorm gains stay 1
            elseif name:match('c_proj%.weight$') then
                p:normal_(0, resid_std)
            else
                p:normal_(0, 0.02)
            end
        end
    end)
end

-- idx (B, T) int64 token ids; targets (B, T) int64 or nil.
-- Returns logits (B, T, vocab_size) and, with targets, the mean cross-entropy loss.
function GPT:forward(idx, targets)
    local B, T = idx:size(0), idx:size(1)
    if T > self.cfg.block_size then
        error(('GPT: sequence length %d exceeds block_size %d'):format(T, self.cfg.block_size), 2)
    end
    local pos = ddpl.arange(T, { dtype = 'int64', device = idx.device })
    local x = self.drop(self.wte(idx) + self.wpe(pos)) -- (B, T, C) + (T, C)
    for _, block in ipairs(self.h:children()) do x = block(x) end
    x = self.ln_f(x)
    local logits = F.linear(x, self.wte.weight) -- tied head: (B, T, C) @ (C, vocab)
    if not targets then return logits end
    local V = self.cfg.vocab_size
    return logits, F.cross_entropy(logits:view(B * T, V), targets:reshape(B * T))
end

return function(cfg) return GPT(cfg) end
