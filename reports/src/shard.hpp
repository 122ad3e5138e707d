// Internal: what run() and merge() share so that a merged sharded report is the unsharded one.
#pragma once

#include "ropecheck/reports/stats.hpp"

#include <nlohmann/json.hpp>

namespace ropecheck::reports::detail {

// The state of a bucket's statistics that the rendered numbers cannot be merged from: exact sums
// (mean, RMS, NMSE, angle share), the sparse quantile-sketch bins (percentiles) and the spec index
// of each worst case (ties between shards go to the lower spec index, as in run()'s merge order).
nlohmann::json bucket_merge_state(const ErrorStats& st);

// Derives doc["checks"] and doc["summary"] from doc["results"] and doc["special_values"].
void add_checks(nlohmann::json& doc);

}  // namespace ropecheck::reports::detail
