-- lua/ddplua/nn/LogSoftmax.lua: nn.LogSoftmax([dim]).
-- defines: nothing new: the class lives beside Softmax in Softmax.lua (one implementation of
--          both); this file makes `nn.LogSoftmax` and require 'ddplua.nn.LogSoftmax' find it.
return require('ddplua.nn.Softmax').LogSoftmax
