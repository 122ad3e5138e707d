// Path avx512bf16 (AVX512-BF16 CPUs): path avx512 except that bf16 storage is rounded by
// vcvtneps2bf16: the same RNE and the same quiet NaN ((x >> 16) | 0x40, Intel SDM pseudocode),
// 1 instruction for 9. The instruction reads f32-subnormal inputs as zero, so a vector holding one
// takes the integer rounding instead; bit-identical everywhere (SimdDispatch.
// NativeBf16StoreEqualsIntegerRoundingOnAllFloats compares the two on all 2^32 f32 inputs).
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 reports its own _mm512_undefined_* placeholders inside the masked intrinsics as
// "may be used uninitialized" (a known false positive of avx512fintrin.h).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "target.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>

#ifdef ROPECHECK_X86
RC_ISA_BEGIN(RC_ISA_AVX512BF16)
#include "avx512-inl.hpp"
#include "heads-inl.hpp"

namespace ropecheck::kernels::simd {
namespace {

// An f32 subnormal among the lanes (vfpclassps category 0x20).
inline bool any_subnormal(__m512 v) { return _mm512_fpclass_ps_mask(v, 0x20) != 0; }

template <bool Tail, bool Nt>
inline void st_native(Eigen::bfloat16* p, __mmask16 k, __m512 v) {
  if (__builtin_expect(any_subnormal(v), 0)) return st<Tail, Nt>(p, k, v);
  st16<Tail, Nt>(p, k, (__m256i)_mm512_cvtneps_pbh(v));
}

template <bool Tail, bool Nt>
inline void half_step(const Eigen::bfloat16* x, Eigen::bfloat16* y, std::int64_t h, std::int64_t i,
                      const float* C, const float* S, __mmask16 k) {
  const auto a = ld<Tail>(x + i, k), b = ld<Tail>(x + h + i, k);
  const auto c = ld<Tail>(C + i, k), s = ld<Tail>(S + i, k);
  st_native<Tail, Nt>(y + i, k, fma(a, c, neg(mul(b, s))));
  st_native<Tail, Nt>(y + h + i, k, fma(b, c, mul(a, s)));
}

template <bool Nt>
void head_half(const Eigen::bfloat16* x, Eigen::bfloat16* y, std::int64_t rd, std::int64_t h,
               const float* C, const float* S) {
  constexpr std::int64_t W = 16;
  const std::int64_t n = rd / 2;
  std::int64_t i = 0;
  for (; i + W <= n; i += W) half_step<false, Nt>(x, y, h, i, C, S, 0);
  if (i < n) half_step<true, false>(x, y, h, i, C, S, first_lanes(n - i));
}

// Interleaved bf16 without shuffles: a bf16 is the top half of an f32, so in 32 loaded elements
// (16 pairs) the even ones (x_a, low halves) become f32 by a shift and the odd ones (x_b, high
// halves) by a mask, already de-interleaved; the pair table (C[i], S[i], as for half) multiplies
// them lane by lane, and one vcvtne2ps2bf16 + vpermw packs and re-interleaves the results.
// Against the C2/S2 form (widen 16, swap, two table vectors, narrow 16, twice): same formulas,
// out_a = fma(x_a, c, -(x_b s)), out_b = fma(x_b, c, x_a s), so the same bits; about a third
// fewer instructions.
template <bool Nt>
inline void store_pairs(Eigen::bfloat16* y, __m512 ya, __m512 yb) {
  if (__builtin_expect(any_subnormal(ya) || any_subnormal(yb), 0)) {
    // The integer rounding (see st_native), re-interleaved by hand.
    alignas(64) Eigen::bfloat16 ta[16], tb[16];
    st<false, false>(ta, 0, ya);
    st<false, false>(tb, 0, yb);
    for (int l = 0; l < 16; ++l) {
      y[2 * l] = ta[l];
      y[2 * l + 1] = tb[l];
    }
    return;
  }
  alignas(64) static constexpr std::uint16_t kInterleave[32] = {
      0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  // Low 16 words: ya, high 16: yb; then (a0, b0, a1, b1, ...).
  const __m512i packed = (__m512i)_mm512_cvtne2ps_pbh(yb, ya);
  const __m512i out = _mm512_permutexvar_epi16(_mm512_load_si512(kInterleave), packed);
  if constexpr (Nt) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(y), _mm512_castsi512_si256(out));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(y + 16), _mm512_extracti64x4_epi64(out, 1));
  } else {
    _mm512_storeu_si512(y, out);
  }
}

template <bool Nt>
void head_interleaved(const Eigen::bfloat16* x, Eigen::bfloat16* y, std::int64_t rd, std::int64_t,
                      const float* C, const float* S) {
  const __m512i hi = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  std::int64_t j = 0;
  for (; j + 32 <= rd; j += 32) {
    const __m512i raw = _mm512_loadu_si512(x + j);
    const __m512 xa = _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
    const __m512 xb = _mm512_castsi512_ps(_mm512_and_si512(raw, hi));
    const __m512 c = _mm512_loadu_ps(C + j / 2), s = _mm512_loadu_ps(S + j / 2);
    store_pairs<Nt>(y + j, _mm512_fmadd_ps(xa, c, neg(_mm512_mul_ps(xb, s))),
                    _mm512_fmadd_ps(xb, c, _mm512_mul_ps(xa, s)));
  }
  for (; j < rd; j += 2) rotate_pair1(x, y, j, j + 1, C[j / 2], S[j / 2]);
}

HeadLoops<Eigen::bfloat16> bf16_loops() {
  using T = Eigen::bfloat16;
  return {.half = heads<T, head_half<false>>,
          .interleaved = heads<T, head_interleaved<false>>,
          .half_stream = heads<T, head_half<true>>,
          .interleaved_stream = heads<T, head_interleaved<true>>,
          .interleaved_pair_table = true};
}

// Both bf16 roundings on every f32 with bits in [first, last], 16 at a time.
std::uint64_t mismatches(std::uint32_t first, std::uint32_t last) {
  alignas(64) std::uint32_t in[16];
  alignas(64) Eigen::bfloat16 a[16], b[16];
  std::uint64_t bad = 0;
  for (std::uint64_t u = first; u <= last; u += 16) {
    const std::uint64_t n = std::min<std::uint64_t>(16, last - u + 1);
    for (std::uint64_t l = 0; l < 16; ++l) in[l] = static_cast<std::uint32_t>(u + (l < n ? l : 0));
    const __m512 v = _mm512_castsi512_ps(_mm512_load_si512(in));
    st<false, false>(a, 0, v);
    st_native<false, false>(b, 0, v);
    for (std::uint64_t l = 0; l < n; ++l)
      bad += std::bit_cast<std::uint16_t>(a[l]) != std::bit_cast<std::uint16_t>(b[l]);
  }
  return bad;
}

}  // namespace
}  // namespace ropecheck::kernels::simd
RC_ISA_END

namespace ropecheck::kernels::simd {

// Path avx512 with the bf16 heads replaced; every other storage type has nothing to gain.
const Target& avx512bf16_target() {
  static const Target t = [] {
    Target r = avx512_target();
    r.bf16 = bf16_loops();
    return r;
  }();
  return t;
}

std::uint64_t bf16_native_mismatches(std::uint32_t first, std::uint32_t last) {
  return mismatches(first, last);
}

}  // namespace ropecheck::kernels::simd
#endif  // ROPECHECK_X86
