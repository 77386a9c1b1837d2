# cmake -P script behind the compile_fail.* ctest entries (registered by
# tests/compile_fail/CMakeLists.txt).
#
#   cmake -DCXX=<compiler> -DSOURCE=<file.cpp> -DMODE=<fail|control> -DFLAGS=<a|b|c> -P SolderCompileFail.cmake
#
# MODE=fail     passes only if compiling SOURCE FAILS with exactly one `error:` line (misuse
#               gives one message, not a page), and that line matches the regex given on
#               SOURCE's first line: `// expect: <regex>`. nvcc's wording of a failed
#               static_assert, `static assertion failed with "<text>"`, is read as g++'s,
#               `static assertion failed: <text>`, so one expectation serves both compilers.
#               (CMake regex syntax: . * + ? [] [^] ^ $ () | — no \d, no {n}, no lazy
#               quantifiers. It is searched for anywhere in the line, which includes the
#               `file:line:col: error: ` prefix. Diagnostics are produced under LC_ALL=C, so
#               quotes are ASCII: 'x'.)
# MODE=control  passes only if SOURCE compiles with -DSOLDER_COMPILE_FAIL_CONTROL, so a fail
#               test cannot pass because of an unrelated error.
# FLAGS is a '|'-separated list of compiler arguments (a ';' would not survive add_test).
cmake_minimum_required(VERSION 3.21)

foreach(var CXX SOURCE MODE)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "SolderCompileFail.cmake: -D${var}=... is required")
  endif()
endforeach()
string(REPLACE "|" ";" flags "${FLAGS}")
get_filename_component(stem "${SOURCE}" NAME_WE)
set(ENV{LC_ALL} C)
set(ENV{LANG} C)

# fail(<one-line reason>): print the caller's `details` verbatim (if any), then fail the test.
function(fail reason)
  if(NOT "${details}" STREQUAL "")
    message(NOTICE "${details}")
  endif()
  message(FATAL_ERROR "${reason}")
endfunction()
set(details "")

if(MODE STREQUAL "control")
  execute_process(
    COMMAND "${CXX}" ${flags} -DSOLDER_COMPILE_FAIL_CONTROL "${SOURCE}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    set(details "${out}")
    fail("compile_fail.${stem}.control: the control variant (-DSOLDER_COMPILE_FAIL_CONTROL) must compile, but the compiler failed (${rc}); output above")
  endif()
  message(STATUS "compile_fail.${stem}.control: compiles, as it must")
  return()
elseif(NOT MODE STREQUAL "fail")
  fail("SolderCompileFail.cmake: MODE must be 'fail' or 'control', not '${MODE}'")
endif()

# --- MODE=fail ----------------------------------------------------------------------------------
file(READ "${SOURCE}" content LIMIT 4096)
string(REGEX MATCH "^[^\r\n]*" first_line "${content}")
if(NOT first_line MATCHES "^//[ \t]*expect:[ \t]*(.*[^ \t])[ \t]*$")
  fail("compile_fail.${stem}: the first line of ${SOURCE} must be `// expect: <regex>`; it is: ${first_line}")
endif()
set(expect "${CMAKE_MATCH_1}")

execute_process(
  COMMAND "${CXX}" ${flags} "${SOURCE}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)

if(rc EQUAL 0)
  set(details "${out}")
  fail("compile_fail.${stem}: ${SOURCE} COMPILED, but it must fail with an error matching: ${expect}")
endif()

# The lines holding a compiler error: `file:line:col: error: ...` (g++), `file(line): error: ...`
# (nvcc), `file: fatal error: ...`, `g++: error: ...`.
string(REPLACE ";" "," listable "${out}")  # one list item per line found
string(REGEX MATCHALL "[^\n]*: (fatal )?error: [^\n]*" errors "${listable}")
list(LENGTH errors error_count)
if(error_count EQUAL 0)
  set(details "${out}")
  fail("compile_fail.${stem}: the compiler failed (${rc}) but printed no `error:` line (output above); expected: ${expect}")
endif()
list(GET errors 0 first_error)
string(REGEX REPLACE "static assertion failed with \"([^\n]*)\"$" "static assertion failed: \\1"
       first_error "${first_error}")
if(error_count GREATER 1)
  set(details "${out}")
  fail("compile_fail.${stem}: ${error_count} errors (output above), where the misuse must give one")
endif()

if(first_error MATCHES "${expect}")
  message(STATUS "compile_fail.${stem}: fails as expected: ${first_error}")
else()
  set(details "${out}\n----\nexpected (regex): ${expect}\nfirst error:      ${first_error}\n----")
  fail("compile_fail.${stem}: the first error does not match the expectation (compiler output above)")
endif()
