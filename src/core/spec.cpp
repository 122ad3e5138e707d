#include "ropecheck/spec.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <sstream>

namespace ropecheck {

std::optional<Layout> parse_layout(std::string_view s) {
  for (Layout l : kAllLayouts)
    if (s == name(l)) return l;
  return std::nullopt;
}

std::string layout_choices(bool one_d) {
  std::vector<const char*> names;
  for (Layout l : kAllLayouts)
    if (!one_d || !is_multi_axis(l)) names.push_back(name(l));
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i)
    s += std::string(i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return s;
}

const char* name(Layout l) {
  switch (l) {
    case Layout::interleaved:
      return "interleaved";
    case Layout::half:
      return "half";
    case Layout::proportional:
      return "proportional";
    case Layout::mrope:
      return "mrope";
    case Layout::imrope:
      return "imrope";
    case Layout::axial:
      return "axial";
  }
  return "?";
}

const char* name(ScalingKind k) {
  switch (k) {
    case ScalingKind::none:
      return "none";
    case ScalingKind::linear:
      return "linear";
    case ScalingKind::dynamic:
      return "dynamic";
    case ScalingKind::yarn:
      return "yarn";
    case ScalingKind::llama3:
      return "llama3";
    case ScalingKind::freq_factors:
      return "freq_factors";
    case ScalingKind::longrope:
      return "longrope";
  }
  return "?";
}

std::optional<ScalingKind> parse_scaling_kind(std::string_view s) {
  for (ScalingKind k :
       {ScalingKind::none, ScalingKind::linear, ScalingKind::dynamic, ScalingKind::yarn,
        ScalingKind::llama3, ScalingKind::freq_factors, ScalingKind::longrope})
    if (s == name(k)) return k;
  return std::nullopt;
}

std::int64_t RopeSpec::n_axes() const {
  switch (layout) {
    case Layout::mrope:
    case Layout::imrope:
      return 3;
    case Layout::axial:
      return static_cast<std::int64_t>(sections.size());
    default:
      return 1;
  }
}

std::int64_t RopeSpec::pair_axis(std::int64_t i) const {
  switch (layout) {
    case Layout::mrope:
    case Layout::axial: {
      // Contiguous chunks (HF Qwen2-VL: cos.split(mrope_section * 2), chunk k -> axis k % 3; the
      // second half of the rotate_half layout repeats the first half's assignment).
      std::int64_t acc = 0;
      for (std::size_t a = 0; a < sections.size(); ++a) {
        acc += sections[a];
        if (i < acc) return static_cast<std::int64_t>(a);
      }
      return static_cast<std::int64_t>(sections.size()) - 1;
    }
    case Layout::imrope:
      // HF Qwen3-VL apply_interleaved_mrope: freqs_t[..., offset:3*section[dim]:3] =
      // freqs[dim][..., same] for (dim, offset) in ((1, 1), (2, 2)).
      if (i % 3 == 1 && i < 3 * sections[1]) return 1;
      if (i % 3 == 2 && i < 3 * sections[2]) return 2;
      return 0;
    default:
      return 0;
  }
}

std::pair<std::int64_t, std::int64_t> RopeSpec::ladder(std::int64_t i) const {
  if (layout == Layout::axial) {
    std::int64_t start = 0;
    for (std::int64_t sec : sections) {
      if (i < start + sec) return {i - start, 2 * sec};
      start += sec;
    }
  }
  return {i, ladder_dim()};
}

bool RopeSpec::is_passthrough(std::int64_t j) const {
  if (layout == Layout::proportional) {
    const std::int64_t h = head_dim / 2, r = rotary_dim / 2;
    return !((j >= 0 && j < r) || (j >= h && j < h + r));
  }
  return j >= rotary_dim;
}

RopeSpec RopeSpec::normalized() const {
  RopeSpec s = *this;
  if (s.rotary_dim == 0 && s.head_dim > 0) s.rotary_dim = s.head_dim - (s.head_dim % 2);
  s.validate();
  return s;
}

namespace {

// validate(), one function per field group: the dims and base, the layout's sections, the
// scaling family's parameters. A new layout or scaling kind adds its case here.
[[noreturn]] void invalid(const std::string& m) { throw SpecError("invalid spec: " + m); }
std::string fs(double v) { return std::to_string(v); }
std::string is(std::int64_t v) { return std::to_string(v); }

void check_dims(const RopeSpec& s) {
  if (s.head_dim < 1) invalid("head_dim must be >= 1 (got " + is(s.head_dim) + ")");
  if (s.head_dim > kMaxHeadDim)
    invalid("head_dim must be <= " + is(kMaxHeadDim) + " (got " + is(s.head_dim) + ")");
  if (s.rotary_dim < 0 || s.rotary_dim % 2 != 0)
    invalid("rotary_dim must be even and >= 0 (got " + is(s.rotary_dim) + ")");
  if (s.rotary_dim > s.head_dim)
    invalid("rotary_dim (" + is(s.rotary_dim) + ") must be <= head_dim (" + is(s.head_dim) + ")");
  // base > 1 keeps theta_i decreasing and finite; base == 1 would make every pair spin at
  // 1 rad/token, which no model uses and which hides pairing bugs.
  if (!std::isfinite(s.base) || !(s.base > 1.0))
    invalid("base must be finite and > 1 (got " + fs(s.base) + ")");
  if (!std::isfinite(s.scale) || !(s.scale > 0.0))
    invalid("magnitude scale must be finite and > 0 (got " + fs(s.scale) + ")");
}

// mrope / imrope: exactly 3 sections (t, h, w), each >= 0; axial: one or more, each >= 1. Either
// way they partition the rotary_dim/2 pairs.
void check_sections(const RopeSpec& s) {
  const bool three = s.layout != Layout::axial;
  if (three && s.sections.size() != 3)
    invalid(std::string(name(s.layout)) + " needs 3 sections (mrope_section t, h, w), got " +
            is(static_cast<std::int64_t>(s.sections.size())));
  if (!three && s.sections.empty()) invalid("axial layout needs at least one section");
  for (std::int64_t v : s.sections)
    if (v < (three ? 0 : 1))
      invalid("sections must be " + std::string(three ? ">= 0" : ">= 1") + " (got " + is(v) + ")");
  const std::int64_t sum = std::accumulate(s.sections.begin(), s.sections.end(), std::int64_t{0});
  if (sum != s.n_pairs())
    invalid(std::string(name(s.layout)) + " sections (in pairs) sum to " + is(sum) +
            ", must equal rotary_dim/2 = " + is(s.n_pairs()));
  if (s.layout == Layout::axial && s.scaling.kind != ScalingKind::none)
    invalid("frequency scaling is not defined for the axial layout (one ladder per axis)");
}

void check_layout(const RopeSpec& s) {
  switch (s.layout) {
    case Layout::interleaved:
    case Layout::half:
      if (!s.sections.empty()) invalid("sections are only for mrope/imrope/axial layouts");
      return;
    case Layout::proportional:
      if (!s.sections.empty()) invalid("sections are only for mrope/imrope/axial layouts");
      if (s.head_dim % 2 != 0)
        invalid("proportional layout needs an even head_dim (pairs (i, i + head_dim/2)), got " +
                is(s.head_dim));
      return;
    case Layout::mrope:
    case Layout::imrope:
    case Layout::axial:
      check_sections(s);
      return;
  }
  invalid("unknown layout");
}

// The parameter checks of one scaling kind; messages read "scaling <kind>: <field> ...".
struct ScalingCheck {
  const RopeSpec& s;
  const Scaling& sc = s.scaling;

  [[noreturn]] void fail(const std::string& m) const {
    invalid(std::string("scaling ") + name(sc.kind) + ": " + m);
  }
  void finite_pos(double v, const char* what) const {
    if (!std::isfinite(v) || !(v > 0))
      fail(std::string(what) + " must be finite and > 0 (got " + fs(v) + ")");
  }
  void at_least(std::int64_t v, std::int64_t min, const char* what) const {
    if (v < min) fail(std::string(what) + " must be >= " + is(min));
  }
  // f >= 1: dynamic keeps f L/L0 - (f - 1) >= 1 (L >= L0), so base' >= base (HF warns below 1);
  // yarn and llama3 only ever stretch the context.
  void factor_at_least_one() const {
    if (!std::isfinite(sc.factor) || sc.factor < 1)
      fail("factor must be finite and >= 1 (got " + fs(sc.factor) + ")");
  }
  void per_pair(const std::vector<double>& v, const char* what) const {
    if (static_cast<std::int64_t>(v.size()) != s.n_pairs())
      fail(std::string(what) + " has " + is(static_cast<std::int64_t>(v.size())) +
           " entries, must have rotary_dim/2 = " + is(s.n_pairs()));
    for (double x : v) finite_pos(x, what);
  }
  void attention() const {
    if (sc.attention_factor) finite_pos(*sc.attention_factor, "attention_factor");
  }

  void dynamic() const {
    factor_at_least_one();
    at_least(sc.max_position_embeddings, 1, "max_position_embeddings");
    at_least(sc.seq_len, 0, "seq_len");
    if (s.ladder_dim() <= 2)
      fail("the exponent dim/(dim-2) needs a rotary dim > 2 (got " + is(s.ladder_dim()) + ")");
  }
  void yarn() const {
    factor_at_least_one();
    at_least(sc.original_max_position_embeddings, 1, "original_max_position_embeddings");
    finite_pos(sc.beta_fast, "beta_fast");
    finite_pos(sc.beta_slow, "beta_slow");
    if (!std::isfinite(sc.mscale) || sc.mscale < 0 || !std::isfinite(sc.mscale_all_dim) ||
        sc.mscale_all_dim < 0)
      fail("mscale and mscale_all_dim must be finite and >= 0 (0 = not given)");
    attention();
  }
  void llama3() const {
    factor_at_least_one();
    finite_pos(sc.low_freq_factor, "low_freq_factor");
    finite_pos(sc.high_freq_factor, "high_freq_factor");
    if (!(sc.high_freq_factor > sc.low_freq_factor))
      fail("high_freq_factor (" + fs(sc.high_freq_factor) + ") must be > low_freq_factor (" +
           fs(sc.low_freq_factor) + ")");
    at_least(sc.original_max_position_embeddings, 1, "original_max_position_embeddings");
  }
  void longrope() const {
    per_pair(sc.short_factor, "short_factor");
    per_pair(sc.long_factor, "long_factor");
    // ln(original) divides in the default attention factor: original >= 2.
    at_least(sc.original_max_position_embeddings, 2, "original_max_position_embeddings");
    at_least(sc.max_position_embeddings, 1, "max_position_embeddings");
    at_least(sc.seq_len, 0, "seq_len");
    attention();
  }
};

void check_scaling(const RopeSpec& s) {
  const ScalingCheck c{s};
  switch (s.scaling.kind) {
    case ScalingKind::none:
      return;
    case ScalingKind::linear:
      return c.finite_pos(s.scaling.factor, "factor");
    case ScalingKind::dynamic:
      return c.dynamic();
    case ScalingKind::yarn:
      return c.yarn();
    case ScalingKind::llama3:
      return c.llama3();
    case ScalingKind::freq_factors:
      return c.per_pair(s.scaling.freq_factors, "freq_factors");
    case ScalingKind::longrope:
      return c.longrope();
  }
  invalid("unknown scaling kind");
}

}  // namespace

void RopeSpec::validate() const {
  check_dims(*this);
  check_layout(*this);
  check_scaling(*this);
}

// ---- f64 evaluation of the variant formulas (kernels' recipe; bounds in src/bounds) ----

namespace {
// HF get_mscale (modeling_rope_utils._compute_yarn_parameters; vLLM yarn_get_mscale).
double yarn_get_mscale(double scale, double mscale) {
  if (scale <= 1) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}
}  // namespace

double attention_factor_f64(const Scaling& sc, std::int64_t /*ladder_dim*/) {
  switch (sc.kind) {
    case ScalingKind::yarn:
      // HF precedence: explicit attention_factor; else, when both mscale and mscale_all_dim are
      // truthy, get_mscale(f, mscale) / get_mscale(f, mscale_all_dim) (DeepSeek); else
      // get_mscale(f) = 0.1 ln f + 1.
      if (sc.attention_factor) return *sc.attention_factor;
      if (sc.mscale != 0 && sc.mscale_all_dim != 0)
        return yarn_get_mscale(sc.factor, sc.mscale) /
               yarn_get_mscale(sc.factor, sc.mscale_all_dim);
      return yarn_get_mscale(sc.factor, 1.0);
    case ScalingKind::longrope: {
      // HF _compute_longrope_parameters: explicit attention_factor; else with
      // factor = max_position_embeddings / original_max_position_embeddings (Phi-3 note),
      // 1 if factor <= 1 else sqrt(1 + ln(factor) / ln(original)).
      if (sc.attention_factor) return *sc.attention_factor;
      const double f = static_cast<double>(sc.max_position_embeddings) /
                       static_cast<double>(sc.original_max_position_embeddings);
      if (f <= 1.0) return 1.0;
      return std::sqrt(1 + std::log(f) /
                               std::log(static_cast<double>(sc.original_max_position_embeddings)));
    }
    default:
      return 1.0;
  }
}

double magnitude_f64(const RopeSpec& spec) {
  const double af = attention_factor_f64(spec.scaling, spec.ladder_dim());
  return af == 1.0 ? spec.scale : spec.scale * af;
}

double dynamic_base_f64(const RopeSpec& spec) {
  // HF _compute_dynamic_ntk_parameters:
  //   seq_len = seq_len if seq_len > max_position_embeddings else max_position_embeddings
  //   base = base * ((factor * seq_len / max_position_embeddings) - (factor - 1))
  //                 ** (dim / (dim - 2))
  const Scaling& sc = spec.scaling;
  const double L0 = static_cast<double>(sc.max_position_embeddings);
  const double L = sc.seq_len > sc.max_position_embeddings ? static_cast<double>(sc.seq_len) : L0;
  const double d = static_cast<double>(spec.ladder_dim());
  const double t = (sc.factor * L / L0) - (sc.factor - 1);
  return spec.base * std::pow(t, d / (d - 2));
}

std::pair<double, double> yarn_correction_range_f64(const RopeSpec& spec) {
  // HF find_correction_dim / find_correction_range:
  //   dim * ln(orig / (num_rotations * 2 pi)) / (2 ln base); floor/ceil when truncate;
  //   max(low, 0), min(high, dim - 1)
  const Scaling& sc = spec.scaling;
  const double d = static_cast<double>(spec.ladder_dim());
  const double orig = static_cast<double>(sc.original_max_position_embeddings);
  const auto corr = [&](double rot) {
    return (d * std::log(orig / (rot * 2 * std::numbers::pi))) / (2 * std::log(spec.base));
  };
  double low = corr(sc.beta_fast), high = corr(sc.beta_slow);
  if (sc.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  return {std::max(low, 0.0), std::min(high, d - 1)};
}

namespace {
// llama3 multiplier c_i with theta'_i = theta_i * c_i (HF _compute_llama3_parameters), evaluated
// the way HF writes it; returns theta' directly.
double llama3_theta(const Scaling& sc, double theta) {
  const double orig = static_cast<double>(sc.original_max_position_embeddings);
  const double low_freq_wavelen = orig / sc.low_freq_factor;
  const double high_freq_wavelen = orig / sc.high_freq_factor;
  const double wavelen = 2 * std::numbers::pi / theta;
  if (wavelen < high_freq_wavelen) return theta;
  if (wavelen > low_freq_wavelen) return theta / sc.factor;
  const double smooth =
      (orig / wavelen - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
  return (1 - smooth) * theta / sc.factor + smooth * theta;
}
}  // namespace

std::vector<double> theta_ladder_f64(const RopeSpec& spec) {
  const Scaling& sc = spec.scaling;
  const double base = sc.kind == ScalingKind::dynamic ? dynamic_base_f64(spec) : spec.base;
  std::pair<double, double> yr{0, 0};
  if (sc.kind == ScalingKind::yarn) {
    yr = yarn_correction_range_f64(spec);
    if (yr.first == yr.second) yr.second += 0.001;  // HF linear_ramp_factor: prevent singularity
  }
  const bool use_long = sc.seq_len > sc.original_max_position_embeddings;  // strictly (HF Phi-3)
  std::vector<double> th(static_cast<std::size_t>(spec.n_pairs()));
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const auto [j, dim] = spec.ladder(i);
    // The `scalar` recipe: pow(base, -2j/dim) in f64 (unchanged for ScalingKind::none).
    const double theta = std::pow(base, -2.0 * static_cast<double>(j) / static_cast<double>(dim));
    double t = theta;
    switch (sc.kind) {
      case ScalingKind::none:
      case ScalingKind::dynamic:
        break;
      case ScalingKind::linear:
        t = theta / sc.factor;  // HF _compute_linear_scaling_rope_parameters: inv_freq /= factor
        break;
      case ScalingKind::freq_factors:
        t = theta / sc.freq_factors[static_cast<std::size_t>(i)];  // ggml: theta / freq_factor
        break;
      case ScalingKind::longrope:
        // HF: inv_freq = 1 / (ext_factors * base ** (arange(0, dim, 2) / dim))
        t = theta / (use_long ? sc.long_factor : sc.short_factor)[static_cast<std::size_t>(i)];
        break;
      case ScalingKind::llama3:
        t = llama3_theta(sc, theta);
        break;
      case ScalingKind::yarn: {
        // HF: ramp = clamp((j - low) / (high - low), 0, 1); extrapolation factor = 1 - ramp;
        // inv_freq = (inv_freq / factor) * ramp + inv_freq * (1 - ramp)
        const double ramp =
            std::clamp((static_cast<double>(j) - yr.first) / (yr.second - yr.first), 0.0, 1.0);
        t = (theta / sc.factor) * ramp + theta * (1 - ramp);
        break;
      }
    }
    th[static_cast<std::size_t>(i)] = t;
  }
  return th;
}

std::vector<double> llama3_freq_factors_f64(const RopeSpec& spec) {
  // llama.cpp convert_hf_to_gguf (LlamaModel, rope_freqs): for each freq = 1/base^(2i/dim):
  //   wavelen < high_freq_wavelen -> 1; wavelen > low_freq_wavelen -> factor;
  //   else 1 / ((1 - smooth) / factor + smooth)
  const Scaling& sc = spec.scaling;
  const double orig = static_cast<double>(sc.original_max_position_embeddings);
  std::vector<double> ff;
  for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
    const auto [j, dim] = spec.ladder(i);
    const double freq =
        std::pow(spec.base, -2.0 * static_cast<double>(j) / static_cast<double>(dim));
    const double wavelen = 2 * std::numbers::pi / freq;
    if (wavelen < orig / sc.high_freq_factor) {
      ff.push_back(1.0);
    } else if (wavelen > orig / sc.low_freq_factor) {
      ff.push_back(sc.factor);
    } else {
      const double smooth =
          (orig / wavelen - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
      ff.push_back(1 / ((1 - smooth) / sc.factor + smooth));
    }
  }
  return ff;
}

std::string describe(const RopeSpec& s) {
  std::ostringstream o;
  o << "head_dim=" << s.head_dim << " rotary_dim=" << s.rotary_dim << " base=" << s.base
    << " layout=" << name(s.layout);
  if (s.scale != 1.0) o << " scale=" << s.scale;
  if (!s.sections.empty()) {
    o << " sections=[";
    for (std::size_t i = 0; i < s.sections.size(); ++i) o << (i ? "," : "") << s.sections[i];
    o << "]";
  }
  const Scaling& c = s.scaling;
  switch (c.kind) {
    case ScalingKind::none:
      break;
    case ScalingKind::linear:
      o << " scaling=linear(factor=" << c.factor << ")";
      break;
    case ScalingKind::dynamic:
      o << " scaling=dynamic(factor=" << c.factor << " max_pos=" << c.max_position_embeddings
        << " seq_len=" << c.seq_len << ")";
      break;
    case ScalingKind::yarn:
      o << " scaling=yarn(factor=" << c.factor << " orig=" << c.original_max_position_embeddings
        << " beta_fast=" << c.beta_fast << " beta_slow=" << c.beta_slow
        << " truncate=" << (c.truncate ? "true" : "false") << " mscale=" << c.mscale
        << " mscale_all_dim=" << c.mscale_all_dim;
      if (c.attention_factor) o << " attention_factor=" << *c.attention_factor;
      o << ")";
      break;
    case ScalingKind::llama3:
      o << " scaling=llama3(factor=" << c.factor << " low=" << c.low_freq_factor
        << " high=" << c.high_freq_factor << " orig=" << c.original_max_position_embeddings << ")";
      break;
    case ScalingKind::freq_factors:
      o << " scaling=freq_factors(" << c.freq_factors.size() << " factors)";
      break;
    case ScalingKind::longrope:
      o << " scaling=longrope(orig=" << c.original_max_position_embeddings
        << " max_pos=" << c.max_position_embeddings << " seq_len=" << c.seq_len;
      if (c.attention_factor) o << " attention_factor=" << *c.attention_factor;
      o << ")";
      break;
  }
  return o.str();
}

Scaling llama31_scaling() {
  Scaling s;
  s.kind = ScalingKind::llama3;
  s.factor = 8;
  s.low_freq_factor = 1;
  s.high_freq_factor = 4;
  s.original_max_position_embeddings = 8192;
  return s;
}

Scaling deepseek_v3_yarn_scaling() {
  Scaling s;
  s.kind = ScalingKind::yarn;
  s.factor = 40;
  s.original_max_position_embeddings = 4096;
  s.mscale = 1;
  s.mscale_all_dim = 1;
  return s;
}

Scaling example_scaling(ScalingKind kind, std::int64_t n_pairs) {
  Scaling s;
  s.kind = kind;
  const double n = static_cast<double>(std::max<std::int64_t>(n_pairs, 1));
  switch (kind) {
    case ScalingKind::none:
      break;
    case ScalingKind::linear:
      s.factor = 4;
      break;
    case ScalingKind::dynamic:
      s.factor = 2;
      s.max_position_embeddings = 4096;
      s.seq_len = 16384;
      break;
    case ScalingKind::yarn:
      return deepseek_v3_yarn_scaling();
    case ScalingKind::llama3:
      return llama31_scaling();
    case ScalingKind::freq_factors:
      for (std::int64_t i = 0; i < n_pairs; ++i)
        s.freq_factors.push_back(1.0 + 7.0 * static_cast<double>(i) / n);
      break;
    case ScalingKind::longrope:
      s.original_max_position_embeddings = 4096;
      s.max_position_embeddings = 131072;
      s.seq_len = 4097;
      for (std::int64_t i = 0; i < n_pairs; ++i) {
        s.short_factor.push_back(1.0 + 0.05 * static_cast<double>(i));
        s.long_factor.push_back(1.0 + 1.5 * static_cast<double>(i));
      }
      break;
  }
  return s;
}

std::vector<std::int64_t> model_rotary_dims(std::int64_t head_dim) {
  std::vector<std::int64_t> v;
  auto add = [&](std::int64_t rd) {
    rd -= rd % 2;
    if (rd >= 2 && rd < head_dim && std::find(v.begin(), v.end(), rd) == v.end()) v.push_back(rd);
  };
  add(head_dim / 2);
  add(head_dim / 4);
  add(static_cast<std::int64_t>(std::llround(0.2 * static_cast<double>(head_dim))) * 2);
  if (head_dim > 64) add(64);
  return v;
}

}  // namespace ropecheck
