# FindOneDNN.cmake - oneDNN, Intel's deep learning primitives library (https://github.com/oneapi-src/oneDNN;
# Debian: libdnnl-dev), whose matmul runs headgrad's bf16 gemms. Defines the imported target
# OneDNN::dnnl (the C API header oneapi/dnnl/dnnl.h and libdnnl) and OneDNN_FOUND, OneDNN_VERSION.
# Debian's package also ships a CMake package (dnnl-config.cmake), but that one requires the
# OpenCL development files (its GPU runtime), which headgrad does not use: the header and the
# library are all it needs. Used by the build and, installed next to headgradConfig.cmake, by
# projects that link the static headgrad library.
include("${CMAKE_CURRENT_LIST_DIR}/HeadgradFindLibrary.cmake")
headgrad_find_library(OneDNN TARGET OneDNN::dnnl HEADER oneapi/dnnl/dnnl.h LIBRARY dnnl
                      VERSION_HEADER oneapi/dnnl/dnnl_version.h
                      VERSION_MACROS DNNL_VERSION_MAJOR DNNL_VERSION_MINOR DNNL_VERSION_PATCH)
