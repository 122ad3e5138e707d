// ropecheck::cli — the one place that wires everything: each subcommand turns its options into
// calls of the modules below it (reference, bounds, kernels, io, plugin, verify, properties,
// reports, validate) and returns its exit status; nothing here computes a value or judges an
// output.
//
// Map of this module:
//   cli.hpp          shared pieces (this file): errors, parsing helpers, --hf-config, RunOptions
//   app.cpp          the CLI11 app and main()'s exit-code mapping (run, add_all)
//   parse.cpp        split / parse_int64 / parse_finite_double, --hf-config, run-time seq_len
//   cmd_list.cpp     `list`: kernels, policies, dtypes, layouts (+ an HF config's support table)
//   cmd_eval.cpp     `eval`: exact reference (and a kernel's output) for one spec, as JSON
//   cmd_check.cpp    `check`: recorded tensors (safetensors / .npy) vs the reference, via scan
//   check_spec.cpp   `check`'s spec keys -> spec, declared policy, fused chain (also --spec of
//                    `validate`)
//   cmd_validate.cpp `validate`: options -> plan -> run -> outputs of ropecheck::validate
//                    (src/validate: the plan, the run on forked runners, verdict, outputs)
//   cmd_report.cpp   `report`: the precision report set (reports/), merge of shards; --plugin
//                    loads through ropecheck::validate (plugin_load.hpp)
//   shard.cpp        gtest-protocol sharding shared by `report` and `validate`
// A new subcommand: a cmd_<name>.cpp with add_<name>(CLI::App&, int& status), declared below and
// called from add_all (app.cpp); its logic goes in a module below (as src/validate for validate).
// A new layout, dtype, engine or property needs no change here: names come from spec.hpp
// (layout_choices, parse_layout), dtype.hpp, the kernel registry and the property list. A new
// spec key of `check`: check_spec.cpp (warn_unknown_keys' list and the reader).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "ropecheck/kernel.hpp"
#include "ropecheck/reports/report.hpp"

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ropecheck::cli {

// Bad usage or bad input: run() prints the message to stderr and returns status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Splits "a,b,c" (sep ',') or "r1;r2" (sep ';'); empty fields are errors.
std::vector<std::string> split(const std::string& s, char sep, const std::string& what);
// Strict integer / finite-double parsing (whole string, no trailing garbage).
bool parse_int64(const std::string& s, long long& out);
double parse_finite_double(const std::string& s, const std::string& what);
// --worker-fds R,W (`validate`, `report`): the two descriptors of a worker that serves already
// (plugin::serve; the Python module's rc.validate and rc.report).
std::pair<int, int> parse_worker_fds(const std::string& text);

// After a report set is written (`report`, `report --merge`): prints the failed checks and the
// verdict line; returns the exit status (0, or 1 when a check failed).
int report_verdict(const nlohmann::json& report);

// `--hf-config F [--seq-len N]`, the same on every subcommand.
struct HfConfigArg {
  std::string path;
  std::int64_t seq_len = 0;  // current sequence length for dynamic NTK / LongRoPE
  std::string layer_type;    // --hf-layer-type: which RoPE of a config with one per layer type
  // The model's spec (SpecError on a bad config -> exit 2); none without --hf-config.
  std::optional<RopeSpec> read() const;
};
// Adds both options to cmd; `what` is --hf-config's help text. Returns the --hf-config option.
CLI::Option* add_hf_config_options(CLI::App* cmd, HfConfigArg& arg, const std::string& what);

// `--fp8 FORMAT[,...] --fp8-scale S --fp8-convention multiply|divide --fp8-overflow P`, the same
// on `eval` (one format: reference_fp8) and `report` (the FP8 cache-byte section).
struct Fp8Arg {
  std::string formats;  // empty: not given
  double scale = 1.0;
  std::string convention = "multiply", overflow = "saturate";
  // Each parsed (UsageError naming the option): the formats in order, duplicates refused.
  std::vector<Fp8Format> parsed_formats() const;
  Fp8Overflow parsed_overflow() const;
  bool divide() const;  // checks the convention
  void check_scale() const;
};
// Adds the four options to cmd; `what` is --fp8's help text.
void add_fp8_options(CLI::App* cmd, Fp8Arg& arg, const std::string& what);

// The run-time sequence length of dynamic NTK and LongRoPE where the positions are known (`eval`,
// `check`). Transformers builds the table for seq_len = max(position_ids) + 1 at run time (the max
// over every token, batch row and axis), so for these two kinds only: a spec without a seq_len
// (0 = not given) takes max_position + 1 (left at 0 when that is <= 0), and an explicit seq_len
// smaller than max_position + 1 is refused (UsageError naming the seq_len, the position and
// `seq_len_from`, where the seq_len came from: a token at position p implies a length > p).
// Other kinds are returned unchanged. max_position_text, when given, is how the largest position
// is written in messages (eval's fractional positions).
RopeSpec with_runtime_seq_len(RopeSpec spec, std::int64_t max_position,
                              const std::string& seq_len_from,
                              const std::string& max_position_text = "");

// How the app runs. eval_validate_only: `eval` stops after parsing and validating every option (no
// reference evaluation, no output): the eval-argument fuzz target sets it so that it fuzzes the
// parser at parser speed.
struct RunOptions {
  bool eval_validate_only = false;
};

// The whole app (all subcommands) and the exit-code mapping of main(): the subcommand's own status
// (0 success, 1 a check failed, 128+signal an interrupted report), parse errors, bad usage and bad
// input -> 2 with a message on stderr, other exceptions -> 3. Each subcommand's callback stores
// its status in `status`; nothing below main() ends the process.
void add_all(CLI::App& app, int& status, const RunOptions& opts = {});
int run(int argc, const char* const* argv, const RunOptions& opts = {});

// `check --spec` JSON text -> the string key/value map __metadata__ also gives (UsageError on
// malformed input), and the spec it resolves to for tensors whose last dimension is last_dim
// (UsageError/SpecError on invalid values). Separate from the file reading for the fuzz target.
std::map<std::string, std::string> parse_spec_json(std::string_view text, const std::string& what);
// --spec's argument, in `check` and `validate` alike: JSON text (it starts with '{') or a file
// holding it; and how messages name it ("--spec 'file'", or "--spec" for JSON text).
std::map<std::string, std::string> read_spec_arg(const std::string& arg);
std::string spec_arg_name(const std::string& arg);
RopeSpec resolve_check_spec(const std::map<std::string, std::string>& keys, std::int64_t last_dim,
                            std::size_t rank);

void add_list(CLI::App& app, int& status);
void add_eval(CLI::App& app, int& status, const RunOptions& opts);
void add_report(CLI::App& app, int& status);
void add_check(CLI::App& app, int& status);
void add_validate(CLI::App& app, int& status);

}  // namespace ropecheck::cli
