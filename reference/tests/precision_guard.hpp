// The reference precision set for one scope of a test and restored after it, so that a test
// running the oracle at a lower precision leaves the next test at the precision it expects.
#pragma once

#include "ropecheck/reference/reference.hpp"

namespace ropecheck::reference {

struct PrecisionGuard {
  unsigned saved = precision_bits();
  explicit PrecisionGuard(unsigned bits) { set_precision_bits(bits); }
  ~PrecisionGuard() { set_precision_bits(saved); }
  PrecisionGuard(const PrecisionGuard&) = delete;
  PrecisionGuard& operator=(const PrecisionGuard&) = delete;
};

}  // namespace ropecheck::reference
