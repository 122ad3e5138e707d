// Exact, order-independent sum of doubles: a fixed-point superaccumulator in units of 2^-1074
// (the smallest subnormal), so every finite double is an integer multiple of the unit and every
// addition is exact. Why: report shards are merged by adding their sums, and floating-point
// addition is not associative; with exact sums, (a + b) + c == a + (b + c) bit for bit, so a
// merged sharded report equals the unsharded one. value() rounds the exact sum once (to nearest,
// ties to even); non-finite terms follow IEEE (NaN, or inf + -inf = NaN, else the inf).
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

namespace ropecheck::reports {

class ExactSum {
 public:
  ExactSum() = default;
  ExactSum& operator+=(double v);
  ExactSum& operator+=(const ExactSum& o);
  // The correctly rounded sum. Implicit so arithmetic written for a plain double sum still reads
  // naturally (st.sum / n); the conversion rounds once.
  double value() const;
  operator double() const { return value(); }  // NOLINT(google-explicit-constructor)

  // Canonical text form for report JSON: "0", "nan", "inf", "-inf" or "[-]0x<hex>p<exp>" (an
  // exact integer times 2^exp, trailing zero nibbles folded into the exponent). parse() throws
  // std::invalid_argument on anything else.
  std::string str() const;
  static ExactSum parse(const std::string& s);

 private:
  // 32-bit digits held in int64 limbs (carry-save: each limb absorbs 2^31 additions before a
  // normalization is needed). 2^-1074 .. 2^1024 plus 2^64 headroom: 2162 bits -> 68 limbs.
  static constexpr int kLimbs = 68;
  std::array<std::int64_t, kLimbs> limb_{};
  std::uint32_t pending_ = 0;  // additions since the last normalization
  bool nan_ = false, pos_inf_ = false, neg_inf_ = false;
  void normalize();
  void add_scaled(std::uint64_t mant, int shift, bool neg);
};

// Inline: the report adds a few values per element and pair of every sweep (out of line, the call
// was a twentieth of the report's time).
inline void ExactSum::add_scaled(std::uint64_t mant, int shift, bool neg) {
  const int i = shift / 32, off = shift % 32;
  const unsigned __int128 t = static_cast<unsigned __int128>(mant) << off;
  const std::int64_t s = neg ? -1 : 1;
  limb_[i] += s * static_cast<std::int64_t>(t & 0xffffffffu);
  limb_[i + 1] += s * static_cast<std::int64_t>((t >> 32) & 0xffffffffu);
  limb_[i + 2] += s * static_cast<std::int64_t>(t >> 64);
  // Each addition moves a limb by < 2^32; normalizing every 2^30 keeps |limb| < 2^63.
  if (++pending_ >= (1u << 30)) normalize();
}

inline ExactSum& ExactSum::operator+=(double v) {
  if (std::isnan(v)) {
    nan_ = true;
  } else if (std::isinf(v)) {
    (v > 0 ? pos_inf_ : neg_inf_) = true;
  } else if (v != 0) {
    const auto bits = std::bit_cast<std::uint64_t>(v);
    const int e = static_cast<int>((bits >> 52) & 0x7ff);
    std::uint64_t mant = bits & ((std::uint64_t{1} << 52) - 1);
    int shift = 0;  // value = mant * 2^(shift - 1074)
    if (e != 0) {
      mant |= std::uint64_t{1} << 52;
      shift = e - 1;
    }
    add_scaled(mant, shift, std::signbit(v));
  }
  return *this;
}

}  // namespace ropecheck::reports
