-- lua/ddplua/nn/LSTM.lua: nn.LSTM(input_size, hidden_size [, {num_layers=1, bias=true,
--          batch_first=false, dropout=0, bidirectional=false, dtype, device}]).
-- defines: LSTM: forward(input [, {h_0, c_0}]) -> output, {h_n, c_n}, as PyTorch's: gates
--          i, f, g, o in that order in weight_ih_l{k} (4H, F) and weight_hh_l{k} (4H, H);
--          h_0, c_0 and h_n, c_n (num_layers*num_directions, B, H), or (.., H) unbatched.
--
-- Both biases are added once, in the input projection's GEMM (b_ih + b_hh); the recurrence is
-- F._lstm_layer (engine/ops/nn_rnn_layer.c). The rest is lua/ddplua/nn/rnn_base.lua.
local RNNBase = require 'ddplua.nn.rnn_base'
local F = require 'ddplua.nn.functional'

local LSTM = RNNBase:extend('LSTM')
LSTM.gates = 4

function LSTM:_states(hx, x, B, batched)
    if hx ~= nil and (type(hx) ~= 'table' or hx[1] == nil or hx[2] == nil) then
        error(string.format('LSTM: expected the initial state as a table {h_0, c_0}, got %s',
                            type(hx)), 3)
    end
    hx = hx or {}
    return self:_initial_state(hx[1], 'h_0', x, B, batched),
           self:_initial_state(hx[2], 'c_0', x, B, batched)
end

function LSTM:_direction(x2, T, B, p, h0, c0, reverse)
    local bias = p.b_ih and p.b_ih + p.b_hh or nil
    local hc = F._lstm_layer(self:_input_gates(x2, T, B, p.w_ih, bias), p.w_hh, h0, c0, reverse)
    local out, last = hc[0], reverse and 0 or T - 1
    return out, out[last], hc[1][last]
end

function LSTM:_pack(output, h_n, c_n) return output, {h_n, c_n} end

return LSTM
