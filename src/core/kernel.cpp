#include "ropecheck/kernel.hpp"

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

}  // namespace ropecheck
