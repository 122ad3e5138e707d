// The built-in kernels (scalar, table_f32, simd, complex), in registry order (engines.hpp: the
// engine atlas). A new built-in kernel
// is one file in src/kernels plus one line in registry.cpp (the module's map: top of registry.cpp).
#pragma once

#include "ropecheck/kernel.hpp"

#include <string>
#include <vector>

namespace ropecheck {

const std::vector<const Kernel*>& builtin_kernels();
const Kernel* find_builtin_kernel(const std::string& name);  // nullptr if absent

}  // namespace ropecheck
