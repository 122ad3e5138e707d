// Private helpers shared by the built-in kernels: dtype dispatch, argument checks, the pass-through
// copy and the f64 angle recipe. Not installed; nothing outside src/kernels/ includes it.
#pragma once

#include "ropecheck/dtype.hpp"
#include "ropecheck/kernel.hpp"
#include "ropecheck/spec.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace ropecheck::kernels {

// Shared supports()/argument checks. Every built-in kernel handles every valid spec with no
// frequency scaling; anything else is a skip (unsupported), never a failure.
class BuiltinKernel : public Kernel {
 public:
  bool supports(const RopeSpec& spec, Dtype d) const override {
    return spec.scaling.kind == ScalingKind::none && spec.rotary_dim % 2 == 0 &&
           spec.rotary_dim >= 0 && spec.rotary_dim <= spec.head_dim && spec.head_dim >= 1 &&
           (d == Dtype::f64 || d == Dtype::f32 || d == Dtype::f16 || d == Dtype::bf16);
  }

 protected:
  // ok: run; otherwise the status to return.
  KernelStatus check(const RopeSpec& spec, const TensorArgs& a) const {
    if (!supports(spec, a.dtype)) return KernelStatus::unsupported;
    if (a.n_tokens < 0 || a.n_heads < 0) return KernelStatus::error;
    if (a.n_tokens == 0 || a.n_heads == 0) return KernelStatus::ok;
    if (!a.positions || !a.in || !a.out) return KernelStatus::error;
    return KernelStatus::ok;
  }
};

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
// scalar, simd and complex kernels agree on the angle bit-for-bit.
inline double theta_f64(const RopeSpec& spec, std::int64_t i) {
  return std::pow(spec.base, -2.0 * static_cast<double>(i) / static_cast<double>(spec.rotary_dim));
}

// Copies the pass-through dims [rotary_dim, head_dim) bit-exactly (out-of-place only; in-place
// leaves them untouched). memcpy, not T assignment, so NaN payloads and -0 survive.
template <class T>
inline void copy_tail(const RopeSpec& spec, const T* x, T* y) {
  if (x == y || spec.head_dim == spec.rotary_dim) return;
  std::memcpy(y + spec.rotary_dim, x + spec.rotary_dim,
              static_cast<std::size_t>(spec.head_dim - spec.rotary_dim) * sizeof(T));
}

}  // namespace ropecheck::kernels
