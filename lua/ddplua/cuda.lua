-- lua/ddplua/cuda.lua: ddpl.cuda as a module of its own (`require 'ddplua.cuda'`).
-- defines: is_available device_count synchronize memory_allocated (from the C core).
return require('ddplua.core').cuda
