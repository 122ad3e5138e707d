#include "ropecheck/kernels/registry.hpp"

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


}  // namespace ropecheck
