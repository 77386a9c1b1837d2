# Optional peers that benchmarks (and tests, as references) compare against.
# Provides the INTERFACE target `solder_peers`, which links whatever was found and defines
#   SOLDER_HAVE_EIGEN     Eigen3::Eigen           (<Eigen/Dense>)
#   SOLDER_HAVE_OPENBLAS  OpenBLAS, CBLAS API     (<cblas.h>)
#   SOLDER_HAVE_DNNL      oneDNN                  (<dnnl.hpp>)
# Each can be switched off with -DSOLDER_USE_<EIGEN|OPENBLAS|DNNL>=OFF.
include_guard(GLOBAL)

option(SOLDER_USE_EIGEN    "Use Eigen as a peer in benchmarks/tests when found"    ON)
option(SOLDER_USE_OPENBLAS "Use OpenBLAS as a peer in benchmarks/tests when found" ON)
option(SOLDER_USE_DNNL     "Use oneDNN as a peer in benchmarks/tests when found"   ON)

add_library(solder_peers INTERFACE)
set(_solder_peers_found "")

# --- Eigen ----------------------------------------------------------------------------------
if(SOLDER_USE_EIGEN)
  find_package(Eigen3 3.3 QUIET CONFIG)
  if(TARGET Eigen3::Eigen)
    target_link_libraries(solder_peers INTERFACE Eigen3::Eigen)
    target_compile_definitions(solder_peers INTERFACE SOLDER_HAVE_EIGEN=1)
    list(APPEND _solder_peers_found "Eigen ${Eigen3_VERSION}")
  endif()
endif()

# --- OpenBLAS (pkg-config `openblas` first, then a plain library + cblas.h search) ------------
if(SOLDER_USE_OPENBLAS)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(SOLDER_OPENBLAS QUIET IMPORTED_TARGET openblas)
  endif()
  if(TARGET PkgConfig::SOLDER_OPENBLAS)
    target_link_libraries(solder_peers INTERFACE PkgConfig::SOLDER_OPENBLAS)
    target_compile_definitions(solder_peers INTERFACE SOLDER_HAVE_OPENBLAS=1)
    list(APPEND _solder_peers_found "OpenBLAS ${SOLDER_OPENBLAS_VERSION} (pkg-config)")
  else()
    find_library(SOLDER_OPENBLAS_LIBRARY NAMES openblas)
    find_path(SOLDER_OPENBLAS_INCLUDE_DIR NAMES cblas.h
              PATH_SUFFIXES openblas openblas-pthread x86_64-linux-gnu/openblas-pthread)
    if(SOLDER_OPENBLAS_LIBRARY AND SOLDER_OPENBLAS_INCLUDE_DIR)
      target_link_libraries(solder_peers INTERFACE "${SOLDER_OPENBLAS_LIBRARY}")
      target_include_directories(solder_peers SYSTEM INTERFACE "${SOLDER_OPENBLAS_INCLUDE_DIR}")
      target_compile_definitions(solder_peers INTERFACE SOLDER_HAVE_OPENBLAS=1)
      list(APPEND _solder_peers_found "OpenBLAS (${SOLDER_OPENBLAS_LIBRARY})")
    endif()
  endif()
endif()

# --- oneDNN (plain library + header: dnnl's own CMake config drags in OpenCL) ------------------
if(SOLDER_USE_DNNL)
  find_library(SOLDER_DNNL_LIBRARY NAMES dnnl)
  find_path(SOLDER_DNNL_INCLUDE_DIR NAMES dnnl.hpp)
  if(SOLDER_DNNL_LIBRARY AND SOLDER_DNNL_INCLUDE_DIR)
    target_link_libraries(solder_peers INTERFACE "${SOLDER_DNNL_LIBRARY}")
    target_include_directories(solder_peers SYSTEM INTERFACE "${SOLDER_DNNL_INCLUDE_DIR}")
    target_compile_definitions(solder_peers INTERFACE SOLDER_HAVE_DNNL=1)
    list(APPEND _solder_peers_found "oneDNN (${SOLDER_DNNL_LIBRARY})")
  endif()
endif()

if(_solder_peers_found)
  list(JOIN _solder_peers_found ", " _solder_peers_msg)
  message(STATUS "solder: peers found: ${_solder_peers_msg}")
else()
  message(STATUS "solder: no benchmark peers found (Eigen, OpenBLAS, oneDNN)")
endif()
