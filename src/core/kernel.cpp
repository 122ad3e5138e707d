#include "ropecheck/kernel.hpp"

#include <limits>

namespace ropecheck {

KernelStatus apply_contiguous(const Kernel& k, const RopeSpec& spec, Dtype d, std::int64_t n_tokens,
                              std::int64_t n_heads, const std::int64_t* positions, const void* in,
                              void* out) {
  TensorArgs a;
  a.dtype = d;
  a.n_tokens = n_tokens;
  a.n_heads = n_heads;
  a.positions = positions;
  a.in = in;
  a.out = out;
  a.head_stride = spec.head_dim;
  a.token_stride = n_heads * spec.head_dim;
  return k.apply(spec, a);
}

NegatedCall negate_positions(const TensorArgs& a) {
  NegatedCall c;
  c.args = a;
  const std::int64_t n = a.n_tokens > 0 && a.n_axes > 0 ? a.n_tokens * a.n_axes : 0;
  if (a.positions && n > 0) {
    c.positions.assign(a.positions, a.positions + n);
    for (auto& m : c.positions) {
      if (m == std::numeric_limits<std::int64_t>::min()) c.ok = false;
      m = c.ok ? -m : m;
    }
    c.args.positions = c.positions.data();
  }
  if (a.real_positions && n > 0) {
    c.real_positions.assign(a.real_positions, a.real_positions + n);
    for (auto& m : c.real_positions) m = -m;
    c.args.real_positions = c.real_positions.data();
  }
  return c;
}

}  // namespace ropecheck
