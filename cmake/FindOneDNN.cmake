# FindOneDNN.cmake - oneDNN, Intel's deep learning primitives library (https://github.com/oneapi-src/oneDNN;
# Debian: libdnnl-dev), whose matmul runs headgrad's bf16 gemms. Defines the imported target
# OneDNN::dnnl (the C API header oneapi/dnnl/dnnl.h and libdnnl) and OneDNN_FOUND, OneDNN_VERSION.
# Debian's package also ships a CMake package (dnnl-config.cmake), but that one requires the
# OpenCL development files (its GPU runtime), which headgrad does not use: the header and the
# library are all it needs. Used by the build and, installed next to headgradConfig.cmake, by
# projects that link the static headgrad library.
find_path(OneDNN_INCLUDE_DIR oneapi/dnnl/dnnl.h)
find_library(OneDNN_LIBRARY dnnl)
if(OneDNN_INCLUDE_DIR AND EXISTS "${OneDNN_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h")
  file(STRINGS "${OneDNN_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h" _onednn_version
       REGEX "^#define DNNL_VERSION_(MAJOR|MINOR|PATCH) ")
  string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+).*" "\\1.\\2.\\3" OneDNN_VERSION
         "${_onednn_version}")
  unset(_onednn_version)
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OneDNN REQUIRED_VARS OneDNN_LIBRARY OneDNN_INCLUDE_DIR VERSION_VAR OneDNN_VERSION)
if(OneDNN_FOUND AND NOT TARGET OneDNN::dnnl)
  add_library(OneDNN::dnnl UNKNOWN IMPORTED)
  set_target_properties(OneDNN::dnnl PROPERTIES IMPORTED_LOCATION "${OneDNN_LIBRARY}"
                                                 INTERFACE_INCLUDE_DIRECTORIES "${OneDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(OneDNN_INCLUDE_DIR OneDNN_LIBRARY)
