# Two kinds of install:
# * pip (scikit-build-core sets SKBUILD): the Python module into the attnzoo package and the attnzoo CLI into the
#   environment's scripts directory, nothing else.
# * cmake --install: the static libraries, their headers and a CMake package, so that C++ code can
#     find_package(attnzoo CONFIG REQUIRED)
#     target_link_libraries(app PRIVATE attnzoo::attnzoo)   # + attnzoo::attnzoo_answers / attnzoo::attnzoo_server
#   and include e.g. "kernels/softmax/attention.h" (the same paths as inside src/). Every header installed is
#   usable: the answer readers' and the server's headers come with their libraries.
if(SKBUILD)
  if(TARGET _core)
    install(TARGETS _core LIBRARY DESTINATION attnzoo)
  endif()
  install(TARGETS attnzoo_cli RUNTIME DESTINATION ${SKBUILD_SCRIPTS_DIR})
  return()
endif()

include(CMakePackageConfigHelpers)
install(TARGETS attnzoo attnzoo_answers attnzoo_server attnzoo_hwy attnzoo_pcre2 attnzoo_blas EXPORT attnzooTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS attnzoo_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/src/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attnzoo
        FILES_MATCHING PATTERN "*.h" PATTERN "cli" EXCLUDE PATTERN "testing" EXCLUDE)
set(ATTNZOO_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/attnzoo)
install(EXPORT attnzooTargets NAMESPACE attnzoo:: DESTINATION ${ATTNZOO_CMAKE_DIR})
set(ATTNZOO_HWY_FROM_CONFIG ${hwy_FOUND})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/attnzooConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/attnzooConfig.cmake INSTALL_DESTINATION ${ATTNZOO_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/attnzooConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/attnzooConfig.cmake ${CMAKE_BINARY_DIR}/attnzooConfigVersion.cmake
        DESTINATION ${ATTNZOO_CMAKE_DIR})
