// Storage dtypes and their traits. Our own table: Eigen 3.4's numeric_limits for half/bfloat16
// report a wrong epsilon (2^-13 for half) and a garbage round_error(), so nothing here asks Eigen.
#pragma once

#include <Eigen/Core>  // Eigen::half, Eigen::bfloat16 (storage types only)

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace ropecheck {

enum class Dtype : int { f64 = 0, f32 = 1, f16 = 2, bf16 = 3 };

inline constexpr std::array<Dtype, 4> kAllDtypes = {Dtype::f64, Dtype::f32, Dtype::f16,
                                                    Dtype::bf16};

// IEEE-style binary format: `digits` counts the implicit bit (p), normal exponents lie in
// [emin, emax], subnormals extend down to 2^(emin - digits + 1). Unit roundoff u = 2^-digits.
struct DtypeTraits {
  const char* name;
  int digits;
  int emin;
  int emax;
  int bytes;
};

constexpr DtypeTraits traits(Dtype d) {
  switch (d) {
    case Dtype::f64:
      return {"f64", 53, -1022, 1023, 8};
    case Dtype::f32:
      return {"f32", 24, -126, 127, 4};
    case Dtype::f16:
      return {"f16", 11, -14, 15, 2};
    case Dtype::bf16:
      return {"bf16", 8, -126, 127, 2};
  }
  return {"?", 0, 0, 0, 0};
}

inline const char* name(Dtype d) { return traits(d).name; }
inline double unit_roundoff(Dtype d) { return std::ldexp(1.0, -traits(d).digits); }
// Largest finite value: (2 - 2^(1-p)) * 2^emax.
inline double max_finite(Dtype d) {
  const auto t = traits(d);
  return std::ldexp(2.0 - std::ldexp(1.0, 1 - t.digits), t.emax);
}
// Smallest positive subnormal.
inline double min_subnormal(Dtype d) {
  const auto t = traits(d);
  return std::ldexp(1.0, t.emin - t.digits + 1);
}

std::optional<Dtype> parse_dtype(std::string_view s);

template <Dtype D>
struct storage;
template <>
struct storage<Dtype::f64> {
  using type = double;
};
template <>
struct storage<Dtype::f32> {
  using type = float;
};
template <>
struct storage<Dtype::f16> {
  using type = Eigen::half;
};
template <>
struct storage<Dtype::bf16> {
  using type = Eigen::bfloat16;
};
template <Dtype D>
using storage_t = typename storage<D>::type;

template <class T>
inline constexpr Dtype dtype_of = Dtype::f64;
template <>
inline constexpr Dtype dtype_of<float> = Dtype::f32;
template <>
inline constexpr Dtype dtype_of<Eigen::half> = Dtype::f16;
template <>
inline constexpr Dtype dtype_of<Eigen::bfloat16> = Dtype::bf16;

// Correctly rounded (round-to-nearest-even) conversion of a double into dtype `d`, returned as the
// double that holds the dtype value exactly (every f32/f16/bf16 value is a double). Handles
// subnormals of the target and overflow to +-inf. Used by kernels whose arithmetic is wider than
// storage, so that they do not double-round (double -> float -> half).
double round_to_dtype(double x, Dtype d);

// Bit pattern of a value that is exactly representable in `d` (for worst-case reports).
std::uint64_t bits_of(double exact_value, Dtype d);
// Inverse of bits_of: the value (as double) that bit pattern `bits` encodes in `d`.
double from_bits(std::uint64_t bits, Dtype d);

// Read/write element `i` of a typed buffer as double (exact: every dtype value is a double).
double load(Dtype d, const void* base, std::int64_t i);
// Stores `v` (which must already be representable in `d`; use round_to_dtype) at element i.
void store(Dtype d, void* base, std::int64_t i, double v);

}  // namespace ropecheck
