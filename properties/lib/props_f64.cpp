// The property table and the per-check driver for storage dtype f64: one translation unit per
// dtype keeps the RapidCheck + Boost.Multiprecision + Eigen compile cost of a unit bounded.
#include "check.hpp"

namespace ropecheck::properties {

namespace detail {
template const Table& table<Dtype::f64>();
}

Verdict check_f64(Property p, const Kernel& k, const Options& o) {
  return detail::check_dtype<Dtype::f64>(p, k, o);
}

}  // namespace ropecheck::properties
