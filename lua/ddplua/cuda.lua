-- lua/ddplua/cuda.lua: ddpl.cuda as a module of its own (`require 'ddplua.cuda'`).
-- defines: is_available device_count set_device current_device synchronize memory_allocated
-- max_memory_allocated empty_cache (from the C core).
return require('ddplua.core').cuda
