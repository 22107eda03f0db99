# HeadgradInstall.cmake - what `cmake --install` puts under the prefix, and how other projects find
# it (included by the root CMakeLists.txt after the targets are defined):
#
#   lib/libheadgrad.a, lib/libheadgrad_models.a     headgrad::headgrad (both; headgrad::framework,
#                                                   headgrad::models each)
#   lib/libheadgrad_distributed.a                   headgrad::distributed: the communicator on MPI
#                                                   (find_package(headgrad COMPONENTS distributed))
#   lib/libheadgrad_train.a                         headgrad::train (train::Trainer; add headgrad::distributed for ranks)
#   lib/cmake/headgrad/                             find_package(headgrad)
#   lib/pkgconfig/headgrad.pc                       pkg-config --cflags --libs headgrad
#   lib/pkgconfig/headgrad-distributed.pc           ... headgrad-distributed (with MPI)
#   include/headgrad/headgrad.hpp                   the umbrella header: every public header
#   include/headgrad/{framework,models,data}/...    the public headers
#   include/headgrad/train/{fit,loop,sample}/...    the trainer's and generation's public headers
#   bin/headgrad                                    the command line
#
# Include scheme. In the source tree headers include each other as "framework/core/tensor.hpp". The
# installed copies say "headgrad/framework/core/tensor.hpp" (rewritten at install time by
# cmake/HeadgradInstallHeaders.cmake, only that prefix changes), so the package exports one
# include directory, include/, and a consumer writes #include <headgrad/...>. Exporting
# include/headgrad/ as well would have kept the headers byte-identical, but it would also put
# directories named framework/, models/ and data/ on every consumer's include path, where they
# shadow (or are shadowed by) the consumer's own headers of those common names.
#
# Private headers are not installed: framework/engine/kernels/ (the engine's kernels: they include
# cblas.h and omp.h; the seam, framework/engine/kernels.hpp, is public), framework/engine/blas/
# (oneDNN) and the helpers only .cpp files include. No public header includes them;
# the install test compiles every installed header against the prefix alone to keep it so.
#
# Dependencies at find_package time (cmake/headgradConfig.cmake.in):
#   fmt       public: framework/core/tensor.hpp includes <fmt/format.h>
#   OpenBLAS  link only (the static library calls cblas_sgemm); its headers stay private
#   SLEEF     link only (the per-instruction-set kernels call its vector functions); found by
#             FindSLEEF.cmake, installed beside the config (SLEEF ships no CMake package)
#   oneDNN    link only (framework/engine/blas/: the bf16 and float32 matmul); found by
#             FindOneDNN.cmake, installed beside the config (oneDNN's own package needs OpenCL)
#   OpenMP    link only (libgomp); consumers are not compiled with -fopenmp
#   MPI       link only, for the component `distributed` alone (its own export file, loaded by
#             find_package(headgrad COMPONENTS distributed)): a program that does not run on ranks
#             links no MPI library
# A static library's link-only dependencies appear in the export as $<LINK_ONLY:target>, and an
# imported target must exist when the consumer generates, hence find_dependency for those.
# nlohmann-json is not needed: it is header-only and used inside framework/io only.

set(HEADGRAD_PRIVATE_HEADERS
  ops/promotion.hpp         # dtype promotion of the binary ops (elementwise.cpp, where.cpp, compare.cpp)
  ops/reduced_axes.hpp      # layouts of the multi-axis reductions (reduce.cpp, softmax.cpp)
  ops/attention_mask.hpp    # attention masks as the kernels take them (masked_softmax.cpp, attention.cpp)
  ops/dropout_draw.hpp      # how dropout draws its mask (dropout.cpp, attention.cpp)
  ops/map.hpp               # the elementwise ops' loops (unary.cpp, elementwise.cpp, ...)
  ops/scatter.hpp           # the scatter-add of indexing's gradients (index.cpp, extrema.cpp)
  core/strided.hpp          # the strided walk, copies and gradient sums (the core, ops, io, distributed)
  io/safetensors_format.hpp # the byte layout shared by the safetensors reader and writer
  engine/runtime/team_meet.hpp     # how the threads of a region meet before its end (spin_pool.cpp)
  engine/runtime/spin_pool.hpp     # the training step's threads, spinning between its phases (train/)
)
# Not installed either: kernels/, blas/ (engine/blas/: the oneDNN matmul and bf16 conversion the
# kernels call), and checks/ (the registry of the gradcheck and misuse rows, which are compiled
# into the headgrad command and the tests only: headgrad_checks).
set(HEADGRAD_HEADER_EXCLUDES PATTERN kernels EXCLUDE PATTERN blas EXCLUDE PATTERN checks EXCLUDE)
foreach(h ${HEADGRAD_PRIVATE_HEADERS})
  list(APPEND HEADGRAD_HEADER_EXCLUDES REGEX "/framework/${h}$" EXCLUDE)
endforeach()

set(HEADGRAD_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/headgrad)

install(TARGETS headgrad headgrad_models headgrad_library EXPORT headgradTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS headgrad_distributed EXPORT headgradDistributedTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT headgradDistributedTargets NAMESPACE headgrad:: DESTINATION ${HEADGRAD_INSTALL_CMAKEDIR})
install(TARGETS headgrad_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY framework models data DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/headgrad
  FILES_MATCHING PATTERN "*.hpp" ${HEADGRAD_HEADER_EXCLUDES})
# Generation (train/sample/: drawing tokens, in the framework library; generate and the key/value
# cache, in the models one).
install(DIRECTORY train/sample DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/headgrad/train
  FILES_MATCHING PATTERN "*.hpp" PATTERN checks EXCLUDE)
install(FILES headgrad.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/headgrad)
# The trainer for a model of one's own (headgrad::train, lib/libheadgrad_train.a): train::Trainer and
# its data source (train/fit/), the stop signal and the training step's NonFiniteError (train/loop/).
# The rest of train/ (the command's run files, pictures, the parallel step) is inside the library
# and not installed: no installed header includes it.
install(TARGETS headgrad_train EXPORT headgradTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY train/fit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/headgrad/train FILES_MATCHING PATTERN "*.hpp")
install(FILES train/loop/stop_signal.hpp train/loop/train_step.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/headgrad/train/loop)
# After the copies: "framework/x.hpp" -> "headgrad/framework/x.hpp" in every installed header.
install(CODE "set(HEADGRAD_INSTALLED_HEADERS_DIR \"${CMAKE_INSTALL_INCLUDEDIR}/headgrad\")")
install(SCRIPT ${CMAKE_CURRENT_LIST_DIR}/HeadgradInstallHeaders.cmake)

install(EXPORT headgradTargets NAMESPACE headgrad:: DESTINATION ${HEADGRAD_INSTALL_CMAKEDIR})
include(CMakePackageConfigHelpers)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/headgradConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/headgradConfig.cmake
  INSTALL_DESTINATION ${HEADGRAD_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/headgradConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/headgradConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/headgradConfigVersion.cmake
  ${CMAKE_CURRENT_LIST_DIR}/HeadgradDependencies.cmake
  ${CMAKE_CURRENT_LIST_DIR}/FindSLEEF.cmake
  ${CMAKE_CURRENT_LIST_DIR}/FindOneDNN.cmake
  ${CMAKE_CURRENT_LIST_DIR}/HeadgradFindLibrary.cmake
  DESTINATION ${HEADGRAD_INSTALL_CMAKEDIR})

# pkg-config. The libraries are static, so everything they link is in Requires/Libs (not the
# .private fields, which plain `pkg-config --libs` leaves out). The prefix is found relative to
# the .pc file, so the installed tree can be moved. MPI has no standard .pc name (ompi-c, mpich),
# hence its libraries as -L/-l (not as paths: build systems put -l flags after the archives that
# need them, as a linker with --as-needed requires).
set(HEADGRAD_PC_MPI_LIBS "")
set(HEADGRAD_PC_DISTRIBUTED_LIBS "")
if(HEADGRAD_WITH_MPI)
  set(HEADGRAD_PC_DISTRIBUTED_LIBS "-Wl,--undefined=headgrad_mpi_communicator -L\${libdir} -lheadgrad_distributed")
  set(dirs "")
  set(names "")
  foreach(lib ${MPI_CXX_LIBRARIES})
    get_filename_component(dir ${lib} DIRECTORY)
    get_filename_component(name ${lib} NAME_WE)
    string(REGEX REPLACE "^lib" "" name ${name})
    list(APPEND dirs ${dir})
    list(APPEND names ${name})
  endforeach()
  list(REMOVE_DUPLICATES dirs)
  foreach(dir ${dirs})
    string(APPEND HEADGRAD_PC_MPI_LIBS " -L${dir}")
  endforeach()
  foreach(name ${names})
    string(APPEND HEADGRAD_PC_MPI_LIBS " -l${name}")
  endforeach()
endif()
# oneDNN ships no .pc file either: its library as -L/-l too.
get_filename_component(_onednn_dir ${OneDNN_LIBRARY} DIRECTORY)
set(HEADGRAD_PC_ONEDNN_LIBS " -L${_onednn_dir} -ldnnl")
unset(_onednn_dir)
file(RELATIVE_PATH HEADGRAD_PC_PREFIX_FROM_PCFILEDIR
  /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${CMAKE_CURRENT_LIST_DIR}/headgrad.pc.in ${CMAKE_CURRENT_BINARY_DIR}/headgrad.pc @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/headgrad-distributed.pc.in ${CMAKE_CURRENT_BINARY_DIR}/headgrad-distributed.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/headgrad.pc ${CMAKE_CURRENT_BINARY_DIR}/headgrad-distributed.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
