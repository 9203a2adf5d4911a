-- lua/ddplua/nn/parameter_repr.lua: the lines ParameterList and ParameterDict print for each
--          parameter, as PyTorch 1.13's extra_repr.
-- defines: parameter_repr(key, p, style): '  (key): Parameter containing: [<type> of size
--          3x4]', with <type> 'torch.float32' (style 'dtype', ParameterList) or
--          'torch.FloatTensor' (style 'typename', ParameterDict: PyTorch's two containers
--          differ), and ' (GPU n)' for a CUDA parameter.
return function(key, p, style)
    local dev = tostring(p.device)
    local cuda = dev:match('^cuda')
    local ty
    if style == 'dtype' then
        ty = 'torch.' .. p.dtype
    else
        ty = p:type() -- 'torch.FloatTensor', 'torch.cuda.FloatTensor'
    end
    local gpu = cuda and string.format(' (GPU %s)', dev:match(':(%d+)') or '0') or ''
    return string.format('  (%s): Parameter containing: [%s of size %s%s]', key, ty,
                         table.concat(p:shape(), 'x'), gpu)
end
