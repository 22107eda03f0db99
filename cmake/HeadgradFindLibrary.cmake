# HeadgradFindLibrary.cmake - what headgrad's finders for libraries without a usable CMake package
# (FindSLEEF.cmake, FindOneDNN.cmake) share: find one header and one library, read the version
# from a header's three #defines, report as find_package does, and define an imported target.
# Installed beside the finders, which include it from their own folder.
include_guard(GLOBAL)
include(FindPackageHandleStandardArgs)

# headgrad_find_library(<Package> TARGET <imported target> HEADER <header> LIBRARY <library name>
#                       VERSION_HEADER <header> VERSION_MACROS <major> <minor> <patch>)
# Sets the cache entries <Package>_INCLUDE_DIR (the folder HEADER is found in) and
# <Package>_LIBRARY, and in the caller's scope <Package>_FOUND and <Package>_VERSION, the three
# VERSION_MACROS (#defines of VERSION_HEADER, found under <Package>_INCLUDE_DIR) joined with dots.
# A function, not a macro: its working variables stay inside; what find_package's caller reads is
# passed up by name.
function(headgrad_find_library package)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "TARGET;HEADER;LIBRARY;VERSION_HEADER" "VERSION_MACROS")
  find_path(${package}_INCLUDE_DIR ${arg_HEADER})
  find_library(${package}_LIBRARY ${arg_LIBRARY})
  set(include_dir "${${package}_INCLUDE_DIR}")
  if(include_dir AND EXISTS "${include_dir}/${arg_VERSION_HEADER}")
    list(JOIN arg_VERSION_MACROS "|" macros)
    file(STRINGS "${include_dir}/${arg_VERSION_HEADER}" version_lines REGEX "^#define (${macros}) ")
    list(GET arg_VERSION_MACROS 0 major)
    list(GET arg_VERSION_MACROS 1 minor)
    list(GET arg_VERSION_MACROS 2 patch)
    string(REGEX REPLACE ".*${major} ([0-9]+).*${minor} ([0-9]+).*${patch} ([0-9]+).*" "\\1.\\2.\\3"
           ${package}_VERSION "${version_lines}")
  endif()
  find_package_handle_standard_args(${package} REQUIRED_VARS ${package}_LIBRARY ${package}_INCLUDE_DIR
                                    VERSION_VAR ${package}_VERSION)
  if(${package}_FOUND AND NOT TARGET ${arg_TARGET})
    add_library(${arg_TARGET} UNKNOWN IMPORTED)
    set_target_properties(${arg_TARGET} PROPERTIES IMPORTED_LOCATION "${${package}_LIBRARY}"
                                                   INTERFACE_INCLUDE_DIRECTORIES "${include_dir}")
  endif()
  mark_as_advanced(${package}_INCLUDE_DIR ${package}_LIBRARY)
  string(TOUPPER ${package} upper)
  set(${package}_FOUND "${${package}_FOUND}" PARENT_SCOPE)
  set(${upper}_FOUND "${${package}_FOUND}" PARENT_SCOPE) # as find_package_handle_standard_args sets it
  if(DEFINED ${package}_VERSION)
    set(${package}_VERSION "${${package}_VERSION}" PARENT_SCOPE)
  endif()
endfunction()
