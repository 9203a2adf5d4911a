-- lua/ddplua/cuda.lua: ddpl.cuda as a module of its own (`require 'ddplua.cuda'`).
-- defines: is_available device_count set_device current_device synchronize memory_allocated
-- max_memory_allocated memory_reserved max_memory_reserved reset_peak_memory_stats empty_cache
-- (all from the C core, engine/lua/bind_util.c).
return require('ddplua.core').cuda
