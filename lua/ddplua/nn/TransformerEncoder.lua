-- lua/ddplua/nn/TransformerEncoder.lua: nn.TransformerEncoder(encoder_layer, num_layers [, norm |
--          {norm}]).
-- defines: TransformerEncoder: forward(src [, mask [, src_key_padding_mask [, is_causal=false]]])
--          -> (same shape as src) (arguments after src positionally or by name in a table).
--
-- PyTorch 1.13's stack: `layers` is a ModuleList of num_layers deep copies of encoder_layer
-- (module_copy.lua; each has its own parameters, starting from the layer's values), so the
-- state_dict names are PyTorch's (layers.0.self_attn.in_proj_weight, ..., norm.weight). Each
-- layer gets the same masks; the optional final norm (a module, e.g. nn.LayerNorm) runs last.
-- PyTorch's enable_nested_tensor (a speed path for padded batches at inference that returns
-- zeros at padded positions) is not implemented: padded positions get their computed values.
local Module = require 'ddplua.nn.Module'
local ModuleList = require 'ddplua.nn.ModuleList'
local Args = require 'ddplua.nn.functional_args'
local deepcopy = require 'ddplua.nn.module_copy'

local TransformerEncoder = Module:extend('TransformerEncoder')

local NAME = 'TransformerEncoder'

function TransformerEncoder:init(encoder_layer, num_layers, opts)
    if not Module.is(encoder_layer) then
        error(string.format('%s: encoder_layer must be a Module, got %s', NAME,
                            type(encoder_layer)), 2)
    end
    local n = Module.check_int(NAME, num_layers, 'num_layers', 1)
    if Module.is(opts) then opts = {norm = opts} end -- PyTorch's positional norm
    local o = Module.options(NAME, opts, {norm = false})
    if o.norm and not Module.is(o.norm) then
        error(string.format('%s: norm must be a Module (or nil), got %s', NAME, type(o.norm)), 2)
    end
    local copies = {}
    for i = 1, n do copies[i] = deepcopy(encoder_layer) end
    self.layers = ModuleList(copies)
    self.num_layers = n
    if o.norm then
        self.norm = o.norm
    else
        self.norm = nil
    end
end

local FORWARD_ARGS = {
    {'src', 'ftensor'}, {'mask', 'tensor?'}, {'src_key_padding_mask', 'tensor?'},
    {'is_causal', 'boolean', false},
}

function TransformerEncoder:forward(...)
    local a = Args.parse(NAME, FORWARD_ARGS, ...)
    local x = a.src
    for _, layer in self.layers:iter() do
        x = layer(x, {src_mask = a.mask, src_key_padding_mask = a.src_key_padding_mask,
                      is_causal = a.is_causal})
    end
    if self.norm ~= nil then x = self.norm(x) end
    return x
end

return TransformerEncoder
