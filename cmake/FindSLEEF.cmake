# FindSLEEF.cmake - SLEEF, the vectorised math library (https://sleef.org; Debian: libsleef-dev),
# which ships a pkg-config file but no CMake package. Defines the imported target SLEEF::sleef
# (sleef.h and libsleef) and SLEEF_FOUND, SLEEF_VERSION. Used by the build and, installed next to
# headgradConfig.cmake, by projects that link the static headgrad library.
include("${CMAKE_CURRENT_LIST_DIR}/HeadgradFindLibrary.cmake")
headgrad_find_library(SLEEF TARGET SLEEF::sleef HEADER sleef.h LIBRARY sleef VERSION_HEADER sleef.h
                      VERSION_MACROS SLEEF_VERSION_MAJOR SLEEF_VERSION_MINOR SLEEF_VERSION_PATCHLEVEL)
