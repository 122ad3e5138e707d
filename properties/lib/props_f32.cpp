// The property definitions instantiated for storage dtype f32 (one translation unit per dtype keeps
// the RapidCheck + Boost.Multiprecision + Eigen compile cost per unit bounded).
#include "impl.hpp"

namespace ropecheck::properties {

Verdict check_f32(Property p, const Kernel& k, const Options& o) {
  return detail::check_dtype<Dtype::f32>(p, k, o);
}

}  // namespace ropecheck::properties
