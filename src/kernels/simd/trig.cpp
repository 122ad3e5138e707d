// The scalar entry points of trig.hpp: the contract functions the vector paths match lane by lane
// (portable code: no target region).
#include "trig.hpp"

#include "target.hpp"

#include <bit>
#include <cmath>
#include <cstdint>

#include "sincos-inl.hpp"

namespace ropecheck::kernels {
namespace {

// sincos-inl.hpp's operations on one double.
struct ScalarOps {
  using V = double;
  using M = bool;
  static V set1(double c) { return c; }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V fma(V a, V b, V c) { return std::fma(a, b, c); }
  static V neg(V a) { return -a; }
  static M kbit(V t, int bit) { return (std::bit_cast<std::uint64_t>(t) >> bit) & 1u; }
  static V select(M m, V a, V b) { return m ? a : b; }
};

}  // namespace

void simd_sincos(double x, double& s, double& c) {
  if (!(std::fabs(x) <= kSimdTrigLimit)) {
    s = std::sin(x);
    c = std::cos(x);
    return;
  }
  simd::sincos_body<ScalarOps>(x, s, c);
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
  simd::compose1(bc, bs, jc, js, c, s);
}

}  // namespace ropecheck::kernels
