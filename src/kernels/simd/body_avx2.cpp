// Path avx2 (AVX2 + FMA + F16C): 4 f64 / 8 f32 lanes, scalar tails (rotate_pair1). The table fill
// is the scalar one (fill_tables).
#include "target.hpp"
#include "trig.hpp"

#include <cstdint>

#ifdef ROPECHECK_X86
RC_ISA_BEGIN(RC_ISA_AVX2)
#include "heads-inl.hpp"
#include "sincos-inl.hpp"

namespace ropecheck::kernels::simd {
namespace {

// sincos-inl.hpp's operations on 4 doubles.
struct Avx2Ops {
  using V = __m256d;
  using M = __m256d;  // all-ones lanes
  static constexpr int kLanes = 4;
  static V set1(double c) { return _mm256_set1_pd(c); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
  static V sub(V a, V b) { return _mm256_sub_pd(a, b); }
  static V mul(V a, V b) { return _mm256_mul_pd(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_pd(a, b, c); }
  static V neg(V a) { return _mm256_xor_pd(a, _mm256_set1_pd(-0.0)); }
  static M kbit(V t, int bit) {
    const __m256i b = _mm256_set1_epi64x(std::int64_t{1} << bit);
    return _mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_and_si256(_mm256_castpd_si256(t), b), b));
  }
  static V select(M m, V a, V b) { return _mm256_blendv_pd(b, a, m); }
  static V load(const double* p) { return _mm256_loadu_pd(p); }
  static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
  static unsigned beyond(V x) {
    const V abs = _mm256_and_pd(x, _mm256_castsi256_pd(_mm256_set1_epi64x(INT64_MAX)));
    return static_cast<unsigned>(
        _mm256_movemask_pd(_mm256_cmp_pd(abs, _mm256_set1_pd(kSimdTrigLimit), _CMP_NLE_UQ)));
  }
};

// ---- element vectors: A = f64 (4 lanes) or f32 (8 lanes), loads widen, stores round ------------
inline __m256d ld(const double* p) { return _mm256_loadu_pd(p); }
inline __m256 ld(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 ld(const Eigen::half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 ld(const Eigen::bfloat16* p) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16));
}
inline void st(double* p, __m256d v) { _mm256_storeu_pd(p, v); }
inline void st(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
inline void st(Eigen::half* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                   _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
// The integer RNE of f32_to_bf16_bits (convert.hpp) on 8 lanes.
inline void st(Eigen::bfloat16* p, __m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i hi = _mm256_srli_epi32(x, 16);
  const __m256i lsb = _mm256_and_si256(hi, _mm256_set1_epi32(1));
  __m256i r =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m256i qnan = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
  const __m256i isnan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  r = _mm256_blendv_epi8(r, qnan, isnan);
  // packus works per 128-bit lane: [r0..3 r0..3 | r4..7 r4..7]; 0xD8 gathers r0..7 low.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
}
inline __m256d mul(__m256d a, __m256d b) { return _mm256_mul_pd(a, b); }
inline __m256 mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
inline __m256d fma(__m256d a, __m256d b, __m256d c) { return _mm256_fmadd_pd(a, b, c); }
inline __m256 fma(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
inline __m256d neg(__m256d a) { return _mm256_xor_pd(a, _mm256_set1_pd(-0.0)); }
inline __m256 neg(__m256 a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
inline __m256d swap_pairs(__m256d a) { return _mm256_permute_pd(a, 0x5); }
inline __m256 swap_pairs(__m256 a) { return _mm256_permute_ps(a, 0xB1); }

// ---- heads --------------------------------------------------------------------------------------
template <class T>
void head_half(const T* x, T* y, std::int64_t rd, std::int64_t h, const arith_t<T>* C,
               const arith_t<T>* S) {
  constexpr std::int64_t W = 32 / sizeof(arith_t<T>);
  const std::int64_t n = rd / 2;
  std::int64_t i = 0;
  for (; i + W <= n; i += W) {
    const auto a = ld(x + i), b = ld(x + h + i);
    const auto c = ld(C + i), s = ld(S + i);
    st(y + i, fma(a, c, neg(mul(b, s))));
    st(y + h + i, fma(b, c, mul(a, s)));
  }
  for (; i < n; ++i) rotate_pair1(x, y, i, i + h, C[i], S[i]);
}

template <class T>
void head_interleaved(const T* x, T* y, std::int64_t rd, std::int64_t, const arith_t<T>* C2,
                      const arith_t<T>* S2) {
  constexpr std::int64_t W = 32 / sizeof(arith_t<T>);
  std::int64_t j = 0;
  for (; j + W <= rd; j += W) {
    const auto v = ld(x + j);
    st(y + j, fma(v, ld(C2 + j), mul(swap_pairs(v), ld(S2 + j))));
  }
  for (; j < rd; j += 2) rotate_pair1(x, y, j, j + 1, C2[j], S2[j + 1]);
}

template <class T>
HeadLoops<T> loops() {
  const HeadsFn<T> half = heads<T, head_half<T>>, inter = heads<T, head_interleaved<T>>;
  return {.half = half, .interleaved = inter, .half_stream = half, .interleaved_stream = inter};
}

}  // namespace
}  // namespace ropecheck::kernels::simd
RC_ISA_END

namespace ropecheck::kernels::simd {

const Target& avx2_target() {
  static const Target t{.sincos_rows = sincos_rows<Avx2Ops>,
                        .compose = compose_rows<Avx2Ops>,
                        .fill_f64 = fill_tables<double>,
                        .fill_f32 = fill_tables<float>,
                        .f64 = loops<double>(),
                        .f32 = loops<float>(),
                        .f16 = loops<Eigen::half>(),
                        .bf16 = loops<Eigen::bfloat16>()};
  return t;
}

}  // namespace ropecheck::kernels::simd
#endif  // ROPECHECK_X86
