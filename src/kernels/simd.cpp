// `simd`: table-based, vectorized, with run-time dispatch (AVX-512, AVX2+FMA+F16C, portable).
//
// Numerics (identical in every path and both layouts, so results are bit-identical across paths,
// layouts, head counts and token orders):
//   angle   = double(m) * pow(base, -2i/rotary_dim)                 f64, same code as `scalar`
//   c, s    = A(scale * cos(angle)), A(scale * sin(angle))          one rounding into the table
//   out_a   = fma(x_a, c, x_b * (-s))                               A = f32 (f64 for f64 dtype)
//   out_b   = fma(x_b, c, x_a * s)
// i.e. each output fuses its own element's product with c and rounds the cross product once.
// The interleaved vector form is fma(v, [c,c], swap(v) * [-s,s]), which is the same two formulas
// lane by lane; x_b * (-s) == -(x_b * s) bit-for-bit because RNE is sign-symmetric.
// Storage: f16 via F16C/AVX-512 conversions (RNE incl. subnormals), bf16 via integer RNE
// (x + 0x7FFF + lsb) >> 16 with NaN kept a quiet NaN; scalar tails use the same rounding.
#include "common.hpp"
#include "ropecheck/simd_info.hpp"

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define ROPECHECK_X86 1
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 reports its own _mm512_undefined_* placeholders inside the masked intrinsics as
// "may be used uninitialized" (a known false positive of avx512fintrin.h).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace ropecheck {
namespace kernels {
namespace {

enum class Path : int { portable = 0, avx2 = 1, avx512 = 2 };

const char* path_name(Path p) {
  switch (p) {
    case Path::avx512:
      return "avx512";
    case Path::avx2:
      return "avx2";
    case Path::portable:
      return "portable";
  }
  return "?";
}

Path detect_best() {
#ifdef ROPECHECK_X86
  __builtin_cpu_init();
  // Clang's __builtin_cpu_supports does not know "f16c": read CPUID.1:ECX directly (the avx2
  // check already covers OS support for the YMM state).
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    return Path::avx512;
  if (avx2) return Path::avx2;
#endif
  return Path::portable;
}

Path best_path() {
  static const Path p = detect_best();
  return p;
}

// Read on every call (cheap next to a kernel call) so a test can switch paths with setenv.
// Unrecognized values are ignored (best path).
Path current_path() {
  const Path best = best_path();
  const char* env = std::getenv("ROPECHECK_SIMD");
  if (!env) return best;
  const std::string_view v(env);
  Path want = best;
  if (v == "portable")
    want = Path::portable;
  else if (v == "avx2")
    want = Path::avx2;
  else if (v == "avx512")
    want = Path::avx512;
  return static_cast<int>(want) < static_cast<int>(best) ? want : best;
}

// ---- scalar element conversions (portable path and vector tails) ------------------------------

template <class T>
struct arith {
  using type = float;
};
template <>
struct arith<double> {
  using type = double;
};
template <class T>
using arith_t = typename arith<T>::type;

inline float bf16_bits_to_f32(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}
// Same integer RNE as the vector paths.
inline std::uint16_t f32_to_bf16_bits(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}
// Eigen's float -> half is RNE with subnormals and overflow to inf, like F16C; NaN is made the
// F16C way (sign and top payload bits kept, quiet bit set).
inline std::uint16_t f32_to_f16_bits(float f) {
  if (std::isnan(f)) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    return static_cast<std::uint16_t>(((x >> 16) & 0x8000u) | 0x7E00u | ((x >> 13) & 0x3FFu));
  }
  return Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(f));
}

inline double ld1(const double* p) { return *p; }
inline float ld1(const float* p) { return *p; }
inline float ld1(const Eigen::half* p) { return static_cast<float>(*p); }  // exact
inline float ld1(const Eigen::bfloat16* p) {
  std::uint16_t b;
  std::memcpy(&b, static_cast<const void*>(p), 2);
  return bf16_bits_to_f32(b);
}
inline void st1(double* p, double v) { *p = v; }
inline void st1(float* p, float v) { *p = v; }
inline void st1(Eigen::half* p, float v) {
  const std::uint16_t b = f32_to_f16_bits(v);
  std::memcpy(static_cast<void*>(p), &b, 2);
}
inline void st1(Eigen::bfloat16* p, float v) {
  const std::uint16_t b = f32_to_bf16_bits(v);
  std::memcpy(static_cast<void*>(p), &b, 2);
}

// The one rotation formula. std::fma is correctly rounded whether it becomes an instruction
// (inlined into an FMA-target function) or a libm call, so tails match vector lanes.
template <class T>
inline void rotate_pair1(const T* x, T* y, std::int64_t ia, std::int64_t ib, arith_t<T> c,
                         arith_t<T> s) {
  const arith_t<T> xa = ld1(x + ia), xb = ld1(x + ib);
  st1(y + ia, std::fma(xa, c, xb * -s));
  st1(y + ib, std::fma(xb, c, xa * s));
}

// Tables: half layout uses C[i], S[i] (i < n_pairs); interleaved uses C2[j] = c_{j/2} and
// S2[j] = (j odd ? s : -s)_{j/2} (j < rotary_dim), so one vector multiply covers both slots.
template <class T>
using HeadFn = void (*)(const T* x, T* y, std::int64_t rd, const arith_t<T>* C,
                        const arith_t<T>* S);

template <class T>
void head_portable_half(const T* x, T* y, std::int64_t rd, const arith_t<T>* C,
                        const arith_t<T>* S) {
  const std::int64_t h = rd / 2;
  for (std::int64_t i = 0; i < h; ++i) rotate_pair1(x, y, i, i + h, C[i], S[i]);
}
template <class T>
void head_portable_interleaved(const T* x, T* y, std::int64_t rd, const arith_t<T>* C2,
                               const arith_t<T>* S2) {
  for (std::int64_t j = 0; j < rd; j += 2) rotate_pair1(x, y, j, j + 1, C2[j], S2[j + 1]);
}

#ifdef ROPECHECK_X86
// ---- AVX2 + FMA + F16C ------------------------------------------------------------------------
#define RC_AVX2 __attribute__((target("avx2,fma,f16c")))

RC_AVX2 inline __m256d v2_ld(const double* p) { return _mm256_loadu_pd(p); }
RC_AVX2 inline __m256 v2_ld(const float* p) { return _mm256_loadu_ps(p); }
RC_AVX2 inline __m256 v2_ld(const Eigen::half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
RC_AVX2 inline __m256 v2_ld(const Eigen::bfloat16* p) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16));
}
RC_AVX2 inline void v2_st(double* p, __m256d v) { _mm256_storeu_pd(p, v); }
RC_AVX2 inline void v2_st(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
RC_AVX2 inline void v2_st(Eigen::half* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                   _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
RC_AVX2 inline void v2_st(Eigen::bfloat16* p, __m256 v) {
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
RC_AVX2 inline __m256d v2_mul(__m256d a, __m256d b) { return _mm256_mul_pd(a, b); }
RC_AVX2 inline __m256 v2_mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
RC_AVX2 inline __m256d v2_fma(__m256d a, __m256d b, __m256d c) { return _mm256_fmadd_pd(a, b, c); }
RC_AVX2 inline __m256 v2_fma(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
RC_AVX2 inline __m256d v2_neg(__m256d a) { return _mm256_xor_pd(a, _mm256_set1_pd(-0.0)); }
RC_AVX2 inline __m256 v2_neg(__m256 a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
RC_AVX2 inline __m256d v2_swap(__m256d a) { return _mm256_permute_pd(a, 0x5); }
RC_AVX2 inline __m256 v2_swap(__m256 a) { return _mm256_permute_ps(a, 0xB1); }

template <class T>
RC_AVX2 void head_avx2_half(const T* x, T* y, std::int64_t rd, const arith_t<T>* C,
                            const arith_t<T>* S) {
  constexpr std::int64_t W = 32 / sizeof(arith_t<T>);
  const std::int64_t h = rd / 2;
  std::int64_t i = 0;
  for (; i + W <= h; i += W) {
    const auto a = v2_ld(x + i), b = v2_ld(x + h + i);
    const auto c = v2_ld(C + i), s = v2_ld(S + i);
    v2_st(y + i, v2_fma(a, c, v2_neg(v2_mul(b, s))));
    v2_st(y + h + i, v2_fma(b, c, v2_mul(a, s)));
  }
  for (; i < h; ++i) rotate_pair1(x, y, i, i + h, C[i], S[i]);
}

template <class T>
RC_AVX2 void head_avx2_interleaved(const T* x, T* y, std::int64_t rd, const arith_t<T>* C2,
                                   const arith_t<T>* S2) {
  constexpr std::int64_t W = 32 / sizeof(arith_t<T>);
  std::int64_t j = 0;
  for (; j + W <= rd; j += W) {
    const auto v = v2_ld(x + j);
    v2_st(y + j, v2_fma(v, v2_ld(C2 + j), v2_mul(v2_swap(v), v2_ld(S2 + j))));
  }
  for (; j < rd; j += 2) rotate_pair1(x, y, j, j + 1, C2[j], S2[j + 1]);
}

// ---- AVX-512 (F + BW + VL): full vectors unmasked, one masked tail, no scalar remainder -------
// Full vectors use plain loads/stores: masked 512-bit stores are slow on some CPUs (e.g. AMD Zen
// 4).
#define RC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

template <bool Tail>
RC_AVX512 inline __m512d v5_ld(const double* p, __mmask16 k) {
  if constexpr (Tail) return _mm512_maskz_loadu_pd(static_cast<__mmask8>(k), p);
  return _mm512_loadu_pd(p);
}
template <bool Tail>
RC_AVX512 inline __m512 v5_ld(const float* p, __mmask16 k) {
  if constexpr (Tail) return _mm512_maskz_loadu_ps(k, p);
  return _mm512_loadu_ps(p);
}
template <bool Tail>
RC_AVX512 inline __m256i v5_ld16(const void* p, __mmask16 k) {
  if constexpr (Tail) return _mm256_maskz_loadu_epi16(k, p);
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
template <bool Tail>
RC_AVX512 inline __m512 v5_ld(const Eigen::half* p, __mmask16 k) {
  return _mm512_cvtph_ps(v5_ld16<Tail>(p, k));
}
template <bool Tail>
RC_AVX512 inline __m512 v5_ld(const Eigen::bfloat16* p, __mmask16 k) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v5_ld16<Tail>(p, k)), 16));
}
template <bool Tail>
RC_AVX512 inline void v5_st(double* p, __mmask16 k, __m512d v) {
  if constexpr (Tail)
    _mm512_mask_storeu_pd(p, static_cast<__mmask8>(k), v);
  else
    _mm512_storeu_pd(p, v);
}
template <bool Tail>
RC_AVX512 inline void v5_st(float* p, __mmask16 k, __m512 v) {
  if constexpr (Tail)
    _mm512_mask_storeu_ps(p, k, v);
  else
    _mm512_storeu_ps(p, v);
}
template <bool Tail>
RC_AVX512 inline void v5_st16(void* p, __mmask16 k, __m256i v) {
  if constexpr (Tail)
    _mm256_mask_storeu_epi16(p, k, v);
  else
    _mm256_storeu_si256(static_cast<__m256i*>(p), v);
}
template <bool Tail>
RC_AVX512 inline void v5_st(Eigen::half* p, __mmask16 k, __m512 v) {
  v5_st16<Tail>(p, k, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
template <bool Tail>
RC_AVX512 inline void v5_st(Eigen::bfloat16* p, __mmask16 k, __m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i hi = _mm512_srli_epi32(x, 16);
  const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  const __m512i qnan = _mm512_or_si512(hi, _mm512_set1_epi32(0x40));
  r = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), r, qnan);
  v5_st16<Tail>(p, k, _mm512_cvtepi32_epi16(r));
}
RC_AVX512 inline __m512d v5_mul(__m512d a, __m512d b) { return _mm512_mul_pd(a, b); }
RC_AVX512 inline __m512 v5_mul(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
RC_AVX512 inline __m512d v5_fma(__m512d a, __m512d b, __m512d c) {
  return _mm512_fmadd_pd(a, b, c);
}
RC_AVX512 inline __m512 v5_fma(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
RC_AVX512 inline __m512d v5_neg(__m512d a) {
  return _mm512_castsi512_pd(
      _mm512_xor_si512(_mm512_castpd_si512(a), _mm512_set1_epi64(INT64_MIN)));
}
RC_AVX512 inline __m512 v5_neg(__m512 a) {
  return _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)));
}
RC_AVX512 inline __m512d v5_swap(__m512d a) { return _mm512_permute_pd(a, 0x55); }
RC_AVX512 inline __m512 v5_swap(__m512 a) { return _mm512_permute_ps(a, 0xB1); }

template <bool Tail, class T>
RC_AVX512 inline void v5_half_step(const T* x, T* y, std::int64_t h, std::int64_t i,
                                   const arith_t<T>* C, const arith_t<T>* S, __mmask16 k) {
  const auto a = v5_ld<Tail>(x + i, k), b = v5_ld<Tail>(x + h + i, k);
  const auto c = v5_ld<Tail>(C + i, k), s = v5_ld<Tail>(S + i, k);
  v5_st<Tail>(y + i, k, v5_fma(a, c, v5_neg(v5_mul(b, s))));
  v5_st<Tail>(y + h + i, k, v5_fma(b, c, v5_mul(a, s)));
}

template <bool Tail, class T>
RC_AVX512 inline void v5_interleaved_step(const T* x, T* y, std::int64_t j, const arith_t<T>* C2,
                                          const arith_t<T>* S2, __mmask16 k) {
  const auto v = v5_ld<Tail>(x + j, k);
  v5_st<Tail>(y + j, k,
              v5_fma(v, v5_ld<Tail>(C2 + j, k), v5_mul(v5_swap(v), v5_ld<Tail>(S2 + j, k))));
}

template <class T>
RC_AVX512 void head_avx512_half(const T* x, T* y, std::int64_t rd, const arith_t<T>* C,
                                const arith_t<T>* S) {
  constexpr std::int64_t W = 64 / sizeof(arith_t<T>);
  const std::int64_t h = rd / 2;
  std::int64_t i = 0;
  for (; i + W <= h; i += W) v5_half_step<false>(x, y, h, i, C, S, 0);
  if (i < h) v5_half_step<true>(x, y, h, i, C, S, static_cast<__mmask16>((1u << (h - i)) - 1u));
}

template <class T>
RC_AVX512 void head_avx512_interleaved(const T* x, T* y, std::int64_t rd, const arith_t<T>* C2,
                                       const arith_t<T>* S2) {
  constexpr std::int64_t W = 64 / sizeof(arith_t<T>);
  std::int64_t j = 0;
  for (; j + W <= rd; j += W) v5_interleaved_step<false>(x, y, j, C2, S2, 0);
  // rd and W are even, so the masked tail covers whole pairs only.
  if (j < rd)
    v5_interleaved_step<true>(x, y, j, C2, S2, static_cast<__mmask16>((1u << (rd - j)) - 1u));
}
#endif  // ROPECHECK_X86

template <class T>
HeadFn<T> pick(Path p, Layout l) {
  const bool half = l == Layout::half;
#ifdef ROPECHECK_X86
  if (p == Path::avx512) return half ? head_avx512_half<T> : head_avx512_interleaved<T>;
  if (p == Path::avx2) return half ? head_avx2_half<T> : head_avx2_interleaved<T>;
#endif
  return half ? head_portable_half<T> : head_portable_interleaved<T>;
}

template <class T>
void rotate_all(const RopeSpec& spec, const TensorArgs& a, Path path) {
  using A = arith_t<T>;
  const auto* in = static_cast<const T*>(a.in);
  auto* out = static_cast<T*>(a.out);
  const std::int64_t np = spec.n_pairs(), rd = spec.rotary_dim;
  const bool half = spec.layout == Layout::half;
  const HeadFn<T> head = pick<T>(path, spec.layout);

  std::vector<double> theta(np);
  for (std::int64_t i = 0; i < np; ++i) theta[i] = theta_f64(spec, i);
  std::vector<A> C(rd), S(rd);

  for (std::int64_t t = 0; t < a.n_tokens; ++t) {
    const std::int64_t pos = a.positions[t];
    // The table depends on the position only; runs of equal positions reuse it.
    if (rd > 0 && (t == 0 || pos != a.positions[t - 1])) {
      const double m = static_cast<double>(pos);
      for (std::int64_t i = 0; i < np; ++i) {
        const double angle = m * theta[i];
        const A c = static_cast<A>(spec.scale * std::cos(angle));
        const A s = static_cast<A>(spec.scale * std::sin(angle));
        if (half) {
          C[i] = c;
          S[i] = s;
        } else {
          C[2 * i] = C[2 * i + 1] = c;
          S[2 * i] = -s;
          S[2 * i + 1] = s;
        }
      }
    }
    for (std::int64_t hd = 0; hd < a.n_heads; ++hd) {
      const std::int64_t off = t * a.token_stride + hd * a.head_stride;
      if (rd > 0) head(in + off, out + off, rd, C.data(), S.data());
      copy_tail(spec, in + off, out + off);
    }
  }
}

class SimdKernel final : public BuiltinKernel {
 public:
  std::string name() const override { return "simd"; }
  std::string description() const override {
    return "f64 angle and cos/sin per distinct token into an f32 table (f64 for f64), FMA "
           "rotation vectorized with run-time dispatch (avx512 / avx2+fma+f16c / portable)";
  }
  Policy policy(Dtype d) const override {
    const Precision p = d == Dtype::f64 ? Dtype::f64 : Dtype::f32;
    return {Dtype::f64,
            p,
            p,
            AngleRecipe::pow_product,
            true,
            std::string("path: ") + path_name(current_path()) +
                " (all paths bit-identical); out_a = fma(x_a, c, x_b*(-s)), "
                "out_b = fma(x_b, c, x_a*s); table holds scale*cos, scale*sin"};
  }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    if (auto st = check(spec, a); st != KernelStatus::ok || a.n_tokens == 0 || a.n_heads == 0)
      return st;
    const Path p = current_path();
    return dispatch_dtype(a.dtype, [&](auto tag) {
      rotate_all<decltype(tag)>(spec, a, p);
      return KernelStatus::ok;
    });
  }
};

}  // namespace

const Kernel& simd_kernel() {
  static const SimdKernel k;
  return k;
}

}  // namespace kernels

const char* simd_path() { return kernels::path_name(kernels::current_path()); }
const char* simd_best_path() { return kernels::path_name(kernels::best_path()); }

}  // namespace ropecheck
