# The CUDA variants of solder's own targets (tests/cuda/, examples/*.cu, bench/*.cu).
# nvcc is looked for with check_language(CUDA); without it the CPU build goes on and says that
# CUDA was skipped. Every CUDA target is built warning-free for sm_80 and sm_90 (A100, H100) by
# default: machine code for both from one PTX, for compute_80, which the programs also carry for
# newer GPUs. nvcc's device front end (cicc) then runs once per file instead of once per
# architecture (test_cuda_tensor.cu: 74 s to 57 s), and the sm_90 code is the same, instruction
# for instruction, as from compute_90 (all 277 kernels of test_cuda_reduce.cu, nvcc 13.0):
# solder uses nothing of sm_90 that compute_80 lacks. A CMAKE_CUDA_ARCHITECTURES given on the
# command line is CMake's usual list instead (scripts/gpu-check.sh --bundle: 90-real).
#
# Sets SOLDER_HAVE_CUDA; SOLDER_CUDA_SASS, the architectures machine code is built for (the
# ptxas checks read each); the INTERFACE target solder_flags_cuda for the project's .cu
# files (with CUDA's runtime, cuBLAS and cuBLASLt: backend/cuda/contract.hpp); and, where cuDNN
# is found (beside the CUDA Toolkit, or in the system's paths), SOLDER_HAVE_CUDNN and the
# INTERFACE target solder_cudnn, for the programs that convolve sd::Cuda tensors
# (backend/cuda/conv.hpp). Without cuDNN everything else builds.
include_guard(GLOBAL)
include(CheckLanguage)

set(SOLDER_HAVE_CUDA OFF)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  message(STATUS "solder: CUDA skipped: nvcc not found (put it on PATH or set CMAKE_CUDA_COMPILER)")
  return()
endif()
set(_solder_cuda_gencode "")
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES OFF)  # CMake adds no flags: solder_flags_cuda has them
  set(SOLDER_CUDA_SASS 80 90)
  list(TRANSFORM SOLDER_CUDA_SASS PREPEND sm_ OUTPUT_VARIABLE _sms)
  list(JOIN _sms "," _sms)
  set(_solder_cuda_gencode "--generate-code=arch=compute_80,code=[compute_80,${_sms}]")
endif()
if(NOT CMAKE_CUDA_HOST_COMPILER)
  set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}")
endif()
enable_language(CUDA)
# The host pass's level comes from solder_flags_cuda below (nvcc's -O is the host compiler's
# alone); a second -O on nvcc's line would draw a warning.
foreach(config RELEASE RELWITHDEBINFO MINSIZEREL)
  string(REGEX REPLACE "(^| )-O[0-3s]( |$)" " " CMAKE_CUDA_FLAGS_${config} "${CMAKE_CUDA_FLAGS_${config}}")
endforeach()
if(NOT _solder_cuda_gencode)  # CMake's list ("native" known once the language is enabled)
  set(_archs ${CMAKE_CUDA_ARCHITECTURES})
  if(_archs STREQUAL "native")
    set(_archs ${CMAKE_CUDA_ARCHITECTURES_NATIVE})
  endif()
  set(SOLDER_CUDA_SASS "")
  foreach(arch IN LISTS _archs)
    string(REGEX MATCH "^[0-9]+" sm "${arch}")
    if(sm AND NOT arch MATCHES "-virtual$")
      list(APPEND SOLDER_CUDA_SASS ${sm})
    endif()
  endforeach()
endif()
find_package(CUDAToolkit REQUIRED)
set(SOLDER_HAVE_CUDA ON)
if(PROJECT_IS_TOP_LEVEL AND SOLDER_CCACHE_PROGRAM AND NOT CMAKE_CUDA_COMPILER_LAUNCHER)
  set(CMAKE_CUDA_COMPILER_LAUNCHER "${SOLDER_CCACHE_PROGRAM}")
endif()
string(REPLACE ";" ", sm_" _solder_sass "sm_${SOLDER_CUDA_SASS}")
message(STATUS "solder: CUDA ${CMAKE_CUDA_COMPILER_VERSION} for ${_solder_sass}")

# Warnings of nvcc's front end and of the host compiler are errors, as for the C++ targets.
add_library(solder_flags_cuda INTERFACE)
# -std=c++20 by hand: CMake 3.25 does not know nvcc 13's CUDA20 dialect flag.
target_compile_options(solder_flags_cuda INTERFACE
  $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 -Xcompiler=-Wall,-Wextra ${_solder_cuda_gencode}>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${SOLDER_WERROR}>>:-Werror=all-warnings>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${SOLDER_NATIVE}>>:-Xcompiler=-march=native>
  # The host pass at -O2, as the C++ targets, or at the target's SOLDER_CUDA_HOST_OPT (not
  # -Xcompiler=-O2, which comes before nvcc's own -O on g++'s line, and loses). The device code
  # is optimized in full whatever the level.
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<NOT:$<CONFIG:Debug>>>:-O$<IF:$<STREQUAL:$<TARGET_PROPERTY:SOLDER_CUDA_HOST_OPT>,>,2,$<TARGET_PROPERTY:SOLDER_CUDA_HOST_OPT>>>)
target_link_libraries(solder_flags_cuda INTERFACE solder::solder CUDA::cudart CUDA::cublas CUDA::cublasLt)

# cuDNN: linked only by the targets that need it (conv2d on sd::Cuda tensors).
set(SOLDER_HAVE_CUDNN OFF)
find_path(SOLDER_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
find_library(SOLDER_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
if(SOLDER_CUDNN_INCLUDE_DIR AND SOLDER_CUDNN_LIBRARY)
  set(SOLDER_HAVE_CUDNN ON)
  add_library(solder_cudnn INTERFACE)
  target_include_directories(solder_cudnn INTERFACE "${SOLDER_CUDNN_INCLUDE_DIR}")
  target_link_libraries(solder_cudnn INTERFACE "${SOLDER_CUDNN_LIBRARY}")
  message(STATUS "solder: cuDNN: ${SOLDER_CUDNN_LIBRARY}")
else()
  message(STATUS "solder: cuDNN not found: conv2d on sd::Cuda tensors, and its test, are skipped")
endif()

# solder_add_cuda_executable(<name> <source> [HOST_OPT <level>] [KERNEL_REPORT]): one .cu file,
# the project's CUDA flags.
#   HOST_OPT: the host pass's optimization level, for programs whose host code need not be fast
#     (the GPU tests: their host side computes references; at -O0 each builds in about a fifth
#     less time, where CI builds them and cannot run them).
#   KERNEL_REPORT: ptxas's report on every kernel it builds, for each architecture (`ptxas -v`:
#     registers, stack frame, spills), goes to <the target's build dir>/<name>.kernels.txt when
#     the source is compiled, and not to the build's output; tests read it
#     (tests/cuda/check_kernels.cmake), so that what they check is what was built.
set(_solder_kernel_report "${CMAKE_CURRENT_LIST_DIR}/kernel-report.sh")
function(solder_add_cuda_executable name src)
  cmake_parse_arguments(arg "KERNEL_REPORT" "HOST_OPT" "" ${ARGN})
  _solder_check_target_name(${name} "${src}")
  add_executable(${name} "${src}")
  target_link_libraries(${name} PRIVATE solder_flags_cuda)
  if(DEFINED arg_HOST_OPT)
    set_target_properties(${name} PROPERTIES SOLDER_CUDA_HOST_OPT "${arg_HOST_OPT}")
  endif()
  if(arg_KERNEL_REPORT)
    target_compile_options(${name} PRIVATE -Xptxas=-v)
    set(launcher bash "${_solder_kernel_report}" "${CMAKE_CURRENT_BINARY_DIR}/${name}.kernels.txt")
    list(APPEND launcher ${CMAKE_CUDA_COMPILER_LAUNCHER})  # ccache, where there is one
    set_target_properties(${name} PROPERTIES CUDA_COMPILER_LAUNCHER "${launcher}")
  endif()
endfunction()
