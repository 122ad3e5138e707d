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
  // How the exact references answered (double-double or MPFR): a property of the run, not of
  // the results, so it goes to the environment block.
  detail::OracleCounts c;
  for (const auto& r : executed.results)
    std::visit(
        [&c](const auto& u) {
          if constexpr (requires { u.counts; }) {
            c.vectors += u.counts.vectors;
            c.fallbacks += u.counts.fallbacks;
            c.recipe_pairs += u.counts.recipe_pairs;
            c.recipe_fallbacks += u.counts.recipe_fallbacks;
          }
        },
        r);
  doc["environment"]["oracle"] = {{"mode", o.oracle_mpfr ? "mpfr" : "fast"},
                                  {"vectors", c.vectors},
                                  {"mpfr_fallbacks", c.fallbacks},
                                  {"recipe_pairs", c.recipe_pairs},
                                  {"recipe_mpfr_fallbacks", c.recipe_fallbacks}};
  doc["environment"]["wall_seconds"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return doc;
}

}  // namespace ropecheck::reports
