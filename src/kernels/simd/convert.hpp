// The simd kernel's element operations in scalar form, for the portable path and every vector
// path's scalar tail: loads and stores, the one rotation formula, the step composition and the
// table fill. The vector paths compute and convert the same way, so a tail element gets the bits
// a vector lane would. Storage rounding:
// * f16: RNE with subnormals and overflow to inf (F16C / AVX-512 vcvtps2ph, Eigen's float -> half);
//   NaN the F16C way: sign and top payload bits kept, quiet bit set.
// * bf16: integer RNE (x + 0x7FFF + lsb) >> 16, NaN kept a quiet NaN ((x >> 16) | 0x40).
// * f32/f16/bf16 compute in f32 (A = float), f64 in f64: arith_t<T>.
#pragma once

#include "ropecheck/dtype.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ropecheck::kernels::simd {

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
inline std::uint16_t f32_to_bf16_bits(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}
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

// The one rotation formula: out_a = fma(x_a, c, x_b*(-s)), out_b = fma(x_b, c, x_a*s) in A, then
// one rounding into storage. Each output fuses its own element's product with c and rounds the
// cross product once; x_b * (-s) == -(x_b * s) bit for bit because RNE is sign-symmetric, which
// lets the interleaved vector form be fma(v, [c,c], swap(v) * [-s,s]). std::fma is correctly
// rounded whether it becomes an instruction (inlined into an FMA-target function) or a libm call,
// so tails match vector lanes.
template <class T>
inline void rotate_pair1(const T* x, T* y, std::int64_t ia, std::int64_t ib, arith_t<T> c,
                         arith_t<T> s) {
  const arith_t<T> xa = ld1(x + ia), xb = ld1(x + ib);
  st1(y + ia, std::fma(xa, c, xb * -s));
  st1(y + ib, std::fma(xb, c, xa * s));
}

// The step composition of simd_step_sincos (trig.hpp): (c, s) = (bc + i bs)(jc + i js).
inline void compose1(double bc, double bs, double jc, double js, double& c, double& s) {
  c = std::fma(bc, jc, -(bs * js));
  s = std::fma(bs, jc, bc * js);
}

// FillFn (target.hpp): one rounding of the f64 product scale*cos (scale*sin) into A; the sine
// slots of the interleaved table are negated exactly.
template <class A>
void fill_tables(std::int64_t np, double scale, bool half, const double* cb, const double* sb, A* C,
                 A* S) {
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

}  // namespace ropecheck::kernels::simd
