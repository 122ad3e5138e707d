#include "ropecheck/reports/exact_sum.hpp"

#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace ropecheck::reports {

namespace {
constexpr int kUnitExp = -1074;  // the accumulator counts multiples of 2^-1074
}

void ExactSum::normalize() {
  // Floor carries: limbs 0..K-2 end in [0, 2^32), the top limb keeps the sign.
  for (int i = 0; i + 1 < kLimbs; ++i) {
    const std::int64_t c = limb_[i] >> 32;  // arithmetic shift: floor division by 2^32
    limb_[i] -= c * (std::int64_t{1} << 32);
    limb_[i + 1] += c;
  }
  pending_ = 0;
}

ExactSum& ExactSum::operator+=(const ExactSum& o) {
  ExactSum b = o;
  b.normalize();
  normalize();
  for (int i = 0; i < kLimbs; ++i) limb_[i] += b.limb_[i];
  normalize();
  nan_ = nan_ || o.nan_;
  pos_inf_ = pos_inf_ || o.pos_inf_;
  neg_inf_ = neg_inf_ || o.neg_inf_;
  return *this;
}

namespace {
// Magnitude of a normalized accumulator as non-negative 32-bit digits, and its sign.
template <class Limbs>
bool magnitude(Limbs& l) {
  const bool neg = l.back() < 0;
  if (neg) {
    for (auto& x : l) x = -x;
    for (std::size_t i = 0; i + 1 < l.size(); ++i) {
      const std::int64_t c = l[i] >> 32;
      l[i] -= c * (std::int64_t{1} << 32);
      l[i + 1] += c;
    }
  }
  return neg;
}
template <class Limbs>
int top_bit(const Limbs& l) {  // -1 for zero
  for (int i = static_cast<int>(l.size()) - 1; i >= 0; --i)
    if (l[i]) return i * 32 + 63 - std::countl_zero(static_cast<std::uint64_t>(l[i]));
  return -1;
}
template <class Limbs>
bool bit(const Limbs& l, int k) {
  return k >= 0 && ((static_cast<std::uint64_t>(l[k / 32]) >> (k % 32)) & 1u);
}
}  // namespace

double ExactSum::value() const {
  if (nan_ || (pos_inf_ && neg_inf_)) return std::numeric_limits<double>::quiet_NaN();
  if (pos_inf_) return std::numeric_limits<double>::infinity();
  if (neg_inf_) return -std::numeric_limits<double>::infinity();
  ExactSum c = *this;
  c.normalize();
  const bool neg = magnitude(c.limb_);
  const int top = top_bit(c.limb_);
  if (top < 0) return 0.0;
  std::uint64_t mant = 0;
  const int lo = top >= 52 ? top - 52 : 0;
  for (int k = top; k >= lo; --k) mant = (mant << 1) | (bit(c.limb_, k) ? 1u : 0u);
  if (lo > 0) {
    // Round to nearest, ties to even, on the bits below the 53 kept.
    const bool guard = bit(c.limb_, lo - 1);
    bool sticky = false;
    for (int k = lo - 2; k >= 0 && !sticky; --k) sticky = bit(c.limb_, k);
    if (guard && (sticky || (mant & 1u))) ++mant;
  }
  const double r = std::ldexp(static_cast<double>(mant), lo + kUnitExp);
  return neg ? -r : r;
}

std::string ExactSum::str() const {
  if (nan_ || (pos_inf_ && neg_inf_)) return "nan";
  if (pos_inf_) return "inf";
  if (neg_inf_) return "-inf";
  ExactSum c = *this;
  c.normalize();
  const bool neg = magnitude(c.limb_);
  const int top = top_bit(c.limb_);
  if (top < 0) return "0";
  int lo = 0;
  while (!bit(c.limb_, lo)) ++lo;
  std::string hex;
  const int nibbles = (top - lo) / 4 + 1;
  for (int n = nibbles - 1; n >= 0; --n) {
    int v = 0;
    for (int b = 3; b >= 0; --b) v = (v << 1) | (bit(c.limb_, lo + 4 * n + b) ? 1 : 0);
    hex += "0123456789abcdef"[v];
  }
  return std::string(neg ? "-" : "") + "0x" + hex + "p" + std::to_string(lo + kUnitExp);
}

ExactSum ExactSum::parse(const std::string& s) {
  ExactSum r;
  if (s == "0") return r;
  if (s == "nan") return r.nan_ = true, r;
  if (s == "inf") return r.pos_inf_ = true, r;
  if (s == "-inf") return r.neg_inf_ = true, r;
  const auto bad = [&] { return std::invalid_argument("not an exact sum: '" + s + "'"); };
  std::size_t i = 0;
  const bool neg = !s.empty() && s[0] == '-';
  if (neg) ++i;
  if (s.compare(i, 2, "0x") != 0) throw bad();
  i += 2;
  const std::size_t p = s.find('p', i);
  if (p == std::string::npos || p == i || p + 1 >= s.size()) throw bad();
  std::size_t used = 0;
  int exp = 0;
  try {
    exp = std::stoi(s.substr(p + 1), &used);
  } catch (const std::exception&) {
    throw bad();
  }
  if (used != s.size() - p - 1) throw bad();
  const long long base = static_cast<long long>(exp) - kUnitExp;
  const long long nbits = 4LL * static_cast<long long>(p - i);
  if (base < 0 || base + nbits > (kLimbs - 2) * 32) throw bad();
  for (std::size_t k = p; k-- > i;) {
    const char ch = s[k];
    int v;
    if (ch >= '0' && ch <= '9')
      v = ch - '0';
    else if (ch >= 'a' && ch <= 'f')
      v = ch - 'a' + 10;
    else
      throw bad();
    const long long pos = base + 4LL * static_cast<long long>(p - 1 - k);
    for (int b = 0; b < 4; ++b)
      if ((v >> b) & 1) r.limb_[(pos + b) / 32] |= std::int64_t{1} << ((pos + b) % 32);
  }
  if (neg) {
    for (auto& x : r.limb_) x = -x;
    r.normalize();
  }
  return r;
}

}  // namespace ropecheck::reports
