// The kernel interface: a run-time value. Built-in kernels (src/kernels, listed by
// ropecheck/kernels/registry.hpp), third-party plugins loaded through the C ABI (src/plugin) and
// the bug zoo's mutants are all `Kernel`s, so every property and report is written once against
// this interface. Only the interface lives here (core); no kernel is defined in this layer.
#pragma once

#include "ropecheck/dtype.hpp"
#include "ropecheck/policy.hpp"
#include "ropecheck/spec.hpp"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ropecheck {

// One call: n_tokens x n_heads vectors of head_dim elements. Element (t, h, j) is at
// base + t * token_stride + h * head_stride + j (strides in elements). `out` may equal `in`
// (in-place). positions[t * n_axes + a] is token t's position on axis a; n_axes is 1 (the
// default: one position per token, used on every axis of a multi-axis spec, i.e. t = h = w) or
// spec.n_axes(). real_positions, when set, replaces `positions` (same indexing) with real-valued
// positions taken as exact doubles (CogVideoX linspace grids); kernels that cannot take them
// return unsupported.
struct TensorArgs {
  Dtype dtype = Dtype::f32;
  std::int64_t n_tokens = 0;
  std::int64_t n_heads = 0;
  const std::int64_t* positions = nullptr;
  const void* in = nullptr;
  void* out = nullptr;
  std::int64_t token_stride = 0;
  std::int64_t head_stride = 0;
  std::int64_t n_axes = 1;
  const double* real_positions = nullptr;
};

enum class KernelStatus : int { ok = 0, unsupported = 1, error = 2 };

// What a kernel declares it can be called with, beyond supports(spec, dtype) (which decides dtype,
// layout, scaling kind and shape). Declarations are contracts: every property draws its cases
// inside the domain, and a call inside it that returns `unsupported` is a declaration mismatch
// (a failure), never a skipped case. The defaults are an unrestricted kernel.
struct Domain {
  // The head dims the kernel takes (empty: any head_dim; supports() may still filter). Most
  // production kernels take a short list (flash-attn, vLLM, TensorRT-LLM: 64, 128, 256, ...).
  std::vector<std::int64_t> head_dims;
  // Every position passed (every axis) lies in [min_position, max_position]: e.g. int32 positions,
  // or non-negative ones only (then no inverse rotation and no negative KV-cache shift is asked).
  std::int64_t min_position = std::numeric_limits<std::int64_t>::min();
  std::int64_t max_position = std::numeric_limits<std::int64_t>::max();
  bool magnitude_scale = true;  // spec.scale != 1 may be passed (else scale is exactly 1)
  bool in_place = true;         // out == in may be passed
  // K_half(P x) == P K_interleaved(x) bit for bit (the same operations per pair, only the indexing
  // differs); otherwise LayoutsArePermutations compares within the derived pair bound.
  bool layouts_bitwise_symmetric = false;
  // Each token's result equals the single-token call bit for bit, whatever the batch; otherwise
  // TokensAreIndependent compares the two within twice the derived pair bound.
  bool batch_invariant = true;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  virtual Policy policy(Dtype d) const = 0;
  virtual bool supports(const RopeSpec& spec, Dtype d) const = 0;
  // spec is normalized. Returns unsupported when !supports(spec, dtype); inside the declared
  // domain (supports() true, Domain respected) unsupported is a declaration mismatch.
  virtual KernelStatus apply(const RopeSpec& spec, const TensorArgs& args) const = 0;
  virtual Domain domain() const { return {}; }

  // The backward of apply(), optional (training kernels): args.in holds the upstream gradient g
  // of y = K(x, m), args.out receives grad_x = s R(m)^T g, with the same spec, positions, dtype,
  // strides and aliasing rules as apply(). Pass-through dims take g unchanged (the forward copies
  // them). The backward is declared to compute under the forward's policy(d) and Domain; its
  // exact value is s R(-m) g (R(m)^T = R(-m): every angle is m theta_i, odd in m, for every
  // scaling variant and axis), which is how the properties check it (properties.hpp).
  virtual bool has_backward() const { return false; }
  virtual KernelStatus apply_backward(const RopeSpec& /*spec*/, const TensorArgs& /*args*/) const {
    return KernelStatus::unsupported;
  }
};

// A call's arguments at the negated positions (every axis; real positions too), owning the
// arrays they point at: a backward is the forward at -m (s R(m)^T = s R(-m)). ok is false when a
// position is INT64_MIN, which has no negation. Movable (the arrays move with it), not copyable.
struct NegatedCall {
  TensorArgs args;
  std::vector<std::int64_t> positions;
  std::vector<double> real_positions;
  bool ok = true;
  NegatedCall() = default;
  NegatedCall(NegatedCall&&) = default;
  NegatedCall(const NegatedCall&) = delete;
  NegatedCall& operator=(const NegatedCall&) = delete;
};
NegatedCall negate_positions(const TensorArgs& a);

// Contiguous [tokens][heads][head_dim] convenience wrapper.
KernelStatus apply_contiguous(const Kernel& k, const RopeSpec& spec, Dtype d, std::int64_t n_tokens,
                              std::int64_t n_heads, const std::int64_t* positions, const void* in,
                              void* out);

}  // namespace ropecheck
