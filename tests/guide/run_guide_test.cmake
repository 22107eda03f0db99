# Builds tests/guide (every ```cpp block of GUIDE, docs/cpp-guide.md unless given) against the
# installed package in PREFIX and runs the blocks that are programs.
include(${CMAKE_CURRENT_LIST_DIR}/../consumer/build_against_install.cmake)
if(NOT GUIDE)
  set(GUIDE ${SOURCE_DIR}/docs/cpp-guide.md)
endif()
build_against_install(${CMAKE_CURRENT_LIST_DIR} ${WORK_DIR} ${PREFIX} -DGUIDE=${GUIDE})
file(READ ${WORK_DIR}/programs.txt programs)
foreach(p ${programs})
  run_and_show(out ${WORK_DIR}/${p})
endforeach()
