// The outputs of a validation run: the header and the plan (--print-plan) as text, the summary
// table with its coverage lines, the verdict lines, validation.json, the report set's
// "validation" block (report.md/html and junit.xml are written from it) and the replay line of
// each failure. Text goes to the stream given; files are written whole (reports::atomic_write).
#pragma once

#include <nlohmann/json.hpp>

#include "ropecheck/plugin/host.hpp"
#include "ropecheck/validate/options.hpp"
#include "ropecheck/validate/plan.hpp"
#include "ropecheck/validate/result.hpp"

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace ropecheck::validate {

// The plugin's header lines: name, path, ABI, declared domain, backward, and the one spec or the
// model's spec of the plan.
void print_header(std::ostream& os, const plugin::PluginKernel& pk, const Plan& plan,
                  const Options& o);

// --print-plan: what the differential check of each configuration would run, as data: the specs
// supports() accepts with their scaling regime, the positions, and the partial and structural
// coverage lines with any gap.
void print_plan(std::ostream& os, const plugin::PluginKernel& pk, const std::vector<Config>& cfgs,
                const Plan& plan);

// The table (rows: checks; columns: configurations; cells: cases run, n/a, or the failure), the
// coverage lines, the reasons for n/a grouped by property, then each failure with its
// counterexample and one replay command. Returns whether anything failed.
bool print_summary(std::ostream& os, const std::vector<ConfigResult>& results, const Options& o);

// The classification line and the verdict line (PASS/FAIL, cases, calls, seconds); returns the
// overall classification.
std::string print_verdict(std::ostream& os, const std::vector<ConfigResult>& results, bool any_fail,
                          std::uint64_t calls, double secs, const Options& o);

// The command that reruns exactly one check of one configuration: every configuration and
// property draws its cases from the seed alone, so it replays the same cases and shrinks to the
// same counterexample (a Python call when served by rc.validate).
std::string replay_command(const Options& o, const ConfigResult& r, const std::string& check);

// One configuration in validation.json.
nlohmann::json config_json(const ConfigResult& r, const Options& o);

// validation.json: the run's verdict, classification and every configuration. shard_total > 1
// adds the shard.
nlohmann::json validation_json(const std::vector<ConfigResult>& results,
                               const plugin::PluginKernel& pk, const Options& o, double secs,
                               int shard_index, int shard_total);

// The report's "validation" block (report.schema.json): the verdict, the first failure with its
// replay, and one case per configuration x check for junit.xml.
nlohmann::json validation_block(const std::vector<ConfigResult>& results, const nlohmann::json& doc,
                                const Options& o);

// A plugin's worst cases cannot be rerun with `ropecheck eval` (it runs built-in kernels only):
// their reproduce command becomes the validate line of their configuration.
void plugin_reproduce_commands(nlohmann::json& report, const Options& o);

// --out: the report set of `ropecheck report` on the plugin (with the validation block), and
// validation.json (doc) beside it. Progress of the sweep on stderr, the closing line on os.
void write_outputs(std::ostream& os, plugin::PluginKernel& pk,
                   const std::vector<ConfigResult>& results, const nlohmann::json& doc,
                   const Options& o);

}  // namespace ropecheck::validate
