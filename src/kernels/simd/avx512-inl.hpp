// AVX-512 (F + BW + VL) element vectors shared by the avx512 and avx512bf16 bodies: 8 f64 / 16 f32
// lanes, loads widen and stores round (the rounding of convert.hpp). Tail = true: the masked form
// for the one partial vector at the end of a head (lanes outside mask k are neither read nor
// written); full vectors use plain loads/stores, since masked 512-bit stores are slow on some CPUs
// (e.g. AMD Zen 4). Nt = true: non-temporal stores (full vectors only; see kernel.cpp). Included
// by each of the two body files inside its target region (isa.hpp); internal linkage.

namespace ropecheck::kernels::simd {
namespace {

template <bool Tail>
inline __m512d ld(const double* p, __mmask16 k) {
  if constexpr (Tail) return _mm512_maskz_loadu_pd(static_cast<__mmask8>(k), p);
  return _mm512_loadu_pd(p);
}
template <bool Tail>
inline __m512 ld(const float* p, __mmask16 k) {
  if constexpr (Tail) return _mm512_maskz_loadu_ps(k, p);
  return _mm512_loadu_ps(p);
}
template <bool Tail>
inline __m256i ld16(const void* p, __mmask16 k) {
  if constexpr (Tail) return _mm256_maskz_loadu_epi16(k, p);
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
template <bool Tail>
inline __m512 ld(const Eigen::half* p, __mmask16 k) {
  return _mm512_cvtph_ps(ld16<Tail>(p, k));
}
template <bool Tail>
inline __m512 ld(const Eigen::bfloat16* p, __mmask16 k) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(ld16<Tail>(p, k)), 16));
}

template <bool Tail, bool Nt = false>
inline void st(double* p, __mmask16 k, __m512d v) {
  if constexpr (Tail)
    _mm512_mask_storeu_pd(p, static_cast<__mmask8>(k), v);
  else if constexpr (Nt)
    _mm512_stream_pd(p, v);
  else
    _mm512_storeu_pd(p, v);
}
template <bool Tail, bool Nt = false>
inline void st(float* p, __mmask16 k, __m512 v) {
  if constexpr (Tail)
    _mm512_mask_storeu_ps(p, k, v);
  else if constexpr (Nt)
    _mm512_stream_ps(p, v);
  else
    _mm512_storeu_ps(p, v);
}
template <bool Tail, bool Nt = false>
inline void st16(void* p, __mmask16 k, __m256i v) {
  if constexpr (Tail)
    _mm256_mask_storeu_epi16(p, k, v);
  else if constexpr (Nt)
    _mm256_stream_si256(static_cast<__m256i*>(p), v);
  else
    _mm256_storeu_si256(static_cast<__m256i*>(p), v);
}
template <bool Tail, bool Nt = false>
inline void st(Eigen::half* p, __mmask16 k, __m512 v) {
  st16<Tail, Nt>(p, k, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
// The integer RNE of f32_to_bf16_bits (convert.hpp) on 16 lanes.
template <bool Tail, bool Nt = false>
inline void st(Eigen::bfloat16* p, __mmask16 k, __m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i hi = _mm512_srli_epi32(x, 16);
  const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  const __m512i qnan = _mm512_or_si512(hi, _mm512_set1_epi32(0x40));
  r = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), r, qnan);
  st16<Tail, Nt>(p, k, _mm512_cvtepi32_epi16(r));
}

inline __m512d mul(__m512d a, __m512d b) { return _mm512_mul_pd(a, b); }
inline __m512 mul(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
inline __m512d fma(__m512d a, __m512d b, __m512d c) { return _mm512_fmadd_pd(a, b, c); }
inline __m512 fma(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
inline __m512d neg(__m512d a) {
  return _mm512_castsi512_pd(
      _mm512_xor_si512(_mm512_castpd_si512(a), _mm512_set1_epi64(INT64_MIN)));
}
inline __m512 neg(__m512 a) {
  return _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)));
}
inline __m512d swap_pairs(__m512d a) { return _mm512_permute_pd(a, 0x55); }
inline __m512 swap_pairs(__m512 a) { return _mm512_permute_ps(a, 0xB1); }

// The mask of the first n < 16 lanes.
inline __mmask16 first_lanes(std::int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

}  // namespace
}  // namespace ropecheck::kernels::simd
