# cmake -P driver of the consume.* ctest entries (registered by tests/consume/CMakeLists.txt).
# Builds and RUNS tests/consume/main.cpp the way a user of solder would:
#   MODE=subdirectory  a tiny CMake project doing add_subdirectory(<solder source tree>)
#   MODE=installed     configure solder alone, `cmake --install` it into a scratch prefix, then a
#                      tiny CMake project doing find_package(solder CONFIG REQUIRED)
#   MODE=compiler      the plain compiler: <cxx> -std=c++20 -fopenmp -I <solder>/include main.cpp
# Inputs (-D...): MODE SOLDER_SOURCE_DIR WORK_DIR CXX MAIN, optional LAUNCHER GENERATOR
#                 MAKE_PROGRAM BOOST_INCLUDE ('|'-separated).
# WORK_DIR is wiped first, so every run starts from nothing (ccache keeps it fast).
cmake_minimum_required(VERSION 3.21)

foreach(var MODE SOLDER_SOURCE_DIR WORK_DIR CXX MAIN)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_consume.cmake: -D${var}=... is required")
  endif()
endforeach()
set(here "${CMAKE_CURRENT_LIST_DIR}")

# run(<step name> <command>...): run, and on failure show everything and stop.
function(run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    list(JOIN ARGN " " cmd)
    message(NOTICE "$ ${cmd}\n${out}")
    message(FATAL_ERROR "consume.${MODE}: step '${step}' failed (${rc}); command and output above")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
  message(STATUS "consume.${MODE}: ${step}: ok")
endfunction()

# Arguments every CMake configure here gets: the same compiler, launcher and generator.
set(cmake_args "-DCMAKE_CXX_COMPILER=${CXX}" -DCMAKE_BUILD_TYPE=Release)
if(LAUNCHER)
  list(APPEND cmake_args "-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}")
endif()
if(GENERATOR)
  list(APPEND cmake_args -G "${GENERATOR}")
  if(MAKE_PROGRAM AND GENERATOR MATCHES "Ninja|Makefiles")
    list(APPEND cmake_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
  endif()
endif()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

if(MODE STREQUAL "subdirectory")
  run("configure" "${CMAKE_COMMAND}" -S "${here}/subdirectory" -B "${WORK_DIR}/build" ${cmake_args}
      "-DSOLDER_SOURCE_DIR=${SOLDER_SOURCE_DIR}" "-DSOLDER_CONSUME_MAIN=${MAIN}")
  run("build" "${CMAKE_COMMAND}" --build "${WORK_DIR}/build" --config Release)
  set(exe "${WORK_DIR}/build/consume")

elseif(MODE STREQUAL "installed")
  set(prefix "${WORK_DIR}/prefix")
  run("configure solder" "${CMAKE_COMMAND}" -S "${SOLDER_SOURCE_DIR}" -B "${WORK_DIR}/solder-build"
      ${cmake_args} -DSOLDER_BUILD_TESTS=OFF -DSOLDER_BUILD_BENCH=OFF -DSOLDER_BUILD_EXAMPLES=OFF
      "-DCMAKE_INSTALL_PREFIX=${prefix}")
  run("install solder" "${CMAKE_COMMAND}" --install "${WORK_DIR}/solder-build" --config Release
      --prefix "${prefix}")
  if(NOT EXISTS "${prefix}/include/solder/solder.hpp")
    message(FATAL_ERROR "consume.installed: ${prefix}/include/solder/solder.hpp was not installed")
  endif()
  # Only the scratch prefix may provide solder: no package registries, no system copies.
  run("configure consumer" "${CMAKE_COMMAND}" -S "${here}/installed" -B "${WORK_DIR}/build"
      ${cmake_args} "-DCMAKE_PREFIX_PATH=${prefix}" "-DSOLDER_CONSUME_MAIN=${MAIN}"
      -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
  file(STRINGS "${WORK_DIR}/build/CMakeCache.txt" solder_dir_line REGEX "^solder_DIR:")
  string(REGEX REPLACE "^solder_DIR:[A-Z]+=" "" solder_dir "${solder_dir_line}")
  file(REAL_PATH "${prefix}" real_prefix)
  file(REAL_PATH "${solder_dir}" real_solder_dir)
  string(FIND "${real_solder_dir}" "${real_prefix}/" pos)
  if(NOT pos EQUAL 0)
    message(FATAL_ERROR "consume.installed: find_package found solder in '${solder_dir}', not under '${prefix}'")
  endif()
  run("build" "${CMAKE_COMMAND}" --build "${WORK_DIR}/build" --config Release)
  set(exe "${WORK_DIR}/build/consume")

elseif(MODE STREQUAL "compiler")
  set(cmd "${CXX}" -std=c++20 -fopenmp -I "${SOLDER_SOURCE_DIR}/include")
  if(LAUNCHER)
    set(cmd "${LAUNCHER}" ${cmd})
  endif()
  # Boost (Hana) headers, unless they sit in a directory the compiler searches anyway.
  string(REPLACE "|" ";" boost_dirs "${BOOST_INCLUDE}")
  foreach(dir IN LISTS boost_dirs)
    if(dir AND NOT dir MATCHES "^/usr(/local)?/include/?$")
      list(APPEND cmd -I "${dir}")
    endif()
  endforeach()
  run("compile" ${cmd} "${MAIN}" -o "${WORK_DIR}/consume")
  set(exe "${WORK_DIR}/consume")

else()
  message(FATAL_ERROR "run_consume.cmake: MODE must be subdirectory, installed or compiler, not '${MODE}'")
endif()

run("run" "${exe}")
if(NOT run_output MATCHES "consume ok")
  message(NOTICE "${run_output}")
  message(FATAL_ERROR "consume.${MODE}: the program ran but did not print 'consume ok' (its output is above)")
endif()
message(STATUS "consume.${MODE}: ${run_output}")
