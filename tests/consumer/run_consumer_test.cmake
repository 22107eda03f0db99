# Builds tests/consumer against the installed package in PREFIX (find_package and pkg-config),
# runs both programs, and runs the installed `headgrad` command.
include(${CMAKE_CURRENT_LIST_DIR}/build_against_install.cmake)
# With nlohmann-json hidden from find_package: the installed package must not ask for it.
build_against_install(${CMAKE_CURRENT_LIST_DIR} ${WORK_DIR} ${PREFIX} -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON)
run_and_show(out ${WORK_DIR}/consumer)
run_and_show(out ${WORK_DIR}/consumer_pkgconfig)

# MPI comes in with headgrad::distributed only: the consumers of headgrad::headgrad and of
# headgrad.pc link no MPI library; the one of headgrad::distributed does, when headgrad has MPI.
run_and_show(out ${WORK_DIR}/consumer_ranks)
string(FIND "${out}" "built with MPI: yes" with_mpi)
foreach(p consumer consumer_pkgconfig consumer_ranks)
  execute_process(COMMAND ldd ${WORK_DIR}/${p} OUTPUT_VARIABLE libs RESULT_VARIABLE rc)
  string(REGEX MATCHALL "lib(mpi|open-rte|open-pal)[^ ]*" mpi_libs "${libs}")
  message(STATUS "${p}: MPI libraries linked: ${mpi_libs}")
  if(rc OR (NOT p STREQUAL "consumer_ranks" AND mpi_libs))
    message(FATAL_ERROR "${p} links MPI (${mpi_libs}) without headgrad::distributed, or ldd failed (${rc})")
  endif()
  if(p STREQUAL "consumer_ranks" AND NOT with_mpi EQUAL -1 AND NOT mpi_libs)
    message(FATAL_ERROR "consumer_ranks says it has MPI, but links no MPI library")
  endif()
endforeach()
run_and_show(out ${PREFIX}/${BINDIR}/headgrad --help)
if(NOT out MATCHES "usage: headgrad <command>")
  message(FATAL_ERROR "bin/headgrad --help printed no usage")
endif()

# On a CPU where OpenBLAS falls back to its generic Prescott kernel by itself (simulated with
# framework/engine/runtime/startup.hpp's test hook, as OpenBLAS 0.3.21 does on Intel models it does not
# know): without runtime::configure the consumer runs Prescott and stderr says so in one line at its
# first gemm; with it, the consumer runs this CPU's kernel and nothing is said.
set(simulated_fallback ${CMAKE_COMMAND} -E env OPENBLAS_CORETYPE=Prescott HEADGRAD_BLAS_AUTOCORE_ASSUME=Prescott
    --unset=HEADGRAD_REEXECED --unset=HEADGRAD_BLAS_AUTOCORE --unset=HEADGRAD_BLAS_AUTOCORE_FROM --unset=OMP_WAIT_POLICY)
execute_process(COMMAND ${simulated_fallback} ${WORK_DIR}/consumer OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message(STATUS "$ (simulated fallback) consumer\n${out}${err}")
string(REGEX MATCH "in place of a fallback: ([A-Za-z0-9]+)" _ "${out}")
set(better ${CMAKE_MATCH_1})
if(rc OR better STREQUAL "")
  message(FATAL_ERROR "the consumer failed (${rc}) or did not say which kernel this CPU prefers")
endif()
if(better STREQUAL "none")
  message(STATUS "this CPU has neither AVX2+FMA nor AVX-512: there is no better kernel to choose")
  return()
endif()
string(REGEX MATCHALL "headgrad: note: OpenBLAS runs its generic Prescott kernel on this CPU, which supports ${better}: about [0-9.]+x slower gemms\\. Set OPENBLAS_CORETYPE=${better}, or call headgrad::runtime::configure\\(argc, argv\\)" notes "${err}")
list(LENGTH notes n_notes)
string(REGEX MATCHALL "[^\n]+" err_lines "${err}")
list(LENGTH err_lines n_err_lines)
if(NOT out MATCHES "consumer: BLAS kernel Prescott \\(without" OR NOT n_notes EQUAL 1 OR NOT n_err_lines EQUAL 1)
  message(FATAL_ERROR "without runtime::configure: expected the Prescott kernel and exactly one stderr line naming ${better}")
endif()
execute_process(COMMAND ${simulated_fallback} ${WORK_DIR}/consumer --configure OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message(STATUS "$ (simulated fallback) consumer --configure\n${out}${err}")
if(rc OR NOT out MATCHES "consumer: BLAS kernel ${better} \\(after" OR NOT err STREQUAL "")
  message(FATAL_ERROR "with runtime::configure: expected the ${better} kernel and nothing on stderr")
endif()
