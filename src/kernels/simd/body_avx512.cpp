// Path avx512 (AVX-512 F + BW + VL): 8 f64 / 16 f32 lanes, full vectors unmasked and one masked
// tail per head (no scalar remainder), a vectorized table fill, and the non-temporal-store heads
// that large out-of-place calls use (kernel.cpp).
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 reports its own _mm512_undefined_* placeholders inside the masked intrinsics as
// "may be used uninitialized" (a known false positive of avx512fintrin.h).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "target.hpp"
#include "trig.hpp"

#include <cstdint>

#ifdef ROPECHECK_X86
RC_ISA_BEGIN(RC_ISA_AVX512)
#include "avx512-inl.hpp"
#include "heads-inl.hpp"
#include "sincos-inl.hpp"

namespace ropecheck::kernels::simd {
namespace {

// sincos-inl.hpp's operations on 8 doubles.
struct Avx512Ops {
  using V = __m512d;
  using M = __mmask8;
  static constexpr int kLanes = 8;
  static V set1(double c) { return _mm512_set1_pd(c); }
  static V add(V a, V b) { return _mm512_add_pd(a, b); }
  static V sub(V a, V b) { return _mm512_sub_pd(a, b); }
  static V mul(V a, V b) { return _mm512_mul_pd(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_pd(a, b, c); }
  static V neg(V a) { return simd::neg(a); }
  static M kbit(V t, int bit) {
    return _mm512_test_epi64_mask(_mm512_castpd_si512(t),
                                  _mm512_set1_epi64(std::int64_t{1} << bit));
  }
  static V select(M m, V a, V b) { return _mm512_mask_blend_pd(m, b, a); }
  static V load(const double* p) { return _mm512_loadu_pd(p); }
  static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
  static unsigned beyond(V x) {
    return _mm512_cmp_pd_mask(_mm512_abs_pd(x), _mm512_set1_pd(kSimdTrigLimit), _CMP_NLE_UQ);
  }
};

// ---- table fill, 8 pairs per step ---------------------------------------------------------------
// The same roundings as fill_tables (the f64 product scale*cos, then one conversion to A with RNE,
// as static_cast does) and an exact negation, so the same bits. The per-token table (sincos + fill)
// is about a quarter of simd's time at head_dim 128 for 2-byte dtypes (measured with every position
// equal); the scalar fill was a visible part of it.
inline __m256 narrow(__m512d v, float) { return _mm512_cvtpd_ps(v); }
inline __m512d narrow(__m512d v, double) { return v; }
inline void put_interleaved(float* C2, float* S2, __m256 c, __m256 s) {
  const __m512 c5 = _mm512_castps256_ps512(c), s5 = _mm512_castps256_ps512(s);
  const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  const __m512i mix = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  _mm512_storeu_ps(C2, _mm512_permutexvar_ps(dup, c5));
  _mm512_storeu_ps(S2, _mm512_permutex2var_ps(neg(s5), mix, s5));
}
inline void put_interleaved(double* C2, double* S2, __m512d c, __m512d s) {
  const __m512i lo = _mm512_setr_epi64(0, 0, 1, 1, 2, 2, 3, 3);
  const __m512i hi = _mm512_setr_epi64(4, 4, 5, 5, 6, 6, 7, 7);
  const __m512i mlo = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
  const __m512i mhi = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
  const __m512d ns = neg(s);
  _mm512_storeu_pd(C2, _mm512_permutexvar_pd(lo, c));
  _mm512_storeu_pd(C2 + 8, _mm512_permutexvar_pd(hi, c));
  _mm512_storeu_pd(S2, _mm512_permutex2var_pd(ns, mlo, s));
  _mm512_storeu_pd(S2 + 8, _mm512_permutex2var_pd(ns, mhi, s));
}
inline void put(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
inline void put(double* p, __m512d v) { _mm512_storeu_pd(p, v); }

template <class A>
void fill_tables_avx512(std::int64_t np, double scale, bool half, const double* cb,
                        const double* sb, A* C, A* S) {
  const __m512d vs = _mm512_set1_pd(scale);
  std::int64_t i = 0;
  for (; i + 8 <= np; i += 8) {
    const auto c = narrow(_mm512_mul_pd(vs, _mm512_loadu_pd(cb + i)), A{});
    const auto s = narrow(_mm512_mul_pd(vs, _mm512_loadu_pd(sb + i)), A{});
    if (half) {
      put(C + i, c);
      put(S + i, s);
    } else {
      put_interleaved(C + 2 * i, S + 2 * i, c, s);
    }
  }
  if (i < np) {
    // The last < 8 pairs by the scalar formulas, written from the pair index on.
    fill_tables(np - i, scale, half, cb + i, sb + i, C + (half ? i : 2 * i),
                S + (half ? i : 2 * i));
  }
}

// ---- heads --------------------------------------------------------------------------------------
template <bool Tail, bool Nt, class T>
inline void half_step(const T* x, T* y, std::int64_t h, std::int64_t i, const arith_t<T>* C,
                      const arith_t<T>* S, __mmask16 k) {
  const auto a = ld<Tail>(x + i, k), b = ld<Tail>(x + h + i, k);
  const auto c = ld<Tail>(C + i, k), s = ld<Tail>(S + i, k);
  st<Tail, Nt>(y + i, k, fma(a, c, neg(mul(b, s))));
  st<Tail, Nt>(y + h + i, k, fma(b, c, mul(a, s)));
}

template <bool Tail, bool Nt, class T>
inline void interleaved_step(const T* x, T* y, std::int64_t j, const arith_t<T>* C2,
                             const arith_t<T>* S2, __mmask16 k) {
  const auto v = ld<Tail>(x + j, k);
  st<Tail, Nt>(y + j, k, fma(v, ld<Tail>(C2 + j, k), mul(swap_pairs(v), ld<Tail>(S2 + j, k))));
}

template <class T, bool Nt>
void head_half(const T* x, T* y, std::int64_t rd, std::int64_t h, const arith_t<T>* C,
               const arith_t<T>* S) {
  constexpr std::int64_t W = 64 / sizeof(arith_t<T>);
  const std::int64_t n = rd / 2;
  std::int64_t i = 0;
  for (; i + W <= n; i += W) half_step<false, Nt>(x, y, h, i, C, S, 0);
  if (i < n) half_step<true, false>(x, y, h, i, C, S, first_lanes(n - i));
}

template <class T, bool Nt>
void head_interleaved(const T* x, T* y, std::int64_t rd, std::int64_t, const arith_t<T>* C2,
                      const arith_t<T>* S2) {
  constexpr std::int64_t W = 64 / sizeof(arith_t<T>);
  std::int64_t j = 0;
  for (; j + W <= rd; j += W) interleaved_step<false, Nt>(x, y, j, C2, S2, 0);
  // rd and W are even, so the masked tail covers whole pairs only.
  if (j < rd) interleaved_step<true, false>(x, y, j, C2, S2, first_lanes(rd - j));
}

template <class T>
HeadLoops<T> loops() {
  return {.half = heads<T, head_half<T, false>>,
          .interleaved = heads<T, head_interleaved<T, false>>,
          .half_stream = heads<T, head_half<T, true>>,
          .interleaved_stream = heads<T, head_interleaved<T, true>>};
}

}  // namespace
}  // namespace ropecheck::kernels::simd
RC_ISA_END

namespace ropecheck::kernels::simd {

const Target& avx512_target() {
  static const Target t{.sincos_rows = sincos_rows<Avx512Ops>,
                        .compose = compose_rows<Avx512Ops>,
                        .fill_f64 = fill_tables_avx512<double>,
                        .fill_f32 = fill_tables_avx512<float>,
                        .f64 = loops<double>(),
                        .f32 = loops<float>(),
                        .f16 = loops<Eigen::half>(),
                        .bf16 = loops<Eigen::bfloat16>()};
  return t;
}

}  // namespace ropecheck::kernels::simd
#endif  // ROPECHECK_X86
