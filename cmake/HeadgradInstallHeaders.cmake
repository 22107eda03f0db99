# HeadgradInstallHeaders.cmake - run by `cmake --install` after the headers are copied (see
# HeadgradInstall.cmake): their includes of each other, "framework/x.hpp" (or models/, data/,
# train/) in the source tree, become "headgrad/framework/x.hpp", which the exported include
# directory resolves. Only that prefix of those include lines changes; running it twice changes
# nothing more.
set(dir "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${HEADGRAD_INSTALLED_HEADERS_DIR}")
file(GLOB_RECURSE headers "${dir}/*.hpp")
foreach(header ${headers})
  file(READ "${header}" text)
  string(REGEX REPLACE "#include \"(framework|models|data|train)/" "#include \"headgrad/\\1/" rewritten "${text}")
  if(NOT rewritten STREQUAL text)
    file(WRITE "${header}" "${rewritten}")
  endif()
endforeach()
