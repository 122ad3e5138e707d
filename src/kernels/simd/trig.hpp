// The simd kernel's own f64 sin/cos and its angle-addition table entries: the contracts, stated
// once, here (private to src/kernels and its tests). The vector paths evaluate exactly these
// operation sequences lane by lane (sincos-inl.hpp), so these scalar entry points are the declared
// formulas the tests compare the kernel against; kernels_test checks each contract against
// long-double sinl/cosl (SimdTrig.*) and every path bit for bit (SimdDispatch.*).
//
// Why our own: with libm per (token, pair) the cos/sin table was most of the kernel's time (131k
// sin+cos per call at 2048 tokens x 64 pairs); ours is vectorized and uses only IEEE add, mul and
// fma (each correctly rounded), so every lane of every path gives the same bits without relying on
// libm.
#pragma once

#include <cstdint>

namespace ropecheck::kernels {

// ---- simd_sincos ------------------------------------------------------------------------------
// Max error: |s - sin x| <= 2^-53 and |c - cos x| <= 2^-53, absolute (u = 2^-53 = u64).
// Valid range: |x| <= kSimdTrigLimit = 2^28. Beyond it (and for NaN/inf) libm sin/cos, whose error
// is <= 1 ulp, i.e. <= 2^-52 absolute. As a table in the angle precision f64 this is within the
// 2 u64 per entry the bound table (ropecheck::bounds) assumes: Policy::trig_error = 2.
// Derivation (u = 2^-53, first order; second-order terms are below 2^-100):
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
//    is read from the low bits of t = RN(x * 2/pi) + 1.5*2^52; cos is negated exactly when
//    (k + 1) mod 4 >= 2, i.e. bit 1 of t + 1 (exact: t is an integer-valued double below 2^53).
inline constexpr double kSimdTrigLimit = 0x1p28;
void simd_sincos(double x, double& s, double& c);

// ---- simd_step_sincos: the f32 tables' entries (f32/f16/bf16 storage) ---------------------------
// For integer positions |m| < kSimdStepLimit = 2^53: m = m0 + j with j = m % kSimdStep (C++
// remainder: the sign of m, |j| < 16) and
//   (b_s, b_c) = simd_sincos(double(m0) * theta),  (j_s, j_c) = simd_sincos(double(j) * theta),
//   c = fma(b_c, j_c, -(b_s * j_s)),  s = fma(b_s, j_c, b_c * j_s);
// beyond the limit simd_sincos(double(m) * theta).
// Max error: |c - cos(a)|, |s - sin(a)| <= kSimdStepTrigError * 2^-53 = 6.5 u64 absolute, with
// a = RN(m0 theta) + RN(j theta) (beyond the limit a = RN(double(m) theta), error <= 2 u64).
// Valid range: every int64 m and finite theta.
// Why: one sincos per 16 consecutive positions (the base) plus 31 shared step rows per call,
// instead of one per token; the table was about a quarter of simd's time for 2-byte dtypes
// (measured: bf16 [2048][32][128] 1.20-1.26 -> 1.11-1.14 x memcpy interleaved).
// Derivation (u = 2^-53, absolute per entry, first order; the u^2 terms are below 2^-100):
// * Angle: m0 and j have the sign of m, so |RN(m0 theta) - m0 theta| + |RN(j theta) - j theta|
//   <= u |m0 theta| + u |j theta| = u |m theta|: the one product rounding the bound's angle term
//   already counts (bounds.cpp section 1). What remains is trig error against cos/sin of a.
// * Inputs: the base within e_b per entry (u from simd_sincos, 2u when |m0 theta| > 2^28 takes
//   libm), the step within u (|j theta| < 16): as complex numbers |b^ - b| <= sqrt2 e_b,
//   |j^ - j| <= sqrt2 u, so the exact product errs by <= |b^ - b| |j^| + |b| |j^ - j|
//   <= sqrt2 (e_b + u) <= 3 sqrt2 u = 4.25u.
// * Roundings: c = fma(bc, jc, -RN(bs js)) errs by <= u |bs js| + u |bc jc - RN(bs js)|
//   <= u (|bc jc| + 2 |bs js|) <= u ||(bc, bs)|| ||(jc, 2 js)|| <= 2u (Cauchy-Schwarz); s likewise.
// Per entry <= 4.25u + 2u = 6.25u < 6.5u = Policy::trig_error (j = 0: the base alone, <= 2u).
// The bound has teeth: chaining the same products from token to token (c(m+1) from c(m), no
// bases) leaves it within a few dozen steps (SimdTrig.StepEntriesWithinDeclaredError).
inline constexpr std::int64_t kSimdStep = 16;
inline constexpr double kSimdStepTrigError = 6.5;
inline constexpr double kSimdStepLimit = 0x1p53;
void simd_step_sincos(double theta, std::int64_t m, double& s, double& c);

}  // namespace ropecheck::kernels
