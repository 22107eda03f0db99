# build_against_install(SOURCE BUILD PREFIX [-DVAR=VALUE...]): configures and builds the CMake
# project in SOURCE into BUILD (removed first) against the installed package in PREFIX alone, as a
# user would, with warnings as errors (our headers must compile cleanly in other people's builds
# too).
function(build_against_install source build prefix)
  file(REMOVE_RECURSE ${build})
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${source} -B ${build} -DCMAKE_PREFIX_PATH=${prefix}
                  -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Werror" ${ARGN}
                  OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "configuring ${source} against ${prefix} failed:\n${out}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${build} -j2
                  OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "building ${source} against ${prefix} failed:\n${out}")
  endif()
endfunction()

# run_and_show(OUT_VAR program args...): runs it, prints its output, fails on a nonzero exit.
function(run_and_show out_var)
  execute_process(COMMAND ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  list(JOIN ARGN " " command)
  message(STATUS "$ ${command}\n${out}${err}")
  if(rc)
    message(FATAL_ERROR "${command} exited with ${rc}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()
