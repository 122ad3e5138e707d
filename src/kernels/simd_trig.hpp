// The simd kernel's own f64 sin/cos (private to src/kernels and its tests). The vector paths
// evaluate exactly this operation sequence lane by lane, so this scalar entry point is the
// declared formula the tests compare the kernel against; its accuracy is tested separately
// against long-double sinl/cosl.
#pragma once

#include <cstdint>

namespace ropecheck::kernels {

// Arguments with |x| above this use libm's sin/cos (exact range reduction): the Cody-Waite
// reduction below is only proven exact up to here (see simd.cpp).
inline constexpr double kSimdTrigLimit = 0x1p28;

// sin(x), cos(x) with absolute error <= 2^-53 each for |x| <= kSimdTrigLimit (derivation in
// simd.cpp); libm beyond. Bit-identical to every vector lane of the simd kernel.
void simd_sincos(double x, double& s, double& c);

// The f32-table kernels' entries (f32/f16/bf16): for integer positions |m| < kSimdStepLimit,
// m = m0 + j with j = m % kSimdStep (C++ remainder: sign of m, |j| < kSimdStep) and
//   (b_s, b_c) = simd_sincos(double(m0) * theta),  (j_s, j_c) = simd_sincos(double(j) * theta),
//   c = fma(b_c, j_c, -(b_s * j_s)),  s = fma(b_s, j_c, b_c * j_s);
// beyond the limit, simd_sincos(double(m) * theta). |c - cos(m theta)|, |s - sin(m theta)| <=
// 6.5 * 2^-53 + |m theta| 2^-53 (derivation in simd.cpp). Bit-identical to every vector lane.
inline constexpr std::int64_t kSimdStep = 16;
// The declared trig error of those entries in units of 2^-53 (Policy::trig_error).
inline constexpr double kSimdStepTrigError = 6.5;
inline constexpr double kSimdStepLimit = 0x1p53;
void simd_step_sincos(double theta, std::int64_t m, double& s, double& c);

}  // namespace ropecheck::kernels
