// The property table and the per-check driver for storage dtype bf16: one translation unit per
// dtype keeps the RapidCheck + Boost.Multiprecision + Eigen compile cost of a unit bounded.
#include "check.hpp"

namespace ropecheck::properties {

namespace detail {
template const Table& table<Dtype::bf16>();
}

Verdict check_bf16(Property p, const Kernel& k, const Options& o) {
  return detail::check_dtype<Dtype::bf16>(p, k, o);
}

}  // namespace ropecheck::properties
