// `simd`: table-based, vectorized, with run-time dispatch (AVX-512, AVX2+FMA+F16C, portable).
//
// Numerics (identical in every path and both layouts, so results are bit-identical across paths,
// layouts, head counts and token orders):
//   angle   = double(m) * pow(base, -2i/rotary_dim)                 f64, same code as `scalar`
//   c, s    = A(scale * cos(angle)), A(scale * sin(angle))          one rounding into the table
//             cos/sin: our own f64 evaluation (simd_sincos below: |error| <= 2^-53 absolute,
//             vectorized, the same operations in every lane and path), libm for |angle| > 2^28;
//             for the f32 table (f32/f16/bf16) of integer positions by angle addition, below
//   out_a   = fma(x_a, c, x_b * (-s))                               A = f32 (f64 for f64 dtype)
//   out_b   = fma(x_b, c, x_a * s)
// i.e. each output fuses its own element's product with c and rounds the cross product once.
// The interleaved vector form is fma(v, [c,c], swap(v) * [-s,s]), which is the same two formulas
// lane by lane; x_b * (-s) == -(x_b * s) bit-for-bit because RNE is sign-symmetric.
//
// Angle addition (f32 table, |m| < 2^53; simd_step_sincos in simd_trig.hpp is the scalar form):
// m = m0 + j, j = m % 16 (sign of m), (bc, bs) = sincos(RN(m0 theta)), (jc, js) = sincos(RN(j
// theta)), c = fma(bc, jc, -(bs js)), s = fma(bs, jc, bc js). One sincos per 16 consecutive
// positions (the base) plus 31 step rows per call, instead of one per token: the table was about
// a quarter of simd's time for 2-byte dtypes (measured: bf16 [2048][32][128] 1.20-1.26 ->
// 1.11-1.14 x memcpy interleaved, same run). A token's entries depend on its position only.
// Error (u = 2^-53, absolute per entry; first order, the u^2 terms are below 2^-100):
// * Angle: m0 and j have the sign of m, so |RN(m0 theta) - m0 theta| + |RN(j theta) - j theta|
//   <= u |m0 theta| + u |j theta| = u |m theta|, the one product rounding the bound's angle term
//   already counts (bounds.cpp section 1); the rest is trig error against cos/sin of the sum.
// * Inputs: the base within e_b per entry (u from simd_sincos, 2u when |m0 theta| > 2^28 takes
//   libm), the step within u (|j theta| < 16): as complex numbers |b^ - b| <= sqrt2 e_b,
//   |j^ - j| <= sqrt2 u, so the exact product errs by <= |b^ - b| |j^| + |b| |j^ - j|
//   <= sqrt2 (e_b + u) <= 3 sqrt2 u = 4.25u.
// * Roundings: c = fma(bc, jc, -RN(bs js)) errs by <= u |bs js| + u |bc jc - RN(bs js)|
//   <= u (|bc jc| + 2 |bs js|) <= u ||(bc, bs)|| ||(jc, 2 js)|| <= 2u (Cauchy-Schwarz); s likewise.
// Per entry <= 4.25u + 2u = 6.25u < 6.5u = Policy::trig_error (j = 0: the base alone, <= 2u).
// kernels_test checks entries against long double, and that chaining the same products token to
// token (c(m+1) from c(m), no bases) leaves this bound within a few dozen steps.
// Storage: f16 via F16C/AVX-512 conversions (RNE incl. subnormals), bf16 via integer RNE
// (x + 0x7FFF + lsb) >> 16 with NaN kept a quiet NaN; scalar tails use the same rounding.
// Path avx512bf16 (AVX512-BF16 CPUs) stores bf16 with vcvtneps2bf16 instead: the same RNE and the
// same quiet NaN ((x >> 16) | 0x40, Intel SDM pseudocode), 1 instruction for 9, but it treats
// f32-subnormal inputs as zero, so vectors holding one take the integer rounding (bit-identical
// everywhere; the unit test compares the two conversions on all 2^32 f32 inputs).
#include "common.hpp"
#include "ropecheck/kernels/simd_info.hpp"
#include "simd_trig.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>
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

enum class Path : int { portable = 0, avx2 = 1, avx512 = 2, avx512bf16 = 3 };

const char* path_name(Path p) {
  switch (p) {
    case Path::avx512bf16:
      return "avx512bf16";
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
      __builtin_cpu_supports("avx512vl")) {
    // AVX512_BF16: CPUID.(EAX=7, ECX=1):EAX bit 5 (not known to every compiler's cpu_supports);
    // vfpclassps needs AVX512DQ.
    unsigned a7 = 0, b7 = 0, c7 = 0, d7 = 0;
    const bool bf16 = __get_cpuid_count(7, 1, &a7, &b7, &c7, &d7) && (a7 & (1u << 5)) &&
                      __builtin_cpu_supports("avx512dq");
    return bf16 ? Path::avx512bf16 : Path::avx512;
  }
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
  else if (v == "avx512bf16")
    want = Path::avx512bf16;
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

// ---- f64 sin/cos, one operation sequence for every path ---------------------------------------
// The cos/sin table is most of the simd kernel's time when it calls libm per (token, pair) (e.g.
// 131k sin+cos per call at 2048 tokens x 64 pairs), so it is evaluated here, vectorized, with the
// same IEEE operations (add, mul, fma: each correctly rounded) in every lane of every path; hence
// bit-identical results across paths without relying on libm.
//
// Accuracy claim: |error| <= 2^-53 = u64 absolute for sin and for cos, |x| <= kSimdTrigLimit = 2^28
// (libm beyond, whose error is <= 1 ulp). The bound table (ropecheck::bounds, kernels_test) assumes
// <= 2 u_A absolute per entry for trig in the angle precision A = f64, so the policy holds as it
// is. Derivation (u = 2^-53, first order; second-order terms are below 2^-100):
// 1. Reduction. k = RN(RN(x * 2/pi) + 1.5*2^52) - 1.5*2^52 is an integer with |k| < 2^28 and
//    |x - k pi/2| <= pi/4 + 2^-24 < 0.786 (x*2/pi errs by <= 2^-24 absolutely for |x| <= 2^28).
//    pi/2 = C1 + C2 + C3 + d with |d| < 2^-163 (three doubles, computed exactly offline).
//    r1 = fma(-k, C1, x) is exact: for |x| >= 1, x and k*C1 are multiples of 2^-52 (C1 in [1,2))
//    and |x - k C1| < 1, so it fits in 53 bits; for |x| < 1, k is 0 (r1 = x) or +-1 and
//    C1/2 <= |x| <= 2 C1 (Sterbenz). k*C2 = p_hi + p_lo exactly (2Prod via fma), r1 - p_hi =
//    r_hi + e1 exactly (TwoSum), and r_lo = fma(-k, C3, e1 - p_lo) rounds twice on values below
//    2^-53: |r_hi + r_lo - (x - k pi/2)| < 2^-104. |r_hi| < 0.786.
// 2. Polynomials in z = RN(r_hi^2), z_lo = r_hi^2 - z exactly (fma). Taylor series to r^17 (sin)
//    and r^18 (cos): truncation < 0.786^19/19! < 2^-63. Coefficients are 1/n! rounded (rel u).
//    sin = r_hi + [r_lo (1 - z/2) + (r_hi z) P(z)],  P = -1/3! + z/5! - ... (Horner, fma)
//      |(r_hi z) P| <= 0.081; z (u), r_hi z (u), P incl. coefficients (~1.2u), product (u):
//      <= 4.2u * 0.081 < 0.35u; the bracket's own roundings < 0.09u; the r_lo z^2/24 term dropped
//      < 2^-60. Final add: half an ulp of |sin| < 0.71, i.e. <= u/2. Total < 0.95u.
//    cos = w + [e - z_lo/2 - r_hi r_lo + z^2 Q(z)],  w = RN(1 - z/2), e = (1 - z/2) - w exactly
//      (Fast2Sum, 1 >= z/2); |z^2 Q| <= 0.016: z^2 (2u), Q (~1.1u), product (u) < 0.07u; bracket
//      roundings < 0.03u; dropped r_lo r_hi z/6 < 0.05u. Final add: half an ulp of cos <= 1,
//      i.e. <= u/2. Total < 0.65u.
// 3. Quadrant: sin x = {s, c, -s, -c}[k mod 4], cos x = {c, -s, -c, s}[k mod 4] (exact). k mod 4
//    is read from the low bits of RN(x * 2/pi) + 1.5*2^52.
// kernels_test checks the claim against long-double sinl/cosl, and every path bit for bit.
namespace trig {
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;
constexpr double kRound = 0x1.8p52;
constexpr double kC1 = 0x1.921fb54442d18p+0, kC2 = 0x1.1a62633145c07p-54,
                 kC3 = -0x1.f1976b7ed8fbcp-110;
constexpr double kS[8] = {-0x1.5555555555555p-3,  0x1.1111111111111p-7,   -0x1.a01a01a01a01ap-13,
                          0x1.71de3a556c734p-19,  -0x1.ae64567f544e4p-26, 0x1.6124613a86d09p-33,
                          -0x1.ae7f3e733b81fp-41, 0x1.952c77030ad4ap-49};
constexpr double kC[8] = {0x1.5555555555555p-5,   -0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-16,
                          -0x1.27e4fb7789f5cp-22, 0x1.1eed8eff8d898p-29,  -0x1.93974a8c07c9dp-37,
                          0x1.ae7f3e733b81fp-45,  -0x1.6827863b97d97p-53};
}  // namespace trig

// Scalar operations; the vector paths overload the same names.
inline double o_bc(double, double c) { return c; }
inline double o_add(double a, double b) { return a + b; }
inline double o_sub(double a, double b) { return a - b; }
inline double o_mul(double a, double b) { return a * b; }
inline double o_fma(double a, double b, double c) { return std::fma(a, b, c); }
inline double o_neg(double a) { return -a; }
// Bit `bit` of the integer k carried in the mantissa of t = k + 1.5*2^52.
inline bool o_kbit(double t, int bit) { return (std::bit_cast<std::uint64_t>(t) >> bit) & 1u; }
inline double o_sel(bool m, double a, double b) { return m ? a : b; }

// The body shared by every path (V = double, __m256d, __m512d); see the derivation above.
#define RC_SINCOS_BODY(V)                                                                   \
  const V t = o_add(o_mul(x, o_bc(x, trig::kTwoOverPi)), o_bc(x, trig::kRound));            \
  const V k = o_sub(t, o_bc(x, trig::kRound));                                              \
  const V nk = o_neg(k);                                                                    \
  const V r1 = o_fma(nk, o_bc(x, trig::kC1), x);                                            \
  const V p_hi = o_mul(k, o_bc(x, trig::kC2));                                              \
  const V p_lo = o_fma(k, o_bc(x, trig::kC2), o_neg(p_hi));                                 \
  const V r_hi = o_sub(r1, p_hi);                                                           \
  const V bb = o_sub(r_hi, r1);                                                             \
  const V e1 = o_add(o_sub(r1, o_sub(r_hi, bb)), o_sub(o_neg(p_hi), bb));                   \
  const V r_lo = o_fma(nk, o_bc(x, trig::kC3), o_sub(e1, p_lo));                            \
  const V z = o_mul(r_hi, r_hi);                                                            \
  const V z_lo = o_fma(r_hi, r_hi, o_neg(z));                                               \
  const V hz = o_mul(z, o_bc(x, 0.5));                                                      \
  V p = o_bc(x, trig::kS[7]);                                                               \
  for (int j = 6; j >= 0; --j) p = o_fma(p, z, o_bc(x, trig::kS[j]));                       \
  V q = o_bc(x, trig::kC[7]);                                                               \
  for (int j = 6; j >= 0; --j) q = o_fma(q, z, o_bc(x, trig::kC[j]));                       \
  const V s_tail = o_fma(o_mul(r_hi, z), p, o_sub(r_lo, o_mul(r_lo, hz)));                  \
  const V sn = o_add(r_hi, s_tail);                                                         \
  const V w = o_sub(o_bc(x, 1.0), hz);                                                      \
  const V e = o_sub(o_neg(hz), o_sub(w, o_bc(x, 1.0)));                                     \
  const V c_tail =                                                                          \
      o_fma(o_mul(z, z), q, o_sub(o_sub(e, o_mul(z_lo, o_bc(x, 0.5))), o_mul(r_hi, r_lo))); \
  const V cs = o_add(w, c_tail);                                                            \
  const auto odd = o_kbit(t, 0);                                                            \
  const auto neg_s = o_kbit(t, 1);                                                          \
  const auto neg_c = o_kbit(o_add(t, o_bc(x, 1.0)), 1);                                     \
  const V s0 = o_sel(odd, cs, sn), c0 = o_sel(odd, sn, cs);                                 \
  s_out = o_sel(neg_s, o_neg(s0), s0);                                                      \
  c_out = o_sel(neg_c, o_neg(c0), c0);

// cos x = {c, -s, -c, s}[k mod 4] is negated exactly when (k + 1) mod 4 >= 2, i.e. bit 1 of k + 1
// (t + 1 is exact: t is an integer-valued double below 2^53).
inline void sincos_portable(double x, double& s_out, double& c_out) { RC_SINCOS_BODY(double) }

}  // namespace

void simd_sincos(double x, double& s, double& c) {
  if (!(std::fabs(x) <= kSimdTrigLimit)) {
    s = std::sin(x);
    c = std::cos(x);
    return;
  }
  sincos_portable(x, s, c);
}

void simd_step_sincos(double theta, std::int64_t m, double& s, double& c) {
  if (!(std::fabs(static_cast<double>(m)) < kSimdStepLimit)) {
    simd_sincos(static_cast<double>(m) * theta, s, c);
    return;
  }
  const std::int64_t j = m % kSimdStep, m0 = m - j;
  double bs, bc, js, jc;
  simd_sincos(static_cast<double>(m0) * theta, bs, bc);
  simd_sincos(static_cast<double>(j) * theta, js, jc);
  c = std::fma(bc, jc, -(bs * js));
  s = std::fma(bs, jc, bc * js);
}

namespace {

// Table entries from sin/cos: half layout C[i], S[i]; interleaved C2[2i] = C2[2i+1] = c_i,
// S2[2i] = -s_i, S2[2i+1] = s_i (see HeadFn). One rounding scale*cos (f64) -> A.
template <class A>
inline void fill_tables(std::int64_t np, double scale, bool half, const double* cb,
                        const double* sb, A* C, A* S) {
  if (half) {
    for (std::int64_t i = 0; i < np; ++i) {
      C[i] = static_cast<A>(scale * cb[i]);
      S[i] = static_cast<A>(scale * sb[i]);
    }
  } else {
    for (std::int64_t i = 0; i < np; ++i) {
      const A c = static_cast<A>(scale * cb[i]), s = static_cast<A>(scale * sb[i]);
      C[2 * i] = C[2 * i + 1] = c;
      S[2 * i] = -s;
      S[2 * i + 1] = s;
    }
  }
}

// sin/cos of the angles m * theta_i (f64, the `scalar` recipe) into sb/cb, i < np.
using SincosFn = void (*)(const double* theta, std::int64_t np, double m, double* cb, double* sb);
// The step composition (see rotate_all): cb + i sb = (bc + i bs)(jc + i js), i < np, as
//   c = fma(bc, jc, -(bs * js)),  s = fma(bs, jc, bc * js).
using ComposeFn = void (*)(std::int64_t np, const double* bc, const double* bs, const double* jc,
                           const double* js, double* cb, double* sb);
template <class A>
using FillFn = void (*)(std::int64_t np, double scale, bool half, const double* cb,
                        const double* sb, A* C, A* S);

void sincos_rows_portable(const double* theta, std::int64_t np, double m, double* cb, double* sb) {
  for (std::int64_t i = 0; i < np; ++i) simd_sincos(m * theta[i], sb[i], cb[i]);
}

inline void compose1(double bc, double bs, double jc, double js, double& c, double& s) {
  c = std::fma(bc, jc, -(bs * js));
  s = std::fma(bs, jc, bc * js);
}

void compose_portable(std::int64_t np, const double* bc, const double* bs, const double* jc,
                      const double* js, double* cb, double* sb) {
  for (std::int64_t i = 0; i < np; ++i) compose1(bc[i], bs[i], jc[i], js[i], cb[i], sb[i]);
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
// Half-style heads rotate pairs (i, i + off), i < rd/2: off = rd/2 for half/mrope/imrope and
// head_dim/2 for proportional. Interleaved heads ignore off.
template <class T>
using HeadFn = void (*)(const T* x, T* y, std::int64_t rd, std::int64_t off, const arith_t<T>* C,
                        const arith_t<T>* S);

template <class T>
void head_portable_half(const T* x, T* y, std::int64_t rd, std::int64_t off, const arith_t<T>* C,
                        const arith_t<T>* S) {
  const std::int64_t n = rd / 2;
  for (std::int64_t i = 0; i < n; ++i) rotate_pair1(x, y, i, i + off, C[i], S[i]);
}
template <class T>
void head_portable_interleaved(const T* x, T* y, std::int64_t rd, std::int64_t,
                               const arith_t<T>* C2, const arith_t<T>* S2) {
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

RC_AVX2 inline __m256d o_bc(__m256d, double c) { return _mm256_set1_pd(c); }
RC_AVX2 inline __m256d o_add(__m256d a, __m256d b) { return _mm256_add_pd(a, b); }
RC_AVX2 inline __m256d o_sub(__m256d a, __m256d b) { return _mm256_sub_pd(a, b); }
RC_AVX2 inline __m256d o_mul(__m256d a, __m256d b) { return _mm256_mul_pd(a, b); }
RC_AVX2 inline __m256d o_fma(__m256d a, __m256d b, __m256d c) { return _mm256_fmadd_pd(a, b, c); }
RC_AVX2 inline __m256d o_neg(__m256d a) { return v2_neg(a); }
RC_AVX2 inline __m256d o_kbit(__m256d t, int bit) {
  const __m256i b = _mm256_set1_epi64x(std::int64_t{1} << bit);
  return _mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_and_si256(_mm256_castpd_si256(t), b), b));
}
RC_AVX2 inline __m256d o_sel(__m256d m, __m256d a, __m256d b) { return _mm256_blendv_pd(b, a, m); }
RC_AVX2 inline void sincos_avx2(__m256d x, __m256d& s_out, __m256d& c_out) {
  RC_SINCOS_BODY(__m256d);
}

RC_AVX2
void sincos_rows_avx2(const double* theta, std::int64_t np, double m, double* cb, double* sb) {
  const __m256d vm = _mm256_set1_pd(m);
  const __m256d lim = _mm256_set1_pd(kSimdTrigLimit);
  const __m256d absmask = _mm256_castsi256_pd(_mm256_set1_epi64x(INT64_MAX));
  std::int64_t i = 0;
  for (; i + 4 <= np; i += 4) {
    const __m256d x = _mm256_mul_pd(vm, _mm256_loadu_pd(theta + i));
    __m256d s, c;
    sincos_avx2(x, s, c);
    _mm256_storeu_pd(sb + i, s);
    _mm256_storeu_pd(cb + i, c);
    // !(|x| <= limit): beyond the proven reduction range (or NaN) -> libm, lane by lane.
    const int out = _mm256_movemask_pd(_mm256_cmp_pd(_mm256_and_pd(x, absmask), lim, _CMP_NLE_UQ));
    if (out)
      for (int l = 0; l < 4; ++l)
        if (out >> l & 1) simd_sincos(m * theta[i + l], sb[i + l], cb[i + l]);
  }
  for (; i < np; ++i) simd_sincos(m * theta[i], sb[i], cb[i]);
}

RC_AVX2 void compose_avx2(std::int64_t np, const double* bc, const double* bs, const double* jc,
                          const double* js, double* cb, double* sb) {
  std::int64_t i = 0;
  for (; i + 4 <= np; i += 4) {
    const __m256d c0 = _mm256_loadu_pd(bc + i), s0 = _mm256_loadu_pd(bs + i);
    const __m256d c1 = _mm256_loadu_pd(jc + i), s1 = _mm256_loadu_pd(js + i);
    _mm256_storeu_pd(cb + i, _mm256_fmadd_pd(c0, c1, o_neg(_mm256_mul_pd(s0, s1))));
    _mm256_storeu_pd(sb + i, _mm256_fmadd_pd(s0, c1, _mm256_mul_pd(c0, s1)));
  }
  for (; i < np; ++i) compose1(bc[i], bs[i], jc[i], js[i], cb[i], sb[i]);
}

template <class T>
RC_AVX2 void head_avx2_half(const T* x, T* y, std::int64_t rd, std::int64_t h, const arith_t<T>* C,
                            const arith_t<T>* S) {
  constexpr std::int64_t W = 32 / sizeof(arith_t<T>);
  const std::int64_t n = rd / 2;
  std::int64_t i = 0;
  for (; i + W <= n; i += W) {
    const auto a = v2_ld(x + i), b = v2_ld(x + h + i);
    const auto c = v2_ld(C + i), s = v2_ld(S + i);
    v2_st(y + i, v2_fma(a, c, v2_neg(v2_mul(b, s))));
    v2_st(y + h + i, v2_fma(b, c, v2_mul(a, s)));
  }
  for (; i < n; ++i) rotate_pair1(x, y, i, i + h, C[i], S[i]);
}

template <class T>
RC_AVX2 void head_avx2_interleaved(const T* x, T* y, std::int64_t rd, std::int64_t,
                                   const arith_t<T>* C2, const arith_t<T>* S2) {
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
template <bool Tail, bool Nt = false>
RC_AVX512 inline void v5_st(double* p, __mmask16 k, __m512d v) {
  if constexpr (Tail)
    _mm512_mask_storeu_pd(p, static_cast<__mmask8>(k), v);
  else if constexpr (Nt)
    _mm512_stream_pd(p, v);
  else
    _mm512_storeu_pd(p, v);
}
template <bool Tail, bool Nt = false>
RC_AVX512 inline void v5_st(float* p, __mmask16 k, __m512 v) {
  if constexpr (Tail)
    _mm512_mask_storeu_ps(p, k, v);
  else if constexpr (Nt)
    _mm512_stream_ps(p, v);
  else
    _mm512_storeu_ps(p, v);
}
template <bool Tail, bool Nt = false>
RC_AVX512 inline void v5_st16(void* p, __mmask16 k, __m256i v) {
  if constexpr (Tail)
    _mm256_mask_storeu_epi16(p, k, v);
  else if constexpr (Nt)
    _mm256_stream_si256(static_cast<__m256i*>(p), v);
  else
    _mm256_storeu_si256(static_cast<__m256i*>(p), v);
}
template <bool Tail, bool Nt = false>
RC_AVX512 inline void v5_st(Eigen::half* p, __mmask16 k, __m512 v) {
  v5_st16<Tail, Nt>(p, k, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
template <bool Tail, bool Nt = false>
RC_AVX512 inline void v5_st(Eigen::bfloat16* p, __mmask16 k, __m512 v) {
  const __m512i x = _mm512_castps_si512(v);
  const __m512i hi = _mm512_srli_epi32(x, 16);
  const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  const __m512i qnan = _mm512_or_si512(hi, _mm512_set1_epi32(0x40));
  r = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), r, qnan);
  v5_st16<Tail, Nt>(p, k, _mm512_cvtepi32_epi16(r));
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

RC_AVX512 inline __m512d o_bc(__m512d, double c) { return _mm512_set1_pd(c); }
RC_AVX512 inline __m512d o_add(__m512d a, __m512d b) { return _mm512_add_pd(a, b); }
RC_AVX512 inline __m512d o_sub(__m512d a, __m512d b) { return _mm512_sub_pd(a, b); }
RC_AVX512 inline __m512d o_mul(__m512d a, __m512d b) { return _mm512_mul_pd(a, b); }
RC_AVX512 inline __m512d o_fma(__m512d a, __m512d b, __m512d c) { return _mm512_fmadd_pd(a, b, c); }
RC_AVX512 inline __m512d o_neg(__m512d a) { return v5_neg(a); }
RC_AVX512 inline __mmask8 o_kbit(__m512d t, int bit) {
  return _mm512_test_epi64_mask(_mm512_castpd_si512(t), _mm512_set1_epi64(std::int64_t{1} << bit));
}
RC_AVX512 inline __m512d o_sel(__mmask8 m, __m512d a, __m512d b) {
  return _mm512_mask_blend_pd(m, b, a);
}
RC_AVX512 inline void sincos_avx512(__m512d x, __m512d& s_out, __m512d& c_out) {
  RC_SINCOS_BODY(__m512d);
}

// fill_tables, 8 pairs per step: the same roundings (f64 product scale*cos, then one
// conversion to A with RNE, as static_cast does) and an exact negation, so the same bits. The
// per-token table (sincos + fill) is about a quarter of simd's time at head_dim 128 for 2-byte
// dtypes (measured with every position equal); the scalar fill was a visible part of it.
RC_AVX512 inline __m256 v5_narrow(__m512d v, float) { return _mm512_cvtpd_ps(v); }
RC_AVX512 inline __m512d v5_narrow(__m512d v, double) { return v; }
RC_AVX512 inline void v5_put_interleaved(float* C2, float* S2, __m256 c, __m256 s) {
  const __m512 c5 = _mm512_castps256_ps512(c), s5 = _mm512_castps256_ps512(s);
  const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  const __m512i mix = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  _mm512_storeu_ps(C2, _mm512_permutexvar_ps(dup, c5));
  _mm512_storeu_ps(S2, _mm512_permutex2var_ps(v5_neg(s5), mix, s5));
}
RC_AVX512 inline void v5_put_interleaved(double* C2, double* S2, __m512d c, __m512d s) {
  const __m512i lo = _mm512_setr_epi64(0, 0, 1, 1, 2, 2, 3, 3);
  const __m512i hi = _mm512_setr_epi64(4, 4, 5, 5, 6, 6, 7, 7);
  const __m512i mlo = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
  const __m512i mhi = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
  const __m512d ns = v5_neg(s);
  _mm512_storeu_pd(C2, _mm512_permutexvar_pd(lo, c));
  _mm512_storeu_pd(C2 + 8, _mm512_permutexvar_pd(hi, c));
  _mm512_storeu_pd(S2, _mm512_permutex2var_pd(ns, mlo, s));
  _mm512_storeu_pd(S2 + 8, _mm512_permutex2var_pd(ns, mhi, s));
}
RC_AVX512 inline void v5_put(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
RC_AVX512 inline void v5_put(double* p, __m512d v) { _mm512_storeu_pd(p, v); }

template <class A>
RC_AVX512 void fill_tables_avx512(std::int64_t np, double scale, bool half, const double* cb,
                                  const double* sb, A* C, A* S) {
  const __m512d vs = _mm512_set1_pd(scale);
  std::int64_t i = 0;
  for (; i + 8 <= np; i += 8) {
    const auto c = v5_narrow(_mm512_mul_pd(vs, _mm512_loadu_pd(cb + i)), A{});
    const auto s = v5_narrow(_mm512_mul_pd(vs, _mm512_loadu_pd(sb + i)), A{});
    if (half) {
      v5_put(C + i, c);
      v5_put(S + i, s);
    } else {
      v5_put_interleaved(C + 2 * i, S + 2 * i, c, s);
    }
  }
  if (i < np) {
    // The last < 8 pairs by the scalar formulas, written from the pair index on.
    fill_tables(np - i, scale, half, cb + i, sb + i, C + (half ? i : 2 * i),
                S + (half ? i : 2 * i));
  }
}

RC_AVX512 void sincos_rows_avx512(const double* theta, std::int64_t np, double m, double* cb,
                                  double* sb) {
  const __m512d vm = _mm512_set1_pd(m);
  const __m512d lim = _mm512_set1_pd(kSimdTrigLimit);
  std::int64_t i = 0;
  for (; i + 8 <= np; i += 8) {
    const __m512d x = _mm512_mul_pd(vm, _mm512_loadu_pd(theta + i));
    __m512d s, c;
    sincos_avx512(x, s, c);
    _mm512_storeu_pd(sb + i, s);
    _mm512_storeu_pd(cb + i, c);
    // !(|x| <= limit): beyond the proven reduction range (or NaN) -> libm, lane by lane.
    const unsigned out = _mm512_cmp_pd_mask(_mm512_abs_pd(x), lim, _CMP_NLE_UQ);
    if (out)
      for (int l = 0; l < 8; ++l)
        if (out >> l & 1u) simd_sincos(m * theta[i + l], sb[i + l], cb[i + l]);
  }
  for (; i < np; ++i) simd_sincos(m * theta[i], sb[i], cb[i]);
}

RC_AVX512 void compose_avx512(std::int64_t np, const double* bc, const double* bs, const double* jc,
                              const double* js, double* cb, double* sb) {
  std::int64_t i = 0;
  for (; i + 8 <= np; i += 8) {
    const __m512d c0 = _mm512_loadu_pd(bc + i), s0 = _mm512_loadu_pd(bs + i);
    const __m512d c1 = _mm512_loadu_pd(jc + i), s1 = _mm512_loadu_pd(js + i);
    _mm512_storeu_pd(cb + i, _mm512_fmadd_pd(c0, c1, v5_neg(_mm512_mul_pd(s0, s1))));
    _mm512_storeu_pd(sb + i, _mm512_fmadd_pd(s0, c1, _mm512_mul_pd(c0, s1)));
  }
  for (; i < np; ++i) compose1(bc[i], bs[i], jc[i], js[i], cb[i], sb[i]);
}

template <bool Tail, bool Nt, class T>
RC_AVX512 inline void v5_half_step(const T* x, T* y, std::int64_t h, std::int64_t i,
                                   const arith_t<T>* C, const arith_t<T>* S, __mmask16 k) {
  const auto a = v5_ld<Tail>(x + i, k), b = v5_ld<Tail>(x + h + i, k);
  const auto c = v5_ld<Tail>(C + i, k), s = v5_ld<Tail>(S + i, k);
  v5_st<Tail, Nt>(y + i, k, v5_fma(a, c, v5_neg(v5_mul(b, s))));
  v5_st<Tail, Nt>(y + h + i, k, v5_fma(b, c, v5_mul(a, s)));
}

template <bool Tail, bool Nt, class T>
RC_AVX512 inline void v5_interleaved_step(const T* x, T* y, std::int64_t j, const arith_t<T>* C2,
                                          const arith_t<T>* S2, __mmask16 k) {
  const auto v = v5_ld<Tail>(x + j, k);
  v5_st<Tail, Nt>(y + j, k,
                  v5_fma(v, v5_ld<Tail>(C2 + j, k), v5_mul(v5_swap(v), v5_ld<Tail>(S2 + j, k))));
}

template <class T, bool Nt>
RC_AVX512 void head_avx512_half(const T* x, T* y, std::int64_t rd, std::int64_t h,
                                const arith_t<T>* C, const arith_t<T>* S) {
  constexpr std::int64_t W = 64 / sizeof(arith_t<T>);
  const std::int64_t n = rd / 2;
  std::int64_t i = 0;
  for (; i + W <= n; i += W) v5_half_step<false, Nt>(x, y, h, i, C, S, 0);
  if (i < n)
    v5_half_step<true, false>(x, y, h, i, C, S, static_cast<__mmask16>((1u << (n - i)) - 1u));
}

template <class T, bool Nt>
RC_AVX512 void head_avx512_interleaved(const T* x, T* y, std::int64_t rd, std::int64_t,
                                       const arith_t<T>* C2, const arith_t<T>* S2) {
  constexpr std::int64_t W = 64 / sizeof(arith_t<T>);
  std::int64_t j = 0;
  for (; j + W <= rd; j += W) v5_interleaved_step<false, Nt>(x, y, j, C2, S2, 0);
  // rd and W are even, so the masked tail covers whole pairs only.
  if (j < rd)
    v5_interleaved_step<true, false>(x, y, j, C2, S2,
                                     static_cast<__mmask16>((1u << (rd - j)) - 1u));
}

// ---- AVX512-BF16 store (path avx512bf16; bf16 tensors only, everything else as avx512) --------
#define RC_AVX512BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")))

template <bool Tail, bool Nt>
RC_AVX512BF16 inline void v5n_st(Eigen::bfloat16* p, __mmask16 k, __m512 v) {
  // vcvtneps2bf16 reads f32 subnormals as zero; those are rare (|v| < 2^-126), so a vector with
  // one takes the integer rounding, which agrees with the instruction on every other input.
  if (__builtin_expect(_mm512_fpclass_ps_mask(v, 0x20) != 0, 0)) return v5_st<Tail, Nt>(p, k, v);
  v5_st16<Tail, Nt>(p, k, (__m256i)_mm512_cvtneps_pbh(v));
}

template <bool Tail, bool Nt>
RC_AVX512BF16 inline void v5n_half_step(const Eigen::bfloat16* x, Eigen::bfloat16* y,
                                        std::int64_t h, std::int64_t i, const float* C,
                                        const float* S, __mmask16 k) {
  const auto a = v5_ld<Tail>(x + i, k), b = v5_ld<Tail>(x + h + i, k);
  const auto c = v5_ld<Tail>(C + i, k), s = v5_ld<Tail>(S + i, k);
  v5n_st<Tail, Nt>(y + i, k, v5_fma(a, c, v5_neg(v5_mul(b, s))));
  v5n_st<Tail, Nt>(y + h + i, k, v5_fma(b, c, v5_mul(a, s)));
}

template <bool Nt>
RC_AVX512BF16 void head_avx512bf16_half(const Eigen::bfloat16* x, Eigen::bfloat16* y,
                                        std::int64_t rd, std::int64_t h, const float* C,
                                        const float* S) {
  constexpr std::int64_t W = 16;
  const std::int64_t n = rd / 2;
  std::int64_t i = 0;
  for (; i + W <= n; i += W) v5n_half_step<false, Nt>(x, y, h, i, C, S, 0);
  if (i < n)
    v5n_half_step<true, false>(x, y, h, i, C, S, static_cast<__mmask16>((1u << (n - i)) - 1u));
}

// Interleaved bf16 without shuffles: a bf16 is the top half of an f32, so in 32 loaded elements
// (16 pairs) the even ones (x_a, low halves) become f32 by a shift and the odd ones (x_b, high
// halves) by a mask, already de-interleaved; the pair table (C[i], S[i], as for half) multiplies
// them lane by lane, and one vcvtne2ps2bf16 + vpermw packs and re-interleaves the results.
// Against the C2/S2 form (widen 16, swap, two table vectors, narrow 16, twice): same formulas,
// out_a = fma(x_a, c, -(x_b s)), out_b = fma(x_b, c, x_a s), so the same bits; about a third
// fewer instructions.
template <bool Nt>
RC_AVX512BF16 inline void v5n_store_pairs(Eigen::bfloat16* y, __m512 ya, __m512 yb) {
  if (__builtin_expect((_mm512_fpclass_ps_mask(ya, 0x20) | _mm512_fpclass_ps_mask(yb, 0x20)) != 0,
                       0)) {
    // An f32 subnormal: the integer rounding (see v5n_st), re-interleaved by hand.
    alignas(64) Eigen::bfloat16 ta[16], tb[16];
    v5_st<false, false>(ta, 0, ya);
    v5_st<false, false>(tb, 0, yb);
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
RC_AVX512BF16 void head_avx512bf16_interleaved(const Eigen::bfloat16* x, Eigen::bfloat16* y,
                                               std::int64_t rd, std::int64_t, const float* C,
                                               const float* S) {
  const __m512i hi = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  std::int64_t j = 0;
  for (; j + 32 <= rd; j += 32) {
    const __m512i raw = _mm512_loadu_si512(x + j);
    const __m512 xa = _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
    const __m512 xb = _mm512_castsi512_ps(_mm512_and_si512(raw, hi));
    const __m512 c = _mm512_loadu_ps(C + j / 2), s = _mm512_loadu_ps(S + j / 2);
    v5n_store_pairs<Nt>(y + j, _mm512_fmadd_ps(xa, c, v5_neg(_mm512_mul_ps(xb, s))),
                        _mm512_fmadd_ps(xb, c, _mm512_mul_ps(xa, s)));
  }
  for (; j < rd; j += 2) rotate_pair1(x, y, j, j + 1, C[j / 2], S[j / 2]);
}

// Self-check hook (simd_info.hpp): both bf16 conversions on every f32 with bits in [first, last].
RC_AVX512BF16 std::uint64_t bf16_native_mismatches(std::uint32_t first, std::uint32_t last) {
  alignas(64) std::uint32_t in[16];
  alignas(64) Eigen::bfloat16 a[16], b[16];
  std::uint64_t bad = 0;
  for (std::uint64_t u = first; u <= last; u += 16) {
    const std::uint64_t n = std::min<std::uint64_t>(16, last - u + 1);
    for (std::uint64_t l = 0; l < 16; ++l) in[l] = static_cast<std::uint32_t>(u + (l < n ? l : 0));
    const __m512 v = _mm512_castsi512_ps(_mm512_load_si512(in));
    v5_st<false, false>(a, 0, v);
    v5n_st<false, false>(b, 0, v);
    for (std::uint64_t l = 0; l < n; ++l)
      bad += std::bit_cast<std::uint16_t>(a[l]) != std::bit_cast<std::uint16_t>(b[l]);
  }
  return bad;
}
#endif  // ROPECHECK_X86

// All heads of one token in one call: one indirect call per token instead of one per head, and
// the head function inlined into the loop. Per head of 128 elements the call, the loop set-up
// and the prefetch cost as much as a sizeable part of the arithmetic (measured: bf16 at T=2048,
// [T][32][128], 1.46-1.62 -> 1.06-1.30 x memcpy). prefetch_bytes > 0: prefetch each head's
// input kPrefetchAhead bytes ahead (see is_large).
constexpr std::int64_t kPrefetchAhead = 4096;

template <class T>
using HeadsFn = void (*)(const T* x, T* y, std::int64_t n_heads, std::int64_t head_stride,
                         std::int64_t rd, std::int64_t off, const arith_t<T>* C,
                         const arith_t<T>* S, std::int64_t prefetch_bytes);

inline void prefetch_ahead(const void* x, std::int64_t bytes) {
#ifdef ROPECHECK_X86
  // A hint: never faults, also past the end of the input.
  const char* ahead = static_cast<const char*>(x) + kPrefetchAhead;
  for (std::int64_t b = 0; b < bytes; b += 64) _mm_prefetch(ahead + b, _MM_HINT_T0);
#endif
}

#define RC_HEADS_LOOP(F)                                                          \
  for (std::int64_t hd = 0; hd < n_heads; ++hd) {                                 \
    if (prefetch_bytes > 0) prefetch_ahead(x + hd * head_stride, prefetch_bytes); \
    F(x + hd * head_stride, y + hd * head_stride, rd, off, C, S);                 \
  }
#define RC_HEADS_PARAMS                                                              \
  const T *x, T *y, std::int64_t n_heads, std::int64_t head_stride, std::int64_t rd, \
      std::int64_t off, const arith_t<T>*C, const arith_t<T>*S, std::int64_t prefetch_bytes

template <class T, HeadFn<T> F>
void heads_portable(RC_HEADS_PARAMS) {
  RC_HEADS_LOOP(F)
}
#ifdef ROPECHECK_X86
template <class T, HeadFn<T> F>
RC_AVX2 void heads_avx2(RC_HEADS_PARAMS) {
  RC_HEADS_LOOP(F)
}
template <class T, HeadFn<T> F>
RC_AVX512 void heads_avx512(RC_HEADS_PARAMS) {
  RC_HEADS_LOOP(F)
}
template <class T, HeadFn<T> F>
RC_AVX512BF16 void heads_avx512bf16(RC_HEADS_PARAMS) {
  RC_HEADS_LOOP(F)
}
#endif

// Interleaved pairing: interleaved and axial; every other layout pairs (i, i + off).
inline bool half_style(Layout l) { return l != Layout::interleaved && l != Layout::axial; }
inline std::int64_t half_offset(const RopeSpec& spec) {
  return spec.layout == Layout::proportional ? spec.head_dim / 2 : spec.rotary_dim / 2;
}

template <class T>
HeadsFn<T> pick(Path p, Layout l, bool stream) {
  const bool half = half_style(l);
#ifdef ROPECHECK_X86
  if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
    if (p == Path::avx512bf16) {
      if (stream)
        return half ? heads_avx512bf16<T, head_avx512bf16_half<true>>
                    : heads_avx512bf16<T, head_avx512bf16_interleaved<true>>;
      return half ? heads_avx512bf16<T, head_avx512bf16_half<false>>
                  : heads_avx512bf16<T, head_avx512bf16_interleaved<false>>;
    }
  }
  if (p >= Path::avx512) {
    if (stream)
      return half ? heads_avx512<T, head_avx512_half<T, true>>
                  : heads_avx512<T, head_avx512_interleaved<T, true>>;
    return half ? heads_avx512<T, head_avx512_half<T, false>>
                : heads_avx512<T, head_avx512_interleaved<T, false>>;
  }
  if (p == Path::avx2)
    return half ? heads_avx2<T, head_avx2_half<T>> : heads_avx2<T, head_avx2_interleaved<T>>;
#endif
  return half ? heads_portable<T, head_portable_half<T>>
              : heads_portable<T, head_portable_interleaved<T>>;
}

template <class A>
struct TrigOps {
  SincosFn sincos;
  ComposeFn compose;
  FillFn<A> fill;
};

template <class A>
TrigOps<A> pick_trig(Path p) {
#ifdef ROPECHECK_X86
  if (p >= Path::avx512) return {sincos_rows_avx512, compose_avx512, fill_tables_avx512<A>};
  if (p == Path::avx2) return {sincos_rows_avx2, compose_avx2, fill_tables<A>};
#endif
  return {sincos_rows_portable, compose_portable, fill_tables<A>};
}

// Large calls (output >= kLargeBytes, far beyond L2) are memory-bound; two things bring them to
// memcpy speed, neither changes a value:
// * Software prefetch of the input kPrefetchAhead bytes ahead, once per head vector: the hardware
//   prefetcher alone leaves the head loop stalled on loads (measured: f32 1.4x -> 0.9x memcpy).
// * Non-temporal stores for the full vectors of out-of-place calls (AVX-512 path). A memcpy of a
//   tensor this size streams its stores past the cache (glibc does above ~3/4 of the L3 share);
//   with ordinary stores every output line is first read (write-allocate), 1.5x the traffic.
//   Needs every full-vector store aligned to its width (64 bytes; 32 for f16/bf16, 16 f32 lanes
//   narrowed): out, both strides and, for the half layout, the second half's offset rd/2.
constexpr std::int64_t kLargeBytes = std::int64_t{8} << 20;  // kPrefetchAhead: above pick()

template <class T>
bool is_large(const RopeSpec& spec, const TensorArgs& a, Path path) {
  return path != Path::portable &&
         a.n_tokens * a.n_heads * spec.head_dim * static_cast<std::int64_t>(sizeof(T)) >=
             kLargeBytes;
}

template <class T>
bool use_streaming_stores(const RopeSpec& spec, const TensorArgs& a, Path path) {
  if (path < Path::avx512 || a.in == a.out || !is_large<T>(spec, a, path)) return false;
  const std::int64_t align = sizeof(T) == 2 ? 32 : 64;
  const std::int64_t sz = sizeof(T);
  const std::int64_t half_off = half_style(spec.layout) ? half_offset(spec) * sz : 0;
  return reinterpret_cast<std::uintptr_t>(a.out) % align == 0 &&
         (a.token_stride * sz) % align == 0 && (a.head_stride * sz) % align == 0 &&
         half_off % align == 0;
}

template <class T>
void rotate_all(const RopeSpec& spec, const TensorArgs& a, Path path) {
  using A = arith_t<T>;
  const auto* in = static_cast<const T*>(a.in);
  auto* out = static_cast<T*>(a.out);
  const std::int64_t np = spec.n_pairs(), rd = spec.rotary_dim;
  const bool half = half_style(spec.layout);
  // Pair tables (C[i], S[i]) for half-style heads and for the avx512bf16 interleaved bf16 head.
  const bool pair_table = half || (std::is_same_v<T, Eigen::bfloat16> && path == Path::avx512bf16);
  const std::int64_t hoff = half_offset(spec);
  const bool stream = use_streaming_stores<T>(spec, a, path);
  const bool prefetch = is_large<T>(spec, a, path);
  const HeadsFn<T> heads = pick<T>(path, spec.layout, stream);
  const std::int64_t prefetch_bytes =
      prefetch ? spec.head_dim * static_cast<std::int64_t>(sizeof(T)) : 0;

  // theta'_i by the f64 variant formulas (identical to theta_f64 for unscaled 1-D specs), and
  // s = magnitude_f64 (spec.scale times the variant's attention factor).
  const std::vector<double> theta = theta_ladder_f64(spec);
  const double scale = magnitude_f64(spec);
  std::vector<A> C(rd), S(rd);
  std::vector<double> cb(np), sb(np);
  const TrigOps<A> trig = pick_trig<A>(path);
  // Multi-axis or real positions: angles m_axis(i) * theta'_i are formed here (one f64 product,
  // as in the 1-D table functions) and passed with m = 1 (1 * angle is exact).
  const bool per_pair_positions = (a.n_axes != 1 && spec.n_axes() != 1) || a.real_positions;
  std::vector<double> ang(per_pair_positions ? np : 0);

  // f32 tables (f32/f16/bf16) of integer positions: m = m0 + j with j = m % kSimdStep, entries
  // from the rotation of sincos(m0 theta) by sincos(j theta) (simd_step_sincos, one complex
  // product per pair) instead of a sincos per token. For 1-D positions bases are shared by
  // kSimdStep consecutive positions and steps by the whole call, so a run of consecutive
  // positions costs 1/16 of a sincos per token plus the product; a token's entries are still a
  // function of its position alone (TokensAreIndependent). Per-axis integer positions take the
  // same formula pair by pair (bases per token, steps from the shared rows: bit-identical to 1-D
  // when the axes agree).
  // Real positions are not integers: one sincos per angle, as the f64 table always does (its
  // 2 u trig budget is below the composition's 6.5 u; derivation in this file's header).
  constexpr bool kStepped = std::is_same_v<A, float>;
  const bool stepped = kStepped && !a.real_positions;
  std::vector<double> base_c(stepped ? np : 0), base_s(stepped ? np : 0);
  std::int64_t base_m = 0;
  bool have_base = false;
  // Step rows j in (-kSimdStep, kSimdStep) (sincos(j theta_i) for every pair), computed when
  // first needed and shared by every token of the call, 1-D and per-axis alike.
  std::vector<double> step_c, step_s;
  std::vector<char> have_step;
  if (stepped) {
    step_c.resize((2 * kSimdStep - 1) * np);
    step_s.resize((2 * kSimdStep - 1) * np);
    have_step.assign(2 * kSimdStep - 1, 0);
  }
  auto step_row = [&](std::int64_t j) {
    const std::size_t row = static_cast<std::size_t>(j + kSimdStep - 1);
    if (!have_step[row]) {
      trig.sincos(theta.data(), np, static_cast<double>(j), step_c.data() + row * np,
                  step_s.data() + row * np);
      have_step[row] = 1;
    }
    return row * static_cast<std::size_t>(np);
  };
  // Per-axis: every pair's base angle m0 theta_i (in ang), its step (gathered from the rows) and
  // whether j = 0. One sincos per token (the bases), as before the angle addition.
  std::vector<double> jc_pp(stepped && per_pair_positions ? np : 0), js_pp(jc_pp.size());
  std::vector<char> j_zero(jc_pp.size());
  auto fill_per_axis = [&](std::int64_t t) {
    for (std::int64_t i = 0; i < np; ++i) {
      const std::int64_t m = a.positions[t * a.n_axes + spec.pair_axis(i)];
      const bool direct = !(std::fabs(static_cast<double>(m)) < kSimdStepLimit);
      const std::int64_t jj = direct ? 0 : m % kSimdStep;
      ang[i] = static_cast<double>(m - jj) * theta[i];
      j_zero[i] = jj == 0;
      const std::size_t r = jj == 0 ? 0 : step_row(jj);
      jc_pp[i] = jj == 0 ? 1.0 : step_c[r + i];  // j = 0: replaced by the base below
      js_pp[i] = jj == 0 ? 0.0 : step_s[r + i];
    }
    trig.sincos(ang.data(), np, 1.0, base_c.data(), base_s.data());
    trig.compose(np, base_c.data(), base_s.data(), jc_pp.data(), js_pp.data(), cb.data(),
                 sb.data());
    // j = 0 is the base itself, as in the 1-D path (also keeps the sign of a zero sine).
    for (std::int64_t i = 0; i < np; ++i)
      if (j_zero[i]) {
        cb[i] = base_c[i];
        sb[i] = base_s[i];
      }
    trig.fill(np, scale, pair_table, cb.data(), sb.data(), C.data(), S.data());
  };
  auto fill_table = [&](std::int64_t t) {
    if (stepped && per_pair_positions) return fill_per_axis(t);
    if (per_pair_positions) {  // real positions
      for (std::int64_t i = 0; i < np; ++i)
        ang[i] = position_of(spec, a, t, spec.pair_axis(i)) * theta[i];
      trig.sincos(ang.data(), np, 1.0, cb.data(), sb.data());
      trig.fill(np, scale, pair_table, cb.data(), sb.data(), C.data(), S.data());
      return;
    }
    const std::int64_t pos = a.positions[t * a.n_axes];
    if (!stepped || !(std::fabs(static_cast<double>(pos)) < kSimdStepLimit)) {
      trig.sincos(theta.data(), np, static_cast<double>(pos), cb.data(), sb.data());
      trig.fill(np, scale, pair_table, cb.data(), sb.data(), C.data(), S.data());
      return;
    }
    const std::int64_t j = pos % kSimdStep, m0 = pos - j;
    if (!have_base || base_m != m0) {
      trig.sincos(theta.data(), np, static_cast<double>(m0), base_c.data(), base_s.data());
      base_m = m0;
      have_base = true;
    }
    if (j == 0) {
      trig.fill(np, scale, pair_table, base_c.data(), base_s.data(), C.data(), S.data());
      return;
    }
    const std::size_t r = step_row(j);
    trig.compose(np, base_c.data(), base_s.data(), step_c.data() + r, step_s.data() + r, cb.data(),
                 sb.data());
    trig.fill(np, scale, pair_table, cb.data(), sb.data(), C.data(), S.data());
  };

  for (std::int64_t t = 0; t < a.n_tokens; ++t) {
    // The table depends on the position only; runs of equal 1-D positions reuse it.
    if (rd > 0 && (per_pair_positions || t == 0 ||
                   a.positions[t * a.n_axes] != a.positions[(t - 1) * a.n_axes]))
      fill_table(t);
    const std::int64_t toff = t * a.token_stride;
    if (rd > 0)
      heads(in + toff, out + toff, a.n_heads, a.head_stride, rd, hoff, C.data(), S.data(),
            prefetch_bytes);
    if (rd < spec.head_dim)  // else copy_tail has nothing to copy
      for (std::int64_t hd = 0; hd < a.n_heads; ++hd)
        copy_tail(spec, in + toff + hd * a.head_stride, out + toff + hd * a.head_stride);
  }
#ifdef ROPECHECK_X86
  // Streaming stores are weakly ordered: make them visible before the caller reads the output.
  if (stream) _mm_sfence();
#endif
}

class SimdKernel final : public BuiltinKernel {
 public:
  std::string name() const override { return "simd"; }
  std::string description() const override {
    return "f64 angle and vectorized f64 cos/sin (own, |err| <= 2^-53) per distinct token into "
           "an f32 table (f64 for f64), FMA rotation vectorized with run-time dispatch (avx512bf16 "
           "/ "
           "avx512 / avx2+fma+f16c / portable)";
  }
  Policy policy(Dtype d) const override {
    const Precision p = d == Dtype::f64 ? Dtype::f64 : Dtype::f32;
    return {Dtype::f64,
            p,
            p,
            AngleRecipe::pow_product,
            true,
            std::string("path: ") + path_name(current_path()) +
                " (all paths bit-identical); cos/sin: own vectorized f64 evaluation, absolute "
                "error <= 2^-53 for |angle| <= 2^28, libm beyond; out_a = fma(x_a, c, x_b*(-s)), "
                "out_b = fma(x_b, c, x_a*s); table holds scale*cos, scale*sin; scaling variants, "
                "magnitude and multi-axis angles by the f64 recipe formulas (theta_ladder_f64, "
                "magnitude_f64), as `scalar`" +
                (d == Dtype::f64 ? std::string()
                                 : "; f32-table entries by angle addition from sincos(m0 theta) "
                                   "and sincos(j theta), m = m0 + j, |j| < 16 (trig error <= "
                                   "6.5 u64)"),
            d == Dtype::f64 ? 2.0 : kSimdStepTrigError};
  }
  bool extended() const override { return true; }
  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    const Path p = current_path();
    return checked_apply(spec, a, [&](auto tag) { rotate_all<decltype(tag)>(spec, a, p); });
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
std::int64_t simd_bf16_native_mismatches(std::uint32_t first, std::uint32_t last) {
#ifdef ROPECHECK_X86
  if (kernels::best_path() == kernels::Path::avx512bf16)
    return static_cast<std::int64_t>(kernels::bf16_native_mismatches(first, last));
#endif
  return -1;
}

}  // namespace ropecheck
