// RoPE kernels emulated as engines compute them, for the hint tests (advise_test) and the hint
// dumps (src/cli/tests/hint_dumpgen.cpp): float / bf16 / f16 arithmetic step by step (HF's f32
// inv_freq and f32(m) * inv_freq, a cos/sin table rounded into a narrower format, truncation into
// bf16, an angle computed wholly in bf16), or a long-double rotation of another spec (another
// base, position, layout, rotary_dim, sin sign) rounded once into f32. Independent of the code
// under test: no reference, no bounds, no spec formulas.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

namespace emulated {

using LD = long double;

inline float bf16_round(float v, bool toward_zero = false) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(v);
  if (!toward_zero) u += 0x7fffu + ((u >> 16) & 1u);
  return std::bit_cast<float>(u & 0xffff0000u);
}
// Nearest-even into f16 (11 significant bits, quantum 2^-24 below 2^-14, inf past 65504 after
// rounding), written out rather than through _Float16, which clang 14 (the sanitizer build) lacks
// on x86-64. v / q and r * q are exact: q is a power of two and v a float.
inline float f16_round(float v) {
  if (!std::isfinite(v) || v == 0) return v;
  int e = 0;
  std::frexp(static_cast<double>(v), &e);  // |v| in [2^(e-1), 2^e)
  const double q = std::ldexp(1.0, std::max(e - 1, -14) - 10);
  const double r = std::nearbyint(static_cast<double>(v) / q) * q;
  return std::fabs(r) > 65504 ? std::copysign(INFINITY, v) : static_cast<float>(r);
}

enum class Table { f32, f16, bf16 };
enum class Angle { hf_f32, exact, bf16 };  // HF's f32 recipe, long double, computed in bf16
enum class Out { f32, bf16, bf16_toward_zero };

// An emulated kernel: the spec it really computes, and how.
struct Emu {
  double base = 10000;
  std::int64_t head_dim = 64, rotary_dim = 64;
  bool half = true;
  Angle angle = Angle::hf_f32;
  Table table = Table::f32;
  Out out = Out::f32;
  std::int64_t offset = 0;  // rotates by m + offset
  bool negate_sin = false;
  bool zero_passthrough = false;
  bool bf16_arithmetic = false;  // products and sum each rounded to bf16
};

inline std::vector<double> emulate(const Emu& e, const double* x, std::int64_t m0) {
  const std::int64_t D = e.head_dim, rd = e.rotary_dim, n = rd / 2;
  const std::int64_t m = m0 + e.offset;
  std::vector<double> y(x, x + D);
  if (e.zero_passthrough)
    for (std::int64_t j = rd; j < D; ++j) y[j] = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    LD c = 0, s = 0;
    if (e.angle == Angle::exact) {
      const LD a = static_cast<LD>(m) * std::pow(static_cast<LD>(e.base), -LD(2 * i) / rd);
      c = std::cos(a);
      s = std::sin(a);
    } else if (e.angle == Angle::hf_f32) {
      const float inv = 1.0f / std::pow(static_cast<float>(e.base),
                                        static_cast<float>(2 * i) / static_cast<float>(rd));
      const float a = static_cast<float>(m) * inv;
      c = static_cast<float>(std::cos(static_cast<double>(a)));
      s = static_cast<float>(std::sin(static_cast<double>(a)));
    } else {  // inv_freq, m and the angle in bf16
      const float inv =
          bf16_round(1.0f / std::pow(static_cast<float>(e.base),
                                     static_cast<float>(2 * i) / static_cast<float>(rd)));
      const float a = bf16_round(bf16_round(static_cast<float>(m)) * inv);
      c = static_cast<float>(std::cos(static_cast<double>(a)));
      s = static_cast<float>(std::sin(static_cast<double>(a)));
    }
    if (e.negate_sin) s = -s;
    const std::int64_t a = e.half ? i : 2 * i, b = e.half ? i + n : 2 * i + 1;
    const auto tab = [&](LD v) -> LD {
      if (e.table == Table::f16) return f16_round(static_cast<float>(v));
      if (e.table == Table::bf16) return bf16_round(static_cast<float>(v));
      return v;
    };
    c = tab(c);
    s = tab(s);
    const LD xa = x[a], xb = x[b];
    LD ya = 0, yb = 0;
    if (e.angle == Angle::exact) {  // one rounding at the end
      ya = xa * c - xb * s;
      yb = xb * c + xa * s;
    } else if (e.bf16_arithmetic) {
      ya = bf16_round(bf16_round(static_cast<float>(xa * c)) -
                      bf16_round(static_cast<float>(xb * s)));
      yb = bf16_round(bf16_round(static_cast<float>(xb * c)) +
                      bf16_round(static_cast<float>(xa * s)));
    } else {
      const float fa = static_cast<float>(xa) * static_cast<float>(c);
      const float fb = static_cast<float>(xb) * static_cast<float>(s);
      const float fc = static_cast<float>(xb) * static_cast<float>(c);
      const float fd = static_cast<float>(xa) * static_cast<float>(s);
      ya = fa - fb;
      yb = fc + fd;
    }
    const auto store = [&](LD v) -> double {
      const float f = static_cast<float>(v);
      if (e.out == Out::bf16) return bf16_round(f);
      if (e.out == Out::bf16_toward_zero) return bf16_round(f, true);
      return f;
    };
    y[a] = store(ya);
    y[b] = store(yb);
  }
  return y;
}

}  // namespace emulated
