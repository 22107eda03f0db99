# What the guide's install builds: configured with the defaults (cmake -S . -B build
# -DCMAKE_BUILD_TYPE=Release), the build runs the libraries and the headgrad command only - no
# test program, benchmark or exercise (a fresh build dir's Makefile2: what `all` depends on).
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR} -DCMAKE_BUILD_TYPE=Release
                OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring ${SOURCE_DIR} with the defaults failed:\n${out}")
endif()
# Makefile2 lists what `all` builds: the targets of the top directory, and those of each
# subdirectory not added EXCLUDE_FROM_ALL (as "<dir>/all").
file(STRINGS ${WORK_DIR}/CMakeFiles/Makefile2 plan REGEX "^all: ")
string(REGEX MATCHALL "(tests|bench|docs/exercises)/(all|CMakeFiles/[A-Za-z0-9_]+\\.dir)" extra "${plan}")
if(extra)
  message(FATAL_ERROR "the default build builds more than the libraries and the command: ${extra}")
endif()
if(NOT plan MATCHES "headgrad_cli\\.dir/all" OR NOT plan MATCHES "headgrad_models\\.dir/all")
  message(FATAL_ERROR "the default build does not build the command and the libraries: ${plan}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
message(STATUS "the default build: the libraries and the command only")
