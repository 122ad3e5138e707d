#include "mutants.hpp"

#include <cmath>
#include <cstring>
#include <tuple>
#include <utility>

#include "ropecheck/reference/reference.hpp"

namespace ropecheck::zoo {

namespace {

using properties::Property;

struct Knobs {
  bool flip_sin = false;
  std::int64_t position_offset = 0;
  bool table_bf16 = false;
  bool inv_freq_bf16 = false;
  int position_rounding = 0;     // 0 exact, 1 f16, 2 bf16
  int exponent_denominator = 0;  // 0 rotary_dim, 1 head_dim, 2 rotary_dim - 2
  bool half_pairing_always = false;
  int pass_through = 0;  // 0 copied, 1 zeroed, 2 rotated
  bool skip_last_pair = false;
  bool scale_twice = false;
  bool in_place_alias = false;
  bool fast_trig = false;
  bool input_scratch = false;
  bool first_position_only = false;
  // Declares itself batch-variant (Domain::batch_invariant = false).
  bool batch_variant = false;
  // Batched calls contract the rotation to FMA, single-token calls do not: last-bit differences
  // between a token batched and alone, both within the bound (a vectorised body with a scalar
  // tail does the same).
  bool fma_when_batched = false;
  // The backward (apply_backward: the exact transpose, grad_a = s(c g_a + sin g_b), grad_b =
  // s(c g_b - sin g_a), as TransformerEngine / Apex write it), with its own knobs:
  bool bwd_sin_not_negated = false;         // the forward run on the gradient (B = F)
  bool bwd_partner_sin_other_half = false;  // grad_a reads its partner's sin from the pair
                                            // n_pairs/2 away (the other half of the table)
  bool bwd_pairing_transposed = false;      // GPT-J pairing in the half layout and back
  int bwd_scale = 0;                        // 0 s once, 1 s twice, 2 s dropped
  int bwd_pass_through = 0;  // 0 copied, 1 written 1.0 (Apex PR #1750), 2 not written
};

// sin/cos by truncated Taylor series without range reduction: accurate to ~1e-12 for |x| < 0.1,
// useless beyond a few radians (the "fast sin that is fine for small angles" bug).
double fast_sin(double x) {
  const double x2 = x * x;
  return x * (1 - x2 / 6 * (1 - x2 / 20 * (1 - x2 / 42 * (1 - x2 / 72))));
}
double fast_cos(double x) {
  const double x2 = x * x;
  return 1 - x2 / 2 * (1 - x2 / 12 * (1 - x2 / 30 * (1 - x2 / 56)));
}

class ZooKernel final : public Kernel {
 public:
  ZooKernel(std::string name, Knobs k) : name_(std::move(name)), k_(k) {}
  std::string name() const override { return name_; }
  std::string description() const override { return "bug-zoo kernel " + name_; }
  Policy policy(Dtype) const override {
    return {Dtype::f64, Dtype::f64, Dtype::f64, AngleRecipe::pow_product, false, "bug zoo"};
  }
  Domain domain() const override {  // one code path for both layouts, as the built-in kernels
    Domain d;
    d.layouts_bitwise_symmetric = true;
    d.batch_invariant = !k_.batch_variant;
    return d;
  }
  // Unscaled interleaved/half specs only (the mutated recipes are the unscaled one).
  bool supports(const RopeSpec& s, Dtype) const override {
    return s.scaling.kind == ScalingKind::none &&
           (s.layout == Layout::interleaved || s.layout == Layout::half);
  }

  KernelStatus apply(const RopeSpec& s, const TensorArgs& a) const override {
    return each_vector(s, a, [&](double m, const void* in, void* out) {
      rotate(s, a.dtype, m, in, out, a.in == a.out, k_.fma_when_batched && a.n_tokens > 1);
    });
  }

  bool has_backward() const override { return true; }
  KernelStatus apply_backward(const RopeSpec& s, const TensorArgs& a) const override {
    return each_vector(
        s, a, [&](double m, const void* in, void* out) { backward(s, a.dtype, m, in, out); });
  }

 private:
  // f(m, in, out) for each (token, head) vector of the call, m the token's position (knobs
  // applied).
  template <class F>
  KernelStatus each_vector(const RopeSpec& s, const TensorArgs& a, F&& f) const {
    if (!supports(s, a.dtype) || a.n_axes != 1 || a.real_positions)
      return KernelStatus::unsupported;
    const std::int64_t esize = traits(a.dtype).bytes;
    for (std::int64_t t = 0; t < a.n_tokens; ++t) {
      const double m = position(a, t);
      for (std::int64_t h = 0; h < a.n_heads; ++h) {
        const std::int64_t off = t * a.token_stride + h * a.head_stride;
        f(m, static_cast<const char*>(a.in) + off * esize, static_cast<char*>(a.out) + off * esize);
      }
    }
    return KernelStatus::ok;
  }

  // One gradient vector at position m, with the backward knobs (and the forward's angle knobs).
  void backward(const RopeSpec& s, Dtype d, double m, const void* in, void* out) const {
    const std::int64_t rd = s.rotary_dim, hd = s.head_dim, n = rd / 2;
    const std::int64_t esize = traits(d).bytes;
    std::vector<double> g(static_cast<std::size_t>(hd));
    for (std::int64_t j = 0; j < hd; ++j) g[j] = load(d, in, j);  // in place: read all first
    for (std::int64_t i = 0; i < n; ++i) {
      auto [ia, ib] = s.pair(i);
      if (k_.bwd_pairing_transposed)
        std::tie(ia, ib) = s.layout == Layout::half
                               ? std::pair<std::int64_t, std::int64_t>{2 * i, 2 * i + 1}
                               : std::pair<std::int64_t, std::int64_t>{i, i + n};
      const auto [c, sn] = cos_sin(s, i, m);
      const double sp = k_.bwd_partner_sin_other_half ? cos_sin(s, (i + n / 2) % n, m).second : sn;
      const double sc = k_.bwd_scale == 1 ? s.scale * s.scale : k_.bwd_scale == 2 ? 1.0 : s.scale;
      const double ga = g[ia], gb = g[ib];
      const double ya = k_.bwd_sin_not_negated ? ga * c - gb * sn : ga * c + gb * sp;
      const double yb = k_.bwd_sin_not_negated ? ga * sn + gb * c : gb * c - ga * sn;
      store(d, out, ia, round_to_dtype(sc * ya, d));
      store(d, out, ib, round_to_dtype(sc * yb, d));
    }
    for (std::int64_t j = rd; j < hd; ++j) {
      if (k_.bwd_pass_through == 1)
        store(d, out, j, 1.0);
      else if (k_.bwd_pass_through == 0 && in != out)
        std::memcpy(static_cast<char*>(out) + j * esize, static_cast<const char*>(in) + j * esize,
                    static_cast<std::size_t>(esize));
    }
  }

  // Token t's position, with the position knobs.
  double position(const TensorArgs& a, std::int64_t t) const {
    double m = static_cast<double>(a.positions[k_.first_position_only ? 0 : t]) +
               static_cast<double>(k_.position_offset);
    if (k_.position_rounding == 1) m = round_to_dtype(m, Dtype::f16);
    if (k_.position_rounding == 2) m = round_to_dtype(m, Dtype::bf16);
    return m;
  }

  // cos and sin of pair i's angle at position m, with the ladder and trig knobs.
  std::pair<double, double> cos_sin(const RopeSpec& s, std::int64_t i, double m) const {
    const std::int64_t rd = s.rotary_dim, hd = s.head_dim;
    double denom = static_cast<double>(rd);
    if (k_.exponent_denominator == 1) denom = static_cast<double>(hd);
    if (k_.exponent_denominator == 2 && rd > 2) denom = static_cast<double>(rd - 2);
    double theta = std::pow(s.base, -2.0 * static_cast<double>(i) / denom);
    if (k_.inv_freq_bf16) theta = round_to_dtype(theta, Dtype::bf16);
    const double ang = m * theta;
    double c = k_.fast_trig ? fast_cos(ang) : std::cos(ang);
    double sn = k_.fast_trig ? fast_sin(ang) : std::sin(ang);
    if (k_.table_bf16) c = round_to_dtype(c, Dtype::bf16), sn = round_to_dtype(sn, Dtype::bf16);
    if (k_.flip_sin) sn = -sn;
    return {c, sn};
  }

  // One head vector at position m, with the pairing, pass-through and aliasing knobs.
  void rotate(const RopeSpec& s, Dtype d, double m, const void* in, void* out, bool in_place,
              bool fma) const {
    const std::int64_t rd = s.rotary_dim, hd = s.head_dim;
    const std::int64_t esize = traits(d).bytes;
    std::int64_t n_pairs = rd / 2;
    if (k_.pass_through == 2) n_pairs = hd / 2;  // rotates pass-through dims as more pairs
    std::vector<double> results(static_cast<std::size_t>(hd));
    for (std::int64_t i = 0; i < n_pairs; ++i) {
      auto [ia, ib] = s.pair(i);
      if (k_.half_pairing_always) ia = i, ib = i + rd / 2;
      if (i >= rd / 2) ia = 2 * i, ib = 2 * i + 1;  // only for pass_through == 2
      const double xa = load(d, in, ia), xb0 = load(d, in, ib);
      if (k_.skip_last_pair && i == rd / 2 - 1) {
        store(d, out, ia, xa);
        store(d, out, ib, xb0);
        continue;
      }
      const auto [c, sn] = cos_sin(s, i, m);
      const double sc = k_.scale_twice ? s.scale * s.scale : s.scale;
      const double ya = sc * (fma ? std::fma(xa, c, -xb0 * sn) : xa * c - xb0 * sn);
      store(d, out, ia, round_to_dtype(ya, d));
      // The aliasing bug: re-reads x_a after out_a was written (same address when in-place).
      const double xa2 = k_.in_place_alias ? load(d, in, ia) : xa;
      const double yb = sc * (fma ? std::fma(xa2, sn, xb0 * c) : xa2 * sn + xb0 * c);
      store(d, out, ib, round_to_dtype(yb, d));
      results[ia] = round_to_dtype(ya, d);
      results[ib] = round_to_dtype(yb, d);
    }
    const std::int64_t first_pass = k_.pass_through == 2 ? 2 * n_pairs : rd;
    for (std::int64_t j = first_pass; j < hd; ++j) {
      if (k_.pass_through == 1)
        store(d, out, j, 0.0);
      else if (in != out)
        std::memcpy(static_cast<char*>(out) + j * esize, static_cast<const char*>(in) + j * esize,
                    static_cast<std::size_t>(esize));
    }
    if (k_.input_scratch && !in_place) {
      // Uses the input as scratch: leaves rotated values behind in the caller's input.
      for (std::int64_t i = 0; i < rd; ++i) store(d, const_cast<void*>(in), i, results[i]);
    }
  }

  std::string name_;
  Knobs k_;
};

// ---- scaling and multi-axis mutants ------------------------------------------------------------
struct ScaledKnobs {
  int yarn_mscale = 0;  // 0 right, 1: 0.07 ln f + 1 instead of 0.1 ln f + 1, 2: applied twice
  bool drop_attention_factor = false;    // yarn / longrope magnitude ignored (s = scale)
  bool longrope_ge = false;              // long factors when seq_len >= original (not >)
  bool neox_pairing_multi_axis = false;  // multi-axis layouts always pair (i, i + rd/2)
  bool swap_h_w = false;                 // 3-axis layouts: h pairs read w's position and back
  bool t_for_all_axes = false;           // every pair reads the t (first) position
  bool mrope_section_ladders = false;    // mrope/imrope: a ladder per section (axial-style)
  bool batch_variant = false;            // declared batch-variant (Domain::batch_invariant)
};

// theta' and s from the reference (MP, rounded once to f64), rotation in f64: a correct kernel
// for every variant and layout unless a knob is set.
class ScaledZooKernel final : public Kernel {
 public:
  ScaledZooKernel(std::string name, ScaledKnobs k) : name_(std::move(name)), k_(k) {}
  std::string name() const override { return name_; }
  std::string description() const override { return "bug-zoo scaling kernel " + name_; }
  Policy policy(Dtype) const override {
    return {Dtype::f64, Dtype::f64, Dtype::f64, AngleRecipe::pow_product, false, "bug zoo"};
  }
  Domain domain() const override {  // one code path for both layouts, as the built-in kernels
    Domain d;
    d.layouts_bitwise_symmetric = true;
    d.batch_invariant = !k_.batch_variant;
    return d;
  }
  bool supports(const RopeSpec&, Dtype) const override { return true; }

  KernelStatus apply(const RopeSpec& spec, const TensorArgs& a) const override {
    RopeSpec s = spec;
    const Scaling& sc = spec.scaling;
    if (k_.longrope_ge && sc.kind == ScalingKind::longrope &&
        sc.seq_len == sc.original_max_position_embeddings)
      s.scaling.seq_len = sc.original_max_position_embeddings + 1;  // takes the long factors
    const std::vector<double> theta = thetas(s);
    const double scale = magnitude(spec, s);
    const std::int64_t esize = traits(a.dtype).bytes;
    for (std::int64_t t = 0; t < a.n_tokens; ++t)
      for (std::int64_t h = 0; h < a.n_heads; ++h) {
        const std::int64_t off = t * a.token_stride + h * a.head_stride;
        const void* in = static_cast<const char*>(a.in) + off * esize;
        void* out = static_cast<char*>(a.out) + off * esize;
        rotate(s, theta, scale, a, t, in, out);
      }
    return KernelStatus::ok;
  }

  // The backward as the rotation by -m (exact: s R(m)^T = s R(-m)), on every variant and layout,
  // with the forward's knobs.
  bool has_backward() const override { return true; }
  KernelStatus apply_backward(const RopeSpec& spec, const TensorArgs& a) const override {
    const NegatedCall n = negate_positions(a);
    return n.ok ? apply(spec, n.args) : KernelStatus::error;
  }

 private:
  // theta'_i of the spec (rounded once to f64), or with the section-ladder knob the axial ladder.
  std::vector<double> thetas(const RopeSpec& s) const {
    std::vector<double> theta;
    for (const auto& t : reference::inv_freqs(s)) theta.push_back(t.convert_to<double>());
    if (k_.mrope_section_ladders && (s.layout == Layout::mrope || s.layout == Layout::imrope)) {
      // Section a's pairs (in mrope's contiguous order) get base^(-2j/(2 sections[a])), j from 0
      // in each section, the variant's factors ignored: the axial ladder applied to M-RoPE.
      std::int64_t i = 0;
      for (std::int64_t sec : s.sections)
        for (std::int64_t j = 0; j < sec; ++j, ++i)
          theta[static_cast<std::size_t>(i)] =
              std::pow(s.base, -2.0 * static_cast<double>(j) / static_cast<double>(2 * sec));
    }
    return theta;
  }

  // The magnitude s (scale times attention factor), with the attention-factor knobs. spec: as
  // called; s: as the kernel reads it.
  double magnitude(const RopeSpec& spec, const RopeSpec& s) const {
    const Scaling& sc = spec.scaling;
    double scale = reference::magnitude(s).convert_to<double>();
    const bool has_af = (sc.kind == ScalingKind::yarn || sc.kind == ScalingKind::longrope);
    if (k_.drop_attention_factor && has_af) scale = spec.scale;
    if (k_.yarn_mscale != 0 && sc.kind == ScalingKind::yarn && !sc.attention_factor &&
        sc.factor > 1) {
      const auto gm = [&](double m) { return 0.1 * m * std::log(sc.factor) + 1; };
      const double af = (sc.mscale != 0 && sc.mscale_all_dim != 0)
                            ? gm(sc.mscale) / gm(sc.mscale_all_dim)
                            : gm(1.0);
      if (k_.yarn_mscale == 1) {
        const auto gm7 = [&](double m) { return 0.07 * m * std::log(sc.factor) + 1; };
        scale = spec.scale * ((sc.mscale != 0 && sc.mscale_all_dim != 0)
                                  ? gm7(sc.mscale) / gm(sc.mscale_all_dim)
                                  : gm7(1.0));
      } else {
        scale = spec.scale * af * af;
      }
    }
    return scale;
  }

  // Token t's head vector, with the pairing and axis knobs.
  void rotate(const RopeSpec& s, const std::vector<double>& theta, double scale,
              const TensorArgs& a, std::int64_t t, const void* in, void* out) const {
    const Dtype d = a.dtype;
    const std::int64_t esize = traits(d).bytes;
    std::vector<double> x(static_cast<std::size_t>(s.head_dim));
    for (std::int64_t j = 0; j < s.head_dim; ++j) x[j] = load(d, in, j);
    for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
      auto [ia, ib] = s.pair(i);
      if (k_.neox_pairing_multi_axis && is_multi_axis(s.layout)) ia = i, ib = i + s.rotary_dim / 2;
      std::int64_t ax = a.n_axes == 1 ? 0 : s.pair_axis(i);
      if (k_.swap_h_w && a.n_axes == 3 && ax > 0) ax = 3 - ax;
      if (k_.t_for_all_axes) ax = 0;
      const double m = a.real_positions ? a.real_positions[t * a.n_axes + ax]
                                        : static_cast<double>(a.positions[t * a.n_axes + ax]);
      const double ang = m * theta[static_cast<std::size_t>(i)];
      const double c = std::cos(ang), sn = std::sin(ang);
      store(d, out, ia, round_to_dtype(scale * (x[ia] * c - x[ib] * sn), d));
      store(d, out, ib, round_to_dtype(scale * (x[ia] * sn + x[ib] * c), d));
    }
    if (in != out)
      for (std::int64_t j = 0; j < s.head_dim; ++j)
        if (s.is_passthrough(j))
          std::memcpy(static_cast<char*>(out) + j * esize, static_cast<const char*>(in) + j * esize,
                      static_cast<std::size_t>(esize));
  }

  std::string name_;
  ScaledKnobs k_;
};

Mutant make_scaled(std::string name, std::string why, std::vector<Property> expected, ScaledKnobs k,
                   std::optional<ScalingKind> fs, std::optional<Layout> fl) {
  auto kern = std::make_shared<ScaledZooKernel>(name, k);
  Mutant m{std::move(name), std::move(why), std::move(expected), std::move(kern), fs, fl};
  return m;
}

Mutant make(std::string name, std::string why, std::vector<Property> expected, Knobs k) {
  auto kern = std::make_shared<ZooKernel>(name, k);
  return {std::move(name), std::move(why), std::move(expected),
          std::move(kern), std::nullopt,   std::nullopt};
}

// The broken backwards (ZooKernel's backward knobs): each a formula real training stacks shipped.
std::vector<Mutant> backward_mutants() {
  return {
      make("bwd_sin_not_negated",
           "backward = the forward run on the gradient (sin not negated; Liger/Unsloth-style "
           "kernels reuse the forward with -sin)",
           {Property::BackwardMatchesReferenceWithinBound, Property::BackwardIsAdjoint,
            Property::BackwardUndoesForward},
           Knobs{.bwd_sin_not_negated = true}),
      make("bwd_partner_sin_other_half",
           "exact-transpose backward reading the partner's sin from the other half of the table "
           "(Paddle PR #74716's formula mix, visible once the halves differ)",
           {Property::BackwardMatchesReferenceWithinBound, Property::BackwardIsAdjoint},
           Knobs{.bwd_partner_sin_other_half = true}),
      make("bwd_pairing_transposed", "backward pairs GPT-J style in a NeoX kernel and back",
           {Property::BackwardMatchesReferenceWithinBound, Property::BackwardUndoesForward},
           Knobs{.bwd_pairing_transposed = true}),
      make("bwd_scale_twice", "backward multiplies the magnitude s into the table and the output",
           {Property::BackwardMatchesReferenceWithinBound, Property::BackwardUndoesForward},
           Knobs{.bwd_scale = 1}),
      make("bwd_scale_dropped", "backward forgets the magnitude s (mscale) of the forward",
           {Property::BackwardMatchesReferenceWithinBound, Property::BackwardUndoesForward},
           Knobs{.bwd_scale = 2}),
      make("bwd_pass_through_ones",
           "partial rotary backward writes 1.0 into the pass-through gradient (Apex PR #1750; "
           "its all-ones test gradient could not see it)",
           {Property::BackwardPassThroughIsExact, Property::BackwardIsAdjoint},
           Knobs{.bwd_pass_through = 1}),
      make("bwd_pass_through_not_written",
           "partial rotary backward never copies the pass-through gradient (grad buffer from "
           "zeros)",
           {Property::BackwardPassThroughIsExact}, Knobs{.bwd_pass_through = 2})};
}

}  // namespace

const Kernel& baseline() {
  static const ZooKernel k("zoo_baseline", Knobs{});
  return k;
}

const Kernel& batch_dependent(bool declared_batch_variant) {
  static const ZooKernel invariant("zoo_fma_when_batched", Knobs{.fma_when_batched = true});
  static const ZooKernel variant("zoo_fma_when_batched_declared",
                                 Knobs{.batch_variant = true, .fma_when_batched = true});
  return declared_batch_variant ? variant : invariant;
}

const Kernel& scaled_baseline() {
  static const ScaledZooKernel k("zoo_scaled_baseline", ScaledKnobs{});
  return k;
}

namespace {

std::vector<Mutant> forward_mutants() {
  return {
      make("sin_sign_flipped",
           "rotation direction reversed (transposed R, conjugated complex factor)",
           {Property::MatchesReferenceWithinBound, Property::ScoresDependOnlyOnOffset},
           Knobs{.flip_sin = true}),
      make("position_off_by_one", "positions counted from 1 / cache length added twice",
           {Property::ZeroPositionIsIdentity, Property::MatchesReferenceWithinBound},
           Knobs{.position_offset = 1}),
      make("table_bf16", "cos/sin cache kept in the model dtype (bf16)",
           {Property::PreservesNorm, Property::MatchesReferenceWithinBound},
           Knobs{.table_bf16 = true}),
      make("inv_freq_bf16", "inv_freq buffer cast to bf16 with the model (.to(dtype))",
           {Property::MatchesReferenceWithinBound}, Knobs{.inv_freq_bf16 = true}),
      make("positions_f16", "position ids cast to f16 before the angle (exact only to 2048)",
           {Property::MatchesReferenceWithinBound}, Knobs{.position_rounding = 1}),
      make("positions_bf16", "position ids cast to bf16 before the angle (exact only to 256)",
           {Property::MatchesReferenceWithinBound}, Knobs{.position_rounding = 2}),
      make("exponent_over_head_dim", "theta_i = base^(-2i/head_dim) with partial rotary",
           {Property::MatchesReferenceWithinBound}, Knobs{.exponent_denominator = 1}),
      make("exponent_over_rotary_dim_minus_2", "arange(0, dim, 2)/(dim-2) (linspace-style) ladder",
           {Property::MatchesReferenceWithinBound}, Knobs{.exponent_denominator = 2}),
      make("half_pairing_in_interleaved",
           "NeoX rotate_half applied to a GPT-J (interleaved) checkpoint",
           {Property::LayoutsArePermutations, Property::MatchesReferenceWithinBound},
           Knobs{.half_pairing_always = true}),
      make("pass_through_zeroed", "partial rotary: output allocated with zeros, tail never copied",
           {Property::PassThroughIsExact}, Knobs{.pass_through = 1}),
      make("pass_through_rotated", "partial rotary ignored: all head dims rotated",
           {Property::PassThroughIsExact}, Knobs{.pass_through = 2}),
      make("last_pair_skipped", "loop bound i < n_pairs - 1 (off by one at the end)",
           {Property::MatchesReferenceWithinBound}, Knobs{.skip_last_pair = true}),
      make("scale_applied_twice", "YaRN mscale applied to the table and again to the output",
           {Property::PreservesNorm}, Knobs{.scale_twice = true}),
      make("in_place_aliasing", "in-place kernel reads x_a after overwriting it",
           {Property::InPlaceEqualsOutOfPlace}, Knobs{.in_place_alias = true}),
      make("fast_small_angle_trig", "polynomial sin/cos without range reduction",
           {Property::PreservesNorm, Property::MatchesReferenceWithinBound},
           Knobs{.fast_trig = true}),
      make("input_used_as_scratch", "out-of-place kernel rotating its input buffer in place",
           {Property::InputUntouched}, Knobs{.input_scratch = true}),
      make("first_position_broadcast", "position_ids[0] broadcast over the batch (decode-step bug)",
           {Property::TokensAreIndependent}, Knobs{.first_position_only = true}),
      // The same bug in a kernel declaring itself batch-variant: TokensAreIndependent compares
      // within twice the bound and still sees a token turned by another token's position.
      make("position_broadcast_batch_variant",
           "position_ids[0] broadcast, in a kernel declared batch-variant (PyTorch-style)",
           {Property::TokensAreIndependent},
           Knobs{.first_position_only = true, .batch_variant = true}),
      make_scaled("yarn_mscale_0_07",
                  "YaRN attention factor 0.07 ln f + 1 instead of 0.1 ln f + 1 (the "
                  "27% mscale bug)",
                  {Property::PreservesNorm, Property::MatchesReferenceWithinBound},
                  ScaledKnobs{.yarn_mscale = 1}, ScalingKind::yarn, std::nullopt),
      make_scaled("yarn_mscale_applied_twice",
                  "YaRN mscale multiplied into cos/sin and again into the output",
                  {Property::PreservesNorm, Property::MatchesReferenceWithinBound},
                  ScaledKnobs{.yarn_mscale = 2}, ScalingKind::yarn, std::nullopt),
      make_scaled("attention_factor_dropped",
                  "rope_scaling attention_factor / mscale ignored (cos/sin unscaled)",
                  {Property::PreservesNorm, Property::MatchesReferenceWithinBound},
                  ScaledKnobs{.drop_attention_factor = true}, ScalingKind::yarn, std::nullopt),
      make_scaled("longrope_switch_off_by_one",
                  "LongRoPE long factors at seq_len >= original (not >)",
                  {Property::MatchesReferenceWithinBound}, ScaledKnobs{.longrope_ge = true},
                  ScalingKind::longrope, std::nullopt),
      make_scaled("mrope_hardcoded_neox_pairing",
                  "multi-axis RoPE hard-codes NeoX (i, i + d/2) pairing for an "
                  "interleaved-pair layout",
                  {Property::MatchesReferenceWithinBound},
                  ScaledKnobs{.neox_pairing_multi_axis = true}, std::nullopt, Layout::axial),
      // Axis mix-ups are invisible with t = h = w (every 1-D-position property passes them): only
      // the per-axis properties, with distinct positions per axis, see them.
      make_scaled("mrope_h_w_positions_swapped",
                  "M-RoPE reads the h section's cos/sin from the w positions and back "
                  "(position_ids rows transposed)",
                  {Property::ComposesAdditivelyPerAxis, Property::ScoresDependOnlyOnAxisOffsets},
                  ScaledKnobs{.swap_h_w = true}, std::nullopt, Layout::mrope),
      make_scaled("imrope_t_position_for_all_axes",
                  "multi-axis RoPE fed position_ids[0] (temporal) for every axis "
                  "(text-only code path applied to image tokens)",
                  {Property::ComposesAdditivelyPerAxis, Property::ScoresDependOnlyOnAxisOffsets},
                  ScaledKnobs{.t_for_all_axes = true}, std::nullopt, Layout::imrope),
      make_scaled(
          "mrope_ladder_per_section",
          "M-RoPE with a frequency ladder per section (CogVideoX/axial style) "
          "instead of one ladder over the head",
          {Property::EqualAxesReduceToOneDimensional, Property::MatchesReferenceWithinBound},
          ScaledKnobs{.mrope_section_ladders = true}, std::nullopt, Layout::mrope),
      make_scaled("mrope_section_ladders_variant",
                  "the same, in a kernel declared batch-variant (compared within twice the bound)",
                  {Property::EqualAxesReduceToOneDimensional},
                  ScaledKnobs{.mrope_section_ladders = true, .batch_variant = true}, std::nullopt,
                  Layout::mrope),
  };
}

}  // namespace

const std::vector<Mutant>& mutants() {
  static const std::vector<Mutant> v = [] {
    std::vector<Mutant> f = forward_mutants();
    for (auto& b : backward_mutants()) f.push_back(std::move(b));
    return f;
  }();
  return v;
}

}  // namespace ropecheck::zoo
