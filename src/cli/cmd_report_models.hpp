// `ropecheck report --models all|NAME,...` (cmd_report_models.cpp): the model atlas.
#pragma once

#include "ropecheck/reports/model_atlas.hpp"

#include <string>
#include <vector>

namespace ropecheck::cli {

// One engine atlas per model preset (src/io/hfconfig/presets) into out/<name>/ (report.json, .md,
// .html, junit.xml) at the model's spec, dtypes o.dtypes, contexts up to max(4 x the trained
// context, max_position_embeddings) (o.max_position is replaced per model), with the model's
// block (its source, and the engine differences); then out/index.json and out/index.md. `base`
// holds the parsed atlas options (its spec must be unset). Unknown names: UsageError listing the
// presets. Returns 0 when every model's checks hold, else 1.
int report_models(const std::string& list, const reports::Options& base,
                  const std::vector<reports::AtlasEngine>& engines, const std::string& out,
                  const reports::Progress& progress);

}  // namespace ropecheck::cli
