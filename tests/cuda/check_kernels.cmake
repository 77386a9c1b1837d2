# What nvcc builds for the element-wise chain example (examples/cuda_chain.cu), for one
# architecture: compiles its device code with `ptxas -v` and reads the report.
#   - the fused chain (the one kernel whose evaluator holds both tanh and sigmoid) is exactly one
#     entry function: one kernel per fused expression type;
#   - no solder kernel (element-wise, row/line, fill) uses local memory: no register spills and
#     no stack frame (an evaluator kept in local memory).
# Prints one line per solder kernel: registers, stack frame, spills.
# Usage: cmake -DNVCC=<nvcc> -DARCH=<80> -DINCLUDE=<include dir> -DSOURCE=<.cu> -DWORK=<dir>
#              -P check_kernels.cmake
foreach(v NVCC ARCH INCLUDE SOURCE WORK)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_kernels.cmake: -D${v}=... is required")
  endif()
endforeach()

execute_process(
  COMMAND "${NVCC}" -std=c++20 --expt-relaxed-constexpr -fmad=false -O2 "-I${INCLUDE}"
          -Xcompiler=-fopenmp -cubin -gencode "arch=compute_${ARCH},code=sm_${ARCH}" -Xptxas=-v
          "${SOURCE}" -o "${WORK}/cuda_chain.sm_${ARCH}.cubin"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nvcc failed (${rc}):\n${out}${err}")
endif()

string(REPLACE ";" "," report "${out}${err}")
string(REPLACE "\n" ";" lines "${report}")
set(entry "")
set(entries 0)
set(solder 0)
set(chain 0)
set(bad "")
foreach(line IN LISTS lines)
  if(line MATCHES "Compiling entry function '([^']+)' for 'sm_${ARCH}'")
    set(entry "${CMAKE_MATCH_1}")
    math(EXPR entries "${entries} + 1")
    set(kind "")
    if(entry MATCHES "6solder6detail4cuda([0-9]+)([a-z_]+)I")
      set(kind "${CMAKE_MATCH_2}")
      math(EXPR solder "${solder} + 1")
      if(kind STREQUAL "elementwise_kernel" AND entry MATCHES "4Tanh" AND entry MATCHES "7Sigmoid")
        math(EXPR chain "${chain} + 1")
        set(kind "elementwise_kernel (the fused chain)")
      endif()
    endif()
  elseif(line MATCHES "([0-9]+) bytes stack frame, ([0-9]+) bytes spill stores, ([0-9]+) bytes spill loads")
    set(stack "${CMAKE_MATCH_1}")
    set(spill_st "${CMAKE_MATCH_2}")
    set(spill_ld "${CMAKE_MATCH_3}")
  elseif(line MATCHES "Used ([0-9]+) registers" AND NOT kind STREQUAL "")
    message(STATUS "sm_${ARCH} ${kind}: ${CMAKE_MATCH_1} registers, ${stack} bytes stack, "
                   "${spill_st}/${spill_ld} bytes spilled (stores/loads)")
    if(NOT spill_st EQUAL 0 OR NOT spill_ld EQUAL 0 OR NOT stack EQUAL 0)
      list(APPEND bad "${kind} ${entry}")
    endif()
  endif()
endforeach()

message(STATUS "sm_${ARCH}: ${entries} entry functions, ${solder} of them solder kernels")
if(solder EQUAL 0)
  message(FATAL_ERROR "no solder kernel in ptxas's report: the report's format changed?\n${report}")
endif()
if(NOT chain EQUAL 1)
  message(FATAL_ERROR "the fused chain compiled to ${chain} kernels, expected exactly 1")
endif()
if(bad)
  message(FATAL_ERROR "kernels that use local memory (spills or a stack frame):\n${bad}")
endif()
