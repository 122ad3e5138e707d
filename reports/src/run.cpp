// reports::run: plan -> executor -> document (see report.hpp for the map of the module).
#include "document.hpp"
#include "ropecheck/reference/reference.hpp"

#include <algorithm>
#include <chrono>

namespace ropecheck::reports {

nlohmann::json run(const Options& o, const std::vector<const Kernel*>& kernels,
                   const Progress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const detail::Plan plan = detail::make_plan(o, kernels);
  // The reference's working precision (Boost.Multiprecision keeps it per process): enough bits
  // for every dtype swept, or --ref-bits.
  unsigned bits = o.reference_bits;
  if (!bits)
    for (Dtype d : o.dtypes) bits = std::max(bits, reference::default_bits(d));
  reference::set_precision_bits(bits);
  const detail::Executed executed = detail::execute(plan, progress);
  nlohmann::json doc = detail::document(plan, executed);
  doc["environment"]["wall_seconds"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return doc;
}

}  // namespace ropecheck::reports
