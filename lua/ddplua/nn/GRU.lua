-- lua/ddplua/nn/GRU.lua: nn.GRU(input_size, hidden_size [, {num_layers=1, bias=true,
--          batch_first=false, dropout=0, bidirectional=false, dtype, device}]).
-- defines: GRU: forward(input [, h_0]) -> output, h_n, as PyTorch's: gates r, z, n in that
--          order in weight_ih_l{k} (3H, F) and weight_hh_l{k} (3H, H), with
--          n = tanh(W_in x + b_in + r * (W_hn h + b_hn)); h_0 and h_n
--          (num_layers*num_directions, B, H), or (.., H) unbatched.
--
-- b_ih goes into the input projection's GEMM; b_hh stays in the per-step hidden GEMM because r
-- multiplies its n part. The recurrence is F._gru_layer (engine/ops/nn_rnn_layer.c); the rest
-- is lua/ddplua/nn/rnn_base.lua.
local RNNBase = require 'ddplua.nn.rnn_base'
local F = require 'ddplua.nn.functional'

local GRU = RNNBase:extend('GRU')
GRU.gates = 3

function GRU:_states(hx, x, B, batched)
    return self:_initial_state(hx, 'h_0', x, B, batched), nil
end

function GRU:_direction(x2, T, B, p, h0, _, reverse)
    local out = F._gru_layer(self:_input_gates(x2, T, B, p.w_ih, p.b_ih), p.w_hh, p.b_hh, h0,
                             reverse)
    return out, out[reverse and 0 or T - 1], nil
end

function GRU:_pack(output, h_n) return output, h_n end

return GRU
