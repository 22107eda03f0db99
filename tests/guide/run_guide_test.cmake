# Builds every ```cpp block of GUIDE (docs/cpp-guide.md unless given) against the installed package in PREFIX exactly as
# the guide tells a reader to: each block is the main.cpp of a project of its own whose
# CMakeLists.txt is the guide's ```cmake template, unchanged (so the target the guide names must
# link everything its programs use). Each program then runs and must exit 0. Each main.cpp starts
# with a #line directive, so a compiler error names the guide's line.
cmake_minimum_required(VERSION 3.20) # (policies: while(TRUE))
include(${CMAKE_CURRENT_LIST_DIR}/../consumer/build_against_install.cmake)
if(NOT GUIDE) # docs/cpp-guide.md unless given (docs/trainer.md)
  set(GUIDE ${SOURCE_DIR}/docs/cpp-guide.md)
endif()
file(READ ${GUIDE} rest) # handled as one string (never as a CMake list: code is full of semicolons)
set(fence "```")
string(FIND "${rest}" "\n${fence}cmake\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${GUIDE}: no ${fence}cmake block (the project template)")
endif()
math(EXPR at "${at} + 10")
string(SUBSTRING "${rest}" ${at} -1 template)
string(FIND "${template}" "\n${fence}" close)
string(SUBSTRING "${template}" 0 ${close} template)
if(NOT template MATCHES "add_executable\\(([A-Za-z_0-9]+) main\\.cpp\\)")
  message(FATAL_ERROR "${GUIDE}: the template builds no add_executable(NAME main.cpp)")
endif()
set(program ${CMAKE_MATCH_1})

set(line 1) # the guide's line number at the start of `rest`
set(index 0)
while(TRUE)
  string(FIND "${rest}" "\n${fence}cpp\n" open)
  if(open EQUAL -1)
    break()
  endif()
  string(SUBSTRING "${rest}" 0 ${open} before)
  string(REGEX MATCHALL "\n" newlines "${before}")
  list(LENGTH newlines n)
  math(EXPR line "${line} + ${n} + 2") # the opening fence's line, then the block's first line
  math(EXPR open "${open} + 8")         # past "\n```cpp\n"
  string(SUBSTRING "${rest}" ${open} -1 rest)
  string(FIND "${rest}" "\n${fence}" close)
  if(close EQUAL -1)
    message(FATAL_ERROR "${GUIDE}:${line}: a ${fence}cpp block without its closing fence")
  endif()
  string(SUBSTRING "${rest}" 0 ${close} code)
  string(SUBSTRING "${rest}" ${close} -1 rest)
  math(EXPR index "${index} + 1")
  if(NOT code MATCHES "int main\\(")
    message(FATAL_ERROR "${GUIDE}:${line}: a ${fence}cpp block without main(): the template builds programs")
  endif()

  set(dir ${WORK_DIR}/snippet_${index})
  file(REMOVE_RECURSE ${dir})
  file(WRITE ${dir}/CMakeLists.txt "${template}\n")
  file(WRITE ${dir}/main.cpp "#line ${line} \"${GUIDE}\"\n${code}\n")
  # MPI hidden from find_package: a program that does not run on ranks must not need it
  build_against_install(${dir} ${dir}/build ${PREFIX} -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON)
  run_and_show(out ${dir}/build/${program})
  string(REGEX MATCHALL "\n" newlines "${code}")
  list(LENGTH newlines n)
  math(EXPR line "${line} + ${n}") # the block's last line; `rest` starts with its "\n```"
endwhile()
if(index EQUAL 0)
  message(FATAL_ERROR "${GUIDE}: no ${fence}cpp blocks")
endif()
message(STATUS "${GUIDE}: ${index} programs built with the guide's template and run")
