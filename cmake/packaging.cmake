# cmake/packaging.cmake: CPack settings for a Debian package of everything `cmake --install`
# installs (included from CMakeLists.txt after the install rules):
#   cmake -S . -B build -DCMAKE_INSTALL_PREFIX=/usr && cmake --build build -j2
#   cd build && cpack -G DEB          ->  ddplua_<version>_<arch>.deb
# One package (the ddplua command, libddplua.so/.a, headers, ddplua.pc, the CMake package
# files, the Lua modules), not Debian's split into a library, -dev and lua- packages: ddplua
# is one tool, and the split can come when something else depends on the library alone.
#
# Layout: the package installs under /usr. The library folder is the build's
# CMAKE_INSTALL_LIBDIR: configured with CMAKE_INSTALL_PREFIX=/usr (as debhelper does),
# GNUInstallDirs makes it Debian's multiarch lib/x86_64-linux-gnu, so the Lua C module lands in
# /usr/lib/x86_64-linux-gnu/lua/5.4 as Debian's lua-* packages have it; with the default
# prefix /usr/local it is plain /usr/lib (and /usr/lib/lua/5.4), which is on the same default
# search paths (ld.so, lua5.4's package.cpath, pkg-config, find_package) but is not multiarch.
# The Lua files go to /usr/share/lua/5.4, which a stock lua5.4 searches, and the ddplua command
# finds them relative to itself (bin/../share/lua/5.4: engine/lua/bind_module.c).
#
# Depends come from dpkg-shlibdeps on the packaged binaries (CPACK_DEBIAN_PACKAGE_SHLIBDEPS):
# liblua5.4-0, libopenblas0-pthread (or whichever OpenBLAS variant the build machine's
# alternative points to, as "libopenblas0-pthread | libopenblas.so.0"), libgloo0, zlib1g,
# libreadline8, libstdc++6, libgcc-s1, libc6. A CUDA build also links NVIDIA's CUDA runtime
# (libcudart.so.N), which no Debian package provides (the toolkit here comes from NVIDIA's
# installer, and Debian's nvidia-cuda-toolkit is older): dpkg-shlibdeps then finds no package
# for it and leaves it out, so the runtime is added by the name NVIDIA's Debian repository
# gives it, cuda-cudart-<major>-<minor>. Such a package installs only where that repository is
# configured; build with -DDDPL_CUDA=OFF for a package that needs Debian alone.

set(DDPL_PACKAGE_MAINTAINER "ddplua developers <ddplua@localhost>" CACHE STRING
    "Maintainer field of the Debian package (cpack -G DEB)")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ddplua)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "ddplua")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Lua-scripted training engine with PyTorch-style DistributedDataParallel")
set(CPACK_PACKAGE_DESCRIPTION
    "ddplua is a C training engine (tensors, CPU and CUDA kernels, autograd, a DDP gradient
reducer) scripted in Lua 5.4 with a PyTorch-shaped API. This package has the ddplua command
(scripts, REPL, torchrun-style launcher, ddplua plot), the Lua modules for a stock lua5.4
(require 'ddplua'), and libddplua with its headers, pkg-config and CMake files.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # ddplua_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${DDPL_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# lua5.4 runs the modules; not a shared-library dependency of any binary, so named here
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "lua5.4")
if(DDPL_HAVE_CUDA AND NOT DDPL_CUDA_EMU) # the emulation links no NVIDIA library
  set(CPACK_DEBIAN_PACKAGE_DEPENDS
      "cuda-cudart-${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR}")
  # where dpkg-shlibdeps finds libcudart when ld.so.conf does not name the toolkit
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CUDAToolkit_LIBRARY_DIR})
endif()
if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  message(STATUS "ddplua: cpack -G DEB puts libraries in /usr/${CMAKE_INSTALL_LIBDIR}; configure "
                 "with -DCMAKE_INSTALL_PREFIX=/usr for Debian's multiarch folders")
endif()
include(CPack)
