-- lua/ddplua/nn/Embedding.lua: nn.Embedding(num_embeddings, embedding_dim [, {dtype, device}]).
-- defines: Embedding: a lookup table; int64 indices (*) (0-based) -> rows (*, embedding_dim).
--
-- The weight starts as N(0, 1), as in PyTorch. padding_idx and max_norm are not supported by
-- the engine's F.embedding, so they are refused here rather than ignored.
local ddpl = require 'ddplua'
local Module = require 'ddplua.nn.Module'
local Parameter = require 'ddplua.nn.Parameter'
local init = require 'ddplua.nn.init_functions'
local F = require 'ddplua.nn.functional'

local Embedding = Module:extend('Embedding')

function Embedding:init(num_embeddings, embedding_dim, opts)
    self.num_embeddings = Module.check_int('Embedding', num_embeddings, 'num_embeddings')
    self.embedding_dim = Module.check_int('Embedding', embedding_dim, 'embedding_dim')
    local o = Module.options('Embedding', opts, {}, true)
    self.weight = Parameter(ddpl.empty({self.num_embeddings, self.embedding_dim},
                                       {dtype = o.dtype, device = o.device}))
    self:reset_parameters()
end

function Embedding:reset_parameters()
    init.normal_(self.weight)
end

function Embedding:forward(idx)
    return F.embedding(idx, self.weight)
end

function Embedding:extra_repr()
    return string.format('%d, %d', self.num_embeddings, self.embedding_dim)
end

return Embedding
