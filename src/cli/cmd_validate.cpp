// `ropecheck validate --plugin PATH.so`: a third-party kernel, loaded through the C ABI into an
// isolated worker, checked by (1) a guarded differential run against the multiprecision reference
// on directed positions (crashes, hangs, out-of-bounds writes, unwritten outputs and modified
// inputs are classified here) and (2) every property of the property suite, per configuration
// (dtype x layout) the plugin supports. Exit 0: all pass; 1: any failure or fault; 2: bad usage or
// a plugin that cannot be loaded / has the wrong ABI.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>

#include "cli.hpp"
#include "ropecheck/bounds.hpp"
#include "ropecheck/plugin/host.hpp"
#include "ropecheck/properties.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/reports/report.hpp"
#include "shard.hpp"

namespace ropecheck::cli {

namespace ref = ropecheck::reference;
namespace props = ropecheck::properties;

namespace {

struct ValidateOptions {
  std::string plugin;
  std::vector<std::string> dtypes, layouts;
  std::string budget = "standard";
  double timeout = 10.0;
  std::string out;
  std::uint64_t seed = 1;
  HfConfigArg hf;     // validate on this model's spec (see run_validate)
  std::string shard;  // "i/n"; default GTEST_SHARD_INDEX / GTEST_TOTAL_SHARDS
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
  std::string text;  // "pass", "FAIL", "skip", "crashed (signal 11)", ...
  bool failed = false;
  std::string detail;  // counterexample / fault message
};

struct ConfigResult {
  Dtype dtype;
  Layout layout;
  Cell differential;
  double worst_u = 0, worst_util = 0;
  std::int64_t vectors = 0;
  std::vector<std::pair<props::Property, Cell>> properties;
  // A finite input gave a non-finite output in the differential check (NaN/inf written).
  bool nonfinite_output = false;
  // The first fault of this configuration, if any (the named classification comes from it).
  std::optional<plugin::Fault> fault;
};

// The named classification of one configuration in validation.json: the fault kind when the
// isolation or the guards caught one (crashed, exited, timeout, out_of_bounds_write,
// unwritten_output, input_modified, bad_reply), else non_finite_output, wrong_results (a property
// or the differential check failed), or pass. A plugin that prints to stdout is not a fault: the
// worker's stdout goes to stderr, so it cannot corrupt ropecheck's tables/JSON (classified pass).
std::string classification(const ConfigResult& r) {
  if (r.fault) return plugin::name(r.fault->kind);
  if (r.nonfinite_output) return "non_finite_output";
  bool failed = r.differential.failed;
  for (const auto& pc : r.properties) failed = failed || pc.second.failed;
  return failed ? "wrong_results" : "pass";
}

std::string fmt(double v, int prec = 3) {
  if (std::isnan(v)) return "nan";
  std::ostringstream o;
  o << std::setprecision(prec) << v;
  return o.str();
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
    default:
      return plugin::name(f.kind);
  }
}

bool fatal(const plugin::Fault& f) {
  return f.kind == plugin::FaultKind::crashed || f.kind == plugin::FaultKind::exited ||
         f.kind == plugin::FaultKind::timeout;
}

// Directed positions: table-size and power-of-two boundaries where f32 angle recipes and
// cos/sin caches break, negatives (KV-cache shifts), and long context.
const std::vector<std::int64_t> kPositions = {0,    1,     2,     255,    256,     2047, 2048,
                                              4095, 65535, 65536, 131071, 1048575, -1,   -4096};

// Differential check of one configuration on directed specs/positions, in three call shapes
// (contiguous, strided with gaps, in place). Guards run on every call inside the worker.
// Representative variant specs (real-model parameters) for the directed differential check of a
// plugin that declares scaling kinds: each is shaped to the layout of the configuration.
std::vector<RopeSpec> variant_specs(Layout l) {
  std::vector<RopeSpec> v;
  auto add = [&](std::int64_t hd, double base, Scaling sc) {
    RopeSpec s;
    s.head_dim = hd;
    s.base = base;
    s.layout = l;
    s.scaling = std::move(sc);
    if (l == Layout::mrope || l == Layout::imrope) s.sections = {hd / 8, 3 * hd / 16, 3 * hd / 16};
    if (l == Layout::axial) s.sections = {hd / 8, 3 * hd / 16, 3 * hd / 16};
    try {
      v.push_back(s.normalized());
    } catch (const SpecError&) {  // a variant this layout cannot take (e.g. axial + scaling)
    }
  };
  Scaling lin;
  lin.kind = ScalingKind::linear;
  lin.factor = 4;
  add(64, 1e4, lin);
  Scaling dyn;
  dyn.kind = ScalingKind::dynamic;
  dyn.factor = 2;
  dyn.max_position_embeddings = 4096;
  dyn.seq_len = 16384;
  add(64, 1e4, dyn);
  add(64, 1e4, deepseek_v3_yarn_scaling());
  Scaling yarn2;  // Qwen-style: derived attention factor 0.1 ln f + 1
  yarn2.kind = ScalingKind::yarn;
  yarn2.factor = 4;
  yarn2.original_max_position_embeddings = 32768;
  add(128, 1e6, yarn2);
  add(128, 5e5, llama31_scaling());
  for (std::int64_t seq : {4096, 4097}) {  // LongRoPE on both sides of the strict switch
    Scaling lr;
    lr.kind = ScalingKind::longrope;
    lr.original_max_position_embeddings = 4096;
    lr.max_position_embeddings = 131072;
    lr.seq_len = seq;
    for (int i = 0; i < 32; ++i) {
      lr.short_factor.push_back(1.0 + 0.05 * i);
      lr.long_factor.push_back(1.0 + 1.5 * i);
    }
    add(64, 1e4, lr);
  }
  return v;
}

// Positions per token on each axis of a multi-axis spec: distinct (t, h, w) so that a kernel
// driving a pair by the wrong axis is caught, from the directed 1-D positions.
std::vector<std::int64_t> axis_positions(std::int64_t n_axes) {
  std::vector<std::int64_t> p;
  for (std::int64_t m : kPositions)
    for (std::int64_t a = 0; a < n_axes; ++a) p.push_back(a == 0 ? m : m / (a + 2) + 3 * a);
  return p;
}

void differential(const plugin::PluginKernel& pk, const Kernel& k, ConfigResult& cr,
                  std::uint64_t seed, const std::vector<RopeSpec>& extra_specs) {
  const Dtype d = cr.dtype;
  const double u = unit_roundoff(d);
  const int eb = traits(d).bytes;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> val(-2.0, 2.0);
  std::vector<RopeSpec> specs;
  for (auto [hd, rd, base] : {std::tuple<std::int64_t, std::int64_t, double>{64, 64, 1e4},
                              {128, 128, 5e5},
                              {80, 32, 1e4},   // partial rotary: pass-through dims
                              {9, 8, 1e6}}) {  // odd head_dim
    RopeSpec s;
    s.head_dim = hd;
    s.rotary_dim = rd;
    s.base = base;
    s.layout = cr.layout;
    if (is_multi_axis(cr.layout)) {  // sections over rd/2 pairs: [n/4, 3n/8, rest] (>= 1 each)
      const std::int64_t n = rd / 2, a = std::max<std::int64_t>(1, n / 4),
                         b = std::max<std::int64_t>(1, 3 * n / 8);
      s.sections = {a, b, n - a - b};
    }
    try {
      specs.push_back(s.normalized());
    } catch (const SpecError&) {  // e.g. proportional with an odd head_dim
    }
  }
  for (const RopeSpec& s : extra_specs)
    if (s.layout == cr.layout) specs.push_back(s);
  int supported = 0;
  std::string first_fail;
  std::int64_t failures = 0;
  for (const RopeSpec& spec : specs) {
    if (!k.supports(spec, d)) continue;
    ++supported;
    const std::int64_t T = static_cast<std::int64_t>(kPositions.size()), H = 2, D = spec.head_dim;
    const std::int64_t NA = spec.n_axes();
    const std::vector<std::int64_t> pos = NA == 1 ? kPositions : axis_positions(NA);
    std::vector<double> x(static_cast<std::size_t>(T * H * D));
    for (auto& v : x) v = round_to_dtype(val(rng), d);
    // Exact results once per vector (shared by the three call shapes).
    std::vector<ref::MpVector> exact;
    for (std::int64_t t = 0; t < T; ++t) {
      ref::Positions mp;
      for (std::int64_t a = 0; a < NA; ++a) mp.push_back(ref::Mp(pos[t * NA + a]));
      for (std::int64_t h = 0; h < H; ++h)
        exact.push_back(ref::apply_blocked(
            spec, mp,
            std::vector<double>(x.begin() + (t * H + h) * D, x.begin() + (t * H + h + 1) * D)));
    }
    for (int shape = 0; shape < 3; ++shape) {
      const std::int64_t hs = shape == 1 ? D + 3 : D;
      const std::int64_t ts = shape == 1 ? H * hs + 5 : H * D;
      std::vector<unsigned char> in(static_cast<std::size_t>(T * ts * eb)), out(in.size());
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t h = 0; h < H; ++h)
          for (std::int64_t j = 0; j < D; ++j)
            store(d, in.data(), t * ts + h * hs + j, x[(t * H + h) * D + j]);
      TensorArgs a;
      a.dtype = d;
      a.n_tokens = T;
      a.n_heads = H;
      a.token_stride = ts;
      a.head_stride = hs;
      a.positions = pos.data();
      a.n_axes = NA;
      a.in = in.data();
      a.out = shape == 2 ? static_cast<void*>(in.data()) : out.data();
      const KernelStatus st = k.apply(spec, a);
      if (pk.poisoned()) return;  // the fault is the verdict
      const char* shape_name[] = {"contiguous", "strided", "in-place"};
      if (st == KernelStatus::unsupported) continue;
      if (st != KernelStatus::ok) {
        ++failures;
        if (first_fail.empty())
          first_fail =
              "apply() returned an error for a supported spec: " + plugin::describe_call(spec, a);
        continue;
      }
      const unsigned char* res = shape == 2 ? in.data() : out.data();
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t h = 0; h < H; ++h) {
          ++cr.vectors;
          const auto& ex = exact[t * H + h];
          const double* xv = &x[(t * H + h) * D];
          auto y = [&](std::int64_t j) { return load(d, res, t * ts + h * hs + j); };
          for (std::int64_t j = 0; j < D; ++j)
            if (spec.is_passthrough(j) && bits_of(y(j), d) != bits_of(xv[j], d)) {
              ++failures;
              if (first_fail.empty())
                first_fail = "pass-through element " + std::to_string(j) + " changed at token " +
                             std::to_string(t) + " (position " + std::to_string(kPositions[t]) +
                             "), head " + std::to_string(h) + " [" + shape_name[shape] + "] " +
                             describe(spec);
            }
          for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
            const auto [ia, ib] = spec.pair(i);
            const double da = static_cast<double>(ref::exact(y(ia)) - ex[ia]);
            const double db = static_cast<double>(ref::exact(y(ib)) - ex[ib]);
            const double err = std::hypot(da, db);
            if (!std::isfinite(y(ia)) || !std::isfinite(y(ib))) cr.nonfinite_output = true;
            // The magnitude includes the variant's attention factor (yarn, longrope).
            const double sn = magnitude_f64(spec) * std::hypot(xv[ia], xv[ib]);
            const std::int64_t ax = NA == 1 ? 0 : spec.pair_axis(i);
            const auto pb = bounds::pair_error_bound(k.policy(d), spec, d, i,
                                                     static_cast<double>(pos[t * NA + ax]));
            const double bound = pb.abs(sn);
            const double eu = sn > 0 ? err / (sn * u) : (err > 0 ? INFINITY : 0);
            const double util = bound > 0 ? err / bound : (err > 0 ? INFINITY : 0);
            if (!(eu <= cr.worst_u)) cr.worst_u = eu;
            if (!(util <= cr.worst_util)) cr.worst_util = util;
            if (!(err <= bound)) {
              ++failures;
              if (first_fail.empty()) {
                std::ostringstream o;
                o << "token " << t << " (position " << kPositions[t] << "), head " << h << ", pair "
                  << i << " (elements " << ia << ", " << ib << "): error " << fmt(eu)
                  << " u > bound " << fmt(sn > 0 ? bound / (sn * u) : bound) << " u; got ("
                  << std::setprecision(9) << y(ia) << ", " << y(ib) << "), expected ("
                  << static_cast<double>(ex[ia]) << ", " << static_cast<double>(ex[ib]) << ") ["
                  << shape_name[shape] << "] " << describe(spec);
                first_fail = o.str();
              }
            }
          }
        }
    }
  }
  if (supported == 0) {
    cr.differential = {"skip", false, "no directed spec supported"};
  } else if (failures) {
    cr.differential = {"FAIL", true,
                       std::to_string(failures) + " failure(s); first: " + first_fail};
  } else {
    cr.differential = {"pass", false, ""};
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

void run_validate(const ValidateOptions& o) {
  const int max_success = max_success_for(o.budget);
  if (!(o.timeout > 0) || !std::isfinite(o.timeout)) throw UsageError("--timeout must be > 0");
  std::vector<Dtype> dtypes;
  for (const auto& s : o.dtypes) {
    for (const auto& f : split(s, ',', "--dtypes")) {
      auto d = parse_dtype(f);
      if (!d) throw UsageError("--dtypes: '" + f + "' is not one of f64, f32, f16, bf16");
      dtypes.push_back(*d);
    }
  }
  if (dtypes.empty()) dtypes.assign(kAllDtypes.begin(), kAllDtypes.end());
  std::vector<Layout> layouts;
  for (const auto& s : o.layouts)
    for (const auto& f : split(s, ',', "--layouts")) {
      auto l = parse_layout(f);
      if (!l)
        throw UsageError("--layouts: '" + f +
                         "' is not interleaved, half, proportional, mrope, imrope or axial");
      layouts.push_back(*l);
    }
  // --hf-config: the model's spec is checked directly by the differential run, and the
  // properties draw their random specs from the same scaling kind and layout (focus), so every
  // verdict is about the variant the model uses.
  const std::optional<RopeSpec> hf_spec = o.hf.read();
  if (hf_spec) {
    if (!layouts.empty() && layouts != std::vector<Layout>{hf_spec->layout})
      throw UsageError("--layouts contradicts --hf-config (the model's layout is " +
                       std::string(name(hf_spec->layout)) + ")");
    layouts = {hf_spec->layout};
  }
  const bool all_layouts = layouts.empty();
  if (all_layouts)
    for (int l = 0; l <= static_cast<int>(Layout::axial); ++l)
      layouts.push_back(static_cast<Layout>(l));

  plugin::Options po;
  po.timeout_s = o.timeout;
  std::unique_ptr<plugin::PluginKernel> pk;
  try {
    pk = plugin::PluginKernel::load(o.plugin, po);
  } catch (const plugin::LoadError& e) {
    throw UsageError(std::string("cannot use plugin: ") + e.what());
  }
  // Tables handed to plugins that take one: correctly rounded from the exact theta_i.
  pk->set_inv_freq_provider([](const RopeSpec& s) {
    plugin::InvFreqTables t;
    for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
      const ref::Mp th = ref::inv_freq(s, i);
      t.f64.push_back(ref::round_to(th, Dtype::f64));
      t.f32.push_back(static_cast<float>(ref::round_to(th, Dtype::f32)));
    }
    return t;
  });
  const auto& desc = pk->descriptor();
  std::cout << "ropecheck validate: plugin '" << desc.name << "' (" << o.plugin << ", ABI "
            << desc.abi_version << ")\n  " << desc.description << "\n";
  // ABI 2 carries every variant: a plugin that declares scaling kinds or the newer layouts gets
  // the property suite's variant generator and the directed variant specs.
  const bool variants = desc.scalings != 0 || (desc.layouts & ~0x3u) != 0;
  std::vector<RopeSpec> extra_specs;
  if (hf_spec) {
    extra_specs = {*hf_spec};
    std::cout << "  on the spec of " << o.hf.path << ": " << describe(*hf_spec) << "\n";
  } else if (variants) {
    for (Layout l : layouts)
      for (RopeSpec& v : variant_specs(l))
        if (desc.scalings & ROPECHECK_SCALING_BIT(static_cast<int>(v.scaling.kind)))
          extra_specs.push_back(std::move(v));
  }

  // Sharding (gtest protocol): the supported configurations, in this order, are dealt round-robin;
  // shard i keeps configuration c when c mod n == i, so the n shards together run each once.
  const Shard shard = resolve_shard(o.shard);
  touch_shard_status_file();
  int config_index = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<ConfigResult> results;
  for (Dtype d : dtypes) {
    if (!(desc.dtypes & ROPECHECK_DTYPE_BIT(static_cast<int>(d)))) continue;
    for (Layout l : layouts) {
      if (!(desc.layouts & ROPECHECK_LAYOUT_BIT(static_cast<int>(l)))) continue;
      if (config_index++ % shard.total != shard.index) continue;
      ConfigResult cr{d, l, {}, 0, 0, 0, {}, false, std::nullopt};
      const Policy pol = pk->policy(d);
      std::cerr << "[validate] " << name(d) << " " << name(l) << " (declared policy: angle "
                << name(pol.angle) << ", table " << name(pol.table) << ", arithmetic "
                << name(pol.arithmetic) << ")\n";
      LayoutRestricted k(*pk, l);
      pk->reset();
      ref::set_precision_bits(ref::default_bits(d));
      differential(*pk, k, cr, o.seed, extra_specs);
      std::optional<plugin::Fault> config_fault;
      if (pk->poisoned()) {
        const auto& f = pk->faults().front();
        cr.differential = {fault_short(f), true, f.message()};
        // Guard faults repeat on the properties' first call; the fault is the verdict.
        config_fault = f;
        cr.fault = f;
      }
      for (props::Property p : props::all_properties()) {
        Cell c;
        if (config_fault) {
          c = {"not run", true, "configuration faulted: " + fault_short(*config_fault)};
        } else {
          pk->reset();
          props::Options popt;
          popt.max_success = max_success;
          popt.seed = o.seed;
          popt.id = props::test_id("Validate", desc.name, d, p) + "_" + name(l);
          popt.variants = variants || hf_spec.has_value();
          // The 1-D layouts keep drawing every scaling kind; a configuration of a newer layout
          // draws that layout (else nearly every case would be discarded by the restriction).
          if (popt.variants && (hf_spec || (l != Layout::interleaved && l != Layout::half)))
            popt.focus_layout = l;
          if (hf_spec && hf_spec->scaling.kind != ScalingKind::none)
            popt.focus_scaling = hf_spec->scaling.kind;
          // LayoutsArePermutations relates the two layouts, so it sees the unrestricted plugin
          // (and the verdict is the same in both layout columns of a dtype).
          const bool both = p == props::Property::LayoutsArePermutations;
          const auto v = both ? props::check(p, *pk, d, popt) : props::check(p, k, d, popt);
          if (pk->poisoned()) {
            const auto& f = pk->faults().front();
            c = {fault_short(f), true, f.message()};
            if (!cr.fault) cr.fault = f;
            if (fatal(f)) config_fault = f;  // a crash or hang would repeat in every property
          } else {
            switch (v.status) {
              case props::Status::passed:
                c = {"pass", false, ""};
                break;
              case props::Status::skipped:
                c = {"skip", false, v.message};
                break;
              case props::Status::gave_up:
                c = {"gave up", true, v.message};
                break;
              case props::Status::failed:
                c = {"FAIL", true, v.message};
                break;
            }
          }
        }
        cr.properties.push_back({p, c});
      }
      results.push_back(std::move(cr));
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (results.empty()) throw UsageError("the plugin supports none of the requested dtypes/layouts");

  // Summary: rows are checks, columns configurations.
  const int w0 = 33, w = 27;  // w0: the longest property name (31) + 2
  std::cout << "\n" << std::left << std::setw(w0) << "check";
  for (const auto& r : results)
    std::cout << std::setw(w) << (std::string(name(r.dtype)) + " " + name(r.layout));
  std::cout << "\n" << std::setw(w0) << "Differential (worst err, u)";
  for (const auto& r : results) {
    std::string cell = r.differential.text;
    if (r.vectors && (cell == "pass" || cell == "FAIL"))
      cell += " (" + fmt(r.worst_u) + " u, " + fmt(100 * r.worst_util, 3) + "%)";
    std::cout << std::setw(w) << cell << (cell.size() >= static_cast<std::size_t>(w) ? " " : "");
  }
  std::cout << "\n";
  bool any_fail = false;
  for (std::size_t i = 0; i < props::all_properties().size(); ++i) {
    std::cout << std::setw(w0) << props::name(props::all_properties()[i]);
    for (const auto& r : results) std::cout << std::setw(w) << r.properties[i].second.text;
    std::cout << "\n";
  }
  std::cout << "(worst err: max per-pair error relative to the pair norm in units of the dtype's "
               "unit roundoff; % = of the derived bound for the declared policy)\n";
  nlohmann::json jconf = nlohmann::json::array();
  for (const auto& r : results) {
    const std::string cfg = std::string(name(r.dtype)) + " " + name(r.layout);
    nlohmann::json jc{{"dtype", name(r.dtype)},
                      {"layout", name(r.layout)},
                      {"classification", classification(r)},
                      {"differential",
                       {{"result", r.differential.text},
                        {"worst_pair_error_u", r.worst_u},
                        {"worst_bound_utilization", r.worst_util},
                        {"vectors", r.vectors},
                        {"detail", r.differential.detail}}}};
    if (r.differential.failed) {
      any_fail = true;
      std::cout << "\n[" << cfg << "] Differential: " << r.differential.detail << "\n";
    }
    for (const auto& [p, c] : r.properties) {
      jc["properties"][props::name(p)] = {{"result", c.text}, {"detail", c.detail}};
      if (!c.failed) continue;
      any_fail = true;
      if (c.text == "not run") continue;
      std::cout << "\n[" << cfg << "] " << props::name(p) << ": " << c.text << "\n"
                << c.detail << "\n";
    }
    // Every configuration draws its cases from --seed alone, so narrowing the run to the failing
    // configuration replays exactly the same cases and shrinks to the same counterexample.
    if (r.differential.failed || std::any_of(r.properties.begin(), r.properties.end(),
                                             [](const auto& pc) { return pc.second.failed; })) {
      std::string replay = "ropecheck validate --plugin " + o.plugin + " --dtypes " +
                           name(r.dtype) + " --layouts " + name(r.layout) + " --budget " +
                           o.budget + " --seed " + std::to_string(o.seed);
      if (!o.hf.path.empty()) replay += " --hf-config " + o.hf.path;
      if (o.hf.seq_len) replay += " --seq-len " + std::to_string(o.hf.seq_len);
      std::cout << "[" << cfg << "] replay: " << replay << "\n";
      jc["replay"] = replay;
    }
    jconf.push_back(jc);
  }
  std::string overall = "pass";
  std::cout << "\nclassification:";
  for (const auto& r : results) {
    const std::string c = classification(r);
    if (overall == "pass") overall = c;
    std::cout << " " << name(r.dtype) << " " << name(r.layout) << " = " << c << ";";
  }
  std::cout << "\n"
            << (any_fail ? "FAIL" : "PASS") << ": " << results.size() << " configuration(s), "
            << pk->calls() << " plugin calls, " << fmt(secs, 3) << " s (budget " << o.budget << ", "
            << max_success << " cases per property)\n";

  if (!o.out.empty() && results.empty())
    std::cout << "shard " << shard.index << "/" << shard.total
              << " holds no configuration; nothing written to " << o.out << "\n";
  if (!o.out.empty() && !results.empty()) {
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
    pk->reset();
    try {
      reports::validate(ro);
      auto report = reports::run(
          ro, {pk.get()}, [](const std::string& m) { std::cerr << "[report] " << m << "\n"; });
      reports::write_all(report, o.out);
      nlohmann::json doc{{"command", "validate"},     {"plugin", o.plugin},
                         {"name", desc.name},         {"budget", o.budget},
                         {"seconds", secs},           {"passed", !any_fail},
                         {"classification", overall}, {"configurations", jconf}};
      if (shard.total > 1) doc["shard"] = {{"index", shard.index}, {"total", shard.total}};
      if (pk->poisoned()) {
        doc["report_faults"] = nlohmann::json::array();
        for (const auto& f : pk->faults()) doc["report_faults"].push_back(f.message());
      }
      reports::atomic_write(std::filesystem::path(o.out) / "validation.json", doc.dump(2) + "\n");
      std::cout << "reports written to " << o.out
                << " (report.json, report.md, report.html, junit.xml, validation.json)\n";
    } catch (const reports::OptionsError& e) {
      throw UsageError(e.what());
    }
  }
  if (any_fail) {
    std::cout.flush();
    std::exit(1);  // as `report`: 1 = a check failed
  }
}

}  // namespace

void add_validate(CLI::App& app) {
  auto o = std::make_shared<ValidateOptions>();
  auto* cmd = app.add_subcommand(
      "validate",
      "Validate a third-party kernel plugin (ropecheck/plugin.h) in an isolated process");
  cmd->add_option("--plugin", o->plugin, "plugin shared object")->required();
  cmd->add_option("--dtypes", o->dtypes, "dtypes to check (default: all the plugin supports)")
      ->delimiter(',');
  cmd->add_option("--layouts", o->layouts, "layouts to check (default: all the plugin supports)")
      ->delimiter(',');
  cmd->add_option("--budget", o->budget, "quick | standard | deep (default standard)");
  cmd->add_option("--timeout", o->timeout,
                  "seconds per plugin call before it counts as hung (default 10)");
  cmd->add_option("--seed", o->seed,
                  "seed of the differential inputs and the properties (default 1)");
  cmd->add_option("--out", o->out,
                  "write the report set (as `ropecheck report`) and validation.json here");
  add_hf_config_options(cmd, o->hf,
                        "validate on this Hugging Face config.json's RoPE spec (differential on "
                        "the exact spec, properties focused on its scaling kind and layout)");
  cmd->add_option("--shard", o->shard,
                  "i/n: check only configurations c with c mod n == i (default: "
                  "GTEST_SHARD_INDEX / GTEST_TOTAL_SHARDS when set)");
  cmd->callback([o] { run_validate(*o); });
}

}  // namespace ropecheck::cli
