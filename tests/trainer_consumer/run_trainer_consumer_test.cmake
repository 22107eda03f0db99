# Builds tests/trainer_consumer against the installed package in PREFIX and runs kill_and_resume:
# a program of a user's own trains with train::Trainer, is killed with SIGKILL mid-run three times,
# resumes each time, and ends with the bits of an uninterrupted run.
include(${CMAKE_CURRENT_LIST_DIR}/../consumer/build_against_install.cmake)
build_against_install(${CMAKE_CURRENT_LIST_DIR} ${WORK_DIR} ${PREFIX})
run_and_show(out ${WORK_DIR}/kill_and_resume ${WORK_DIR}/trainer ${WORK_DIR}/runs)
if(NOT out MATCHES "the same bits")
  message(FATAL_ERROR "kill_and_resume did not report the same bits")
endif()
