// The model atlas's engine differences (atlas_model.cpp), beside report.hpp's run_atlas.
#pragma once

#include "ropecheck/reports/report.hpp"

namespace ropecheck::reports {

// The engine differences of a model atlas (atlas_model.cpp): each pair of engines that runs
// `spec` in a dtype gets the same inputs at 64 positions up to max_position; every pair whose
// outputs differ in any bit gives a row (dtype, engines, elements differing of compared, the
// largest difference per rotated pair in u of the dtype and its position, and which step differs
// as inferred from the two engines' declared policies). `layout`: the layout each engine runs
// (the spec's, or the other one, permuted, as in the atlas).
struct DiffEngine {
  const Kernel* kernel = nullptr;
  Layout layout = Layout::half;
};
nlohmann::json engine_differences(const RopeSpec& spec, const std::vector<DiffEngine>& engines,
                                  const std::vector<Dtype>& dtypes, std::int64_t max_position,
                                  std::uint64_t seed);

}  // namespace ropecheck::reports
