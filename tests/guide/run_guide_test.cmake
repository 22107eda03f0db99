# Builds tests/guide (every ```cpp block of docs/cpp-guide.md) against the installed package in
# PREFIX and runs the blocks that are programs.
include(${CMAKE_CURRENT_LIST_DIR}/../consumer/build_against_install.cmake)
build_against_install(${CMAKE_CURRENT_LIST_DIR} ${WORK_DIR} ${PREFIX} -DGUIDE=${SOURCE_DIR}/docs/cpp-guide.md)
file(READ ${WORK_DIR}/programs.txt programs)
foreach(p ${programs})
  run_and_show(out ${WORK_DIR}/${p})
endforeach()
