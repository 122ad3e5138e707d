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
// Each engine runs every position on its own, so an engine that refuses some positions (past its
// cache) is compared on the positions both engines of a pair serve, never dropped whole. `pairs`
// (optional) receives one entry per dtype and pair of engines that both implement the spec:
// positions and elements compared (0: no position both serve, not compared) and elements
// differing (0: the same bits) -- so a pair missing from the rows is visibly the same bits, not
// silently uncompared.
nlohmann::json engine_differences(const RopeSpec& spec, const std::vector<DiffEngine>& engines,
                                  const std::vector<Dtype>& dtypes, std::int64_t max_position,
                                  std::uint64_t seed, nlohmann::json* pairs = nullptr);

}  // namespace ropecheck::reports
