# What nvcc built for a program that runs the element-wise chain (examples/cuda_chain.cu,
# bench/bench_cuda.cu), for one architecture, from ptxas's report written when the program was
# compiled (KERNEL_REPORT in cmake/SolderCuda.cmake):
#   - the fused chain (the one kernel whose evaluator holds both tanh and sigmoid) is exactly one
#     entry function: one kernel per fused expression type;
#   - no solder kernel (element-wise, row/line, fill) uses local memory: no register spills and
#     no stack frame (an evaluator kept in local memory).
# Prints one line per solder kernel: registers, stack frame, spills.
# Usage: cmake -DARCH=<80> -DREPORT=<build>/examples/cuda_chain.kernels.txt [-DCHAIN=OFF]
#        -P check_kernels.cmake
# CHAIN=OFF: a program without the chain (test_cuda_contract): only the local-memory check.
foreach(v ARCH REPORT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_kernels.cmake: -D${v}=... is required")
  endif()
endforeach()
if(NOT EXISTS "${REPORT}")
  message(FATAL_ERROR "no report at ${REPORT}: build its program first")
endif()
file(READ "${REPORT}" report)

string(REPLACE ";" "," report "${report}")
string(REPLACE "\n" ";" lines "${report}")
set(entry "")
set(kind "")
set(entries 0)
set(solder 0)
set(chain 0)
set(bad "")
foreach(line IN LISTS lines)
  if(line MATCHES "Compiling entry function '([^']+)' for 'sm_([0-9]+)'")
    set(entry "${CMAKE_MATCH_1}")
    set(kind "")  # (stays empty for another architecture's entries: the lines that follow are skipped)
    if(NOT CMAKE_MATCH_2 STREQUAL ARCH)
      continue()
    endif()
    math(EXPR entries "${entries} + 1")
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
if(NOT DEFINED CHAIN)
  set(CHAIN ON)
endif()
if(CHAIN AND NOT chain EQUAL 1)
  message(FATAL_ERROR "the fused chain compiled to ${chain} kernels, expected exactly 1")
endif()
if(bad)
  message(FATAL_ERROR "kernels that use local memory (spills or a stack frame):\n${bad}")
endif()
