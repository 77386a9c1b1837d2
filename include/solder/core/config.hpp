// Portability macros shared by every layer: one functor source runs on the host and on CUDA.
#pragma once

// solder's functors are constexpr and run on the device too: nvcc must be told that this is
// allowed, or each use is an error deep inside an expression ("calling a constexpr __host__
// function from a __device__ function"). The solder::solder CMake target adds these flags.
#if defined(__CUDACC__) && !defined(__CUDACC_RELAXED_CONSTEXPR__)
#error "solder: compile .cu files that include solder with nvcc --expt-relaxed-constexpr (and -fmad=false -Xcompiler=-fopenmp,-fno-math-errno,-ffp-contract=off, as the solder::solder CMake target adds)"
#endif

#if defined(__CUDACC__)
#define SOLDER_HD __host__ __device__
// Before a SOLDER_HD template (before its `template <...>`) whose instantiations for host-only
// types call host-only code, e.g. an element-wise evaluator over the host's reductions: nvcc
// then checks the calls only where they are compiled for the device.
#define SOLDER_HD_ANY_CALLEE _Pragma("nv_exec_check_disable")
#else
#define SOLDER_HD
#define SOLDER_HD_ANY_CALLEE
#endif

// Device code unrolls loops over axes, so array indices become constants and evaluators stay
// in registers (an array indexed at run time lives in local memory).
// SOLDER_NO_UNROLL keeps a loop rolled: an unrolled loop over a run-time count costs its trip
// count, a division, wherever the compiler hoists it (even where the loop is not taken).
#if defined(__CUDA_ARCH__)
#define SOLDER_UNROLL _Pragma("unroll")
#define SOLDER_NO_UNROLL _Pragma("unroll 1")
#else
#define SOLDER_UNROLL
#define SOLDER_NO_UNROLL
#endif

// Evaluators are inlined by force where the code is optimized (host -O1 and above, and device
// code, which is always optimized), so that an expression's loop is one body. An unoptimized
// build (a debug or sanitizer build) calls them instead: inlined there, each expression's code
// is copied into every loop variant that runs it, a fifth or more of such a build's time, for
// no speed.
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__OPTIMIZE__) || defined(__CUDA_ARCH__))
#define SOLDER_INLINE inline __attribute__((always_inline))
#else
#define SOLDER_INLINE inline
#endif

// `omp simd` asserts the loop has no carried dependence, so the compiler vectorizes
// expression loops without per-pointer alias checks (the executor handles aliasing itself).
#if defined(_OPENMP)
#define SOLDER_SIMD _Pragma("omp simd")
#else
#define SOLDER_SIMD _Pragma("GCC ivdep")
#endif

#define SOLDER_PRAGMA(x) _Pragma(#x)
#if defined(_OPENMP)
#define SOLDER_OMP(x) SOLDER_PRAGMA(omp x)
#else
#define SOLDER_OMP(x)
#endif
