// The validation plan (plan.hpp): directed positions and specs, scaling variants, and the
// configurations of a run.
#include "ropecheck/validate/plan.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <ostream>
#include <tuple>

#include "ropecheck/regimes.hpp"
#include "ropecheck/validate/options.hpp"

namespace ropecheck::validate {

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
                                                  bool with_model_dim) {
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

void add_declared(Plan& plan, const plugin::PluginKernel& pk) {
  const auto& desc = pk.descriptor();
  // ABI 2 carries every variant: a plugin that declares scaling kinds or the newer layouts gets
  // the property suite's variant generator and the directed variant specs.
  plan.variants = desc.scalings != 0 || (desc.layouts & ~0x3u) != 0;
  if (plan.only_spec) {
    plan.extra_specs = {*plan.only_spec};
  } else if (plan.hf_spec) {
    plan.extra_specs = {*plan.hf_spec};
  } else if (plan.variants) {
    for (Layout l : plan.layouts)
      for (auto& g : variant_groups(l, realistic_head_dims(pk.domain())))
        if (desc.scalings & ROPECHECK_SCALING_BIT(static_cast<int>(g.front().scaling.kind)))
          plan.variant_groups.push_back(std::move(g));
  }
}

std::vector<Config> configurations(const Plan& plan, const plugin::PluginKernel& pk,
                                   bool dtypes_named, int index, int total, std::ostream& notes) {
  const auto& desc = pk.descriptor();
  int config_index = 0;
  std::vector<Config> cfgs;
  for (Dtype d : plan.dtypes) {
    if (!(desc.dtypes & ROPECHECK_DTYPE_BIT(static_cast<int>(d)))) {
      if (dtypes_named)
        notes << "  note: --dtypes " << name(d)
              << ": the plugin does not declare this dtype; not checked\n";
      continue;
    }
    for (Layout l : plan.layouts) {
      if (!(desc.layouts & ROPECHECK_LAYOUT_BIT(static_cast<int>(l)))) continue;
      if (config_index++ % total != index) continue;
      cfgs.push_back({d, l});
    }
  }
  if (cfgs.empty()) throw UsageError("the plugin supports none of the requested dtypes/layouts");
  return cfgs;
}

}  // namespace ropecheck::validate
