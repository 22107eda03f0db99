# Builds tests/consumer against the installed package in PREFIX (find_package and pkg-config),
# runs both programs, and runs the installed `headgrad` command.
include(${CMAKE_CURRENT_LIST_DIR}/build_against_install.cmake)
# With nlohmann-json hidden from find_package: the installed package must not ask for it.
build_against_install(${CMAKE_CURRENT_LIST_DIR} ${WORK_DIR} ${PREFIX} -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON)
run_and_show(out ${WORK_DIR}/consumer)
run_and_show(out ${WORK_DIR}/consumer_pkgconfig)
run_and_show(out ${PREFIX}/${BINDIR}/headgrad --help)
if(NOT out MATCHES "usage: headgrad <command>")
  message(FATAL_ERROR "bin/headgrad --help printed no usage")
endif()
