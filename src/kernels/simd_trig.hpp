// The simd kernel's own f64 sin/cos (private to src/kernels and its tests). The vector paths
// evaluate exactly this operation sequence lane by lane, so this scalar entry point is the
// declared formula the tests compare the kernel against; its accuracy is tested separately
// against long-double sinl/cosl.
#pragma once

namespace ropecheck::kernels {

// Arguments with |x| above this use libm's sin/cos (exact range reduction): the Cody-Waite
// reduction below is only proven exact up to here (see simd.cpp).
inline constexpr double kSimdTrigLimit = 0x1p28;

// sin(x), cos(x) with absolute error <= 2^-53 each for |x| <= kSimdTrigLimit (derivation in
// simd.cpp); libm beyond. Bit-identical to every vector lane of the simd kernel.
void simd_sincos(double x, double& s, double& c);

}  // namespace ropecheck::kernels
