// Target regions for the per-ISA body files: every function defined between RC_ISA_BEGIN(isa) and
// RC_ISA_END is compiled for that ISA (GCC: #pragma GCC target; clang: #pragma clang attribute),
// and only those. No per-file -m flags: a TU built with -mavx512f would compile every inline
// function it pulls from shared headers (std::, Eigen, ours) for AVX-512 too, and the linker may
// keep that copy for the portable path, which then faults on CPUs without AVX-512. Hence the rules
// for a body file:
// * include every ordinary header before RC_ISA_BEGIN, so nothing from them is compiled for the ISA
//   (implicit template instantiations keep the target of the template's own definition);
// * inside the region, define everything in an anonymous namespace (internal linkage), including
//   the *-inl.hpp files included there: no copy built for one ISA can stand in for another's;
// * export only plain functions taking pointers and scalars (no vector types cross a TU boundary).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#define ROPECHECK_X86 1
#include <immintrin.h>
#endif

#define RC_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define RC_ISA_BEGIN(isa) \
  RC_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define RC_ISA_END RC_PRAGMA(clang attribute pop)
#else
#define RC_ISA_BEGIN(isa) RC_PRAGMA(GCC push_options) RC_PRAGMA(GCC target(isa))
#define RC_ISA_END RC_PRAGMA(GCC pop_options)
#endif

// The ISA of each path (run-time detection in cpu.cpp checks the same features).
#define RC_ISA_AVX2 "avx2,fma,f16c"
#define RC_ISA_AVX512 "avx512f,avx512bw,avx512vl,avx2,fma,f16c"
#define RC_ISA_AVX512BF16 "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c"
