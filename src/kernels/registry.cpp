#include "ropecheck/kernel.hpp"

namespace ropecheck {
namespace kernels {
const Kernel& scalar_kernel();
const Kernel& table_f32_kernel();
const Kernel& simd_kernel();
const Kernel& complex_kernel();
}  // namespace kernels

const std::vector<const Kernel*>& builtin_kernels() {
  static const std::vector<const Kernel*> all = {
      &kernels::scalar_kernel(), &kernels::table_f32_kernel(), &kernels::simd_kernel(),
      &kernels::complex_kernel()};
  return all;
}

const Kernel* find_builtin_kernel(const std::string& name) {
  for (const Kernel* k : builtin_kernels())
    if (k->name() == name) return k;
  return nullptr;
}

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
