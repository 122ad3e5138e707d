// The simd kernel's paths and what each path's body file provides (private to src/kernels).
// A path is one ISA: portable (body_portable.cpp), avx2 (AVX2+FMA+F16C, body_avx2.cpp), avx512
// (F+BW+VL, body_avx512.cpp), avx512bf16 (avx512 plus vcvtneps2bf16 for bf16 storage,
// body_avx512bf16.cpp). Each body file fills one Target: the table functions and, per storage
// type, the head loops; kernel.cpp picks the Target of the call's path and never touches an
// intrinsic. All paths give the same bits (SimdDispatch tests).
#pragma once

#include "convert.hpp"
#include "isa.hpp"

#include <cstdint>
#include <type_traits>

namespace ropecheck::kernels::simd {

enum class Path : int { portable = 0, avx2 = 1, avx512 = 2, avx512bf16 = 3 };

// cpu.cpp. current_path() re-reads ROPECHECK_SIMD on every call (cheap next to a kernel call), so a
// test can switch paths with setenv; a request above the CPU's best path is clamped down and an
// unrecognized value means the best path.
const char* path_name(Path p);
Path best_path();
Path current_path();

// ---- the functions of one path -----------------------------------------------------------------
// Tables: the half-style layouts read the pair table C[i], S[i] (i < n_pairs); interleaved heads
// read C2[j] = c_{j/2} and S2[j] = (j odd ? s : -s)_{j/2} (j < rotary_dim), so one vector multiply
// covers both slots of every pair. Half-style heads rotate pairs (i, i + off), i < rd/2: off = rd/2
// for half/mrope/imrope and head_dim/2 for proportional; interleaved heads ignore off.

// sin/cos of the angles m * theta_i into sb/cb, i < np: simd_sincos (trig.hpp) on every lane.
using SincosRowsFn = void (*)(const double* theta, std::int64_t np, double m, double* cb,
                              double* sb);
// The step composition of simd_step_sincos (trig.hpp): cb + i sb = (bc + i bs)(jc + i js), i < np.
using ComposeFn = void (*)(std::int64_t np, const double* bc, const double* bs, const double* jc,
                           const double* js, double* cb, double* sb);
// Table entries from sin/cos: one rounding of the f64 product scale*cos (scale*sin) into A; `half`
// selects the pair table (C[i], S[i]) over the interleaved one (C2, S2).
template <class A>
using FillFn = void (*)(std::int64_t np, double scale, bool half, const double* cb,
                        const double* sb, A* C, A* S);
// One head: rotary dims [0, rd) of x into y.
template <class T>
using HeadFn = void (*)(const T* x, T* y, std::int64_t rd, std::int64_t off, const arith_t<T>* C,
                        const arith_t<T>* S);
// All heads of one token (heads-inl.hpp). prefetch_bytes > 0: prefetch each head's input
// kPrefetchAhead bytes ahead.
template <class T>
using HeadsFn = void (*)(const T* x, T* y, std::int64_t n_heads, std::int64_t head_stride,
                         std::int64_t rd, std::int64_t off, const arith_t<T>* C,
                         const arith_t<T>* S, std::int64_t prefetch_bytes);
inline constexpr std::int64_t kPrefetchAhead = 4096;

template <class T>
struct HeadLoops {
  HeadsFn<T> half = nullptr, interleaved = nullptr;
  // Non-temporal full-vector stores (avx512 paths; elsewhere the same as the above).
  HeadsFn<T> half_stream = nullptr, interleaved_stream = nullptr;
  // The interleaved head reads the pair table (C[i], S[i]) instead of C2/S2.
  bool interleaved_pair_table = false;
};

struct Target {
  SincosRowsFn sincos_rows = nullptr;
  ComposeFn compose = nullptr;
  FillFn<double> fill_f64 = nullptr;
  FillFn<float> fill_f32 = nullptr;
  HeadLoops<double> f64;
  HeadLoops<float> f32;
  HeadLoops<Eigen::half> f16;
  HeadLoops<Eigen::bfloat16> bf16;

  template <class T>
  const HeadLoops<T>& heads() const {
    if constexpr (std::is_same_v<T, double>)
      return f64;
    else if constexpr (std::is_same_v<T, float>)
      return f32;
    else if constexpr (std::is_same_v<T, Eigen::half>)
      return f16;
    else
      return bf16;
  }
  template <class A>
  FillFn<A> fill() const {
    if constexpr (std::is_same_v<A, double>)
      return fill_f64;
    else
      return fill_f32;
  }
};

// The body files' Targets, and the one for a path (cpu.cpp).
const Target& portable_target();
#ifdef ROPECHECK_X86
const Target& avx2_target();
const Target& avx512_target();
const Target& avx512bf16_target();
// simd_info.hpp's self-check of path avx512bf16 (body_avx512bf16.cpp).
std::uint64_t bf16_native_mismatches(std::uint32_t first, std::uint32_t last);
#endif
const Target& target_of(Path p);

}  // namespace ropecheck::kernels::simd
