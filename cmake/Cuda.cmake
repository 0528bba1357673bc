# The optional CUDA build. ATTNZOO_CUDA=AUTO (the default) turns it on when a CUDA compiler is found: the shim
# that scripts/cuda_toolchain.sh lays out in .cuda/toolkit (CUDA 13.0 from PyPI, no GPU needed), else whatever
# CMake finds (CUDACXX, nvcc on PATH). Without one, the CPU build is exactly what it was. The sanitizer build
# leaves CUDA out: ASan's host instrumentation and nvcc's host pass do not mix, and that build runs CPU tests only.
set(ATTNZOO_CUDA AUTO CACHE STRING "CUDA kernels: AUTO (when a CUDA compiler is found), ON or OFF")
set_property(CACHE ATTNZOO_CUDA PROPERTY STRINGS AUTO ON OFF)
set(ATTNZOO_WITH_CUDA OFF)
if(NOT ATTNZOO_CUDA STREQUAL "OFF" AND NOT ATTNZOO_SANITIZE)
  set(_shim_nvcc ${CMAKE_SOURCE_DIR}/.cuda/toolkit/bin/nvcc)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS ${_shim_nvcc})
    set(CMAKE_CUDA_COMPILER ${_shim_nvcc} CACHE FILEPATH "CUDA compiler (the PyPI toolkit's shim)")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(ATTNZOO_WITH_CUDA ON)
  elseif(ATTNZOO_CUDA STREQUAL "ON")
    message(FATAL_ERROR "ATTNZOO_CUDA=ON but no CUDA compiler was found (run scripts/cuda_toolchain.sh)")
  endif()
endif()

if(ATTNZOO_WITH_CUDA)
  # sm_80 (Ampere and every later GPU through its own SASS or the PTX) and sm_90a: Hopper's wgmma / TMA / setmaxnreg
  # exist only for the "a" target. Set before enable_language: CMake would otherwise probe for a GPU to pick one.
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "80;90a")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_FLAGS_RELEASE "-O3 -DNDEBUG")
  if(ATTNZOO_CCACHE AND NOT CMAKE_CUDA_COMPILER_LAUNCHER)
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${CMAKE_SOURCE_DIR} CCACHE_NOHASHDIR=1
        ${ATTNZOO_CCACHE})
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  get_filename_component(ATTNZOO_CUDA_ROOT ${CUDAToolkit_BIN_DIR} DIRECTORY)  # for the installed CMake package
endif()

# cuBLASLt for the projections' GEMM (src/layers/cuda/gemm_cublaslt.cc): with it, gemm_cuda hands cuBLASLt what it
# multiplies and keeps our mma.sync kernel for the rest; without it, ours runs everything. AUTO takes it when the
# toolkit has both the header and the library (a full CUDA install; from PyPI the cuda-toolkit wheel's cublas
# extra, ~420 MB, then scripts/cuda_toolchain.sh again for the shim's libcublasLt.so). CI installs neither.
set(ATTNZOO_CUBLASLT AUTO CACHE STRING "cuBLASLt for the projections' GEMM: AUTO (when found), ON or OFF")
set_property(CACHE ATTNZOO_CUBLASLT PROPERTY STRINGS AUTO ON OFF)
set(ATTNZOO_WITH_CUBLASLT OFF)
if(NOT ATTNZOO_WITH_CUDA)
  set(_cublaslt_why "no CUDA build")
elseif(ATTNZOO_CUBLASLT STREQUAL "OFF")
  set(_cublaslt_why "ATTNZOO_CUBLASLT=OFF")
else()
  find_file(ATTNZOO_CUBLASLT_HEADER cublasLt.h PATHS ${CUDAToolkit_INCLUDE_DIRS} NO_DEFAULT_PATH)
  if(NOT ATTNZOO_CUBLASLT_HEADER)
    set(_cublaslt_why "no cublasLt.h in ${CUDAToolkit_INCLUDE_DIRS}")
  elseif(NOT TARGET CUDA::cublasLt)
    set(_cublaslt_why "cublasLt.h but no libcublasLt.so in ${CUDAToolkit_LIBRARY_DIR}")
  else()
    set(ATTNZOO_WITH_CUBLASLT ON)
    set(_cublaslt_why "${ATTNZOO_CUBLASLT_HEADER}")
  endif()
  if(ATTNZOO_CUBLASLT STREQUAL "ON" AND NOT ATTNZOO_WITH_CUBLASLT)
    message(FATAL_ERROR "ATTNZOO_CUBLASLT=ON but there is ${_cublaslt_why}")
  endif()
endif()
if(ATTNZOO_WITH_CUBLASLT)
  message(STATUS "attnzoo: cuBLASLt ON (${_cublaslt_why}): the projections' GEMM uses it where it can")
else()
  message(STATUS "attnzoo: cuBLASLt OFF (${_cublaslt_why}): the projections' GEMM is our kernel alone")
endif()
message(STATUS "attnzoo: CUDA ${ATTNZOO_WITH_CUDA} (${CMAKE_CUDA_COMPILER} ${CMAKE_CUDA_COMPILER_VERSION}; "
               "architectures ${CMAKE_CUDA_ARCHITECTURES})")
