// `ropecheck validate --plugin PATH.so`: a third-party kernel, loaded through the C ABI into an
// isolated worker, checked by (1) a guarded differential run against the multiprecision reference
// on directed specs and positions of its declared domain (crashes, hangs, out-of-bounds writes,
// unwritten outputs and modified inputs are classified here) and (2) every property of the
// property suite, per configuration (dtype x layout) the plugin supports, each drawing its cases
// inside the declared domain. Coverage is part of the verdict: every cell says how many cases ran
// or why the declaration makes it not applicable; a property that could not run its budget for
// any other reason fails the run. Exit 0: all pass; 1: any failure, fault, declaration mismatch
// or coverage failure; 2: bad usage or a plugin that cannot be loaded / has the wrong ABI.
#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include <sys/mman.h>

#include "cli.hpp"
#include "forked_jobs.hpp"
#include "plugin_load.hpp"
#include "ropecheck/bounds.hpp"
#include "ropecheck/plugin/host.hpp"
#include "ropecheck/properties.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/regimes.hpp"
#include "ropecheck/reports/report.hpp"
#include "ropecheck/verify/advise.hpp"
#include "ropecheck/verify/verify.hpp"
#include "shard.hpp"

namespace ropecheck::cli {

namespace ref = ropecheck::reference;
namespace props = ropecheck::properties;

namespace {

int default_threads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

struct ValidateOptions {
  std::string plugin;
  std::string worker_fds;  // "R,W": a worker already serving on these pipe ends (Python module)
  std::string json;        // validation.json alone, without the report set of --out
  std::vector<std::string> dtypes, layouts;
  std::string budget = "standard";
  std::string oracle = "fast";  // --oracle: fast (two-tier) or mpfr (MPFR alone, same answers)
  double timeout = 10.0;
  std::uint64_t worker_memory = 8192;  // MiB the plugin worker may add (0: no limit)
  std::string out;
  std::uint64_t seed = 1;
  HfConfigArg hf;     // validate on this model's spec (see run_validate)
  std::string spec;   // --spec: the plugin implements exactly this spec (JSON text or file)
  std::string shard;  // "i/n"; default GTEST_SHARD_INDEX / GTEST_TOTAL_SHARDS
  std::vector<std::string> properties;  // only these checks (names; "Differential" included)
  bool verbose = false;
  bool print_plan = false;          // --print-plan: the directed specs and positions, nothing run
  int threads = default_threads();  // processes running checks at once (forked_jobs.hpp)
  double shrink_seconds = -1;       // --shrink-seconds (< 0: by budget, shrink_seconds_for)
  // The run's shrink-time pool (SharedPool, shared with the forked runners); null: none.
  std::atomic<std::int64_t>* shrink_pool_ns = nullptr;
};

// The plugin restricted to one layout, so each (dtype, layout) configuration gets its own verdict
// from properties that draw specs at random. Every call still goes through the isolated worker.
class LayoutRestricted final : public Kernel {
 public:
  LayoutRestricted(const plugin::PluginKernel& k, Layout l) : k_(k), l_(l) {}
  std::string name() const override { return k_.name(); }
  std::string description() const override { return k_.description(); }
  Policy policy(Dtype d) const override { return k_.policy(d); }
  bool supports(const RopeSpec& s, Dtype d) const override {
    return admits(s) && k_.supports(s, d);
  }
  KernelStatus apply(const RopeSpec& s, const TensorArgs& a) const override {
    if (!admits(s)) return KernelStatus::unsupported;
    return k_.apply(s, a);
  }
  bool has_backward() const override { return k_.has_backward(); }
  KernelStatus apply_backward(const RopeSpec& s, const TensorArgs& a) const override {
    if (!admits(s)) return KernelStatus::unsupported;
    return k_.apply_backward(s, a);
  }
  Domain domain() const override { return k_.domain(); }
  // A configuration of a newer layout (proportional, mrope, imrope, axial) also admits the two
  // basic layouts: the properties draw the configuration's layout wherever a spec admits it
  // (focus_layout) and fall back to interleaved/half otherwise (e.g. proportional with an odd
  // head_dim), and their applicability probes use interleaved/half specs.
  bool admits(const RopeSpec& s) const {
    if (s.layout == l_) return true;
    const bool basic = l_ == Layout::interleaved || l_ == Layout::half;
    return !basic && (s.layout == Layout::interleaved || s.layout == Layout::half);
  }

 private:
  const plugin::PluginKernel& k_;
  Layout l_;
};

struct Cell {
  Cell() = default;
  Cell(std::string t, bool f, std::string d)
      : text(std::move(t)), failed(f), detail(std::move(d)) {}
  std::string text;  // "pass", "FAIL", "n/a", "coverage", "mismatch", "crashed (signal 11)", ...
  bool failed = false;
  std::string detail;  // counterexample / fault message / reason not applicable
  int cases = 0, budget = 0;
  std::string kind;  // "", "wrong_results", "non_finite_output", "declaration_mismatch",
                     // "coverage_failure", "not_applicable"
};

struct ConfigResult {
  Dtype dtype;
  Layout layout;
  Cell differential;
  // The differential check's vectors through verify: their count, the worst pair error (u) and
  // the worst share of the bound.
  verify::Summary diff;
  std::vector<std::pair<props::Property, Cell>> properties;
  // A finite input gave a non-finite output in the differential check (NaN/inf written).
  bool nonfinite_output = false;
  // The first fault of this configuration, if any (the named classification comes from it).
  std::optional<plugin::Fault> fault;
  Policy policy{};  // the plugin's declared policy for this dtype (printed with each replay)
  std::string partial_specs;  // the differential's partial-rotary specs, "rd/hd, ..." (coverage)
  std::string structural;     // the structural variants it ran (structural_coverage)
  // The directed backward differential (BackwardMatchesReferenceWithinBound's directed cases):
  // its vectors and figures, and the structural variants and partial specs it ran.
  verify::Summary bwd;
  std::string bwd_partial_specs, bwd_structural;
};

// The named classification of one configuration in validation.json: the fault kind when the
// isolation or the guards caught one (crashed, exited, timeout, out_of_bounds_write,
// unwritten_output, input_modified, protocol_violation, out_of_memory, bad_reply), else
// non_finite_output, wrong_results (a property or the differential check failed), or pass. A plugin
// that prints to stdout is not a fault: the worker's stdout goes to stderr, so it cannot corrupt
// ropecheck's tables/JSON (classified pass). Precedence: a fault, then a non-finite output (seen by
// the differential check or a property), a declaration mismatch, wrong results, and last a coverage
// failure (nothing wrong was seen, but the declared domain was not covered).
std::string classification(const ConfigResult& r) {
  if (r.fault) return plugin::name(r.fault->kind);
  bool nonfinite = r.nonfinite_output, mismatch = false, wrong = false, coverage = false;
  for (const Cell* c : [&] {
         std::vector<const Cell*> v = {&r.differential};
         for (const auto& pc : r.properties) v.push_back(&pc.second);
         return v;
       }()) {
    if (!c->failed) continue;
    nonfinite = nonfinite || c->kind == "non_finite_output";
    mismatch = mismatch || c->kind == "declaration_mismatch";
    coverage = coverage || c->kind == "coverage_failure";
    wrong = wrong || c->kind == "wrong_results" || c->kind.empty();
  }
  if (nonfinite) return "non_finite_output";
  if (mismatch) return "declaration_mismatch";
  if (wrong) return "wrong_results";
  if (coverage) return "coverage_failure";
  return "pass";
}

std::string fault_short(const plugin::Fault& f) {
  switch (f.kind) {
    case plugin::FaultKind::crashed:
      return "crashed (signal " + std::to_string(f.signal) + ")";
    case plugin::FaultKind::exited:
      return "exited (" + std::to_string(f.exit_status) + ")";
    case plugin::FaultKind::timeout:
      return "timeout";
    case plugin::FaultKind::out_of_bounds_write:
      return "out-of-bounds write";
    case plugin::FaultKind::unwritten_output:
      return "unwritten output";
    case plugin::FaultKind::input_modified:
      return "input modified";
    case plugin::FaultKind::declaration_mismatch:
      return "mismatch";
    default:
      return plugin::name(f.kind);
  }
}

// Faults that end the configuration: they would repeat in every later check of it.
bool fatal(const plugin::Fault& f) {
  return f.kind == plugin::FaultKind::crashed || f.kind == plugin::FaultKind::exited ||
         f.kind == plugin::FaultKind::timeout || f.kind == plugin::FaultKind::protocol_violation ||
         f.kind == plugin::FaultKind::out_of_memory ||
         f.kind == plugin::FaultKind::declaration_mismatch;  // said once, at its first call
}

// ---- directed specs and positions --------------------------------------------------------------

// Directed positions: table-size and power-of-two boundaries where f32 angle recipes and
// cos/sin caches break, negatives (KV-cache shifts), and long context; those in the declared
// range, plus the range's own ends when it is narrower than int64 (e.g. INT32_MAX).
std::vector<std::int64_t> directed_positions(const Domain& d) {
  static const std::vector<std::int64_t> all = {0,    1,     2,     255,    256,     2047, 2048,
                                                4095, 65535, 65536, 131071, 1048575, -1,   -4096};
  std::vector<std::int64_t> p;
  for (auto m : all)
    if (m >= d.min_position && m <= d.max_position) p.push_back(m);
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  if (d.max_position != kMax && std::find(p.begin(), p.end(), d.max_position) == p.end())
    p.push_back(d.max_position);
  if (d.min_position != kMin && std::find(p.begin(), p.end(), d.min_position) == p.end())
    p.push_back(d.min_position);
  return p;
}

// The scaling variants of the directed differential check, with real-model parameters: per
// variant a group of specs, its model head dim first, then each of `dims`; the differential runs
// the first of a group supports() accepts. A kernel that takes a scaling kind at one head dim only
// (a template instantiated for 96) still gets the kind checked at that dim (#29, generalized: the
// groups used to hold the model dim alone, and such a kernel got no spec of the kind at all).
// with_model_dim false: `dims` only (the small probes of structural_coverage).
std::vector<std::vector<RopeSpec>> variant_groups(Layout l, const std::vector<std::int64_t>& dims,
                                                  bool with_model_dim = true) {
  struct Template {
    std::int64_t hd;
    double base;
    std::function<Scaling(std::int64_t)> make;  // the variant for n pairs
  };
  std::vector<Template> ts;
  const auto example = [](ScalingKind k) {
    return [k](std::int64_t np) { return example_scaling(k, np); };
  };
  // Every regime of every kind (#37): a kernel wrong in one regime only (builtin_wrap.cpp's regime
  // bugs) meets a spec of that regime here, whatever the random draws do.
  const auto with = [](ScalingKind k, std::function<void(Scaling&)> f) {
    return [k, f](std::int64_t np) {
      Scaling s = example_scaling(k, np);
      f(s);
      return s;
    };
  };
  ts.push_back({64, 1e4, example(ScalingKind::linear)});  // factor 4: a power of two
  // 2.5: 1/factor is not a power of two, so a factor rounded on its way (to bf16, to f32) shows.
  ts.push_back({64, 1e4, with(ScalingKind::linear, [](Scaling& s) { s.factor = 2.5; })});
  // Dynamic NTK above (16384), at (4096) and below (2048) its trained length 4096. Below, HF takes
  // max(seq_len, L0); without it factor 4 gives 4 * 2048/4096 - 3 = -1 to the power dim/(dim-2):
  // NaN (vLLM #52665).
  ts.push_back({64, 1e4, example(ScalingKind::dynamic)});
  ts.push_back({64, 1e4, with(ScalingKind::dynamic, [](Scaling& s) { s.seq_len = 4096; })});
  ts.push_back({64, 1e4, with(ScalingKind::dynamic, [](Scaling& s) {
                  s.factor = 4;
                  s.seq_len = 2048;
                })});
  ts.push_back({64, 1e4, example(ScalingKind::yarn)});  // DeepSeek-V3's: mscale pair, truncate
  ts.push_back({128, 1e6, [](std::int64_t) {  // Qwen-style: derived attention factor 0.1 ln f + 1
                  Scaling yarn2;
                  yarn2.kind = ScalingKind::yarn;
                  yarn2.factor = 4;
                  yarn2.original_max_position_embeddings = 32768;
                  return yarn2;
                }});
  ts.push_back({64, 1.5e5, [](std::int64_t) {  // gpt-oss-style: truncate false, no mscale pair
                  Scaling y;
                  y.kind = ScalingKind::yarn;
                  y.factor = 32;
                  y.original_max_position_embeddings = 4096;
                  y.truncate = false;
                  return y;
                }});
  ts.push_back({128, 1e6, [](std::int64_t) {  // an explicit attention factor, not the derived 1.14
                  Scaling y;
                  y.kind = ScalingKind::yarn;
                  y.factor = 4;
                  y.original_max_position_embeddings = 32768;
                  y.attention_factor = 0.8;
                  return y;
                }});
  ts.push_back({128, 5e5, example(ScalingKind::llama3)});        // Llama-3.1's: all three bands
  ts.push_back({128, 5e5, example(ScalingKind::freq_factors)});  // ggml rope_freqs: >= 1
  ts.push_back({64, 1e4, example(ScalingKind::longrope)});       // long side (seq 4097)
  // LongRoPE on the short side, at the edge of the strict switch (seq_len = original)
  ts.push_back({64, 1e4, with(ScalingKind::longrope, [](Scaling& s) { s.seq_len = 4096; })});
  std::vector<std::vector<RopeSpec>> groups;
  for (const Template& t : ts) {
    std::vector<std::int64_t> hds;
    if (with_model_dim) hds.push_back(t.hd);
    for (std::int64_t hd : dims)
      if (std::find(hds.begin(), hds.end(), hd) == hds.end()) hds.push_back(hd);
    std::vector<RopeSpec> g;
    for (std::int64_t hd : hds) {
      RopeSpec s;
      s.head_dim = hd;
      s.base = t.base;
      s.layout = l;
      const std::int64_t np = hd / 2;
      s.scaling = t.make(np);
      if (is_multi_axis(l)) {  // CogVideoX / Qwen-VL-like thirds: [n/4, 3n/8, rest]
        const std::int64_t a = std::max<std::int64_t>(1, np / 4),
                           b = std::max<std::int64_t>(1, 3 * np / 8);
        s.sections = {a, b, np - a - b};
      }
      try {
        g.push_back(s.normalized());
      } catch (const SpecError&) {  // a variant this layout or dim cannot take (axial + scaling)
      }
    }
    if (!g.empty()) groups.push_back(std::move(g));
  }
  return groups;
}

// Positions per token on each axis of a multi-axis spec: distinct (t, h, w) so that a kernel
// driving a pair by the wrong axis is caught, from the directed 1-D positions (kept in range).
std::vector<std::int64_t> axis_positions(const std::vector<std::int64_t>& pos1, std::int64_t n_axes,
                                         const Domain& d) {
  std::vector<std::int64_t> p;
  for (std::int64_t m : pos1)
    for (std::int64_t a = 0; a < n_axes; ++a)
      p.push_back(a == 0 ? m : std::clamp(m / (a + 2) + 3 * a, d.min_position, d.max_position));
  return p;
}

// The directed specs of a configuration: the declared head dims (or 64, 128, 80 with partial
// rotary 32, 9 with an odd head_dim) with full rotary, a partial rotary of about half the pairs
// and one with an odd number of pairs; those supports() accepts.
std::vector<RopeSpec> model_partial_specs(const Kernel& k, Dtype dt, Layout l);
std::vector<RopeSpec> odd_head_dim_specs(const Kernel& k, Dtype dt, Layout l);

std::vector<RopeSpec> directed_specs(const Kernel& k, Dtype dt, Layout l) {
  const Domain d = k.domain();
  std::vector<std::tuple<std::int64_t, std::int64_t, double>> shapes;
  if (d.head_dims.empty()) {
    shapes = {{64, 64, 1e4}, {128, 128, 5e5}, {80, 32, 1e4}, {9, 8, 1e6}};
  } else {
    int n = 0;
    for (std::int64_t hd : d.head_dims) {
      if (n++ == 6) break;  // a long list: its first six dims
      const std::int64_t full = hd - hd % 2, np = full / 2;
      const double base = n % 2 ? 1e4 : 5e5;
      shapes.push_back({hd, full, base});
      if (np >= 2) shapes.push_back({hd, 2 * (np / 2 - (np / 2) % 2), 1e6});  // even pair count
      const std::int64_t odd = (np - 1) % 2 ? np - 1 : np - 2;  // an odd pair count below np
      if (odd >= 1) shapes.push_back({hd, 2 * odd, 1e4});
    }
  }
  std::vector<RopeSpec> specs;
  for (auto [hd, rd, base] : shapes) {
    if (rd < 2 || rd > hd) continue;
    RopeSpec s;
    s.head_dim = hd;
    s.rotary_dim = rd;
    s.base = base;
    s.layout = l;
    if (is_multi_axis(l)) {  // sections over rd/2 pairs: [n/4, 3n/8, rest] (>= 1 each)
      const std::int64_t n = rd / 2, a = std::max<std::int64_t>(1, n / 4),
                         b = std::max<std::int64_t>(1, 3 * n / 8);
      s.sections = {a, b, n - a - b};
    }
    try {
      s = s.normalized();
    } catch (const SpecError&) {  // e.g. proportional with an odd head_dim
      continue;
    }
    if (k.supports(s, dt) && std::find(specs.begin(), specs.end(), s) == specs.end())
      specs.push_back(s);
  }
  for (const RopeSpec& s : model_partial_specs(k, dt, l))
    if (std::find(specs.begin(), specs.end(), s) == specs.end()) specs.push_back(s);
  for (const RopeSpec& s : odd_head_dim_specs(k, dt, l))
    if (std::find(specs.begin(), specs.end(), s) == specs.end()) specs.push_back(s);
  return specs;
}

// Partial rotary at realistic head dims (the declared ones, else 64, 80, 96, 128, 256), with >=
// kRealisticPairs pairs, those supports() accepts: the ratios models ship (model_rotary_dims:
// 1/2, 1/4, 0.4, a 64-dim part), at most two head dims per rotary/head ratio; and at a head dim
// where supports() takes none of those, the largest even rotary_dim it accepts (every even one
// probed: supports() calls are cheap). The shapes above are structural (about half the pairs, an
// odd count); a kernel that takes one ratio only rejects them all, and a bug of its partial path
// would go unchecked (#29: 1/2 and 1/4 passed at the standard budget; #37: 3/4 read as a
// coverage gap).
std::vector<RopeSpec> model_partial_specs(const Kernel& k, Dtype dt, Layout l) {
  if (is_multi_axis(l)) return {};
  const std::vector<std::int64_t> dims = realistic_head_dims(k.domain());
  std::vector<RopeSpec> specs;
  std::map<double, int> per_ratio;
  const auto make = [&](std::int64_t hd, std::int64_t rd) -> std::optional<RopeSpec> {
    RopeSpec s;
    s.head_dim = hd;
    s.rotary_dim = rd;
    s.base = specs.size() % 2 ? 5e5 : 1e4;
    s.layout = l;
    try {
      s = s.normalized();
    } catch (const SpecError&) {  // e.g. proportional with an odd rotary split
      return std::nullopt;
    }
    if (!k.supports(s, dt)) return std::nullopt;
    return s;
  };
  for (std::int64_t hd : dims) {
    bool model = false;
    for (std::int64_t rd : model_rotary_dims(hd)) {
      if (rd < 2 * kRealisticPairs) continue;
      const auto s = make(hd, rd);
      model = model || s.has_value();
      const double ratio = static_cast<double>(rd) / static_cast<double>(hd);
      if (!s || per_ratio[ratio] >= 2) continue;
      ++per_ratio[ratio];
      specs.push_back(*s);
    }
    if (model) continue;
    for (std::int64_t rd = hd - hd % 2 - 2; rd >= 2 * kRealisticPairs; rd -= 2)
      if (const auto s = make(hd, rd)) {
        specs.push_back(*s);
        break;
      }
  }
  return specs;
}

// Odd head dims at realistic sizes (the last dim passes through): the declared odd dims, else
// 65, 97, 33, 129, 255; at most two that supports() accepts, full rotary and, when the kernel
// takes it, the even part minus a 64-dim remainder. The shapes above hold an odd dim only when it
// is declared, or 9 (4 pairs); a kernel whose vector path needs head_dim >= 16 rejects 9, and a
// bug of its odd path (inv_freq's exponent over the odd head_dim, the tail element) would go
// unchecked by the differential.
std::vector<RopeSpec> odd_head_dim_specs(const Kernel& k, Dtype dt, Layout l) {
  if (is_multi_axis(l) || l == Layout::proportional) return {};
  const Domain d = k.domain();
  std::vector<std::int64_t> dims;
  for (std::int64_t hd :
       d.head_dims.empty() ? std::vector<std::int64_t>{65, 97, 33, 129, 255} : d.head_dims)
    if (hd % 2 && hd >= 9) dims.push_back(hd);
  std::vector<RopeSpec> specs;
  for (std::int64_t hd : dims) {
    if (specs.size() >= 2) break;
    RopeSpec s;
    s.head_dim = hd;
    s.rotary_dim = hd - 1;
    s.base = specs.empty() ? 1e4 : 5e5;
    s.layout = l;
    try {
      s = s.normalized();
    } catch (const SpecError&) {
      continue;
    }
    if (k.supports(s, dt)) specs.push_back(s);
  }
  return specs;
}

// The magnitude scale of the directed specs that carry one: not a power of two (a scale folded
// into the table, applied twice, divided instead of multiplied, or dropped on one path all show).
constexpr double kDirectedScale = 0.75;

// Copies of the first realistic (>= 4 pairs) full, partial and odd-head_dim spec with scale 0.75,
// those supports() accepts, when the kernel declares a magnitude scale: every directed spec was
// unscaled, so a bug of the scaled path was left to the properties' draws (30 % scaled).
std::vector<RopeSpec> scaled_specs(const Kernel& k, Dtype dt, const std::vector<RopeSpec>& specs) {
  if (!k.domain().magnitude_scale) return {};
  std::vector<RopeSpec> out;
  bool full = false, partial = false, odd = false;
  for (const RopeSpec& s : specs) {
    if (s.n_pairs() < kRealisticPairs || s.scale != 1) continue;
    const bool is_partial = s.rotary_dim < s.head_dim - s.head_dim % 2;
    const bool is_odd = s.head_dim % 2 == 1;
    bool& done = is_odd ? odd : is_partial ? partial : full;
    if (done) continue;
    RopeSpec t = s;
    t.scale = kDirectedScale;
    if (k.supports(t, dt)) {
      out.push_back(t);
      done = true;
    }
  }
  return out;
}

// The structural variants a configuration's directed specs ran at realistic sizes (>= 4 pairs:
// where an exponent, pair-index or scale bug of a variant's own path can show), as the header line
// says it, and a coverage gap: a variant supports() accepts only below 4 pairs (probed at 2 and 3
// pairs), so that no directed spec of it could show such a bug. Partial rotary has its own line
// (partial_coverage); in-place calls are one of the three call shapes of every spec.
struct StructuralCoverage {
  std::string ran;
  std::string gap;
};

namespace structural {

std::string list(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string r;
  for (const auto& x : v) r += (r.empty() ? "" : sep) + x;
  return r;
}

void once(std::vector<std::string>& v, const std::string& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

// s at 2 and 3 pairs (an odd head_dim stays odd): the first that supports() accepts.
std::optional<RopeSpec> small_probe(const Kernel& k, Dtype dt, const RopeSpec& s) {
  for (std::int64_t np : {2, 3}) {
    RopeSpec t = s;
    t.head_dim = 2 * np + (s.head_dim % 2);
    t.rotary_dim = 2 * np;
    try {
      t = t.normalized();
    } catch (const SpecError&) {
      continue;
    }
    if (k.supports(t, dt)) return t;
  }
  return std::nullopt;
}

std::string odd_head_dims(const Kernel& k, Dtype dt, Layout l, const std::vector<RopeSpec>& specs,
                          std::string& gap) {
  std::vector<std::string> odd;
  for (const RopeSpec& s : specs)
    if (s.head_dim % 2 && s.n_pairs() >= kRealisticPairs) once(odd, std::to_string(s.head_dim));
  if (!odd.empty()) return "odd head_dim " + list(odd);
  RopeSpec p;
  p.head_dim = 5;
  p.layout = l;
  if (const auto t = small_probe(k, dt, p); t && gap.empty())
    gap = "coverage gap: supports() accepts an odd head_dim (" + describe(*t) +
          ") but no odd head_dim with >= 4 pairs (65, 97, 33, 129, 255 or the declared ones), so a "
          "bug of the odd path (the pass-through tail, inv_freq over head_dim) cannot show; accept "
          "a realistic odd head_dim in supports(), or reject odd ones";
  return "odd head_dim: none accepted";
}

std::string scale(const Kernel& k, Dtype dt, Layout l, const std::vector<RopeSpec>& specs,
                  std::string& gap) {
  int n = 0;
  for (const RopeSpec& s : specs) n += s.scale != 1 && s.n_pairs() >= kRealisticPairs;
  if (n > 0)
    return "scale " + verify::fmt(kDirectedScale, 3) + " on " + std::to_string(n) + " spec(s)";
  if (!k.domain().magnitude_scale) return "scale 1 only (declared)";
  RopeSpec p;
  p.head_dim = 4;
  p.layout = l;
  p.scale = kDirectedScale;
  if (const auto t = small_probe(k, dt, p); t && gap.empty())
    gap = "coverage gap: supports() accepts scale != 1 (" + describe(*t) +
          ") but on no directed spec with >= 4 pairs, so a bug of the scaled path cannot show; "
          "accept scale != 1 at realistic sizes, or clear the magnitude-scale flag";
  return "scale != 1: declared, accepted on no directed spec";
}

// Each declared scaling kind (groups: one or more per kind) and the head dims it ran at.
std::string scalings(const Kernel& k, Dtype dt, Layout l, const std::vector<RopeSpec>& specs,
                     const std::vector<std::vector<RopeSpec>>& groups, std::string& gap) {
  if (l == Layout::axial) return "scaling: none (axial specs carry none)";
  std::map<int, std::vector<std::string>> kinds;  // kind -> head dims that ran
  for (const auto& g : groups) kinds[static_cast<int>(g.front().scaling.kind)];
  if (kinds.empty()) return "scaling: none declared";
  for (const RopeSpec& s : specs)
    if (s.scaling.kind != ScalingKind::none && s.n_pairs() >= kRealisticPairs)
      once(kinds[static_cast<int>(s.scaling.kind)], std::to_string(s.head_dim));
  std::vector<std::string> ran, none;
  const auto small = variant_groups(l, {4, 6, 5}, false);  // the probes below 4 pairs
  for (auto& [kind, hds] : kinds) {
    const std::string nm = name(static_cast<ScalingKind>(kind));
    if (!hds.empty()) {  // "yarn 64+128": the head dims it ran at
      ran.push_back(nm + " " + list(hds, "+"));
      continue;
    }
    none.push_back(nm);
    for (const auto& g : small)
      for (const RopeSpec& t : g)
        if (gap.empty() && t.scaling.kind == static_cast<ScalingKind>(kind) && k.supports(t, dt))
          gap = "coverage gap: supports() accepts scaling " + nm + " (" + describe(t) +
                ") but at no head_dim with >= 4 pairs, so a bug of the " + nm +
                " path cannot show; accept it at a realistic head_dim, or reject it";
  }
  return "scaling " + (ran.empty() ? std::string("-") : list(ran)) +
         (none.empty() ? "" : "; declared, accepted at no realistic head_dim: " + list(none));
}

}  // namespace structural

StructuralCoverage structural_coverage(const Kernel& k, Dtype dt, Layout l,
                                       const std::vector<RopeSpec>& specs,
                                       const std::vector<std::vector<RopeSpec>>& groups) {
  StructuralCoverage sc;
  std::vector<std::string> parts;
  if (!is_multi_axis(l) && l != Layout::proportional)
    parts.push_back(structural::odd_head_dims(k, dt, l, specs, sc.gap));
  parts.push_back(structural::scale(k, dt, l, specs, sc.gap));
  parts.push_back(k.domain().in_place ? "in place (every spec)" : "out of place only (declared)");
  parts.push_back(structural::scalings(k, dt, l, specs, groups, sc.gap));
  sc.ran = structural::list(parts, "; ");
  return sc;
}

// The partial-rotary coverage of a configuration's directed specs, as the header line says it:
// the partial specs the differential runs ("32/64, 64/128"), and whether a gap remains: the
// kernel accepts partial rotary (probed at 1 to 3 pairs) but no directed partial spec has >= 4
// pairs, where an exponent or pair-index bug of the partial path could show.
struct PartialCoverage {
  std::string ran;  // "rd/hd, ..." (empty: none)
  std::string gap;  // non-empty: the coverage failure's reason
};

PartialCoverage partial_coverage(const Kernel& k, Dtype dt, Layout l,
                                 const std::vector<RopeSpec>& specs) {
  PartialCoverage pc;
  bool big = false;
  std::vector<std::string> seen;  // "rd/hd" once each (specs differ in base too)
  for (const RopeSpec& s : specs)
    if (s.rotary_dim < s.head_dim - s.head_dim % 2) {
      const std::string rh = std::to_string(s.rotary_dim) + "/" + std::to_string(s.head_dim);
      if (std::find(seen.begin(), seen.end(), rh) == seen.end()) seen.push_back(rh);
      big = big || s.n_pairs() >= kRealisticPairs;
    }
  for (std::size_t i = 0; i < seen.size(); ++i) pc.ran += (i ? ", " : "") + seen[i];
  if (big || is_multi_axis(l)) return pc;
  const Domain d = k.domain();
  std::vector<std::int64_t> dims = d.head_dims;
  if (dims.empty()) dims = {4, 6, 8, 64, 128};
  for (std::int64_t hd : dims)
    for (std::int64_t rd = 2; rd < 2 * kRealisticPairs && rd < hd - hd % 2; rd += 2) {
      RopeSpec s;
      s.head_dim = hd;
      s.rotary_dim = rd;
      s.layout = l;
      try {
        s = s.normalized();
      } catch (const SpecError&) {
        continue;
      }
      if (k.supports(s, dt)) {
        pc.gap = "coverage gap: supports() accepts partial rotary (" + describe(s) +
                 ") but no partial spec with >= 4 pairs (no even rotary_dim of 8 or more at "
                 "head dims " +
                 (d.head_dims.empty() ? std::string("64, 80, 96, 128, 256") : "declared") +
                 "), so a bug of the partial path (inv_freq over head_dim, a pair index) cannot "
                 "show; accept a realistic partial spec in supports(), or reject partial rotary";
        return pc;
      }
    }
  return pc;
}

// ---- the directed differential check ------------------------------------------------------------
// Each supported directed spec: random inputs (one draw per spec from the configuration's seed),
// the exact outputs once per vector, then three call shapes (contiguous, strided with gaps, in
// place) through the isolated worker, whose guards run on every call; every output vector goes
// through verify like `check`'s.

constexpr std::int64_t kDiffHeads = 2;
constexpr const char* kShapeNames[] = {"contiguous", "strided", "in-place"};

// The inputs of one directed spec: token t, head h at x[(t * kDiffHeads + h) * D], its positions
// at pos[t * n_axes ...], its exact output at exact[t * kDiffHeads + h].
struct DirectedInputs {
  std::vector<std::int64_t> pos;
  std::vector<double> x;
  std::unique_ptr<ref::Oracle> oracle;   // outlives the rotations and exact vectors below
  std::vector<ref::Rotation> rotations;  // one per token
  std::vector<ref::ExactVector> exact;
  std::int64_t tokens() const { return static_cast<std::int64_t>(exact.size()) / kDiffHeads; }
};

DirectedInputs directed_inputs(const RopeSpec& spec, Dtype d, const std::vector<std::int64_t>& pos1,
                               const Domain& dom, std::mt19937_64& rng, ref::OracleMode mode) {
  std::uniform_real_distribution<double> val(-2.0, 2.0);
  const std::int64_t T = static_cast<std::int64_t>(pos1.size()), D = spec.head_dim;
  const std::int64_t NA = spec.n_axes();
  DirectedInputs in;
  in.pos = NA == 1 ? pos1 : axis_positions(pos1, NA, dom);
  in.x.resize(static_cast<std::size_t>(T * kDiffHeads * D));
  for (auto& v : in.x) v = round_to_dtype(val(rng), d);
  in.oracle = std::make_unique<ref::Oracle>(spec, mode);
  in.rotations.reserve(static_cast<std::size_t>(T));
  for (std::int64_t t = 0; t < T; ++t) {
    in.rotations.push_back(in.oracle->at(
        std::vector<std::int64_t>(in.pos.begin() + t * NA, in.pos.begin() + (t + 1) * NA)));
    for (std::int64_t h = 0; h < kDiffHeads; ++h)
      in.exact.push_back(in.rotations.back().apply(&in.x[(t * kDiffHeads + h) * D]));
  }
  return in;
}

// The running differential check of one configuration.
struct Differential {
  verify::Summary summary;  // every output vector; keeps the first finding
  std::int64_t call_failures = 0, mismatches = 0;
  std::string first_fail, first_mismatch;  // the first failure of any kind, the first mismatch
  bool nonfinite_output = false;           // a finite input gave a NaN/inf output
  // Every checked call's vectors (one entry per directed spec and call shape), kept for the hint:
  // verify::advise re-checks all of them under each candidate (a few MB at most).
  struct Recorded {
    RopeSpec spec;
    std::vector<std::int64_t> pos;
    std::vector<double> x, got;
    std::vector<std::int64_t> failing;  // vectors that failed, the first few
  };
  std::vector<std::unique_ptr<Recorded>> recorded;
  Differential() { summary.keep = 1; }
  std::int64_t failures() const { return call_failures + summary.failures; }
};

// One call's output vectors (res, with the call's strides) against the exact outputs.
void check_outputs(Differential& st, const verify::PairChecker& c, const DirectedInputs& in,
                   const unsigned char* res, const TensorArgs& a, const std::string& context) {
  const RopeSpec& spec = c.spec();
  const std::int64_t D = spec.head_dim, NA = spec.n_axes();
  auto rec = std::make_unique<Differential::Recorded>();
  rec->spec = spec;
  rec->pos = in.pos;
  rec->x = in.x;
  rec->got.resize(in.x.size());
  for (std::int64_t t = 0; t < in.tokens(); ++t)
    for (std::int64_t h = 0; h < kDiffHeads; ++h) {
      const double* xv = &in.x[(t * kDiffHeads + h) * D];
      double* y = &rec->got[(t * kDiffHeads + h) * D];
      for (std::int64_t j = 0; j < D; ++j)
        y[j] = load(c.dtype(), res, t * a.token_stride + h * a.head_stride + j);
      verify::Location at;
      at.token = t;
      at.position.assign(in.pos.begin() + t * NA, in.pos.begin() + (t + 1) * NA);
      at.head = h;
      const auto& ex = in.exact[t * kDiffHeads + h];
      const verify::VectorCheck v = verify::check_vector(c, at.position, xv, y, ex);
      // A non-finite output that fails: not a correctly rounded overflow (verify::output_diff).
      for (const auto& p : v.pairs)
        st.nonfinite_output = st.nonfinite_output || (!p.finite && !p.within());
      verify::add_vector(st.summary, c, v, at, xv, y, ex);
      if (!v.ok() && rec->failing.size() < 4) rec->failing.push_back(t * kDiffHeads + h);
      if (st.first_fail.empty() && !st.summary.findings.empty())
        st.first_fail = st.summary.findings.front().message() + " " + context;
    }
  st.recorded.push_back(std::move(rec));
}

// The hint of a failing differential (verify::advise): a declaration or spec mismatch under which
// every recorded vector of the configuration passes. Calls that returned an error are no vectors:
// no hint then (nothing makes such a run pass).
std::string differential_hint(const Differential& st, const Policy& policy, Dtype d,
                              bool backward) {
  if (st.summary.failures == 0 || st.call_failures > 0) return "";
  std::vector<verify::RecordedVectors> run;
  for (const auto& r : st.recorded) {
    const std::int64_t na = r->spec.n_axes();
    run.push_back(verify::recorded_in_memory(
        r->spec, d, static_cast<std::int64_t>(r->x.size()) / r->spec.head_dim, kDiffHeads,
        r->pos.data(), na, r->x.data(), r->got.data(), r->failing, backward));
  }
  return verify::advise(policy, run).text;
}

// One call shape of one spec. Returns false when the plugin is poisoned (the fault is the
// verdict).
bool differential_call(const plugin::PluginKernel& pk, const Kernel& k, const RopeSpec& spec,
                       const verify::PairChecker& c, const DirectedInputs& in, int shape,
                       Differential& st) {
  const Dtype d = c.dtype();
  const int eb = traits(d).bytes;
  const std::int64_t T = in.tokens(), D = spec.head_dim;
  const std::int64_t hs = shape == 1 ? D + 3 : D;
  const std::int64_t ts = shape == 1 ? kDiffHeads * hs + 5 : kDiffHeads * D;
  std::vector<unsigned char> inb(static_cast<std::size_t>(T * ts * eb)), out(inb.size());
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t h = 0; h < kDiffHeads; ++h)
      for (std::int64_t j = 0; j < D; ++j)
        store(d, inb.data(), t * ts + h * hs + j, in.x[(t * kDiffHeads + h) * D + j]);
  TensorArgs a;
  a.dtype = d;
  a.n_tokens = T;
  a.n_heads = kDiffHeads;
  a.token_stride = ts;
  a.head_stride = hs;
  a.positions = in.pos.data();
  a.n_axes = spec.n_axes();
  a.in = inb.data();
  a.out = shape == 2 ? static_cast<void*>(inb.data()) : out.data();
  const KernelStatus status = k.apply(spec, a);
  if (pk.poisoned()) return false;
  if (status == KernelStatus::unsupported) {
    ++st.mismatches;
    if (st.first_mismatch.empty())
      st.first_mismatch = "apply() returned UNSUPPORTED for a spec supports() accepted: " +
                          plugin::describe_call(spec, a);
  } else if (status != KernelStatus::ok) {
    ++st.call_failures;
    if (st.first_fail.empty())
      st.first_fail =
          "apply() returned an error for a supported spec: " + plugin::describe_call(spec, a);
  } else {
    check_outputs(st, c, in, shape == 2 ? inb.data() : out.data(), a,
                  std::string("[") + kShapeNames[shape] + "] " + describe(spec));
  }
  return true;
}

// The differential cell of a configuration from its run.
Cell differential_cell(const Differential& st, int supported) {
  Cell c;
  if (supported == 0 || st.summary.vectors == 0) {
    c = {"coverage", true,
         "coverage: supports() accepted none of the directed specs of the declared domain, so no "
         "vector was checked"};
    c.kind = "coverage_failure";
  } else if (st.failures()) {
    c = {"FAIL", true, std::to_string(st.failures()) + " failure(s); first: " + st.first_fail};
    if (!st.summary.hint.empty()) c.detail += "\n  hint: " + st.summary.hint;
    c.kind = st.nonfinite_output ? "non_finite_output" : "wrong_results";
  } else if (st.mismatches) {
    c = {"mismatch", true,
         std::string(props::kMismatchPrefix) + std::to_string(st.mismatches) +
             " call(s); first: " + st.first_mismatch};
    c.kind = "declaration_mismatch";
  } else {
    c = {"pass", false, ""};
  }
  c.cases = static_cast<int>(st.summary.vectors);
  return c;
}

// The smallest |m| >= 1 inside the declared positions at which some pair's bound reaches its angle
// cap (the declared angle precision no longer constrains the rotation), or -1. Bisection on the
// bound, which grows with |m|; every 8th pair and the last are asked (the angle error grows with
// theta_i, and for the ladder with i).
std::int64_t unconstrained_from(const verify::PairChecker& c, const RopeSpec& s, const Domain& d) {
  const auto mag = [](std::int64_t v) { return v == INT64_MIN ? INT64_MAX : (v < 0 ? -v : v); };
  std::int64_t hi = std::min<std::int64_t>(std::max(mag(d.min_position), mag(d.max_position)),
                                           std::int64_t{1} << 62);
  const std::int64_t n = s.n_pairs();
  const auto capped = [&](std::int64_t m) {
    for (std::int64_t i = 0; i < n; i = i + 8 < n || i == n - 1 ? i + 8 : n - 1)
      if (c.bound(i, static_cast<double>(m)).angle_detail.rad >= 2.0) return true;
    return false;
  };
  if (n == 0 || hi < 1 || !capped(hi)) return -1;
  std::int64_t lo = 0;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (capped(mid) ? hi : lo) = mid;
  }
  return hi;
}

// The directed positions of the run: the forward's, or (backward) the backward view's, which
// calls apply_backward at their negations, i.e. at the forward's directed positions (the view's
// own domain, the kernel's negated, would mostly miss the positive boundaries).
std::vector<std::int64_t> run_positions(const Kernel& kernel, bool backward) {
  std::vector<std::int64_t> p = directed_positions(kernel.domain());
  if (backward)
    for (auto& m : p) m = -m;  // |m| <= INT64_MAX: directed_positions never holds INT64_MIN
  return p;
}

// The specs of a configuration's differential check, in the order it runs them: the directed
// ones, the extra ones of the plan (--spec, --hf-config) in this layout, the first accepted spec
// of each variant group of this layout (groups: those groups), and the scaled copies. The check
// runs those supports() accepts.
std::vector<RopeSpec> differential_specs(const Kernel& k, Dtype d, Layout l,
                                         const std::vector<RopeSpec>& extra_specs,
                                         const std::vector<std::vector<RopeSpec>>& variant_groups,
                                         std::vector<std::vector<RopeSpec>>& groups) {
  std::vector<RopeSpec> specs = directed_specs(k, d, l);
  for (const RopeSpec& s : extra_specs)
    if (s.layout == l) specs.push_back(s);
  for (const auto& g : variant_groups) {
    if (g.front().layout != l) continue;
    groups.push_back(g);
    for (const RopeSpec& s : g)
      if (k.supports(s, d)) {
        specs.push_back(s);
        break;
      }
  }
  for (const RopeSpec& s : scaled_specs(k, d, specs)) specs.push_back(s);
  return specs;
}

// Differential check of one configuration on directed specs and positions. A poisoned plugin
// stops it with the figures so far and no cell (the caller's fault cell is the verdict).
// backward: the same check of apply_backward, run on props::backward_view (B(g, m) as a rotation
// by -m, against s R(-m) g = s R(m)^T g exactly), with every structural variant and coverage rule
// of the forward's: the directed counterpart of the random BackwardMatchesReferenceWithinBound.
void differential(const plugin::PluginKernel& pk, const Kernel& kernel, ConfigResult& cr,
                  std::uint64_t seed, const std::vector<RopeSpec>& extra_specs,
                  const std::vector<std::vector<RopeSpec>>& variant_groups, ref::OracleMode mode,
                  bool backward = false) {
  const Dtype d = cr.dtype;
  std::mt19937_64 rng(backward ? seed ^ 0x9e3779b97f4a7c15ULL : seed);  // g independent of x
  const std::unique_ptr<Kernel> view = backward ? props::backward_view(kernel) : nullptr;
  const Kernel& k = backward ? *view : kernel;
  const Domain dom = k.domain();
  std::vector<std::vector<RopeSpec>> groups;  // this layout's
  const std::vector<RopeSpec> specs =
      differential_specs(k, d, cr.layout, extra_specs, variant_groups, groups);
  const std::vector<std::int64_t> pos1 = run_positions(kernel, backward);
  int supported = 0;
  std::int64_t unconstrained = -1;
  Differential st;
  bool poisoned = false;
  for (const RopeSpec& spec : specs) {
    if (!k.supports(spec, d)) continue;
    ++supported;
    const DirectedInputs in = directed_inputs(spec, d, pos1, dom, rng, mode);
    const verify::PairChecker c(k.policy(d), spec, d);
    for (int shape = 0; shape < 3 && !poisoned; ++shape) {
      if (shape == 2 && !dom.in_place) continue;  // declared out-of-place only
      poisoned = !differential_call(pk, k, spec, c, in, shape, st);
    }
    if (poisoned) break;
    const std::int64_t from = unconstrained_from(c, spec, dom);
    if (from >= 0 && (unconstrained < 0 || from < unconstrained)) unconstrained = from;
  }
  // Where the rotation stops being constrained, from the bound itself rather than from the
  // directed positions (which jump from 2^24 to 2^31).
  if (st.summary.unconstrained_pairs > 0 && unconstrained >= 0)
    st.summary.min_unconstrained_position = unconstrained;
  st.summary.hint = differential_hint(st, k.policy(d), d, backward);
  cr.diff = st.summary;
  cr.nonfinite_output = st.nonfinite_output;
  if (!poisoned) cr.differential = differential_cell(st, supported);
  const PartialCoverage pc = partial_coverage(k, d, cr.layout, specs);
  const StructuralCoverage sc = structural_coverage(k, d, cr.layout, specs, groups);
  cr.partial_specs = pc.ran;
  cr.structural = sc.ran;
  const std::string gap = pc.gap.empty() ? sc.gap : pc.gap;
  if (!poisoned && !gap.empty() && !cr.differential.failed) {
    cr.differential.text = "coverage";
    cr.differential.failed = true;
    cr.differential.detail = gap;
    cr.differential.kind = "coverage_failure";
  }
}

int max_success_for(const std::string& budget) {
  // Cases per property and configuration. Each case is a few isolated plugin calls plus MP
  // reference evaluations; "standard" keeps a full plugin validation of all 8 configurations well
  // under a minute.
  if (budget == "quick") return 20;
  if (budget == "standard") return 100;  // RapidCheck's own default
  if (budget == "deep") return 1000;
  throw UsageError("--budget must be quick, standard or deep (got '" + budget + "')");
}

// Shrinking through the isolated worker costs a few ms a call; 4000 calls keep a failing
// property's shrinking to seconds while still reaching small counterexamples.
constexpr long kShrinkCalls = 4000;

// The wall-time budget of one property's shrinking (--shrink-seconds), and the run's: every
// property's shrinking draws from one pool of kShrinkPoolFactor times that. Calls alone did not
// bound the time: a call's cost grows with the case (a restricted kernel's shrink candidates are
// mostly rejected draws, thousands of picks each), and a kernel broken everywhere fails every
// property of every configuration (36 shrinks at quick). With the pool, a failing run costs its
// cases plus about pool / --threads of shrinking, and the last failures keep their first
// counterexample (said in their message). A verdict never depends on it: a property fails at its
// first failing case; only how small its counterexample gets does.
double shrink_seconds_for(const ValidateOptions& o) {
  if (o.shrink_seconds >= 0) return o.shrink_seconds;
  if (o.budget == "quick") return 1;
  if (o.budget == "standard") return 3;
  return 20;
}
constexpr double kShrinkPoolFactor = 5;

// The run's pool in anonymous shared memory mapped before the runners are forked, so one atomic
// counter is seen by every runner process (a lock-free 64-bit atomic works across processes).
class SharedPool {
 public:
  explicit SharedPool(double seconds) {
    static_assert(std::atomic<std::int64_t>::is_always_lock_free);
    void* p = mmap(nullptr, sizeof(std::atomic<std::int64_t>), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap of the shrink pool failed");
    pool_ = new (p) std::atomic<std::int64_t>(static_cast<std::int64_t>(seconds * 1e9));
  }
  ~SharedPool() { munmap(pool_, sizeof(*pool_)); }
  SharedPool(const SharedPool&) = delete;
  SharedPool& operator=(const SharedPool&) = delete;
  std::atomic<std::int64_t>* get() const { return pool_; }

 private:
  std::atomic<std::int64_t>* pool_ = nullptr;
};

std::string shrink_note(const props::Verdict& v, const ValidateOptions& o) {
  if (!v.shrink_budget_spent) return "";
  if (!v.shrink_out_of_time)
    return "\n  (shrinking stopped after its budget of " + std::to_string(kShrinkCalls) +
           " plugin calls: the smallest counterexample found so far)";
  const double s = shrink_seconds_for(o);
  if (v.shrink_seconds < 0.05 && v.shrink_seconds < s)
    return "\n  (not shrunk: the run's shrinking time, " + verify::fmt(kShrinkPoolFactor * s, 3) +
           " s in all (--shrink-seconds " + verify::fmt(s, 3) +
           " per property), was spent by earlier failures; the first counterexample found)";
  return "\n  (shrinking stopped after " + verify::fmt(v.shrink_seconds, 2) +
         " s, its wall-time budget (--shrink-seconds " + verify::fmt(s, 3) +
         "): the smallest counterexample found so far)";
}

// ---- the property suite, the summary ---------------------------------------------------------

// One property on one configuration, as a cell of the table. Cases are drawn inside the
// plugin's declared domain; the cell carries how many ran of the budget.
Cell run_property(plugin::PluginKernel& pk, const Kernel& k, props::Property p, Dtype d, Layout l,
                  const ValidateOptions& o, bool variants, const std::optional<RopeSpec>& hf_spec,
                  const std::optional<RopeSpec>& only_spec) {
  pk.reset();
  props::Options popt;
  popt.max_success = max_success_for(o.budget);
  popt.seed = o.seed;
  popt.max_shrink_calls = kShrinkCalls;
  popt.max_shrink_seconds = shrink_seconds_for(o);
  popt.shrink_pool_ns = o.shrink_pool_ns;
  popt.oracle_mpfr = o.oracle == "mpfr";
  popt.id = props::test_id("Validate", pk.name(), d, p) + "_" + name(l);
  popt.variants = variants || hf_spec.has_value();
  // The 1-D layouts keep drawing every scaling kind; a configuration of a newer layout draws that
  // layout (else nearly every case would be discarded by the restriction).
  if (popt.variants && (hf_spec || (l != Layout::interleaved && l != Layout::half)))
    popt.focus_layout = l;
  if (hf_spec && hf_spec->scaling.kind != ScalingKind::none)
    popt.focus_scaling = hf_spec->scaling.kind;
  popt.only_spec = only_spec;
  // LayoutsArePermutations relates the two layouts, so it sees the unrestricted plugin (and the
  // verdict is the same in both layout columns of a dtype).
  const bool both = p == props::Property::LayoutsArePermutations;
  const auto v = both ? props::check(p, pk, d, popt) : props::check(p, k, d, popt);
  Cell c;
  c.cases = v.cases;
  c.budget = v.budget;
  c.detail = v.message;
  c.detail += shrink_note(v, o);
  if (o.verbose && !v.details.empty()) c.detail += "\n" + v.details;
  switch (v.status) {
    case props::Status::passed:
      c.text = "pass " + std::to_string(v.cases);
      break;
    case props::Status::not_applicable:
      c.text = "n/a";
      c.kind = "not_applicable";
      break;
    case props::Status::gave_up:
      c.text = "coverage " + std::to_string(v.cases) + "/" + std::to_string(v.budget);
      c.failed = true;
      c.kind = "coverage_failure";
      break;
    case props::Status::mismatch:
      c.text = "mismatch";
      c.failed = true;
      c.kind = "declaration_mismatch";
      break;
    case props::Status::failed:
      c.text = "FAIL";
      c.failed = true;
      c.kind = v.non_finite ? "non_finite_output" : "wrong_results";
      break;
  }
  return c;
}

// The command that reruns exactly one check of one configuration: every configuration and
// property draws its cases from --seed alone, so it replays the same cases and shrinks to the
// same counterexample.
std::string replay_command(const ValidateOptions& o, const ConfigResult& r,
                           const std::string& check) {
  std::ostringstream c;
  if (!o.worker_fds.empty()) {  // served by rc.validate: the replay is a Python call
    c << "rc.validate(fn, dtypes=['" << name(r.dtype) << "'], layouts=['" << name(r.layout)
      << "'], properties=['" << check << "'], budget='" << o.budget << "', seed=" << o.seed
      << ")  # plus the call's other arguments: the full line is under 'replay in Python'";
    return c.str();
  }
  c << "ropecheck validate --plugin " << o.plugin << " --dtypes " << name(r.dtype) << " --layouts "
    << name(r.layout) << " --properties " << check << " --budget " << o.budget << " --seed "
    << o.seed;
  if (o.timeout != 10.0) c << " --timeout " << o.timeout;
  if (o.worker_memory != 8192) c << " --worker-memory " << o.worker_memory;
  if (!o.hf.path.empty()) c << " --hf-config " << o.hf.path;
  if (o.hf.seq_len) c << " --seq-len " << o.hf.seq_len;
  if (!o.hf.layer_type.empty()) c << " --hf-layer-type " << o.hf.layer_type;
  if (!o.spec.empty()) c << " --spec '" << o.spec << "'";
  return c.str();
}

// The table (rows: checks; columns: configurations; cells: cases run, n/a, or the failure), the
// reasons for n/a grouped by property, then each failure with its counterexample and one replay
// command. Returns whether anything failed.
// "f32 angle: rotation unconstrained beyond |m| ~ 2^22.5 (...)": where the bound's angle term
// reaches its cap for this configuration's declared policy, as the differential saw it.
std::string unconstrained_text(const ConfigResult& r) {
  const double m =
      static_cast<double>(std::max<std::int64_t>(1, r.diff.min_unconstrained_position));
  return std::string(name(angle_precision(r.policy))) +
         " angle: rotation unconstrained beyond |m| ~ 2^" + verify::fmt(std::log2(m), 3) + " (" +
         std::to_string(r.diff.unconstrained_pairs) +
         " differential pairs there: the declared angle precision bounds the angle error by more "
         "than 2 rad, so any rotation passes; err and % are over the other pairs)";
}

// The lines under the table that hold for a group of configurations ("<prefix><text> [f32 half,
// bf16 half]"): where the declared angle precision stops constraining the rotation (the * cells),
// which partial-rotary specs and structural variants the differential ran, and the backward's
// directed cases (BackwardMatchesReferenceWithinBound): vectors and figures.
void print_coverage(const std::vector<ConfigResult>& results) {
  using Groups = std::map<std::string, std::vector<std::string>>;
  const auto print_groups = [](const char* prefix, const Groups& g) {
    for (const auto& [text, cfgs] : g) {
      std::cout << prefix << text << " [";
      for (std::size_t i = 0; i < cfgs.size(); ++i) std::cout << (i ? ", " : "") << cfgs[i];
      std::cout << "]\n";
    }
  };
  Groups capped, partial, structural, backward;
  for (const auto& r : results) {
    const std::string cfg = std::string(name(r.dtype)) + " " + name(r.layout);
    if (r.differential.text == "pass" && r.diff.unconstrained_pairs > 0)
      capped[unconstrained_text(r)].push_back(cfg);
    partial[r.partial_specs.empty() ? std::string("none accepted by supports()") : r.partial_specs]
        .push_back(cfg);
    if (!r.structural.empty()) structural[r.structural].push_back(cfg);
    if (r.bwd.vectors > 0)
      backward[std::to_string(r.bwd.vectors) + " vectors, worst " +
               verify::fmt(r.bwd.max_error_u, 3) + "u, " +
               verify::fmt(100 * r.bwd.max_utilization, 3) + "% of the bound" +
               (r.bwd_structural.empty() ? "" : "; " + r.bwd_structural)]
          .push_back(cfg);
  }
  print_groups("* ", capped);
  print_groups("partial rotary (rotary_dim/head_dim) in the differential: ", partial);
  print_groups("structural variants in the differential (>= 4 pairs): ", structural);
  print_groups(
      "backward directed differential (apply_backward vs s R(m)^T g, the forward's "
      "directed specs and positions): ",
      backward);
}

bool print_summary(const std::vector<ConfigResult>& results, const ValidateOptions& o) {
  const int w0 = 37;  // the longest property name (35) + 2
  // The differential cells first: the columns are as wide as their widest cell (+ 2), so a
  // failure's figures ("FAIL 336 (3.36e+07u 2.65e+08%)") never push the columns apart.
  std::vector<std::string> diff;
  int w = 30;
  for (const auto& r : results) {
    std::string cell = r.differential.text;
    // A passing cell's figures are those of the pairs the bound constrains: where the angle
    // term is at its cap any rotation passes, and its utilization would read like a near-miss.
    const bool split = cell == "pass" && r.diff.unconstrained_pairs > 0;
    const double err = split ? r.diff.max_error_u_constrained : r.diff.max_error_u;
    const double use = split ? r.diff.max_utilization_constrained : r.diff.max_utilization;
    if (r.diff.vectors && (cell == "pass" || cell == "FAIL"))
      cell += " " + std::to_string(r.diff.vectors) + " (" + verify::fmt(err, 3) + "u " +
              verify::fmt(100 * use, 3) + "%" + (split ? "*" : "") + ")";
    diff.push_back(cell);
    w = std::max(w, static_cast<int>(cell.size()) + 2);
    for (const auto& pc : r.properties)
      w = std::max(w, static_cast<int>(pc.second.text.size()) + 2);
  }
  std::cout << "\n" << std::left << std::setw(w0) << "check (cases run)";
  for (const auto& r : results)
    std::cout << std::setw(w) << (std::string(name(r.dtype)) + " " + name(r.layout));
  std::cout << "\n" << std::setw(w0) << "Differential (vectors, err, %)";
  for (const auto& cell : diff) std::cout << std::setw(w) << cell;
  std::cout << "\n";
  for (std::size_t i = 0; i < props::all_properties().size(); ++i) {
    std::cout << std::setw(w0) << props::name(props::all_properties()[i]);
    for (const auto& r : results) std::cout << std::setw(w) << r.properties[i].second.text;
    std::cout << "\n";
  }
  std::cout << "(cases: property cases that ran and held, of " << max_success_for(o.budget)
            << " per property; vectors: differential vectors vs the exact reference; err: worst "
               "per-pair error in units of the dtype's unit roundoff; %: of the derived bound for "
               "the declared policy)\n";
  print_coverage(results);
  // Not applicable: the reason follows from the declaration; one line per property and reason.
  std::map<std::string, std::vector<std::string>> na;
  for (const auto& r : results)
    for (const auto& [p, c] : r.properties)
      if (c.kind == "not_applicable") {
        // A kernel without a backward: one line for the ten, not ten.
        const bool no_backward =
            props::is_backward_property(p) && c.detail.rfind("no backward", 0) == 0;
        const std::string what = no_backward ? "Backward* (all ten)" : props::name(p);
        auto& cfgs = na[what + ": " + c.detail];
        const std::string cfg = std::string(name(r.dtype)) + " " + name(r.layout);
        if (std::find(cfgs.begin(), cfgs.end(), cfg) == cfgs.end()) cfgs.push_back(cfg);
      }
  if (!na.empty()) std::cout << "\nnot applicable (follows from the declaration):\n";
  for (const auto& [what, cfgs] : na) {
    std::cout << "  " << what << " [";
    for (std::size_t i = 0; i < cfgs.size(); ++i) std::cout << (i ? ", " : "") << cfgs[i];
    std::cout << "]\n";
  }
  bool any_fail = false;
  for (const auto& r : results) {
    const std::string cfg = std::string(name(r.dtype)) + " " + name(r.layout);
    auto show = [&](const std::string& check, const Cell& c) {
      if (!c.failed) return;
      any_fail = true;
      if (c.text == "not run") return;
      std::cout << "\n[" << cfg << "] " << check << ": " << c.text;
      if (check != "Differential" && (c.kind == "wrong_results" || c.kind == "non_finite_output"))
        std::cout << " after " << c.cases << " passing case(s)";
      std::cout << "\n  " << c.detail << "\n  replay: " << replay_command(o, r, check)
                << "\n  (declared policy: " << describe(r.policy) << ")\n";
    };
    show("Differential", r.differential);
    for (const auto& [p, c] : r.properties) show(props::name(p), c);
  }
  return any_fail;
}

nlohmann::json cell_json(const Cell& c) {
  return {{"result", c.text},
          {"classification", c.kind.empty() ? (c.failed ? "fault" : "pass") : c.kind},
          {"cases", c.cases},
          {"budget", c.budget},
          {"detail", c.detail}};
}

nlohmann::json config_json(const ConfigResult& r, const ValidateOptions& o) {
  nlohmann::json jc{
      {"dtype", name(r.dtype)}, {"layout", name(r.layout)}, {"classification", classification(r)}};
  // The declaration every bound of this configuration was derived from.
  jc["policy"] = policy_json(r.policy);
  nlohmann::json diff = cell_json(r.differential);
  diff["worst_pair_error_u"] = r.diff.max_error_u;
  diff["worst_bound_utilization"] = r.diff.max_utilization;
  diff["vectors"] = r.diff.vectors;
  diff["partial_specs"] = r.partial_specs;
  diff["structural_variants"] = r.structural;
  // Over the pairs whose bound constrains the rotation, and where that stops (null: nowhere).
  diff["worst_pair_error_u_constrained"] = r.diff.max_error_u_constrained;
  diff["worst_bound_utilization_constrained"] = r.diff.max_utilization_constrained;
  diff["unconstrained_pairs"] = r.diff.unconstrained_pairs;
  diff["unconstrained_beyond_position"] = r.diff.min_unconstrained_position >= 0
                                              ? nlohmann::json(r.diff.min_unconstrained_position)
                                              : nlohmann::json(nullptr);
  if (r.differential.failed) diff["replay"] = replay_command(o, r, "Differential");
  jc["differential"] = diff;
  for (const auto& [p, c] : r.properties) {
    nlohmann::json jp = cell_json(c);
    if (p == props::Property::BackwardMatchesReferenceWithinBound && r.bwd.vectors > 0)
      jp["directed"] = {{"vectors", r.bwd.vectors},
                        {"worst_pair_error_u", r.bwd.max_error_u},
                        {"worst_bound_utilization", r.bwd.max_utilization},
                        {"partial_specs", r.bwd_partial_specs},
                        {"structural_variants", r.bwd_structural}};
    if (c.failed && c.text != "not run") jp["replay"] = replay_command(o, r, props::name(p));
    jc["properties"][props::name(p)] = jp;
  }
  return jc;
}

// ---- the run ------------------------------------------------------------------------------------

// What validate runs: configurations (dtype x layout, those the plugin declares) and the specs
// the differential check adds to its directed ones.
struct Plan {
  std::vector<Dtype> dtypes;
  std::vector<Layout> layouts;
  std::optional<RopeSpec> hf_spec;    // --hf-config: the model's spec
  std::optional<RopeSpec> only_spec;  // --spec: the one spec the plugin implements
  bool variants = false;              // the plugin declares scaling kinds or the newer layouts
  std::vector<RopeSpec> extra_specs;
  // The declared scaling kinds' variant groups (variant_groups), every layout of the plan.
  std::vector<std::vector<RopeSpec>> variant_groups;
};

std::vector<Dtype> parse_dtypes(const ValidateOptions& o) {
  std::vector<Dtype> dtypes;
  for (const auto& s : o.dtypes)
    for (const auto& f : split(s, ',', "--dtypes")) {
      auto d = parse_dtype(f);
      if (!d) throw UsageError("--dtypes: '" + f + "' is not one of f64, f32, f16, bf16");
      dtypes.push_back(*d);
    }
  if (dtypes.empty()) dtypes.assign(kAllDtypes.begin(), kAllDtypes.end());
  return dtypes;
}

// --hf-config: the model's spec is checked directly by the differential run, and the properties
// draw their random specs from the same scaling kind and layout (focus), so every verdict is
// about the variant the model uses.
std::vector<Layout> parse_layouts(const ValidateOptions& o, const std::optional<RopeSpec>& hf) {
  std::vector<Layout> layouts;
  for (const auto& s : o.layouts)
    for (const auto& f : split(s, ',', "--layouts")) {
      auto l = parse_layout(f);
      if (!l) throw UsageError("--layouts: '" + f + "' is not " + layout_choices());
      layouts.push_back(*l);
    }
  if (hf) {
    if (!layouts.empty() && layouts != std::vector<Layout>{hf->layout})
      throw UsageError("--layouts contradicts --hf-config / --spec (the layout is " +
                       std::string(name(hf->layout)) + ")");
    return {hf->layout};
  }
  if (layouts.empty()) layouts.assign(std::begin(kAllLayouts), std::end(kAllLayouts));
  return layouts;
}

// --spec: JSON text ('{...}') or a file holding it, with the keys of `check --spec`.
RopeSpec read_only_spec(const std::string& arg) {
  const auto keys = read_spec_arg(arg);
  const auto hd = keys.find("head_dim");
  long long d = 0;
  if (hd == keys.end() || !parse_int64(hd->second, d))
    throw UsageError("--spec: give head_dim (an integer)");
  return resolve_check_spec(keys, d, 3);
}

// The options' part of the plan, parsed before the plugin is loaded.
Plan parse_plan(const ValidateOptions& o) {
  Plan plan;
  plan.dtypes = parse_dtypes(o);
  plan.hf_spec = o.hf.read();
  if (!o.spec.empty()) {
    if (plan.hf_spec) throw UsageError("--spec and --hf-config exclude each other");
    plan.only_spec = read_only_spec(o.spec);
  }
  // The one spec's layout is the one configuration layout, as --hf-config's.
  plan.layouts = parse_layouts(o, plan.hf_spec ? plan.hf_spec : plan.only_spec);
  return plan;
}

// Prints the plugin's header lines and adds the specs its declaration asks for to the plan.
void plan_plugin(Plan& plan, const plugin::PluginKernel& pk, const ValidateOptions& o) {
  const auto& desc = pk.descriptor();
  std::cout << "ropecheck validate: plugin '" << desc.name << "' (" << o.plugin << ", ABI "
            << desc.abi_version << ")\n  " << desc.description
            << "\n  declared domain: " << describe_domain(pk.domain()) << "\n  backward: "
            << (desc.has_backward ? "apply_backward (the Backward* properties run)"
                                  : "none (the Backward* properties are not applicable)")
            << "\n";
  if (desc.abi_version < ROPECHECK_PLUGIN_ABI_VERSION)
    std::cout << "  note: plugin built for ABI " << desc.abi_version
              << ": loaded with that ABI's meaning (trig_error 2, any position, magnitude scale "
                 "passed, in-place calls, layouts compared within the bound); rebuild against "
                 "this ropecheck/plugin.h (ABI "
              << ROPECHECK_PLUGIN_ABI_VERSION << ") to declare them\n";
  // ABI 2 carries every variant: a plugin that declares scaling kinds or the newer layouts gets
  // the property suite's variant generator and the directed variant specs.
  plan.variants = desc.scalings != 0 || (desc.layouts & ~0x3u) != 0;
  if (plan.only_spec) {
    plan.extra_specs = {*plan.only_spec};
    std::cout << "  one configuration (--spec): " << describe(*plan.only_spec)
              << "\n  coverage: the properties draw positions, inputs, tokens and heads only; "
                 "checks that relate other specs are not applicable\n";
  } else if (plan.hf_spec) {
    plan.extra_specs = {*plan.hf_spec};
    std::cout << "  on the spec of " << o.hf.path << ": " << describe(*plan.hf_spec) << "\n";
  } else if (plan.variants) {
    for (Layout l : plan.layouts)
      for (auto& g : variant_groups(l, realistic_head_dims(pk.domain())))
        if (desc.scalings & ROPECHECK_SCALING_BIT(static_cast<int>(g.front().scaling.kind)))
          plan.variant_groups.push_back(std::move(g));
  }
}

// --properties: the checks to run (the replay command narrows to one).
bool wanted(const ValidateOptions& o, const std::string& check) {
  return o.properties.empty() ||
         std::find(o.properties.begin(), o.properties.end(), check) != o.properties.end();
}

// ---- the checks as jobs (--threads) -------------------------------------------------------------
// Each check of each configuration (the differential check, each property) is one job. Jobs run
// on --threads processes (forked_jobs.hpp says why processes), each with its own plugin worker,
// and are handed out in order; assemble() then puts the results together in that order, with the
// rules a sequential run follows, so the output is the same for every --threads.

// One check of one configuration. check 0: Differential; check 1 + i: all_properties()[i].
struct Job {
  std::size_t config;
  int check;
};

// What a job found, as plain data (it travels from a runner process as JSON).
struct CheckResult {
  Cell cell;
  std::optional<plugin::Fault> fault;  // the check poisoned the plugin: its first fault
  std::uint64_t calls = 0;             // plugin apply() calls the check made
  // Differential only: the maxima the table and validation.json print, and a non-finite output.
  std::int64_t vectors = 0;
  double max_error_u = 0, max_utilization = 0;
  // Over the pairs whose bound constrains the rotation, and the smallest |m| where it stops
  // (verify::Summary's *_constrained, min_unconstrained_position).
  double max_error_u_constrained = 0, max_utilization_constrained = 0;
  std::int64_t unconstrained_pairs = 0, min_unconstrained_position = -1;
  bool nonfinite_output = false;
  std::string partial_specs;  // Differential only: ConfigResult::partial_specs
  std::string structural;     // Differential only: ConfigResult::structural
};

// Doubles by their bits: the maxima may be NaN (JSON has none) and must come back unchanged.
std::uint64_t bits(double v) { return std::bit_cast<std::uint64_t>(v); }
double from_bits(std::uint64_t b) { return std::bit_cast<double>(b); }

std::string to_text(const CheckResult& r) {
  const Cell& c = r.cell;
  nlohmann::json j{{"text", c.text},
                   {"failed", c.failed},
                   {"detail", c.detail},
                   {"cases", c.cases},
                   {"budget", c.budget},
                   {"kind", c.kind},
                   {"calls", r.calls},
                   {"vectors", r.vectors},
                   {"max_error_u", bits(r.max_error_u)},
                   {"max_utilization", bits(r.max_utilization)},
                   {"nonfinite_output", r.nonfinite_output},
                   {"partial_specs", r.partial_specs},
                   {"structural", r.structural},
                   {"max_error_u_constrained", bits(r.max_error_u_constrained)},
                   {"max_utilization_constrained", bits(r.max_utilization_constrained)},
                   {"unconstrained_pairs", r.unconstrained_pairs},
                   {"min_unconstrained_position", r.min_unconstrained_position}};
  if (r.fault)
    j["fault"] = {{"kind", static_cast<int>(r.fault->kind)},
                  {"signal", r.fault->signal},
                  {"exit_status", r.fault->exit_status},
                  {"detail", r.fault->detail},
                  {"config", r.fault->config}};
  return j.dump();
}

CheckResult from_text(const std::string& s) {
  const auto j = nlohmann::json::parse(s);
  CheckResult r;
  r.cell = {j.at("text").get<std::string>(), j.at("failed").get<bool>(),
            j.at("detail").get<std::string>()};
  r.cell.cases = j.at("cases").get<int>();
  r.cell.budget = j.at("budget").get<int>();
  r.cell.kind = j.at("kind").get<std::string>();
  r.calls = j.at("calls").get<std::uint64_t>();
  r.vectors = j.at("vectors").get<std::int64_t>();
  r.max_error_u = from_bits(j.at("max_error_u").get<std::uint64_t>());
  r.max_utilization = from_bits(j.at("max_utilization").get<std::uint64_t>());
  r.nonfinite_output = j.at("nonfinite_output").get<bool>();
  r.partial_specs = j.at("partial_specs").get<std::string>();
  r.structural = j.at("structural").get<std::string>();
  r.max_error_u_constrained = from_bits(j.at("max_error_u_constrained").get<std::uint64_t>());
  r.max_utilization_constrained =
      from_bits(j.at("max_utilization_constrained").get<std::uint64_t>());
  r.unconstrained_pairs = j.at("unconstrained_pairs").get<std::int64_t>();
  r.min_unconstrained_position = j.at("min_unconstrained_position").get<std::int64_t>();
  if (j.contains("fault")) {
    const auto& f = j.at("fault");
    r.fault.emplace();
    r.fault->kind = static_cast<plugin::FaultKind>(f.at("kind").get<int>());
    r.fault->signal = f.at("signal").get<int>();
    r.fault->exit_status = f.at("exit_status").get<int>();
    r.fault->detail = f.at("detail").get<std::string>();
    r.fault->config = f.at("config").get<std::string>();
  }
  return r;
}

// A configuration and the checks asked of it.
struct Config {
  Dtype dtype;
  Layout layout;
};

// A differential run's figures (the table's and validation.json's) into a job's result.
void take_figures(const ConfigResult& cr, CheckResult& r) {
  r.vectors = cr.diff.vectors;
  r.max_error_u = cr.diff.max_error_u;
  r.max_utilization = cr.diff.max_utilization;
  r.nonfinite_output = cr.nonfinite_output;
  r.partial_specs = cr.partial_specs;
  r.structural = cr.structural;
  r.max_error_u_constrained = cr.diff.max_error_u_constrained;
  r.max_utilization_constrained = cr.diff.max_utilization_constrained;
  r.unconstrained_pairs = cr.diff.unconstrained_pairs;
  r.min_unconstrained_position = cr.diff.min_unconstrained_position;
}

// BackwardMatchesReferenceWithinBound's directed cases, before its random ones: the differential
// check of apply_backward (differential(), backward) on the configuration's directed specs and
// positions. A failure or coverage gap is the property's verdict (r.cell); the figures go to r
// either way (validation.json's "directed", the summary's backward line).
void backward_differential(const plugin::PluginKernel& pk, const Kernel& k, const Config& cfg,
                           const ValidateOptions& o, const Plan& plan, CheckResult& r) {
  ConfigResult cr{cfg.dtype, cfg.layout, {}, {}, {}, false, std::nullopt, {}, {}, {}};
  differential(pk, k, cr, o.seed, plan.extra_specs, plan.variant_groups,
               o.oracle == "mpfr" ? ref::OracleMode::mpfr : ref::OracleMode::fast, true);
  take_figures(cr, r);
  if (!cr.differential.failed) return;
  r.cell = cr.differential;
  r.cell.cases = 0;  // no random case ran (the cell's "after N passing cases")
  r.cell.detail =
      "directed backward differential (apply_backward against s R(m)^T g on the "
      "directed specs; the view rotates by -m, so the positions shown are negated): " +
      r.cell.detail;
}

// One check of one configuration on plugin pk. A fault is the verdict of the check that met it.
CheckResult run_check(plugin::PluginKernel& pk, const Config& cfg, int check,
                      const ValidateOptions& o, const Plan& plan) {
  const Dtype d = cfg.dtype;
  LayoutRestricted k(pk, cfg.layout);
  pk.reset();
  const std::uint64_t calls0 = pk.calls();
  CheckResult r;
  if (check == 0) {
    std::cerr << "[validate] " << name(d) << " " << name(cfg.layout)
              << " (declared policy: " << describe(pk.policy(d)) << ")\n";
    ref::set_precision_bits(ref::default_bits(d));
    ConfigResult cr{d, cfg.layout, {}, {}, {}, false, std::nullopt, {}, {}, {}};
    differential(pk, k, cr, o.seed, plan.extra_specs, plan.variant_groups,
                 o.oracle == "mpfr" ? ref::OracleMode::mpfr : ref::OracleMode::fast);
    r.cell = cr.differential;
    take_figures(cr, r);
  } else {
    const props::Property p = props::all_properties()[static_cast<std::size_t>(check - 1)];
    const bool directed =
        p == props::Property::BackwardMatchesReferenceWithinBound && k.has_backward();
    if (directed) backward_differential(pk, k, cfg, o, plan, r);
    if (!r.cell.failed && !pk.poisoned())
      r.cell =
          run_property(pk, k, p, d, cfg.layout, o, plan.variants, plan.hf_spec, plan.only_spec);
  }
  if (pk.poisoned()) {
    const auto& f = pk.faults().front();
    r.cell = {fault_short(f), true, f.message()};
    if (f.kind == plugin::FaultKind::declaration_mismatch) r.cell.kind = "declaration_mismatch";
    r.fault = f;
  }
  r.calls = pk.calls() - calls0;
  return r;
}

// Whether a configuration's check still decides a cell, given the results so far (checks[i] of
// the configuration, nullptr: not known yet): not after a fault of the differential check (guard
// faults repeat on the properties' first call; the fault is the verdict), nor after a crash or
// hang of a property (it would repeat in every property after it).
bool still_needed(const std::vector<const CheckResult*>& checks, int check) {
  for (int i = 0; i < check; ++i) {
    const CheckResult* r = checks[static_cast<std::size_t>(i)];
    if (r && r->fault && (i == 0 || fatal(*r->fault))) return false;
  }
  return true;
}

// The configuration's result from its checks' results (nullptr: not run), in check order, with
// the sequential rules of still_needed. Adds the plugin calls of the checks used to `calls`.
ConfigResult assemble(const Config& cfg, const std::vector<const CheckResult*>& checks,
                      const ValidateOptions& o, std::uint64_t& calls) {
  ConfigResult cr{cfg.dtype, cfg.layout, {}, {}, {}, false, std::nullopt, {}, {}, {}};
  std::optional<plugin::Fault> config_fault;
  if (!wanted(o, "Differential")) {
    cr.differential = {"not run", false, "not selected (--properties)"};
  } else {
    const CheckResult& r = *checks[0];
    cr.differential = r.cell;
    cr.diff.vectors = r.vectors;
    cr.diff.max_error_u = r.max_error_u;
    cr.diff.max_utilization = r.max_utilization;
    cr.nonfinite_output = r.nonfinite_output;
    cr.partial_specs = r.partial_specs;
    cr.structural = r.structural;
    cr.diff.max_error_u_constrained = r.max_error_u_constrained;
    cr.diff.max_utilization_constrained = r.max_utilization_constrained;
    cr.diff.unconstrained_pairs = r.unconstrained_pairs;
    cr.diff.min_unconstrained_position = r.min_unconstrained_position;
    calls += r.calls;
    if (r.fault) config_fault = cr.fault = r.fault;
  }
  const auto& all = props::all_properties();
  for (std::size_t i = 0; i < all.size(); ++i) {
    const CheckResult* r = checks[i + 1];
    Cell c;
    if (!wanted(o, props::name(all[i]))) {
      c = {"not run", false, "not selected (--properties)"};
    } else if (config_fault) {
      c = {"not run", true, "configuration faulted: " + fault_short(*config_fault)};
    } else {
      c = r->cell;
      calls += r->calls;
      if (all[i] == props::Property::BackwardMatchesReferenceWithinBound) {
        cr.bwd.vectors = r->vectors;
        cr.bwd.max_error_u = r->max_error_u;
        cr.bwd.max_utilization = r->max_utilization;
        cr.bwd_partial_specs = r->partial_specs;
        cr.bwd_structural = r->structural;
      }
      if (r->fault) {
        if (!cr.fault) cr.fault = r->fault;
        if (fatal(*r->fault)) config_fault = r->fault;
      }
    }
    cr.properties.push_back({all[i], c});
  }
  return cr;
}

// Every check of every configuration on `threads` processes; the results in configuration order.
// pk serves the checks when they run in this process (--threads 1); otherwise each runner loads
// its own plugin worker. Adds the plugin calls of the checks used to `calls`.
std::vector<ConfigResult> run_configs(plugin::PluginKernel& pk, const std::vector<Config>& cfgs,
                                      const ValidateOptions& o, const Plan& plan,
                                      std::uint64_t& calls) {
  const int n_checks = 1 + static_cast<int>(props::all_properties().size());
  auto check_name = [](int check) {
    return check == 0 ? std::string("Differential")
                      : std::string(props::name(props::all_properties()[check - 1]));
  };
  std::vector<Job> jobs;
  for (std::size_t c = 0; c < cfgs.size(); ++c)
    for (int check = 0; check < n_checks; ++check)
      if (wanted(o, check_name(check))) jobs.push_back({c, check});
  // Results so far, per configuration and check (this process only).
  std::vector<std::vector<std::optional<CheckResult>>> got(
      cfgs.size(), std::vector<std::optional<CheckResult>>(static_cast<std::size_t>(n_checks)));
  auto known = [&](std::size_t c) {
    std::vector<const CheckResult*> v;
    for (const auto& r : got[c]) v.push_back(r ? &*r : nullptr);
    return v;
  };
  plugin::PluginKernel* current = &pk;  // a runner's own plugin once it has one
  std::unique_ptr<plugin::PluginKernel> own;
  ForkedJobs fj;
  fj.run = [&](int i) {
    const Job& j = jobs[static_cast<std::size_t>(i)];
    return to_text(run_check(*current, cfgs[j.config], j.check, o, plan));
  };
  fj.wanted = [&](int i) {
    const Job& j = jobs[static_cast<std::size_t>(i)];
    return still_needed(known(j.config), j.check);
  };
  fj.done = [&](int i, const std::string& text) {
    const Job& j = jobs[static_cast<std::size_t>(i)];
    got[j.config][static_cast<std::size_t>(j.check)] = from_text(text);
  };
  fj.runner_start = [&] {
    own = load_plugin(o.plugin, o.worker_fds, o.timeout, o.worker_memory << 20);
    current = own.get();
  };
  fj.runner_end = [&] { own.reset(); };
  run_forked_jobs(static_cast<int>(jobs.size()), o.threads, fj);
  std::vector<ConfigResult> results;
  for (std::size_t c = 0; c < cfgs.size(); ++c) {
    results.push_back(assemble(cfgs[c], known(c), o, calls));
    results.back().policy = pk.policy(cfgs[c].dtype);
  }
  return results;
}

// The classification line and the verdict line; returns the overall classification (the first
// configuration's that is not "pass").
std::string overall_classification(const std::vector<ConfigResult>& results) {
  for (const auto& r : results)
    if (classification(r) != "pass") return classification(r);
  return "pass";
}

bool any_failed(const std::vector<ConfigResult>& results) {
  for (const auto& r : results) {
    if (r.differential.failed) return true;
    for (const auto& pc : r.properties)
      if (pc.second.failed) return true;
  }
  return false;
}

std::string print_verdict(const std::vector<ConfigResult>& results, bool any_fail,
                          std::uint64_t calls, double secs, const ValidateOptions& o) {
  std::cout << "\nclassification:";
  for (const auto& r : results)
    std::cout << " " << name(r.dtype) << " " << name(r.layout) << " = " << classification(r) << ";";
  int budget_cases = 0;
  for (const auto& r : results)
    for (const auto& pc : r.properties) budget_cases += pc.second.cases;
  std::cout << "\n"
            << (any_fail ? "FAIL" : "PASS") << ": " << results.size() << " configuration(s), "
            << budget_cases << " property cases, " << calls << " plugin calls, "
            << verify::fmt(secs, 3) << " s (budget " << o.budget << ", "
            << max_success_for(o.budget) << " cases per property"
            << (o.spec.empty() ? "" : "; one spec: positions, inputs, tokens and heads drawn")
            << ")\n";
  return overall_classification(results);
}

// The report's "validation" block (report.schema.json): the verdict, the first failure with its
// replay, and one case per configuration x check for junit.xml, so that report.md/html and the
// CI's test view say what the exit status says.
nlohmann::json validation_block(const std::vector<ConfigResult>& results, const nlohmann::json& doc,
                                const ValidateOptions& o) {
  nlohmann::json v{{"plugin", doc["name"]},
                   {"passed", doc["passed"]},
                   {"classification", doc["classification"]},
                   {"exit_code", doc["passed"].get<bool>() ? 0 : 1},
                   {"budget", o.budget},
                   {"cases", nlohmann::json::array()}};
  for (const auto& r : results) {
    const std::string cfg = std::string(name(r.dtype)) + " " + name(r.layout);
    auto add = [&](const std::string& check, const Cell& c) {
      const bool skipped = c.text == "not run" || c.kind == "not_applicable";
      nlohmann::json jc{{"configuration", cfg}, {"check", check},   {"passed", !c.failed},
                        {"skipped", skipped},   {"result", c.text}, {"message", c.detail}};
      if (c.failed && c.text != "not run") {
        jc["reproduce"] = replay_command(o, r, check);
        if (!v.contains("first_failure")) {
          v["first_failure"] = "[" + cfg + "] " + check + ": " + c.detail;
          v["reproduce"] = jc["reproduce"];
        }
      }
      v["cases"].push_back(jc);
    };
    add("Differential", r.differential);
    for (const auto& [p, c] : r.properties) add(props::name(p), c);
  }
  return v;
}

// A plugin's worst cases cannot be rerun with `ropecheck eval` (it runs built-in kernels only):
// their reproduce command becomes the validate line of their configuration.
void plugin_reproduce_commands(nlohmann::json& report, const ValidateOptions& o) {
  std::function<void(nlohmann::json&, const std::string&)> walk = [&](nlohmann::json& j,
                                                                      const std::string& dtype) {
    if (j.is_object()) {
      if (j.contains("reproduce") && j.contains("spec") && j["spec"].contains("layout")) {
        std::ostringstream c;
        c << "ropecheck validate --plugin " << o.plugin << " --dtypes " << dtype << " --layouts "
          << j["spec"]["layout"].get<std::string>() << " --budget " << o.budget << " --seed "
          << o.seed;
        j["reproduce"] = c.str();
      }
      for (auto& [k, v] : j.items()) walk(v, dtype);
    } else if (j.is_array()) {
      for (auto& v : j) walk(v, dtype);
    }
  };
  for (auto& res : report["results"]) walk(res, res["dtype"].get<std::string>());
}

// --out: the report set of `ropecheck report` on the plugin, and validation.json.
void write_outputs(plugin::PluginKernel& pk, const std::vector<ConfigResult>& results,
                   const nlohmann::json& doc, const ValidateOptions& o) {
  reports::Options ro;
  ro.kernels = {};
  ro.dtypes.clear();
  ro.layouts.clear();
  for (const auto& r : results) {
    if (std::find(ro.dtypes.begin(), ro.dtypes.end(), r.dtype) == ro.dtypes.end())
      ro.dtypes.push_back(r.dtype);
    if (std::find(ro.layouts.begin(), ro.layouts.end(), r.layout) == ro.layouts.end())
      ro.layouts.push_back(r.layout);
  }
  ro.threads = 1;  // the plugin worker serves one call at a time
  pk.reset();
  try {
    const std::vector<std::string> outside = restrict_to_domain(ro, pk, false);
    reports::validate(ro);
    auto report = reports::run(ro, {&pk},
                               [](const std::string& m) { std::cerr << "[report] " << m << "\n"; });
    report["domain"] = {{"declared", describe_domain(pk.domain())}, {"outside", outside}};
    report["validation"] = validation_block(results, doc, o);
    if (o.worker_fds.empty()) plugin_reproduce_commands(report, o);
    reports::write_all(report, o.out);
    nlohmann::json full = doc;
    if (pk.poisoned()) {
      full["report_faults"] = nlohmann::json::array();
      for (const auto& f : pk.faults()) full["report_faults"].push_back(f.message());
    }
    reports::atomic_write(std::filesystem::path(o.out) / "validation.json", full.dump(2) + "\n");
    std::cout << "reports written to " << o.out
              << " (report.json, report.md, report.html, junit.xml, validation.json)\n";
  } catch (const reports::OptionsError& e) {
    throw UsageError(e.what());
  }
}

// --print-plan: what the differential check of each configuration would run, as data (a test
// pins it for a few plugins, so a change of the directed lists shows as a diff): the specs
// supports() accepts with their scaling regime (regimes.hpp), the positions, and the partial and
// structural coverage lines with any gap.
void print_plan(const plugin::PluginKernel& pk, const std::vector<Config>& cfgs, const Plan& plan) {
  for (const Config& cfg : cfgs) {
    const LayoutRestricted k(pk, cfg.layout);
    std::vector<std::vector<RopeSpec>> groups;
    const std::vector<RopeSpec> specs =
        differential_specs(k, cfg.dtype, cfg.layout, plan.extra_specs, plan.variant_groups, groups);
    std::cout << "plan " << name(cfg.dtype) << " " << name(cfg.layout) << "\n  positions:";
    for (std::int64_t m : run_positions(k, false)) std::cout << " " << m;
    std::cout << "\n";
    for (const RopeSpec& s : specs)
      if (k.supports(s, cfg.dtype))
        std::cout << "  spec " << describe(s) << " [" << scaling_regime(s) << "]\n";
    const PartialCoverage pc = partial_coverage(k, cfg.dtype, cfg.layout, specs);
    const StructuralCoverage sc = structural_coverage(k, cfg.dtype, cfg.layout, specs, groups);
    std::cout << "  partial: " << (pc.ran.empty() ? "-" : pc.ran) << "\n  structural: " << sc.ran
              << "\n";
    if (!pc.gap.empty() || !sc.gap.empty())
      std::cout << "  gap: " << (pc.gap.empty() ? sc.gap : pc.gap) << "\n";
  }
}

int run_validate(ValidateOptions o) {
  max_success_for(o.budget);  // --budget first: a bad one is exit 2 before anything is loaded
  if (!(o.timeout > 0) || !std::isfinite(o.timeout)) throw UsageError("--timeout must be > 0");
  if (o.worker_memory > (std::uint64_t{1} << 30))
    throw UsageError("--worker-memory: at most 2^30 MiB (0: no limit)");
  if (o.plugin.empty() && o.worker_fds.empty()) throw UsageError("--plugin is required");
  // Replay lines, shard runs and the report carry the path that was loaded.
  if (o.worker_fds.empty()) o.plugin = resolve_plugin_path(o.plugin);
  if (!o.worker_fds.empty()) {
    // One serving process answers one call at a time and cannot be forked per runner.
    o.threads = 1;
    if (o.plugin.empty()) o.plugin = "rc.validate";  // not the pipe's fd numbers
  }
  Plan plan = parse_plan(o);
  const std::unique_ptr<plugin::PluginKernel> pk =
      load_plugin(o.plugin, o.worker_fds, o.timeout, o.worker_memory << 20);
  plan_plugin(plan, *pk, o);
  std::optional<SharedPool> pool;
  if (shrink_seconds_for(o) > 0) {
    pool.emplace(kShrinkPoolFactor * shrink_seconds_for(o));
    o.shrink_pool_ns = pool->get();
  }
  for (const auto& f : o.properties)
    if (f != "Differential" && !props::parse_property(f))
      throw UsageError("--properties: '" + f + "' is not Differential or a property name");

  // Sharding (gtest protocol): the supported configurations, in this order, are dealt round-robin;
  // shard i keeps configuration c when c mod n == i, so the n shards together run each once.
  const Shard shard = resolve_shard(o.shard);
  touch_shard_status_file();
  const auto& desc = pk->descriptor();
  int config_index = 0;
  std::vector<Config> cfgs;
  for (Dtype d : plan.dtypes) {
    if (!(desc.dtypes & ROPECHECK_DTYPE_BIT(static_cast<int>(d)))) {
      if (!o.dtypes.empty())  // asked for by name: say so rather than drop it silently
        std::cout << "  note: --dtypes " << name(d)
                  << ": the plugin does not declare this dtype; not checked\n";
      continue;
    }
    for (Layout l : plan.layouts) {
      if (!(desc.layouts & ROPECHECK_LAYOUT_BIT(static_cast<int>(l)))) continue;
      if (config_index++ % shard.total != shard.index) continue;
      cfgs.push_back({d, l});
    }
  }
  if (cfgs.empty()) throw UsageError("the plugin supports none of the requested dtypes/layouts");
  if (o.print_plan) {
    print_plan(*pk, cfgs, plan);
    return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t calls = pk->calls();
  const std::vector<ConfigResult> results = run_configs(*pk, cfgs, o, plan, calls);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // The files (and the report sweep's progress on stderr) first: the verdict is the last line.
  const bool any_fail = any_failed(results);
  const std::string overall = overall_classification(results);
  if (!o.out.empty() || !o.json.empty()) {
    nlohmann::json jconf = nlohmann::json::array();
    for (const auto& r : results) jconf.push_back(config_json(r, o));
    nlohmann::json doc{{"command", "validate"},
                       {"plugin", o.plugin},
                       {"name", desc.name},
                       {"budget", o.budget},
                       {"seconds", secs},
                       {"passed", !any_fail},
                       {"classification", overall},
                       {"configurations", jconf},
                       {"has_backward", desc.has_backward}};
    if (shard.total > 1) doc["shard"] = {{"index", shard.index}, {"total", shard.total}};
    if (!o.out.empty()) write_outputs(*pk, results, doc, o);
    if (!o.json.empty()) reports::atomic_write(o.json, doc.dump(2) + "\n");
  }
  print_summary(results, o);
  print_verdict(results, any_fail, calls, secs, o);
  std::cout.flush();
  return any_fail ? 1 : 0;  // as `report`: 1 = a check failed
}

}  // namespace

void add_validate(CLI::App& app, int& status) {
  auto o = std::make_shared<ValidateOptions>();
  auto* cmd = app.add_subcommand(
      "validate",
      "Validate a third-party kernel plugin (ropecheck/plugin.h) in an isolated process");
  cmd->add_option("--plugin", o->plugin, "plugin shared object (required)");
  // Hidden: the Python module (rc.validate) serves its callable on these pipe ends.
  cmd->add_option("--worker-fds", o->worker_fds, "R,W of a worker already serving")->group("");
  cmd->add_option("--json", o->json, "write validation.json (only) to this file");
  cmd->add_option("--dtypes", o->dtypes, "dtypes to check (default: all the plugin supports)")
      ->delimiter(',');
  cmd->add_option("--layouts", o->layouts, "layouts to check (default: all the plugin supports)")
      ->delimiter(',');
  cmd->add_option("--budget", o->budget, "quick | standard | deep (default standard)");
  cmd->add_option("--timeout", o->timeout,
                  "seconds per plugin call before it counts as hung (default 10)");
  cmd->add_option("--worker-memory", o->worker_memory,
                  "MiB of memory the plugin worker may add beyond its start before it is stopped "
                  "(classified out_of_memory; default 8192, 0: no limit)");
  cmd->add_option("--oracle", o->oracle,
                  "exact values: fast (double-double, MPFR where it cannot certify; default) or "
                  "mpfr (MPFR alone: the same answers, slower)")
      ->check(CLI::IsMember({"fast", "mpfr"}));
  cmd->add_option("--seed", o->seed,
                  "seed of the differential inputs and the properties (default 1)");
  cmd->add_option("--out", o->out,
                  "write the report set (as `ropecheck report`) and validation.json here");
  cmd->add_option("--spec", o->spec,
                  "the plugin implements exactly this spec (JSON text or file, keys as `check "
                  "--spec`): the differential check runs it, the properties draw only positions, "
                  "inputs, tokens and heads");
  add_hf_config_options(cmd, o->hf,
                        "validate on this Hugging Face config.json's RoPE spec (differential on "
                        "the exact spec, properties focused on its scaling kind and layout)");
  cmd->add_option("--properties", o->properties,
                  "run only these checks (Differential and/or property names; the replay "
                  "command of a failure names its one)")
      ->delimiter(',');
  cmd->add_flag("--print-plan", o->print_plan,
                "print each configuration's directed specs (with their scaling regime), "
                "positions and coverage lines, then exit 0 without running a check");
  cmd->add_flag("--verbose", o->verbose,
                "with each failure, also RapidCheck's full report (every generated value)");
  cmd->add_option("--shrink-seconds", o->shrink_seconds,
                  "wall time one failing property may spend shrinking its counterexample "
                  "(default: quick 1, standard 3, deep 20; 0: no time limit, the 4000-call "
                  "budget alone); all shrinking of a run shares 5 times this")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--threads", o->threads,
                  "checks run at once, each runner a process with its own plugin worker "
                  "(default: the hardware threads); the verdicts do not depend on it (how far a "
                  "counterexample shrinks within --shrink-seconds may)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--shard", o->shard,
                  "i/n: check only configurations c with c mod n == i (default: "
                  "GTEST_SHARD_INDEX / GTEST_TOTAL_SHARDS when set)");
  cmd->callback([o, &status] { status = run_validate(*o); });
}

}  // namespace ropecheck::cli
