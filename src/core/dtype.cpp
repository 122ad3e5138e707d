#include "ropecheck/dtype.hpp"

#include <algorithm>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>

namespace ropecheck {

std::optional<Dtype> parse_dtype(std::string_view s) {
  for (Dtype d : kAllDtypes)
    if (s == name(d)) return d;
  return std::nullopt;
}

double round_to_dtype(double x, Dtype d) {
  if (d == Dtype::f64 || !std::isfinite(x) || x == 0.0) return x;
  // IEEE double -> binary32 conversion is this rounding (nearest-even, gradual underflow, inf
  // beyond max + half an ulp) in one instruction.
  if (d == Dtype::f32) return static_cast<float>(x);
  const auto t = traits(d);
  // Quantum q = 2^k of the binade of x, clamped at the subnormal quantum, from the exponent bits
  // (k in [-133, 1016]: q and 1 / q are normal doubles). y = |x| / q is exact and below 2^digits,
  // so adding and subtracting 2^52 rounds it to an integer, to nearest-even under the default
  // rounding mode (no fast-math; nothing to contract): r = n * q is the correctly rounded value.
  const double a = std::fabs(x);
  const int biased = static_cast<int>((std::bit_cast<std::uint64_t>(a) >> 52) & 0x7ff);
  const int k = std::max(biased - 1023, t.emin) - (t.digits - 1);
  const double q = std::bit_cast<double>(static_cast<std::uint64_t>(k + 1023) << 52);
  const double inv_q = std::bit_cast<double>(static_cast<std::uint64_t>(1023 - k) << 52);
  const double r = std::copysign(((a * inv_q + 0x1p52) - 0x1p52) * q, x);
  // Rounding up past the largest finite value overflows to inf (RNE: |x| >= max + ulp/2).
  if (std::fabs(r) > max_finite(d))
    return std::copysign(std::numeric_limits<double>::infinity(), x);
  return r;
}

std::uint64_t bits_of(double v, Dtype d) {
  switch (d) {
    case Dtype::f64:
      return std::bit_cast<std::uint64_t>(v);
    case Dtype::f32:
      return std::bit_cast<std::uint32_t>(static_cast<float>(v));
    case Dtype::f16:
      return Eigen::numext::bit_cast<std::uint16_t>(Eigen::half(static_cast<float>(v)));
    case Dtype::bf16:
      return Eigen::numext::bit_cast<std::uint16_t>(Eigen::bfloat16(static_cast<float>(v)));
  }
  return 0;
}

double from_bits(std::uint64_t b, Dtype d) {
  switch (d) {
    case Dtype::f64:
      return std::bit_cast<double>(b);
    case Dtype::f32:
      return std::bit_cast<float>(static_cast<std::uint32_t>(b));
    case Dtype::f16:
      return static_cast<float>(
          Eigen::numext::bit_cast<Eigen::half>(static_cast<std::uint16_t>(b)));
    case Dtype::bf16:
      return static_cast<float>(
          Eigen::numext::bit_cast<Eigen::bfloat16>(static_cast<std::uint16_t>(b)));
  }
  return 0;
}

double load(Dtype d, const void* base, std::int64_t i) {
  switch (d) {
    case Dtype::f64:
      return static_cast<const double*>(base)[i];
    case Dtype::f32:
      return static_cast<const float*>(base)[i];
    case Dtype::f16:
      return static_cast<float>(static_cast<const Eigen::half*>(base)[i]);
    case Dtype::bf16:
      return static_cast<float>(static_cast<const Eigen::bfloat16*>(base)[i]);
  }
  return 0;
}

void store(Dtype d, void* base, std::int64_t i, double v) {
  // v is representable in d, so double -> float -> half/bf16 is exact here (no double rounding).
  switch (d) {
    case Dtype::f64:
      static_cast<double*>(base)[i] = v;
      return;
    case Dtype::f32:
      static_cast<float*>(base)[i] = static_cast<float>(v);
      return;
    case Dtype::f16:
      static_cast<Eigen::half*>(base)[i] = Eigen::half(static_cast<float>(v));
      return;
    case Dtype::bf16:
      static_cast<Eigen::bfloat16*>(base)[i] = Eigen::bfloat16(static_cast<float>(v));
      return;
  }
}

}  // namespace ropecheck
