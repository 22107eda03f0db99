# Finds the dependencies of the headgrad library (Debian: libopenblas-dev, libfmt-dev, g++'s
# OpenMP) and defines the imported target `headgrad_blas`. Shared by the build and by the installed
# package config (headgradConfig.cmake), where fmt is needed by the public headers and OpenBLAS and
# OpenMP only to link the static library (cmake/HeadgradInstall.cmake).
include(CMakeFindDependencyMacro)
find_dependency(fmt)
find_dependency(OpenMP)
find_dependency(OpenBLAS)
if(NOT TARGET headgrad_blas)
  add_library(headgrad_blas INTERFACE IMPORTED)
  # OpenBLAS's own cblas.h first: it declares openblas_get_corename() and friends.
  set_target_properties(headgrad_blas PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${OpenBLAS_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "${OpenBLAS_LIBRARIES}")
endif()
