// ropecheck::reports — precision reports per kernel x dtype x position bucket. The reports
// *describe*: they never fail because numbers are large, only when a derived bound from
// ropecheck::bounds is exceeded (or a baseline regressed). The JSON document is the data model;
// Markdown, HTML and JUnit are rendered from it, so every number appears once.
//
// Map of this module (reports/src):
//   plan      plan.cpp      options -> specs, variant setups, the deterministic work list: a
//                           std::variant of unit structs (SweepUnit{dtype, spec, bucket}, ...)
//   executor  executor.cpp  this shard's units on a thread pool; stop polling, progress
//   numerics  sweep.cpp     what a unit computes (sweep statistics, safe-context and
//                           score-offset searches, special values), asking ropecheck::verify for
//                           every pair error and bound; stats.cpp, exact_sum.cpp, recipe.cpp
//   document  document.cpp  report.json from the unit results, in work-list order; the checks
//   merge     merge.cpp     shard reports -> the same document, through document.cpp
//   render    render.cpp    Markdown / HTML / JUnit from the document
//   around    baseline.cpp (--baseline), io.cpp (atomic writes, environment), checks.cpp
//             (schema and markup validators for the tests)
// Adding a check (a new kind of work unit): a struct in plan.hpp's Unit and its place in
// work_list(), its numerics in sweep.cpp (+ a UnitResult alternative in executor.hpp if it
// returns something new), its section in document.cpp (and merge.cpp if shards must combine it
// beyond copying entries), a table in render.cpp, report.schema.json.
// Adding a section computed from existing results: document.cpp, render.cpp, the schema.
// Adding a dtype: nothing here (Options::dtypes lists it; core/bounds/reference know it).
#pragma once

#include "ropecheck/dtype.hpp"
#include "ropecheck/fp8.hpp"
#include "ropecheck/kernel.hpp"
#include "ropecheck/spec.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ropecheck::reports {

// report.json's "schema_version": merge() and --baseline refuse reports of another version.
// Bump it when the document's layout or meaning changes; history:
// 2: buckets carry mergeable state ("merge"), octaves their exact sum, shard metadata.
// 3: the policy's trig_error; simd_path avx512bf16.
// 4: the policy's recipe may be ladder_f32 (ggml / llama.cpp).
// 5: the engine atlas block ("atlas"; its checks come first in "checks"), a plugin's "domain",
//    and validate --out's "validation" verdict. Additive within 5 (readers of 5 ignore them):
//    recipe inv_freq_f64, buckets[].label, policy table_rounding / output_rounding; recipe
//    fast_powf_f32 and policy trig_argument (the FlashInfer engine); recipe fast_powf_ladder_f32
//    (ggml / llama.cpp CUDA); results[].fp8 and options.fp8 (--fp8: FP8 cache bytes).
inline constexpr int kSchemaVersion = 5;

// Bad options: the CLI maps this to exit status 2.
class OptionsError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct Options {
  std::vector<std::string> kernels;  // empty = every built-in kernel
  std::vector<Dtype> dtypes{Dtype::f64, Dtype::f32, Dtype::f16, Dtype::bf16};
  std::vector<std::int64_t> head_dims{64, 128};
  std::vector<double> bases{1e4, 1e6};
  std::vector<Layout> layouts{Layout::interleaved, Layout::half};
  std::int64_t max_position = std::int64_t{1} << 20;
  // Input vectors per kernel x dtype x spec x position bucket (drawn as ceil(samples/4) positions
  // with 4 head vectors each: the exact trig of a position is shared by its heads).
  std::int64_t samples = 1024;
  std::uint64_t seed = 1;
  unsigned threads = 0;  // 0 = std::thread::hardware_concurrency()
  // Every exact value from MPFR alone (--oracle mpfr): the same answers as the two-tier oracle,
  // bit for bit, at several times the cost; for cross-checking the fast path.
  bool oracle_mpfr = false;
  unsigned reference_bits = 0;  // 0 = reference::default_bits (160 for every dtype we have)
  // Budget that defines the precision-safe context length: max per-pair error <= budget_u * u.
  double safe_budget_u = 2.0;
  // Sharding (GoogleTest's protocol in the CLI): run only the work units whose index in the
  // deterministic work list is shard_index mod shard_count; merge() joins the shard reports.
  int shard_index = 0, shard_count = 1;
  // One section per scaling variant / multi-axis layout (variant_cases(): a representative spec
  // of each, run on the `scalar` and `simd` kernels among `kernels`, samples / 4 vectors per
  // bucket, at least 16), the safe-context table by variant, and the dynamic-NTK composition
  // section.
  bool variants = true;
  // FP8 cache bytes (--fp8): every output of the main sweep also quantized into each of these
  // formats through the fused chain (verify/fp8_chain.hpp; Fp8Stats in stats.hpp) with one
  // per-tensor scale, its convention and overflow policy. Empty: no FP8 section. FP8 is a storage
  // format of the cache, not a dtype a rotation runs in: the rotation runs in each of `dtypes`.
  std::vector<Fp8Format> fp8;
  double fp8_scale = 1.0;  // vLLM's default k_scale / v_scale when none is calibrated
  bool fp8_divide = false;
  Fp8Overflow fp8_overflow = Fp8Overflow::saturate;
  // Restrict the sweep to this one spec (`report --hf-config`): head_dims, bases and layouts are
  // ignored and the variant sections are not run.
  std::optional<RopeSpec> spec;
  // Polled between work units (from every worker thread; must be cheap and thread-safe, e.g. a
  // flag set by a signal handler). When it returns true, run() stops and throws Interrupted.
  std::function<bool()> stop;
  // The environment block's SIMD fields: the path the built-in simd kernel takes and the best one
  // this CPU has (the CLI asks src/kernels; the reports do not link the kernels).
  std::string simd_path = "unknown", simd_best_path = "unknown";
};

// run() was stopped through Options::stop; what() says after how many work units and which one
// was the first left unfinished. No report document exists: nothing should be written.
class Interrupted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws OptionsError naming the offending option.
void validate(const Options& o);

// The report's variant sections, in order: a name and a representative real-model spec each
// (linear f=4, dynamic NTK, DeepSeek-like YaRN, Llama-3.1 llama3, LongRoPE short and long, Qwen2-VL
// M-RoPE [16,24,24]).
struct VariantCase {
  std::string name;
  std::string model;  // what the parameters are modelled on
  RopeSpec spec;
};
const std::vector<VariantCase>& variant_cases();

// Progress lines (to stderr in the CLI); may be empty.
using Progress = std::function<void(const std::string&)>;

// Runs the sweep, the two novel analyses and the special-value cases; returns the report document
// (see reports/report.schema.json). `kernels` are the kernels to describe (built-in or plugins).
nlohmann::json run(const Options& o, const std::vector<const Kernel*>& kernels,
                   const Progress& progress = {});

// ---- the engine atlas (atlas.cpp) --------------------------------------------------------------
// An engine kernel and where its recipe comes from (the CLI fills this from the kernels library's
// provenance: the reports do not link the kernels).
struct AtlasEngine {
  const Kernel* kernel = nullptr;
  std::string engine, upstream, checked, modelled;
};
// The atlas run: every engine at o.head_dims (exactly one) x o.bases x o.dtypes in its own layout
// (half when it runs it, else interleaved), with o's positions, samples and seed; no variant
// sections. The usual report document of that run (its kernels are "<engine>@<base>") plus an
// "atlas" block: per engine x base x dtype the headline figures, what limits each (storage,
// angle, table, trig, arithmetic) and what would fix it, one sentence per engine, the
// provenance of each, and the run's results (for the charts). Throws OptionsError when no engine
// runs any of the specs.
nlohmann::json run_atlas(const Options& o, const std::vector<AtlasEngine>& engines,
                         const Progress& progress = {});
// Puts atlas_doc's "atlas" block into doc (rendered first) and atlas_doc's checks before doc's
// (exit status and JUnit include them).
void embed_atlas(nlohmann::json& doc, const nlohmann::json& atlas_doc);

// Merges the reports of every shard of one sweep (same options, each shard index once) into the
// report the unsharded run gives, bit for bit apart from "environment" and "shard". Throws
// OptionsError naming the problem (different options/seed/schema, a shard missing or twice).
nlohmann::json merge(const std::vector<nlohmann::json>& shards);

// Compares `now` against an older report: a regression is any kernel x dtype x bucket whose max
// ULP or max per-pair error grew beyond `factor` times the baseline (see baseline.cpp for the
// floor). Adds a "baseline" object to `now` and returns the number of regressions.
int apply_baseline(nlohmann::json& now, const nlohmann::json& baseline, double factor);
inline constexpr double kDefaultBaselineFactor = 2.0;

// 0: every check holds; 1: a derived bound was exceeded, a special-value policy was violated, a
// baseline regressed, or the report carries a failed "validation" block (`validate --out`).
int exit_code(const nlohmann::json& report);

std::string render_markdown(const nlohmann::json& report);
std::string render_html(const nlohmann::json& report);
std::string render_junit(const nlohmann::json& report);

// Writes `data` to `path` atomically: a temporary file in the same directory, fsync, rename,
// fsync of the directory. On any error the temporary is removed and std::runtime_error is thrown;
// `path` is either the old file or the complete new one, never half-written.
void atomic_write(const std::filesystem::path& path, std::string_view data);

// Writes report.json, report.md, report.html and junit.xml into dir (created if missing).
void write_all(const nlohmann::json& report, const std::filesystem::path& dir);

// The environment block (compiler and flags, CPU, SIMD path, library versions, git commit).
nlohmann::json environment(const Options& o);

// ---- checks used by the tests (no GTest in this library) ------------------------------------
// Validates `doc` against the JSON Schema subset used by report.schema.json (type, properties,
// required, additionalProperties (bool), items, enum, const, minimum, maximum, minItems, $ref to
// #/definitions/..., anyOf). Returns the list of violations ("" path = root); empty when valid.
std::vector<std::string> validate_schema(const nlohmann::json& schema, const nlohmann::json& doc);
// Well-formedness of the HTML we emit (XML-style: every element closed or void, properly nested,
// attributes quoted, entities known). Returns the problems found; empty when well-formed.
std::vector<std::string> check_html(std::string_view html);
// Well-formedness of an XML document (JUnit). Same checker, no void elements.
std::vector<std::string> check_xml(std::string_view xml);

}  // namespace ropecheck::reports
