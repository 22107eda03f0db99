# The fixture of the install tests: installs the already-built headgrad into PREFIX (removed
# first) and checks what landed there - every installed header listed by the umbrella header, no
# private header, no include left in the source tree's form. The projects built against PREFIX
# (the consumer, examples/char_lm, the guide's snippets) run after it.
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX}
                OUTPUT_QUIET RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} --prefix ${PREFIX} failed: ${rc}")
endif()

set(include_root ${PREFIX}/${INCLUDEDIR}/headgrad)
set(lib ${PREFIX}/${LIBDIR})
foreach(f ${include_root}/headgrad.hpp ${include_root}/framework/core/tensor.hpp ${include_root}/models/attention.hpp
          ${PREFIX}/${BINDIR}/headgrad ${lib}/libheadgrad.a ${lib}/libheadgrad_models.a
          ${lib}/pkgconfig/headgrad.pc ${lib}/cmake/headgrad/headgradConfig.cmake)
  if(NOT EXISTS ${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
foreach(dir kernels checks)
  if(EXISTS ${include_root}/framework/${dir})
    message(FATAL_ERROR "private headers installed: ${include_root}/framework/${dir}")
  endif()
endforeach()

file(READ ${include_root}/headgrad.hpp umbrella)
file(GLOB_RECURSE headers RELATIVE ${include_root} ${include_root}/*.hpp)
foreach(h ${headers})
  file(READ ${include_root}/${h} text)
  if(text MATCHES "#include \"(framework|models|data|train)/")
    message(FATAL_ERROR "${h}: an include still in the source tree's form: #include \"${CMAKE_MATCH_1}/...")
  endif()
  if(NOT h STREQUAL "headgrad.hpp")
    string(FIND "${umbrella}" "#include \"headgrad/${h}\"" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "headgrad.hpp does not include ${h}: add it there, or to "
                          "HEADGRAD_PRIVATE_HEADERS in cmake/HeadgradInstall.cmake if it is internal")
    endif()
  endif()
endforeach()
list(LENGTH headers n)
message(STATUS "installed into ${PREFIX}: ${n} headers, all listed by headgrad.hpp")
