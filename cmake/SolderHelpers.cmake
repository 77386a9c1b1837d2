# Build settings and helper functions for solder's own targets (tests, benchmarks, examples).
# Nothing here is attached to the exported `solder` INTERFACE target: consumers never inherit
# our warning, optimization or sanitizer flags.
include_guard(GLOBAL)

# --- solder_build_flags: warnings, -march=native, sanitizers ------------------------------------
add_library(solder_build_flags INTERFACE)
target_compile_options(solder_build_flags INTERFACE
  -Wall -Wextra -Wpedantic
  $<$<BOOL:${SOLDER_WERROR}>:-Werror>
  $<$<BOOL:${SOLDER_NATIVE}>:-march=native>)
if(SOLDER_SANITIZE)
  set(_solder_san_flags -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  # GCC's -Wmaybe-uninitialized misfires under ASan instrumentation (e.g. inside libstdc++'s
  # std::regex used by Catch2); the non-sanitized build still enforces it.
  target_compile_options(solder_build_flags INTERFACE ${_solder_san_flags}
    $<$<CXX_COMPILER_ID:GNU>:-Wno-maybe-uninitialized>)
  target_link_options(solder_build_flags INTERFACE ${_solder_san_flags})
endif()
if(SOLDER_TSAN)
  target_compile_options(solder_build_flags INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(solder_build_flags INTERFACE -fsanitize=thread)
endif()
target_link_libraries(solder_build_flags INTERFACE solder::solder)

# Tests and examples: -O2 (kept out of Debug builds so a debugger still sees variables).
# It comes after CMAKE_CXX_FLAGS_<CONFIG> on the command line, so it wins over Release's -O3.
add_library(solder_flags_default INTERFACE)
target_link_libraries(solder_flags_default INTERFACE solder_build_flags)
target_compile_options(solder_flags_default INTERFACE $<$<NOT:$<CONFIG:Debug>>:-O2>)

# Benchmarks: -O3 in every configuration.
add_library(solder_flags_bench INTERFACE)
target_link_libraries(solder_flags_bench INTERFACE solder_build_flags)
target_compile_options(solder_flags_bench INTERFACE -O3)

# Refuse a source whose stem collides with an existing target (e.g. an example named `solder`).
function(_solder_check_target_name name file)
  if(TARGET ${name})
    message(FATAL_ERROR "solder: ${file} would create target '${name}', which already exists; rename the file")
  endif()
endfunction()

# solder_glob(<out-var> <glob>...): sorted CONFIGURE_DEPENDS glob, so new files are picked up
# by the next build without re-running cmake by hand. An empty result is fine.
function(solder_glob out)
  file(GLOB _files LIST_DIRECTORIES false CONFIGURE_DEPENDS ${ARGN})
  list(SORT _files)
  set(${out} ${_files} PARENT_SCOPE)
endfunction()
