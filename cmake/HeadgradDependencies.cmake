# Finds the dependencies of the headgrad library (Debian: libopenblas-dev, libfmt-dev, libsleef-dev,
# libdnnl-dev, g++'s OpenMP) and defines the imported target `headgrad_blas`. Shared by the build and by the
# installed package config (headgradConfig.cmake), where fmt is needed by the public headers and
# OpenBLAS, SLEEF, oneDNN and OpenMP only to link the static library (cmake/HeadgradInstall.cmake).
# SLEEF has no CMake package: FindSLEEF.cmake, beside this file, finds it; oneDNN's own package
# wants OpenCL's development files, so FindOneDNN.cmake, beside it too, finds oneDNN instead.
# oneDNN 2.6 to 2.x: framework/engine/blas/ uses the 2.x C API (operation descriptors, output
# scales), which oneDNN 3.0 replaced.
include(CMakeFindDependencyMacro)
find_dependency(fmt)
find_dependency(OpenMP)
find_dependency(OpenBLAS)
set(_headgrad_saved_module_path "${CMAKE_MODULE_PATH}")
list(APPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")
find_dependency(SLEEF)
find_dependency(OneDNN 2.6)
if(OneDNN_VERSION VERSION_GREATER_EQUAL 3)
  message(FATAL_ERROR "headgrad needs oneDNN 2.x (found ${OneDNN_VERSION}, whose matmul API differs)")
endif()
set(CMAKE_MODULE_PATH "${_headgrad_saved_module_path}")
unset(_headgrad_saved_module_path)
if(NOT TARGET headgrad_blas)
  add_library(headgrad_blas INTERFACE IMPORTED)
  # OpenBLAS's own cblas.h first: it declares openblas_get_corename() and friends.
  set_target_properties(headgrad_blas PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${OpenBLAS_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "${OpenBLAS_LIBRARIES}")
endif()
