// The property definitions instantiated for storage dtype f16 (one translation unit per dtype keeps
// the RapidCheck + Boost.Multiprecision + Eigen compile cost per unit bounded).
#include "impl.hpp"

namespace ropecheck::properties {

Verdict check_f16(Property p, const Kernel& k, const Options& o) {
  return detail::check_dtype<Dtype::f16>(p, k, o);
}

}  // namespace ropecheck::properties
