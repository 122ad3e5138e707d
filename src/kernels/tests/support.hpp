// Helpers shared by the kernel unit tests (kernels_test, engines_native_test): tensors as bytes
// of a dtype, inputs, a guarded run of a kernel, and the check of every pair against the exact
// rotation within the bound of the kernel's declared policy.
#pragma once

#include "ropecheck/bounds.hpp"
#include "ropecheck/dtype.hpp"
#include "ropecheck/kernel.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/spec.hpp"
#include "ropecheck/verify/verify.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace ropecheck::kernel_tests {

using Bytes = std::vector<unsigned char>;
constexpr std::size_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xA5;

inline std::int64_t bytes_of(Dtype d) { return traits(d).bytes; }

inline double get(Dtype d, const Bytes& b, std::int64_t i) { return load(d, b.data(), i); }
inline void set(Dtype d, Bytes& b, std::int64_t i, double v) { store(d, b.data(), i, v); }
inline std::uint64_t raw(Dtype d, const Bytes& b, std::int64_t i) {
  std::uint64_t r = 0;
  std::memcpy(&r, b.data() + i * bytes_of(d), bytes_of(d));  // little-endian machine
  return r;
}
inline void set_raw(Dtype d, Bytes& b, std::int64_t i, std::uint64_t r) {
  std::memcpy(b.data() + i * bytes_of(d), &r, bytes_of(d));
}

// Multiplies the rotated dims of an f32 call's outputs by f, in place: the mutants that apply a
// magnitude once more (YaRN's mscale twice).
inline void scale_rotated_f32(const RopeSpec& s, const TensorArgs& a, float f) {
  auto* y = static_cast<float*>(a.out);
  for (std::int64_t t = 0; t < a.n_tokens; ++t)
    for (std::int64_t h = 0; h < a.n_heads; ++h)
      for (std::int64_t j = 0; j < s.rotary_dim; ++j)
        y[t * a.token_stride + h * a.head_stride + j] *= f;
}

inline RopeSpec make_spec(std::int64_t head_dim, std::int64_t rotary_dim, Layout l,
                          double base = 10000, double scale = 1.0) {
  RopeSpec s;
  s.head_dim = head_dim;
  s.rotary_dim = rotary_dim;
  s.layout = l;
  s.base = base;
  s.scale = scale;
  return s.normalized();
}

// Log-uniform magnitude in [2^lo, 2^hi], random sign, rounded into d (so exactly representable).
inline double random_value(Dtype d, std::mt19937_64& rng, double lo = -4, double hi = 4) {
  std::uniform_real_distribution<double> e(lo, hi);
  const double v = std::exp2(e(rng)) * ((rng() & 1) ? -1.0 : 1.0);
  return round_to_dtype(v, d);
}

// Finite awkward values of d: zeros, subnormals, the normal boundary, large values, ties.
inline std::vector<double> awkward_values(Dtype d) {
  const auto t = traits(d);
  const double u = unit_roundoff(d);
  std::vector<double> v = {0.0,
                           -0.0,
                           min_subnormal(d),
                           -3 * min_subnormal(d),
                           std::ldexp(1.0, t.emin),
                           -std::ldexp(1.0, t.emin) * (1 - 2 * u),
                           1.0,
                           -1.0,
                           1.0 + 2 * u,
                           round_to_dtype(1.0 / 3.0, d),
                           round_to_dtype(-M_PI, d),
                           max_finite(d) / 8,
                           -max_finite(d) / 8};
  return v;
}

inline Bytes random_tensor(Dtype d, std::int64_t n, std::mt19937_64& rng) {
  Bytes b(n * bytes_of(d));
  for (std::int64_t i = 0; i < n; ++i) set(d, b, i, random_value(d, rng));
  return b;
}

// Runs k out-of-place on a contiguous tensor, inside guard bytes that must stay untouched.
inline Bytes run(const Kernel& k, const RopeSpec& spec, Dtype d,
                 const std::vector<std::int64_t>& pos, std::int64_t n_heads, const Bytes& in) {
  const std::size_t n = in.size();
  Bytes buf(n + 2 * kGuard, kGuardByte);
  const KernelStatus st = apply_contiguous(k, spec, d, static_cast<std::int64_t>(pos.size()),
                                           n_heads, pos.data(), in.data(), buf.data() + kGuard);
  EXPECT_EQ(st, KernelStatus::ok) << k.name() << " " << describe(spec);
  for (std::size_t i = 0; i < kGuard; ++i) {
    if (buf[i] != kGuardByte || buf[kGuard + n + i] != kGuardByte) {
      ADD_FAILURE() << k.name() << " wrote outside the output tensor " << describe(spec);
      break;
    }
  }
  return Bytes(buf.begin() + kGuard, buf.begin() + kGuard + n);
}

// Outputs of k that differ bit for bit from a golden set's (one head per token), over every case;
// *total counts them all; report: the first five as test failures. A Case has dtype, spec, pos,
// in, out and line (its header, for messages).
template <class Case>
std::int64_t golden_mismatches(const Kernel& k, const std::vector<Case>& cases, std::int64_t* total,
                               bool report) {
  std::int64_t bad = 0;
  *total = 0;
  for (const Case& c : cases) {
    const Bytes y = run(k, c.spec, c.dtype, c.pos, 1, c.in);
    const std::int64_t n = static_cast<std::int64_t>(c.out.size()) / bytes_of(c.dtype);
    *total += n;
    for (std::int64_t i = 0; i < n; ++i) {
      if (raw(c.dtype, y, i) == raw(c.dtype, c.out, i)) continue;
      if (report && bad < 5)
        ADD_FAILURE() << k.name() << " [" << c.line << "] element " << i << " (position "
                      << c.pos[static_cast<std::size_t>(i / c.spec.head_dim)] << ", dim "
                      << i % c.spec.head_dim << "): got 0x" << std::hex << raw(c.dtype, y, i)
                      << ", real code 0x" << raw(c.dtype, c.out, i) << std::dec;
      ++bad;
    }
  }
  return bad;
}

// Runs k on random vectors at `pos` (n_heads per token) and checks every pair against the exact
// rotation (reference::apply_blocked) within the bound of k's declared policy
// (verify::PairChecker); returns the worst utilization (error / bound) seen.
// expect_within false: no failure is reported, every pair is visited and the worst utilization
// returned (to show that a kernel breaks a bound it does not meet). With `declared`: k is judged
// by that policy instead of its own, and only measured (expect_within false).
inline double check_against_reference(const Kernel& k, const RopeSpec& spec, Dtype d,
                                      const std::vector<std::int64_t>& pos, std::int64_t n_heads,
                                      std::mt19937_64& rng, bool expect_within = true,
                                      const std::optional<Policy>& declared = std::nullopt) {
  const std::int64_t hd = spec.head_dim, n_tok = static_cast<std::int64_t>(pos.size());
  const Bytes in = random_tensor(d, n_tok * n_heads * hd, rng);
  const Bytes out = run(k, spec, d, pos, n_heads, in);
  const verify::PairChecker checker(declared ? *declared : k.policy(d), spec, d);
  if (declared) expect_within = false;
  double worst = 0;
  std::vector<double> x(hd), y(hd);
  for (std::int64_t t = 0; t < n_tok; ++t)
    for (std::int64_t h = 0; h < n_heads; ++h) {
      const std::int64_t o = (t * n_heads + h) * hd;
      for (std::int64_t j = 0; j < hd; ++j) {
        x[j] = get(d, in, o + j);
        y[j] = get(d, out, o + j);
      }
      const reference::MpVector exact = reference::apply_blocked(spec, reference::Mp(pos[t]), x);
      const verify::VectorCheck v =
          verify::check_vector(checker, {pos[t]}, x.data(), y.data(), exact);
      EXPECT_TRUE(v.passthrough_changed.empty()) << k.name() << " " << describe(spec);
      for (const verify::PairCheck& p : v.pairs) {
        worst = std::max(worst, p.utilization);
        if (p.within() || !expect_within) continue;
        verify::Location at;
        at.token = t;
        at.position = {pos[t]};
        at.head = h;
        at.pair = p.pair;
        at.elem_a = p.elem_a;
        at.elem_b = p.elem_b;
        ADD_FAILURE() << k.name() << " " << name(d) << " " << describe(spec) << ", " << at.text()
                      << ": "
                      << verify::explain_pair(p, x[p.elem_a], x[p.elem_b], y[p.elem_a], y[p.elem_b],
                                              exact[p.elem_a], exact[p.elem_b], checker.u());
        return worst;
      }
    }
  return worst;
}
inline double check_against_reference(const Kernel& k, const RopeSpec& spec, Dtype d,
                                      const std::vector<std::int64_t>& pos, std::int64_t n_heads,
                                      std::mt19937_64& rng, const std::optional<Policy>& declared) {
  return check_against_reference(k, spec, d, pos, n_heads, rng, false, declared);
}
}  // namespace ropecheck::kernel_tests
