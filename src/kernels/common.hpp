// Private helpers shared by the built-in kernels: dtype dispatch, argument checks, the pass-through
// copy and the f64 angle recipe. Not installed; nothing outside src/kernels/ includes it.
#pragma once

#include "ropecheck/dtype.hpp"
#include "ropecheck/kernel.hpp"
#include "ropecheck/spec.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace ropecheck::kernels {

// Shared supports()/argument checks. `extended()` kernels (scalar, simd) handle every valid spec:
// every scaling variant, every layout, multi-axis and real positions. The others handle the
// unscaled interleaved/half specs; anything else is a skip (unsupported), never a failure.
// Calls f(T{}) with T the storage type of d.
template <class F>
KernelStatus dispatch_dtype(Dtype d, F&& f) {
  switch (d) {
    case Dtype::f64:
      return f(double{});
    case Dtype::f32:
      return f(float{});
    case Dtype::f16:
      return f(Eigen::half{});
    case Dtype::bf16:
      return f(Eigen::bfloat16{});
  }
  return KernelStatus::unsupported;
}

class BuiltinKernel : public Kernel {
 public:
  // Any head_dim and position, scale and in-place; both layouts run the same operations per pair
  // (only the indexing differs), so they are bitwise symmetric by construction.
  Domain domain() const override {
    Domain d;
    d.layouts_bitwise_symmetric = true;
    return d;
  }
  bool supports(const RopeSpec& spec, Dtype d) const override {
    const bool basic = spec.scaling.kind == ScalingKind::none &&
                       (spec.layout == Layout::interleaved || spec.layout == Layout::half);
    if (!(extended() || basic) || !known(spec)) return false;
    return spec.rotary_dim % 2 == 0 && spec.rotary_dim >= 0 && spec.rotary_dim <= spec.head_dim &&
           spec.head_dim >= 1 &&
           (d == Dtype::f64 || d == Dtype::f32 || d == Dtype::f16 || d == Dtype::bf16);
  }

  // The backward: s R(m)^T g = s R(-m) g, i.e. this kernel's own forward at the negated
  // positions (sin negated, as Liger-Kernel and flash-attn write it). Exact for our recipes: the
  // angle fl(m theta) is odd in m and so are sin and the products, so it is the same arithmetic
  // as the forward, within the same pair bound. INT64_MIN has no negation: error.
  bool has_backward() const override { return true; }
  KernelStatus apply_backward(const RopeSpec& spec, const TensorArgs& a) const override {
    const NegatedCall n = negate_positions(a);
    return n.ok ? apply(spec, n.args) : KernelStatus::error;
  }

 protected:
  virtual bool extended() const { return false; }
  // A spec of a variant/layout this build knows, with its parameters valid (e.g. a per-pair
  // factor list of the right length): anything else is unsupported, never guessed at.
  static bool known(const RopeSpec& spec) {
    try {
      spec.validate();
      return true;
    } catch (const SpecError&) {
      return false;
    }
  }
  // ok: run; otherwise the status to return.
  KernelStatus check(const RopeSpec& spec, const TensorArgs& a) const {
    if (!supports(spec, a.dtype)) return KernelStatus::unsupported;
    if (a.n_axes != 1 && a.n_axes != spec.n_axes()) return KernelStatus::error;
    if (!extended() && (a.n_axes != 1 || a.real_positions)) return KernelStatus::unsupported;
    if (a.n_tokens < 0 || a.n_heads < 0) return KernelStatus::error;
    if (a.n_tokens == 0 || a.n_heads == 0) return KernelStatus::ok;
    if ((!a.positions && !a.real_positions) || !a.in || !a.out) return KernelStatus::error;
    return KernelStatus::ok;
  }
  // The shape every built-in apply() shares: check(), nothing to do for empty tensors, then
  // rotate(T{}) once with T the storage type.
  template <class Rotate>
  KernelStatus checked_apply(const RopeSpec& spec, const TensorArgs& a, Rotate&& rotate) const {
    if (auto st = check(spec, a); st != KernelStatus::ok || a.n_tokens == 0 || a.n_heads == 0)
      return st;
    return dispatch_dtype(a.dtype, [&](auto tag) {
      rotate(tag);
      return KernelStatus::ok;
    });
  }
};

// Rounds a double result once into storage type T (round-to-nearest-even). double -> float is a
// single correctly rounded conversion; half/bfloat16 must not go double -> float -> half (double
// rounding), so they go through round_to_dtype, whose result is exact in T.
template <class T>
inline T store_from_double(double v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(v);
  } else {
    return T(static_cast<float>(round_to_dtype(v, dtype_of<T>)));
  }
}

template <class T>
inline double load_as_double(T v) {
  if constexpr (std::is_same_v<T, double>)
    return v;
  else
    return static_cast<double>(static_cast<float>(v));
}

// The pow_product recipe in f64: theta_i = base^(-2i/rotary_dim). Kept in one place so that the
// scalar, simd and complex kernels agree on the angle bit-for-bit. Variants and multi-axis
// ladders: ropecheck::theta_ladder_f64(spec) (spec.cpp), whose ScalingKind::none entries are
// exactly this value for the 1-D layouts.
inline double theta_f64(const RopeSpec& spec, std::int64_t i) {
  return std::pow(spec.base, -2.0 * static_cast<double>(i) / static_cast<double>(spec.rotary_dim));
}

// Copies the pass-through dims bit-exactly (out-of-place only; in-place leaves them untouched):
// [rotary_dim, head_dim), or for the proportional layout [rd/2, hd/2) and [hd/2 + rd/2, hd).
// memcpy, not T assignment, so NaN payloads and -0 survive.
template <class T>
inline void copy_tail(const RopeSpec& spec, const T* x, T* y) {
  if (x == y) return;
  const auto cp = [&](std::int64_t from, std::int64_t to) {
    if (to > from) std::memcpy(y + from, x + from, static_cast<std::size_t>(to - from) * sizeof(T));
  };
  if (spec.layout == Layout::proportional) {
    const std::int64_t h = spec.head_dim / 2, r = spec.rotary_dim / 2;
    cp(r, h);
    cp(h + r, spec.head_dim);
    return;
  }
  cp(spec.rotary_dim, spec.head_dim);
}

// Token t's position for pair i as a double (multi-axis: the pair's axis; n_axes == 1: the one
// position). int64 -> double is exact below 2^53, as before.
inline double position_of(const RopeSpec& spec, const TensorArgs& a, std::int64_t t,
                          std::int64_t axis) {
  const std::int64_t k = t * a.n_axes + (a.n_axes == 1 ? 0 : axis);
  return a.real_positions ? a.real_positions[k] : static_cast<double>(a.positions[k]);
}

}  // namespace ropecheck::kernels
