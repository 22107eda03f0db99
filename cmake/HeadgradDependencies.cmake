# Finds headgrad's dependencies (Debian: libopenblas-dev, libfmt-dev, nlohmann-json3-dev, g++'s
# OpenMP) and defines the imported target `headgrad_blas`. Shared by the build and by the installed
# package config.
include(CMakeFindDependencyMacro)
find_dependency(fmt)
find_dependency(OpenMP)
find_dependency(OpenBLAS)
find_dependency(nlohmann_json 3) # header-only; linked PRIVATE by headgrad (safetensors headers)
if(NOT TARGET headgrad_blas)
  add_library(headgrad_blas INTERFACE IMPORTED)
  # OpenBLAS's own cblas.h first: it declares openblas_get_corename() and friends.
  set_target_properties(headgrad_blas PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${OpenBLAS_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "${OpenBLAS_LIBRARIES}")
endif()
