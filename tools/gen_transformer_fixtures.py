#!/usr/bin/python3
"""tools/gen_transformer_fixtures.py: PyTorch reference values for spec/nn/transformer_layers_spec.lua
(spec/fixtures/transformer_layers.lua): nn.MultiheadAttention, nn.TransformerEncoderLayer and
nn.TransformerEncoder in float64, eval mode (dropout off), with PyTorch's state_dict loaded
unchanged into the Lua module.

Regenerate (needs PyTorch; Debian's python3-torch is enough, so use /usr/bin/python3):

    /usr/bin/python3 tools/gen_transformer_fixtures.py          # writes the fixture
    /usr/bin/python3 tools/gen_transformer_fixtures.py --check  # fails if the file differs

A case is

    { name = 'mha/cross',
      module = {ctor = 'MultiheadAttention', args = {4, 2, {kdim = 3}}},
                  -- TransformerEncoder: {ctor = ..., layer = <spec>, num_layers = n,
                  --                      norm = <spec or nil>}; an option value {fn = 'gelu'}
                  -- is F.gelu, {module = <spec>} a module
      repr = {'MultiheadAttention(', ...},   -- str(module), one entry per line
      state = {{'in_proj_weight', T}, ...},  -- state_dict() in PyTorch's order
      inputs = {T, ...},                     -- query, key, value (or src)
      same = 'qkv' | 'kv',                   -- key (and value) are the query (the key) itself
      opts = {key_padding_mask = T, attn_mask = T, need_weights = false, ...},
                                             -- the Lua forward's options table
      output = T, weights = T,               -- weights absent when not returned
      grad_out = T, grad_weights = T,        -- the upstream gradients of output and weights
      input_grads = {[1] = T, ...},          -- of the distinct inputs
      param_grads = {{'in_proj_weight', T}, ...},
      rtol = 1e-9, atol = 1e-10 }

torch 1.13 has no is_causal: a case whose Lua options say is_causal = true is computed in PyTorch
with the explicit (L, S) causal mask (True above the diagonal). Tensors use tools/gen_fixtures.py's
format (read by spec/support/helpers.lua). Everything is seeded.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_fixtures import Tensor, fixture_main, lua_value  # noqa: E402  (shared writer)

F64 = torch.float64
GEN = torch.Generator().manual_seed(20261202)
ORDER = ['name', 'module', 'repr', 'state', 'inputs', 'same', 'opts', 'output', 'weights',
         'grad_out', 'grad_weights', 'input_grads', 'param_grads', 'rtol', 'atol']


def rnd(*shape, scale=1.0):
    # drawn in float32 (exact in float64, short to write), computed in float64
    return (torch.randn(shape, generator=GEN, dtype=torch.float64) * scale).float().double()


def spec(ctor, *args, **opts):
    """The Lua constructor call of a module: positional args, then options as a table."""
    args = list(args)
    if opts:
        args.append(opts)
    return {'ctor': ctor, 'args': args}


def causal(L, S):
    return torch.ones(L, S, dtype=torch.bool).triu(1)


def bool_mask(*shape, keep_first=True):
    """Random True (= masked out) entries, never a whole row: the last dim's entry 0 stays
    False, so every query sees at least one key."""
    m = torch.rand(shape, generator=GEN) < 0.35
    if keep_first:
        m[..., 0] = False
    return m


def float_mask(*shape):
    m = rnd(*shape, scale=0.7)
    hide = bool_mask(*shape)
    return m.masked_fill(hide, float('-inf'))


def fresh_parameters(module, name):
    """Parameters get fresh values (not the default init) so that a wrong layout shows."""
    g = torch.Generator().manual_seed(sum(map(ord, name)))
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=F64).float().double() * 0.5)


def run_case(name, module, lua, inputs, same=None, torch_kw=None, lua_opts=None, call=None,
             rtol=1e-9, atol=1e-10):
    """inputs: the distinct input tensors; call(module, *inputs, **torch_kw) -> out or (out, w)."""
    module = module.double().eval()
    fresh_parameters(module, name)
    state = [[k, Tensor(v.clone())] for k, v in module.state_dict().items()]
    ins = [x.clone().requires_grad_(True) for x in inputs]
    res = call(module, *ins, **(torch_kw or {}))
    out, w = res if isinstance(res, tuple) else (res, None)
    g = rnd(*out.shape)
    loss = (out * g).sum()
    c = {'name': name, 'module': lua, 'repr': str(module).split('\n'), 'state': state,
         'inputs': [Tensor(x) for x in ins], 'same': same, 'opts': lua_opts,
         'output': Tensor(out), 'grad_out': Tensor(g), 'rtol': rtol, 'atol': atol}
    if w is not None:
        gw = rnd(*w.shape)
        # masked-out probabilities are exactly 0 whatever gw is; -inf rows do not occur
        loss = loss + (w * gw).sum()
        c['weights'], c['grad_weights'] = Tensor(w), Tensor(gw)
    loss.backward()
    c['input_grads'] = {i + 1: Tensor(x.grad) for i, x in enumerate(ins)}
    c['param_grads'] = [[k, Tensor(p.grad)] for k, p in module.named_parameters()]
    return c


def mha_call(same):
    def call(m, *ins, **kw):
        if same == 'qkv':
            q = k = v = ins[0]
        elif same == 'kv':
            q, k = ins
            v = k
        else:
            q, k, v = ins
        return m(q, k, v, **kw)
    return call


def mha_case(name, E, H, inputs, same=None, ctor_opts=None, torch_kw=None, lua_opts=None):
    ctor_opts = ctor_opts or {}
    module = nn.MultiheadAttention(E, H, **ctor_opts)
    lua = spec('MultiheadAttention', E, H, **ctor_opts)
    if lua_opts is None:
        lua_opts = dict(torch_kw or {})
    return run_case(name, module, lua, inputs, same, torch_kw, lua_opts, mha_call(same))


def mha_cases():
    E, H, L, S, N = 4, 2, 3, 4, 2
    out = []
    x = rnd(L, N, E)
    q, k, v = rnd(L, N, E), rnd(S, N, E), rnd(S, N, E)
    out.append(mha_case('mha/self', E, H, [x], 'qkv'))
    out.append(mha_case('mha/cross', E, H, [q, k, v]))
    out.append(mha_case('mha/key_is_value', E, H, [q, k], 'kv'))
    out.append(mha_case('mha/per_head', E, H, [q, k, v],
                        torch_kw={'average_attn_weights': False}))
    out.append(mha_case('mha/one_head', E, 1, [q, k, v]))
    out.append(mha_case('mha/no_bias', E, H, [q, k, v], ctor_opts={'bias': False}))
    # masks (bool True = masked out), of both kinds, and key padding
    out.append(mha_case('mha/bool_mask_2d', E, H, [q, k, v],
                        torch_kw={'attn_mask': bool_mask(L, S)}))
    out.append(mha_case('mha/float_mask_2d', E, H, [q, k, v],
                        torch_kw={'attn_mask': float_mask(L, S)}))
    out.append(mha_case('mha/bool_mask_3d', E, H, [q, k, v],
                        torch_kw={'attn_mask': bool_mask(N * H, L, S)}))
    out.append(mha_case('mha/float_mask_3d_per_head', E, H, [q, k, v],
                        torch_kw={'attn_mask': float_mask(N * H, L, S),
                                  'average_attn_weights': False}))
    out.append(mha_case('mha/key_padding_bool', E, H, [q, k, v],
                        torch_kw={'key_padding_mask': bool_mask(N, S)}))
    out.append(mha_case('mha/key_padding_float', E, H, [q, k, v],
                        torch_kw={'key_padding_mask': float_mask(N, S)}))
    out.append(mha_case('mha/bool_mask_and_key_padding', E, H, [x], 'qkv',
                        torch_kw={'attn_mask': bool_mask(L, L), 'key_padding_mask':
                                  bool_mask(N, L)}))
    out.append(mha_case('mha/float_mask_and_key_padding', E, H, [q, k, v],
                        torch_kw={'attn_mask': float_mask(L, S), 'key_padding_mask':
                                  bool_mask(N, S)}))
    # is_causal (torch 1.13: the explicit mask); with key padding; without weights (fused path)
    cm = causal(L, L)
    out.append(mha_case('mha/causal', E, H, [x], 'qkv', torch_kw={'attn_mask': cm},
                        lua_opts={'is_causal': True}))
    kpm = bool_mask(N, L)
    out.append(mha_case('mha/causal_key_padding', E, H, [x], 'qkv',
                        torch_kw={'attn_mask': cm, 'key_padding_mask': kpm},
                        lua_opts={'is_causal': True, 'key_padding_mask': kpm}))
    out.append(mha_case('mha/causal_no_weights', E, H, [x], 'qkv',
                        torch_kw={'attn_mask': cm, 'need_weights': False},
                        lua_opts={'is_causal': True, 'need_weights': False}))
    out.append(mha_case('mha/no_weights', E, H, [q, k, v], torch_kw={'need_weights': False}))
    out.append(mha_case('mha/no_weights_masks', E, H, [q, k, v],
                        torch_kw={'need_weights': False, 'attn_mask': bool_mask(L, S),
                                  'key_padding_mask': bool_mask(N, S)}))
    out.append(mha_case('mha/no_weights_float_mask', E, H, [q, k, v],
                        torch_kw={'need_weights': False, 'attn_mask': float_mask(N * H, L, S)}))
    # batch_first (inputs (N, L, E))
    xb, qb, kb, vb = (t.transpose(0, 1).contiguous() for t in (x, q, k, v))
    out.append(mha_case('mha/batch_first_self', E, H, [xb], 'qkv',
                        ctor_opts={'batch_first': True},
                        torch_kw={'key_padding_mask': bool_mask(N, L)}))
    out.append(mha_case('mha/batch_first_cross', E, H, [qb, kb, vb],
                        ctor_opts={'batch_first': True},
                        torch_kw={'attn_mask': float_mask(L, S), 'average_attn_weights': False}))
    out.append(mha_case('mha/batch_first_no_weights', E, H, [qb, kb, vb],
                        ctor_opts={'batch_first': True}, torch_kw={'need_weights': False}))
    # kdim / vdim: separate projection weights
    k3, v5 = rnd(S, N, 3), rnd(S, N, 5)
    out.append(mha_case('mha/kdim_vdim', E, H, [q, k3, v5], ctor_opts={'kdim': 3, 'vdim': 5},
                        torch_kw={'key_padding_mask': bool_mask(N, S)}))
    out.append(mha_case('mha/kdim_vdim_batch_first', E, H,
                        [qb, k3.transpose(0, 1).contiguous(), v5.transpose(0, 1).contiguous()],
                        ctor_opts={'kdim': 3, 'vdim': 5, 'batch_first': True},
                        torch_kw={'attn_mask': bool_mask(L, S), 'need_weights': False}))
    out.append(mha_case('mha/kdim_only_no_bias', E, H, [q, k3, v],
                        ctor_opts={'kdim': 3, 'bias': False}))
    # unbatched (L, E): key_padding_mask (S), attn_mask (L, S) or (H, L, S)
    out.append(mha_case('mha/unbatched', E, H, [q[:, 0], k[:, 0], v[:, 0]],
                        torch_kw={'key_padding_mask': bool_mask(S),
                                  'attn_mask': float_mask(H, L, S)}))
    out.append(mha_case('mha/unbatched_per_head', E, H, [x[:, 1]], 'qkv',
                        torch_kw={'attn_mask': bool_mask(L, L), 'average_attn_weights': False}))
    out.append(mha_case('mha/unbatched_batch_first_ignored', E, H, [q[:, 1], k[:, 1], v[:, 1]],
                        ctor_opts={'batch_first': True}))
    # add_bias_kv, add_zero_attn (masks get extra unmasked columns)
    out.append(mha_case('mha/add_bias_kv', E, H, [q, k, v], ctor_opts={'add_bias_kv': True},
                        torch_kw={'attn_mask': bool_mask(L, S), 'key_padding_mask':
                                  bool_mask(N, S)}))
    out.append(mha_case('mha/add_zero_attn', E, H, [q, k, v], ctor_opts={'add_zero_attn': True},
                        torch_kw={'key_padding_mask': bool_mask(N, S),
                                  'average_attn_weights': False}))
    out.append(mha_case('mha/bias_kv_zero_attn_no_weights', E, H, [x], 'qkv',
                        ctor_opts={'add_bias_kv': True, 'add_zero_attn': True},
                        torch_kw={'attn_mask': float_mask(L, L), 'need_weights': False}))
    return out


def layer_module(d, h, ff, **opts):
    return nn.TransformerEncoderLayer(d, h, ff, 0.0, **opts), \
        spec('TransformerEncoderLayer', d, h, dim_feedforward=ff, dropout=0.0, **{
            k: ({'fn': 'gelu'} if v is F.gelu else {'module': spec('GELU')}
                if isinstance(v, nn.GELU) else v) for k, v in opts.items()})


def encoder_cases():
    d, h, ff, S, N = 4, 2, 6, 4, 2
    out = []
    src = rnd(S, N, d)
    srcb = src.transpose(0, 1).contiguous()

    def layer_case(name, opts, inp, torch_kw=None, lua_opts=None):
        m, lua = layer_module(d, h, ff, **opts)
        lo = dict(torch_kw or {}) if lua_opts is None else lua_opts
        return run_case(name, m, lua, [inp], None, torch_kw, lo,
                        lambda m, x, **kw: m(x, **kw))

    out.append(layer_case('encoder_layer/post_norm_relu', {}, src,
                          {'src_mask': bool_mask(S, S), 'src_key_padding_mask': bool_mask(N, S)}))
    out.append(layer_case('encoder_layer/norm_first_gelu', {'norm_first': True,
                                                             'activation': 'gelu'}, src,
                          {'src_mask': float_mask(S, S)}))
    out.append(layer_case('encoder_layer/batch_first', {'batch_first': True}, srcb,
                          {'src_key_padding_mask': bool_mask(N, S)}))
    out.append(layer_case('encoder_layer/batch_first_norm_first', {'batch_first': True,
                                                                    'norm_first': True}, srcb))
    out.append(layer_case('encoder_layer/gelu_function_eps', {'activation': F.gelu,
                                                               'layer_norm_eps': 1e-3}, src))
    out.append(layer_case('encoder_layer/gelu_module', {'activation': nn.GELU()}, src))
    out.append(layer_case('encoder_layer/unbatched', {'norm_first': True}, src[:, 0],
                          {'src_key_padding_mask': bool_mask(S)}))
    cm = causal(S, S)
    out.append(layer_case('encoder_layer/causal', {}, src, {'src_mask': cm},
                          {'is_causal': True}))

    def encoder_case(name, layer_opts, num_layers, norm, inp, torch_kw=None, lua_opts=None):
        layer, layer_lua = layer_module(d, h, ff, **layer_opts)
        m = nn.TransformerEncoder(layer, num_layers, norm=nn.LayerNorm(d) if norm else None,
                                  enable_nested_tensor=False)
        lua = {'ctor': 'TransformerEncoder', 'layer': layer_lua, 'num_layers': num_layers,
               'norm': spec('LayerNorm', d) if norm else None}
        lo = dict(torch_kw or {}) if lua_opts is None else lua_opts
        return run_case(name, m, lua, [inp], None, torch_kw, lo, lambda m, x, **kw: m(x, **kw))

    out.append(encoder_case('encoder/two_layers_norm', {}, 2, True, src,
                            {'mask': bool_mask(S, S), 'src_key_padding_mask': bool_mask(N, S)}))
    out.append(encoder_case('encoder/three_layers_batch_first_norm_first',
                            {'batch_first': True, 'norm_first': True, 'activation': 'gelu'}, 3,
                            False, srcb, {'mask': float_mask(S, S)}))
    out.append(encoder_case('encoder/causal', {}, 2, True, src, {'mask': cm},
                            {'is_causal': True}))
    return out


def write(cases):
    lines = ['-- spec/fixtures/transformer_layers.lua: nn.MultiheadAttention, '
             'TransformerEncoderLayer and TransformerEncoder (float64)',
             '-- Generated by tools/gen_transformer_fixtures.py with torch %s; do not edit by hand.'
             % torch.__version__, 'return {']
    names = set()
    for c in cases:
        assert c['name'] not in names, 'duplicate case ' + c['name']
        names.add(c['name'])
        assert all(k in ORDER for k in c), c.keys()
        lines.append('  {')
        for k in ORDER:
            if c.get(k) is not None:
                lines.append('    %s = %s,' % (k, lua_value(c[k])))
        lines.append('  },')
    lines.append('}')
    return '\n'.join(lines) + '\n'


if __name__ == '__main__':
    sys.exit(fixture_main(__doc__, 'tools/gen_transformer_fixtures.py',
                          lambda: ('transformer_layers', write(mha_cases() + encoder_cases()))))
