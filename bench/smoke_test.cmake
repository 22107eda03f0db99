# bench_smoke: `headgrad_bench --quick --skip-tta --no-torch --json` must succeed and its last
# stdout line must be JSON with the keys the table is built from. Not a timing test.
# It runs as on a CPU where OpenBLAS falls back to its generic Prescott kernel by itself (the test
# hook of framework/engine/runtime/startup.hpp): the bench's start-up path must replace it.
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env OPENBLAS_CORETYPE=Prescott HEADGRAD_BLAS_AUTOCORE_ASSUME=Prescott
    --unset=HEADGRAD_REEXECED --unset=HEADGRAD_BLAS_AUTOCORE --unset=HEADGRAD_BLAS_AUTOCORE_FROM
    ${BENCH} --quick --skip-tta --no-torch --json --threads 1 --soak-steps 150 --json-file ${WORK_DIR}/bench.json
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "headgrad_bench exited with ${rc}\nstdout:\n${out}\nstderr:\n${err}")
endif()
string(STRIP "${out}" out)
string(FIND "${out}" "\n" nl REVERSE)
math(EXPR start "${nl} + 1")
string(SUBSTRING "${out}" ${start} -1 last)
file(READ ${WORK_DIR}/bench.json from_file)

foreach(doc last from_file)
  foreach(path
      "threads"
      "cpu;model"
      "cpu;features"
      "headgrad;openblas_core"
      "flop_formula"
      "train;lr"
      "train;steps"
      "configs;small;flops_per_step"
      "configs;small;headgrad;ms_per_step"
      "configs;small;headgrad;tokens_per_s"
      "configs;small;headgrad;gflops"
      "configs;small;headgrad;peak_rss_kib"
      "configs;small;headgrad;first_loss"
      "configs;small;headgrad;sgemm;best_gflops"
      "configs;small;headgrad;profile;ops"
      "configs;large;headgrad;tokens_per_s"
      "configs;large;headgrad;sgemm;best_gflops"
      "soak;growth_percent"
      "targets")
    string(JSON value ERROR_VARIABLE jerr GET "${${doc}}" ${path})
    if(jerr)
      message(FATAL_ERROR "bench JSON (${doc}): no '${path}': ${jerr}\nstdout:\n${out}")
    endif()
  endforeach()
endforeach()
string(JSON tps GET "${last}" configs small headgrad tokens_per_s)
if(tps LESS_EQUAL 0)
  message(FATAL_ERROR "small tokens/s is ${tps}")
endif()
string(JSON core GET "${last}" headgrad openblas_core)
string(JSON features GET "${last}" cpu features)
if(core STREQUAL "Prescott" AND features MATCHES "avx2" AND features MATCHES "fma")
  message(FATAL_ERROR "the bench ran OpenBLAS's Prescott fallback on a CPU with ${features}")
endif()
message(STATUS "bench smoke: small ${tps} tokens/s, OpenBLAS core ${core} (CPU features ${features})")
