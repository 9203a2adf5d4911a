-- lua/ddplua/nn/rnn_base.lua: what nn.LSTM and nn.GRU share (PyTorch's RNNBase).
-- defines: RNNBase: constructor options {num_layers=1, bias=true, batch_first=false, dropout=0,
--          bidirectional=false, dtype, device}, the parameters weight_ih_l{k}[_reverse],
--          weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k} (PyTorch's names and order, so its
--          state_dict loads unchanged), their init U(-1/sqrt(H), 1/sqrt(H)), and forward(input
--          [, hx]) over batched (T,B,F) / batch_first (B,T,F) or unbatched (T,F) input.
--
-- Per layer and direction the input projection of every time step is one GEMM,
-- (T*B, F) @ W_ih^T + b -> (T,B,G*H), and the recurrence one native op (F._lstm_layer,
-- F._gru_layer: engine/ops/nn_rnn_layer.c) doing per step one GEMM h @ W_hh^T for all G gates
-- and one fused cell kernel. A subclass sets `gates` (G) and `_direction(x2d, T, B, p, h0, c0,
-- reverse)` returning the direction's outputs (T,B,H), h_n and c_n (nil for the GRU), and
-- `_pack(output, h_n, c_n)`; its states are in `_states(hx, ...)`.
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'
local Parameter = require 'ddplua.nn.Parameter'
local init = require 'ddplua.nn.init_functions'
local F = require 'ddplua.nn.functional'

local RNNBase = Module:extend('RNNBase')

local function shape_str(t) return '[' .. table.concat(t:shape(), ',') .. ']' end

local function check_bool(cls, v, what)
    if type(v) ~= 'boolean' then
        error(string.format('%s: %s must be a boolean, got %s', cls, what, tostring(v)), 4)
    end
    return v
end

function RNNBase:init(input_size, hidden_size, opts)
    local cls = self.__name
    self.input_size = Module.check_int(cls, input_size, 'input_size', 1)
    self.hidden_size = Module.check_int(cls, hidden_size, 'hidden_size', 1)
    local o = Module.options(cls, opts, {num_layers = 1, bias = true, batch_first = false,
                                         dropout = 0, bidirectional = false}, true)
    self.num_layers = Module.check_int(cls, o.num_layers, 'num_layers', 1)
    self.bias = check_bool(cls, o.bias, 'bias')
    self.batch_first = check_bool(cls, o.batch_first, 'batch_first')
    self.bidirectional = check_bool(cls, o.bidirectional, 'bidirectional')
    if type(o.dropout) ~= 'number' or not (o.dropout >= 0 and o.dropout <= 1) then
        error(string.format('%s: dropout must be a number in [0, 1], got %s', cls,
                            tostring(o.dropout)), 2)
    end
    self.dropout = o.dropout
    self.num_directions = self.bidirectional and 2 or 1
    local topts = {dtype = o.dtype, device = o.device}
    local H = self.hidden_size
    local GH = Module.size_product(cls, 'the gate rows (gates x hidden_size)', self.gates, H)
    Module.size_product(cls, 'hidden_size x num_directions', H, self.bidirectional and 2 or 1)
    for layer = 0, self.num_layers - 1 do
        local in_size = layer == 0 and self.input_size or H * self.num_directions
        for dir = 0, self.num_directions - 1 do
            local sfx = layer .. (dir == 1 and '_reverse' or '')
            self:register_parameter('weight_ih_l' .. sfx, Parameter(ddpl.empty({GH, in_size}, topts)))
            self:register_parameter('weight_hh_l' .. sfx, Parameter(ddpl.empty({GH, H}, topts)))
            if self.bias then
                self:register_parameter('bias_ih_l' .. sfx, Parameter(ddpl.empty({GH}, topts)))
                self:register_parameter('bias_hh_l' .. sfx, Parameter(ddpl.empty({GH}, topts)))
            end
        end
    end
    self:reset_parameters()
end

-- PyTorch's RNNBase.reset_parameters: every weight and bias U(-1/sqrt(H), 1/sqrt(H))
function RNNBase:reset_parameters()
    local stdv = 1 / math.sqrt(self.hidden_size)
    for _, p in ipairs(self:parameters()) do init.uniform_(p, -stdv, stdv) end
end

-- The parameters of one layer and direction: weight_ih, weight_hh, bias_ih, bias_hh (nil
-- without bias).
function RNNBase:_params(layer, dir)
    local sfx = layer .. (dir == 1 and '_reverse' or '')
    return {w_ih = self['weight_ih_l' .. sfx], w_hh = self['weight_hh_l' .. sfx],
            b_ih = self.bias and self['bias_ih_l' .. sfx] or nil,
            b_hh = self.bias and self['bias_hh_l' .. sfx] or nil}
end

-- One initial state: nil gives zeros (L*D,B,H); a given one must be (L*D,B,H), or (L*D,H)
-- for unbatched input, of the input's dtype and device.
function RNNBase:_initial_state(s, what, x, B, batched)
    local cls, LD, H = self.__name, self.num_layers * self.num_directions, self.hidden_size
    if s == nil then return ddpl.zeros({LD, B, H}, {dtype = x.dtype, device = x.device}) end
    if not ddpl.is_tensor(s) then
        error(string.format('%s: expected %s to be a tensor, got %s', cls, what, type(s)), 4)
    end
    local want = batched and {LD, B, H} or {LD, H}
    local ok = s:dim() == #want
    for i = 1, #want do ok = ok and s:size(i - 1) == want[i] end
    if not ok then
        error(string.format('%s: expected %s of shape [%s] (num_layers*num_directions, %shidden_size), '
                            .. 'got %s', cls, what, table.concat(want, ','),
                            batched and 'batch, ' or '', shape_str(s)), 4)
    end
    if s.dtype ~= x.dtype or s.device ~= x.device then
        error(string.format('%s: %s is %s on %s but the input is %s on %s', cls, what, s.dtype,
                            s.device, x.dtype, x.device), 4)
    end
    return batched and s or s:unsqueeze(1)
end

-- dtype: the dtype the layer computes in (its parameters', or autocast's).
function RNNBase:_check_input(input, dtype)
    local cls = self.__name
    if not ddpl.is_tensor(input) then
        error(string.format('%s: expected the input to be a tensor, got %s', cls, type(input)), 3)
    end
    local w = self.weight_ih_l0
    if input:dim() ~= 2 and input:dim() ~= 3 then
        error(string.format('%s: expected a 3-D input (%s) or a 2-D unbatched one (seq, features), '
                            .. 'got %s', cls, self.batch_first and '(batch, seq, features)'
                            or '(seq, batch, features)', shape_str(input)), 3)
    end
    if input:size(-1) ~= self.input_size then
        error(string.format('%s: expected input of %d features (input_size) in the last dimension, '
                            .. 'got shape %s', cls, self.input_size, shape_str(input)), 3)
    end
    if input.dtype ~= dtype or input.device ~= w.device then
        error(string.format('%s: the input is %s on %s but the parameters are %s on %s', cls,
                            input.dtype, input.device, w.dtype, w.device), 3)
    end
    local T = input:size(self.batch_first and input:dim() == 3 and 1 or 0)
    if T == 0 then
        error(string.format('%s: the input %s has no time steps', cls, shape_str(input)), 3)
    end
end

-- Autocast's cast of one operand: a float32/float16/bfloat16 tensor to dtype dt (float64 and
-- non-float tensors stay as they are, as PyTorch's autocast leaves them).
local function lower(x, dt)
    if ddpl.is_tensor(x) and x:is_floating_point() and x.dtype ~= 'float64' and x.dtype ~= dt then
        return x:to(dt)
    end
    return x
end

-- Under autocast a recurrent layer is on the lower-precision list, as PyTorch's
-- mkldnn_rnn_layer (CPU, PyTorch 2) and cudnn_rnn (CUDA) are: the input and the given states
-- are cast here, the parameters by the ops (addmm for the input projection, F._lstm_layer /
-- F._gru_layer for the recurrence, through autocast's per-region cast cache), so the GEMMs run
-- on bf16 units and the output and final states come out in the autocast dtype. float64
-- parameters are not eligible: the layer then runs in float64 with autocast off inside.
function RNNBase:_autocast_inputs(dev_type, input, hx)
    local w = self.weight_ih_l0
    if w.dtype == 'float64' then
        if input.dtype == 'float16' or input.dtype == 'bfloat16' then input = input:to(w.dtype) end
        return input, hx, false
    end
    local dt = ddpl.get_autocast_dtype(dev_type)
    if type(hx) == 'table' then
        hx = {lower(hx[1], dt), lower(hx[2], dt)}
    else
        hx = lower(hx, dt)
    end
    return lower(input, dt), hx, true
end

-- input (T,B,F), (B,T,F) with batch_first, or (T,F); hx as the subclass takes it.
-- Returns output (same layout as the input, last dim H*num_directions) and the final states.
function RNNBase:forward(input, hx)
    local dtype = self.weight_ih_l0.dtype -- the dtype the layer computes in
    local dev_type = ddpl.is_tensor(input) and tostring(input.device):match('^%a+')
    if dev_type and ddpl.is_autocast_enabled(dev_type) then
        local lowered
        input, hx, lowered = self:_autocast_inputs(dev_type, input, hx)
        if not lowered then
            return ddpl.autocast(dev_type, {enabled = false}, self.forward, self, input, hx)
        end
        dtype = ddpl.get_autocast_dtype(dev_type)
    end
    self:_check_input(input, dtype)
    local batched = input:dim() == 3
    local x = input
    if not batched then
        x = x:unsqueeze(1)
    elseif self.batch_first then
        x = x:transpose(0, 1)
    end
    local T, B, D = x:size(0), x:size(1), self.num_directions
    local h0, c0 = self:_states(hx, x, B, batched)
    local hn, cn = {}, {}
    for layer = 0, self.num_layers - 1 do
        local x2 = x:reshape(T * B, x:size(2))
        local outs = {}
        for dir = 0, D - 1 do
            local k = layer * D + dir
            local out, h, c = self:_direction(x2, T, B, self:_params(layer, dir), h0[k],
                                              c0 and c0[k], dir == 1)
            outs[dir + 1], hn[k + 1], cn[k + 1] = out, h, c
        end
        x = D == 2 and ddpl.cat(outs, 2) or outs[1]
        if self.dropout > 0 and self.training and layer < self.num_layers - 1 then
            x = F.dropout(x, self.dropout, true)
        end
    end
    local h_n, c_n = ddpl.stack(hn, 0), c0 and ddpl.stack(cn, 0) or nil
    if not batched then
        x, h_n, c_n = x:squeeze(1), h_n:squeeze(1), c_n and c_n:squeeze(1)
    elseif self.batch_first then
        x = x:transpose(0, 1)
    end
    return self:_pack(x, h_n, c_n)
end

-- The input projection of every step of one direction: (T*B, F) @ W_ih^T + bias -> (T,B,G*H)
function RNNBase:_input_gates(x2, T, B, w_ih, bias)
    local g = bias and ddpl.addmm(bias, x2, w_ih:t()) or x2:mm(w_ih:t())
    return g:view(T, B, self.gates * self.hidden_size)
end

function RNNBase:extra_repr()
    local R = Module.repr
    local s = string.format('%d, %d', self.input_size, self.hidden_size)
    if self.num_layers ~= 1 then s = s .. ', num_layers=' .. self.num_layers end
    if not self.bias then s = s .. ', bias=False' end
    if self.batch_first then s = s .. ', batch_first=True' end
    if self.dropout ~= 0 then s = s .. ', dropout=' .. R(self.dropout) end
    if self.bidirectional then s = s .. ', bidirectional=True' end
    return s
end

return RNNBase
