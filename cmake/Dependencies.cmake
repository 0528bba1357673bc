# Every dependency comes from Debian packages present on both Debian 12 and 13 (or the project venv).
find_package(Threads REQUIRED)
find_package(GTest REQUIRED)

# Highway: Debian 12 ships 1.0.3, Debian 13 ships 1.2.x. Prefer its CMake package, fall back to pkg-config.
find_package(hwy CONFIG QUIET)
add_library(attnzoo_hwy INTERFACE)
if(hwy_FOUND)
  target_link_libraries(attnzoo_hwy INTERFACE hwy::hwy)
  set(ATTNZOO_HWY_VERSION "${hwy_VERSION}")
else()
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(HWY REQUIRED IMPORTED_TARGET libhwy)
  target_link_libraries(attnzoo_hwy INTERFACE PkgConfig::HWY)
  set(ATTNZOO_HWY_VERSION "${HWY_VERSION}")
endif()
# Compile exactly the targets we dispatch between: scalar, AVX2, AVX-512 (the BF16 tiles are our own code).
# Highway >= 1.1 knows more x86 targets; they are disabled when this compiler accepts their names.
set(ATTNZOO_HWY_DEFINITIONS "HWY_DISABLED_TARGETS=(HWY_SSSE3|HWY_SSE4)")
include(CheckCXXSourceCompiles)
get_target_property(_hwy_inc attnzoo_hwy INTERFACE_INCLUDE_DIRECTORIES)
set(CMAKE_REQUIRED_DEFINITIONS "-DHWY_COMPILE_ALL_ATTAINABLE"
    "-DHWY_DISABLED_TARGETS=(HWY_SSE2|HWY_SSSE3|HWY_SSE4|HWY_AVX3_DL|HWY_AVX3_ZEN4|HWY_AVX3_SPR)")
check_cxx_source_compiles("#include <hwy/highway.h>
int main() { return (HWY_TARGETS & HWY_EMU128) ? 0 : 1; }" ATTNZOO_HWY_NEW_TARGETS)
unset(CMAKE_REQUIRED_DEFINITIONS)
if(ATTNZOO_HWY_NEW_TARGETS)
  set(ATTNZOO_HWY_DEFINITIONS HWY_COMPILE_ALL_ATTAINABLE
      "HWY_DISABLED_TARGETS=(HWY_SSE2|HWY_SSSE3|HWY_SSE4|HWY_AVX3_DL|HWY_AVX3_ZEN4|HWY_AVX3_SPR)")
endif()
message(STATUS "attnzoo: Highway ${ATTNZOO_HWY_VERSION} (${ATTNZOO_HWY_DEFINITIONS})")

# Python module: needs the venv's interpreter and nanobind; without them only the C++ parts build.
set(ATTNZOO_WITH_PYTHON OFF)
find_package(Python 3.9 COMPONENTS Interpreter Development.Module QUIET)
if(Python_FOUND)
  execute_process(COMMAND ${Python_EXECUTABLE} -m nanobind --cmake_dir
                  OUTPUT_VARIABLE nanobind_ROOT OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _nb_rc)
  if(_nb_rc EQUAL 0)
    find_package(nanobind CONFIG REQUIRED)
    set(ATTNZOO_WITH_PYTHON ON)
  endif()
endif()
message(STATUS "attnzoo: Python module ${ATTNZOO_WITH_PYTHON}")

# PCRE2 (8-bit, with Unicode properties) runs the tokenizers' pre-tokenizer regexes.
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
add_library(attnzoo_pcre2 INTERFACE)
target_link_libraries(attnzoo_pcre2 INTERFACE PkgConfig::PCRE2)

# BLAS for the model GEMMs (OpenBLAS from Debian). Our pool owns the threads: the library is told to use one
# thread and is called from inside our tasks.
find_package(BLAS REQUIRED)
add_library(attnzoo_blas INTERFACE)
target_link_libraries(attnzoo_blas INTERFACE ${BLAS_LIBRARIES})
find_path(ATTNZOO_CBLAS_INCLUDE cblas.h PATH_SUFFIXES openblas x86_64-linux-gnu/openblas-pthread)
if(ATTNZOO_CBLAS_INCLUDE)
  target_include_directories(attnzoo_blas INTERFACE ${ATTNZOO_CBLAS_INCLUDE})
endif()
message(STATUS "attnzoo: BLAS ${BLAS_LIBRARIES} (cblas.h in ${ATTNZOO_CBLAS_INCLUDE})")

