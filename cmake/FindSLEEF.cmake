# FindSLEEF.cmake - SLEEF, the vectorised math library (https://sleef.org; Debian: libsleef-dev),
# which ships a pkg-config file but no CMake package. Defines the imported target SLEEF::sleef
# (sleef.h and libsleef) and SLEEF_FOUND, SLEEF_VERSION. Used by the build and, installed next to
# headgradConfig.cmake, by projects that link the static headgrad library.
find_path(SLEEF_INCLUDE_DIR sleef.h)
find_library(SLEEF_LIBRARY sleef)
if(SLEEF_INCLUDE_DIR AND EXISTS "${SLEEF_INCLUDE_DIR}/sleef.h")
  file(STRINGS "${SLEEF_INCLUDE_DIR}/sleef.h" _sleef_version REGEX "^#define SLEEF_VERSION_(MAJOR|MINOR|PATCHLEVEL) ")
  string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCHLEVEL ([0-9]+).*" "\\1.\\2.\\3" SLEEF_VERSION
         "${_sleef_version}")
  unset(_sleef_version)
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(SLEEF REQUIRED_VARS SLEEF_LIBRARY SLEEF_INCLUDE_DIR VERSION_VAR SLEEF_VERSION)
if(SLEEF_FOUND AND NOT TARGET SLEEF::sleef)
  add_library(SLEEF::sleef UNKNOWN IMPORTED)
  set_target_properties(SLEEF::sleef PROPERTIES IMPORTED_LOCATION "${SLEEF_LIBRARY}"
                                                 INTERFACE_INCLUDE_DIRECTORIES "${SLEEF_INCLUDE_DIR}")
endif()
mark_as_advanced(SLEEF_INCLUDE_DIR SLEEF_LIBRARY)
