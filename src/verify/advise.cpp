// The hint of a failing run (advise.hpp): candidates, a screen, the confirmation on every vector,
// the choice and its sentence.
//
// Why each candidate is honest to name:
// - Spec hypotheses are checked under the DECLARED policy, so when one passes, the outputs are
//   the exact rotation of another spec within the kernel's own bound: not an accident of a wide
//   bound. They are named as mismatches ("usually a bug"), never turned into a looser declaration,
//   and they win over any declaration that also passes (a declaration wide enough to swallow a
//   wrong base or position would hide the bug).
// - Declarations are named with what they mean and how much wider their bound is than the
//   declared one: "passes when declared" is evidence about the errors' size, not proof that the
//   kernel computes that way. The bf16 / f16 table-and-arithmetic bounds are genuinely that wide,
//   so the sentence says what the declaration admits. An angle computed in f16 / bf16 is never a
//   candidate: at long positions it is a bug in every engine we know of, and its bound there is
//   the cap (any rotation passes), which would turn every failure into advice.
// - Truncation (toward zero) is named only when the outputs lean toward zero (kTowardZeroLean of
//   them below the exact magnitude, over the whole run): its bound is twice the nearest-even one,
//   and a round-to-nearest kernel with an error merely within that doubled bound must not be told
//   it truncates.
#include "ropecheck/verify/advise.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

namespace ropecheck::verify {

namespace {

using Keys = std::vector<std::pair<std::string, std::string>>;

// ---- candidates ---------------------------------------------------------------------------------

// How the kernel's rotation may differ from the spec: another spec, or positions mapped (in the
// forward's terms: m -> m + offset, or m -> -m for a negated sin).
struct Hypothesis {
  std::string what;  // "base 10001 (the spec says 10000)"; "" for the spec as declared
  std::string why;   // what it usually means
  Keys keys;
  std::function<std::optional<RopeSpec>(const RopeSpec&)> spec;
  std::int64_t offset = 0;
  bool negate = false;
};

struct Trial {
  std::size_t hyp = 0;  // 0: the spec as declared
  Policy policy;
  Advice::Kind kind = Advice::Kind::declaration;
  bool ignore_passthrough = false;  // the pairs alone (the pass-through hypothesis)
  bool lean = false;                // needs the toward-zero lean
  std::string meaning;              // what the declaration says about the kernel
  double width = 0;                 // sum of the pair bounds at the reference position
  int changes = 0;                  // fields of the declared policy it changes
  bool alive = true;
  std::vector<std::unique_ptr<PairChecker>> checkers;  // per group, made on first use
};

std::optional<RopeSpec> respec(RopeSpec s, const std::function<void(RopeSpec&)>& change) {
  change(s);
  try {
    return s.normalized();
  } catch (const std::exception&) {
    return std::nullopt;  // not a spec (e.g. a rotary_dim the layout cannot take)
  }
}

std::string num(double v) {
  std::ostringstream o;
  o.precision(17);
  o << v;
  return o.str();
}

std::vector<Hypothesis> hypotheses(const RopeSpec& s0) {
  std::vector<Hypothesis> h;
  h.push_back({"", "", {}, [](const RopeSpec& s) { return std::optional<RopeSpec>(s); }});
  if (s0.layout == Layout::interleaved || s0.layout == Layout::half) {
    const Layout o = s0.layout == Layout::half ? Layout::interleaved : Layout::half;
    h.push_back({std::string("the ") + name(o) + " layout",
                 o == Layout::half
                     ? "your kernel pairs (i, i + rd/2) where the spec says interleaved "
                       "(2i, 2i+1): a pairing bug, or the spec's layout is not the model's"
                     : "your kernel pairs (2i, 2i+1) where the spec says half "
                       "(i, i + rd/2): a pairing bug, or the spec's layout is not the model's",
                 {{"layout", name(o)}},
                 [o](const RopeSpec& s) -> std::optional<RopeSpec> {
                   if (s.layout != Layout::interleaved && s.layout != Layout::half)
                     return std::nullopt;
                   return respec(s, [o](RopeSpec& r) { r.layout = o; });
                 }});
  }
  const auto same = [](const RopeSpec& s) { return std::optional<RopeSpec>(s); };
  h.push_back({"the rotation by -m (sin negated)",
               "the kernel rotates the other way (a sign flipped in sin or in the rotation's "
               "off-diagonal): a bug",
               {},
               same,
               0,
               true});
  for (std::int64_t d : {1, -1})
    h.push_back({std::string("position m") + (d > 0 ? "+1" : "-1"),
                 "every vector is rotated as if its position were one " +
                     std::string(d > 0 ? "more" : "less") +
                     " than the positions say: an off-by-one in the kernel's positions (a cache "
                     "or offset bug)",
                 {},
                 same,
                 d});
  // rotary_dim: the model ratios of head_dim (full, 1/2, 1/4, 3/4, 2/5) and the usual 32 / 64,
  // each applied to every group's own head_dim (the ratios) or as is.
  std::vector<std::pair<double, std::int64_t>> rds;  // (ratio, 0) or (0, absolute)
  for (double r : {1.0, 0.5, 0.25, 0.75, 0.4}) rds.push_back({r, 0});
  for (std::int64_t v : {64, 32}) rds.push_back({0, v});
  const auto rd_of = [](const RopeSpec& s, std::pair<double, std::int64_t> w) -> std::int64_t {
    if (w.second) return w.second;
    const double v = w.first * static_cast<double>(s.head_dim);
    return v == std::floor(v) ? static_cast<std::int64_t>(v) : -1;
  };
  std::vector<std::int64_t> seen;
  for (const auto& w : rds) {
    const std::int64_t rd = rd_of(s0, w);
    if (rd % 2 || rd < 2 || rd > s0.head_dim || rd == s0.rotary_dim ||
        std::count(seen.begin(), seen.end(), rd))
      continue;
    seen.push_back(rd);
    h.push_back({"rotary_dim " + std::to_string(rd) + " (the spec says " +
                     std::to_string(s0.rotary_dim) + ")",
                 "the kernel rotates another number of dims: a partial-rotary bug, or the spec's "
                 "rotary_dim is not the model's (partial_rotary_factor, rotary_pct)",
                 {{"rotary_dim", std::to_string(rd)}},
                 [w, rd_of](const RopeSpec& s) -> std::optional<RopeSpec> {
                   const std::int64_t r = rd_of(s, w);
                   if (r < 2 || r % 2 || r > s.head_dim) return std::nullopt;
                   return respec(s, [r](RopeSpec& q) { q.rotary_dim = r; });
                 }});
  }
  // base: one off either way (relative to each group's base), and the common rope_theta values.
  for (double d : {1.0, -1.0})
    h.push_back({"base " + num(s0.base + d) + " (the spec says " + num(s0.base) + ")",
                 "the kernel's frequencies come from a base one off: a bug (an off-by-one in a "
                 "config or a conversion), or the spec's base is not the model's rope_theta",
                 {{"base", num(s0.base + d)}},
                 [d](const RopeSpec& s) { return respec(s, [d](RopeSpec& r) { r.base += d; }); }});
  for (double b : {1e4, 5e4, 1e5, 5e5, 1e6, 5e6, 1e7}) {
    if (b == s0.base || b == s0.base + 1 || b == s0.base - 1) continue;
    h.push_back({"base " + num(b) + " (the spec says " + num(s0.base) + ")",
                 "the kernel's frequencies come from another base: the spec's base is not the "
                 "model's rope_theta, or the kernel ignores the configured one (a bug)",
                 {{"base", num(b)}},
                 [b](const RopeSpec& s) { return respec(s, [b](RopeSpec& r) { r.base = b; }); }});
  }
  return h;
}

const char* recipe_meaning(AngleRecipe r) {
  switch (r) {
    case AngleRecipe::hf_f32:
      return "HF / vLLM: inv_freq in f32, angle f32(m) * inv_freq in f32";
    case AngleRecipe::ladder_f32:
      return "ggml CPU: theta *= powf(base, -2/d) pair after pair in f32";
    case AngleRecipe::inv_freq_f64:
      return "inv_freq computed in f64 and rounded once, angle m * inv_freq";
    case AngleRecipe::fast_powf_f32:
      return "CUDA -use_fast_math __powf inv_freq, angle in f32";
    case AngleRecipe::fast_powf_ladder_f32:
      return "llama.cpp CUDA: __powf(theta_scale, i), angle in f32";
    case AngleRecipe::vllm_f32:
      return "vLLM: hf_f32's inv_freq, scaling formulas in f32 (linear divides the position)";
    default:
      return "theta = base^(-2i/d) and m * theta in the angle precision";
  }
}

bool same_policy(const Policy& a, const Policy& b) { return describe(a) == describe(b); }

// The declarations tried, each a change of the declared policy p: the table alone narrower, the
// angle recipe (inv_freq in f64 included) with an f32 or f64 angle, truncation, the table and the
// arithmetic narrower together. Not the trig argument in turns (CUDA __sinf): its angle term,
// wider than the f32 recipes' only by a few u of the angle, would stand in for them. Not "no
// FMA": an f32 rotation without FMA passes a declared fused one (the bounds differ by less than
// its errors), so that candidate could never be shown to fire.
std::vector<Trial> policy_trials(const Policy& p, Dtype storage) {
  const bool narrow_storage = traits(storage).digits < traits(Dtype::f32).digits;
  std::vector<Trial> t;
  const auto add = [&](Policy q, std::string meaning, bool lean = false) {
    if (same_policy(q, p)) return;
    for (const auto& e : t)
      if (same_policy(e.policy, q)) return;
    Trial r;
    r.policy = q;
    r.meaning = std::move(meaning);
    r.lean = lean;
    t.push_back(std::move(r));
  };
  for (Dtype lo : {Dtype::f32, Dtype::f16, Dtype::bf16})
    if (traits(lo).digits < traits(p.table).digits) {
      Policy q = p;
      q.table = lo;
      add(q, std::string("cos/sin held in ") + name(lo) + " (a " + name(lo) +
                 " cache, or cos/sin cast to the tensor's dtype) with the rotation still in " +
                 name(p.arithmetic));
    }
  for (AngleRecipe r :
       {AngleRecipe::hf_f32, AngleRecipe::inv_freq_f64, AngleRecipe::pow_product,
        AngleRecipe::ladder_f32, AngleRecipe::fast_powf_f32, AngleRecipe::fast_powf_ladder_f32})
    for (Dtype a : {Dtype::f32, Dtype::f64}) {
      Policy q = p;
      q.recipe = r;
      q.angle = a;
      if (angle_precision(q) != a) q.angle = p.angle;  // the f32 recipes ignore it
      add(q, std::string("the angle computed as ") + recipe_meaning(r) + " (angle " +
                 name(angle_precision(q)) + ")");
    }
  if (narrow_storage || traits(p.table).digits < traits(angle_precision(p)).digits) {
    Policy q = p;
    q.output_rounding = Rounding::toward_zero;
    add(q, "results truncated into the storage dtype (e.g. bf16 as the top 16 bits of an f32)",
        true);
    q.table_rounding = Rounding::toward_zero;
    add(q, "cos/sin and results truncated (toward zero), e.g. bf16 as the top 16 bits of an f32",
        true);
  }
  for (Dtype lo : {Dtype::f16, Dtype::bf16}) {
    // f16 / bf16 tensors: the arithmetic of the tensor's own dtype only (HF casts cos/sin to
    // x.dtype); an f16 rotation of bf16 tensors is not a recipe anyone uses.
    if (storage != Dtype::f32 && storage != Dtype::f64 && lo != storage) continue;
    if (traits(p.table).digits <= traits(lo).digits &&
        traits(p.arithmetic).digits <= traits(lo).digits)
      continue;
    Policy q = p;
    q.table = q.arithmetic = lo;
    add(q, std::string("cos/sin rounded to ") + name(lo) + " and the rotation computed in " +
               name(lo) + " (HF in " + name(lo) +
               ": cos.to(x.dtype), then multiplies in that dtype), the angle still " +
               name(angle_precision(p)) +
               ". Declare it only if your kernel does that: an angle "
               "computed in " +
               name(lo) +
               " is a bug it does not describe (it fails at longer "
               "positions than these)");
  }
  return t;
}

// The spec keys and the Python Policy arguments of the fields q changes from p.
void changed_fields(const Policy& p, const Policy& q, Keys& keys, std::string& py) {
  const auto put = [&](const char* key, const char* kw, const std::string& v, bool quote = true) {
    keys.push_back({key, v});
    py += std::string(py.empty() ? "" : ", ") + kw + "=" + (quote ? "'" + v + "'" : v);
  };
  if (q.angle != p.angle) put("angle_precision", "angle", name(q.angle));
  if (q.table != p.table) put("table_precision", "table", name(q.table));
  if (q.arithmetic != p.arithmetic) put("arithmetic_precision", "arithmetic", name(q.arithmetic));
  if (q.recipe != p.recipe) put("angle_recipe", "recipe", name(q.recipe));
  if (q.trig_argument != p.trig_argument)
    put("trig_argument", "trig_argument", name(q.trig_argument));
  if (q.fused != p.fused) put("fused", "fused", q.fused ? "true" : "false", false);
  if (q.table_rounding != p.table_rounding)
    put("table_rounding", "table_rounding", name(q.table_rounding));
  if (q.output_rounding != p.output_rounding)
    put("output_rounding", "output_rounding", name(q.output_rounding));
}

std::string keys_json(const Keys& k) {
  std::string s = "{";
  for (const auto& [key, v] : k)
    s += std::string(s.size() > 1 ? ", " : "") + "\"" + key + "\": \"" + v + "\"";
  return s + "}";
}

// ---- the re-check -------------------------------------------------------------------------------

// One hypothesis on one group: its spec, oracle and the last rotation.
struct GroupHyp {
  bool ready = false;
  std::optional<RopeSpec> spec;
  std::unique_ptr<reference::Oracle> oracle;
  reference::Rotation rot;
  std::vector<std::int64_t> rot_pos;
  bool has_rot = false;
  reference::ExactVector exact;
};

class Recheck {
 public:
  Recheck(const std::vector<RecordedVectors>& run, std::vector<Hypothesis> hyps,
          std::vector<Trial>& trials)
      : run_(run), hyps_(std::move(hyps)), trials_(trials) {
    state_.resize(hyps_.size());
    for (auto& s : state_) s.resize(run_.size());
    for (auto& t : trials_) t.checkers.resize(run_.size());
  }

  bool any_alive() const {
    return std::any_of(trials_.begin(), trials_.end(), [](const Trial& t) { return t.alive; });
  }
  // Every alive trial on one vector of group g; false when none is left.
  bool visit(std::size_t g, const std::vector<std::int64_t>& pos, const double* x,
             const double* got) {
    const RecordedVectors& grp = run_[g];
    for (std::size_t h = 0; h < hyps_.size(); ++h) {
      if (!std::any_of(trials_.begin(), trials_.end(),
                       [h](const Trial& t) { return t.alive && t.hyp == h; }))
        continue;
      GroupHyp& gh = state_[h][g];
      if (!gh.ready) {
        gh.ready = true;
        gh.spec = grp.spec.n_axes() == 1 || h == 0 ? hyps_[h].spec(grp.spec) : std::nullopt;
        if (gh.spec) gh.oracle = std::make_unique<reference::Oracle>(*gh.spec);
      }
      std::vector<std::int64_t> p = pos;
      if (!gh.spec || !map_positions(hyps_[h], grp.backward, p)) {
        kill(h);
        continue;
      }
      if (!gh.has_rot || gh.rot_pos != p) {
        gh.oracle->at(p, gh.rot);
        gh.rot_pos = p;
        gh.has_rot = true;
      }
      gh.rot.apply(x, gh.exact);
      if (h == 0) lean(*gh.spec, grp.dtype, got, gh.exact);
      for (auto& t : trials_) {
        if (!t.alive || t.hyp != h) continue;
        auto& c = t.checkers[g];
        if (!c) c = std::make_unique<PairChecker>(t.policy, *gh.spec, grp.dtype);
        const VectorCheck v = check_vector(*c, p, x, got, gh.exact);
        ++checks_;
        bool ok = t.ignore_passthrough || v.passthrough_changed.empty();
        for (const auto& pc : v.pairs) ok = ok && pc.within();
        if (!ok) t.alive = false;
      }
    }
    return any_alive();
  }
  void reset_lean() { below_ = n_ = 0; }
  bool leans_toward_zero() const {
    return n_ >= 16 && static_cast<double>(below_) >= kTowardZeroLean * static_cast<double>(n_);
  }
  std::int64_t below() const { return below_; }
  std::int64_t counted() const { return n_; }
  std::int64_t checks() const { return checks_; }

 private:
  static bool map_positions(const Hypothesis& h, bool backward, std::vector<std::int64_t>& p) {
    if (!h.negate && h.offset == 0) return true;
    for (auto& m : p) {
      if (m > (std::int64_t{1} << 62) || m < -(std::int64_t{1} << 62)) return false;
      const std::int64_t fwd = backward ? -m : m;
      const std::int64_t k = h.negate ? -fwd : fwd + h.offset;
      m = backward ? -k : k;
    }
    return true;
  }
  void kill(std::size_t h) {
    for (auto& t : trials_)
      if (t.hyp == h) t.alive = false;
  }
  // Outputs below the exact magnitude, over elements whose exact value is not tiny.
  void lean(const RopeSpec& s, Dtype d, const double* got, const reference::ExactVector& ex) {
    const double tiny = std::ldexp(4.0, traits(d).emin);
    for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
      const auto [a, b] = s.pair(i);
      for (std::int64_t j : {a, b}) {
        const double e = std::fabs(ex.value(j));
        if (!(e > tiny) || !std::isfinite(got[j])) continue;
        ++n_;
        below_ += std::fabs(got[j]) < e ? 1 : 0;
      }
    }
  }

  const std::vector<RecordedVectors>& run_;
  std::vector<Hypothesis> hyps_;
  std::vector<Trial>& trials_;
  std::vector<std::vector<GroupHyp>> state_;  // [hypothesis][group]
  std::int64_t below_ = 0, n_ = 0, checks_ = 0;
};

// Sum over pairs of the pair bound (relative, u) at |m|: how wide a declaration is.
double width(const Policy& p, const RopeSpec& s, Dtype d, double m) {
  const PairChecker c(p, s, d);
  double w = 0;
  for (std::int64_t i = 0; i < s.n_pairs(); ++i) w += c.bound(i, m).total_u(1.0);
  return w;
}

std::string ratio_text(double r) {
  std::ostringstream o;
  o.precision(r < 10 ? 2 : 3);
  o << r;
  return o.str();
}

}  // namespace

RecordedVectors recorded_in_memory(const RopeSpec& spec, Dtype d, std::int64_t n,
                                   std::int64_t heads, const std::int64_t* pos, std::int64_t axes,
                                   const double* x, const double* got,
                                   std::vector<std::int64_t> failing, bool backward) {
  RecordedVectors r;
  r.spec = spec;
  r.dtype = d;
  r.backward = backward;
  r.vectors = n;
  const std::int64_t D = spec.head_dim;
  const auto one = [=](std::int64_t v, const VectorVisitor& f) {
    const std::int64_t t = v / heads;
    return f(std::vector<std::int64_t>(pos + t * axes, pos + (t + 1) * axes), x + v * D,
             got + v * D);
  };
  r.for_each = [=](const VectorVisitor& f) {
    for (std::int64_t v = 0; v < n; ++v)
      if (!one(v, f)) return;
  };
  r.failing = [=](const VectorVisitor& f) {
    for (std::int64_t v : failing)
      if (!one(v, f)) return;
  };
  return r;
}

std::vector<std::int64_t> failing_in_memory(const PairChecker& c, std::int64_t n,
                                            std::int64_t heads, const std::int64_t* pos,
                                            std::int64_t axes, const double* x, const double* got,
                                            std::size_t keep) {
  std::vector<std::int64_t> f;
  const reference::Oracle oracle(c.spec());
  const std::int64_t D = c.spec().head_dim;
  for (std::int64_t v = 0; v < n && f.size() < keep; ++v) {
    const std::int64_t t = v / heads;
    const std::vector<std::int64_t> p(pos + t * axes, pos + (t + 1) * axes);
    const reference::ExactVector ex = oracle.at(p).apply(x + v * D);
    if (!check_vector(c, p, x + v * D, got + v * D, ex).ok()) f.push_back(v);
  }
  return f;
}

namespace {

// The group whose spec the sentences name: the first with a failing vector.
std::size_t first_failing(const std::vector<RecordedVectors>& run) {
  std::size_t first = 0;
  for (std::size_t g = run.size(); g-- > 0;) {
    bool failed = false;
    if (run[g].failing)
      run[g].failing([&](const auto&, const double*, const double*) {
        failed = true;
        return false;
      });
    if (failed) first = g;
  }
  return first;
}

// Every candidate: the declaration itself (when it passes everywhere there is nothing to advise),
// the pass-through hypothesis, the spec hypotheses under the declared policy, the declarations.
std::vector<Trial> all_trials(const Policy& declared, const std::vector<RecordedVectors>& run,
                              std::size_t n_hyps, Dtype d0) {
  std::vector<Trial> trials;
  const auto add = [&](std::size_t hyp, Advice::Kind kind, bool ignore_passthrough) {
    Trial t;
    t.hyp = hyp;
    t.policy = declared;
    t.kind = kind;
    t.ignore_passthrough = ignore_passthrough;
    trials.push_back(std::move(t));
  };
  add(0, Advice::Kind::none, false);
  if (std::any_of(run.begin(), run.end(), [](const RecordedVectors& g) {
        return g.spec.rotary_dim < g.spec.head_dim || g.spec.layout == Layout::proportional;
      }))
    add(0, Advice::Kind::passthrough, true);
  for (std::size_t h = 1; h < n_hyps; ++h) add(h, Advice::Kind::spec_mismatch, false);
  for (auto& t : policy_trials(declared, d0)) trials.push_back(std::move(t));
  return trials;
}

// The smallest change of the declaration first (fewest fields: a narrower table alone before a
// narrower table and arithmetic), then the narrowest bound. Both candidates of a bf16-table
// kernel may pass -- an f16 table and f16 arithmetic is even the narrower bound -- but the one
// that keeps what the user declared about the arithmetic is the more specific explanation.
bool before(const Trial* a, const Trial* b) {
  return a->changes != b->changes ? a->changes < b->changes : a->width < b->width;
}

// The declarations alive after the screen, ordered by `before`; all but the first six dropped
// (the confirmation of each costs a pass over the run; a wider one only matters when all of
// these fail somewhere).
std::vector<Trial*> rank_declarations(std::vector<Trial>& trials, const Policy& declared,
                                      const RopeSpec& s0, Dtype d0, double m_ref) {
  std::vector<Trial*> decl;
  for (auto& t : trials) {
    if (!t.alive || t.kind != Advice::Kind::declaration) continue;
    t.width = width(t.policy, s0, d0, m_ref);
    Keys k;
    std::string py;
    changed_fields(declared, t.policy, k, py);
    t.changes = static_cast<int>(k.size());
    decl.push_back(&t);
  }
  std::stable_sort(decl.begin(), decl.end(), before);
  for (std::size_t i = 6; i < decl.size(); ++i) decl[i]->alive = false;
  return decl;
}

// The sentence of the trial that held: pass-through, then a spec mismatch, then the first
// declaration in `before` order (truncation only with the lean).
void choose(Advice& adv, const std::vector<Trial>& trials, const std::vector<Trial*>& decl,
            const std::vector<Hypothesis>& hyps, const Recheck& rc, const Policy& declared,
            const RopeSpec& s0, Dtype d0, double m_ref, std::int64_t vectors) {
  for (const auto& t : trials)
    if (t.alive && t.kind == Advice::Kind::none) return;  // the run passes: no hint
  const std::string all = "every one of the " + std::to_string(vectors) + " vectors";
  for (const auto& t : trials)
    if (t.alive && t.kind == Advice::Kind::passthrough) {
      adv.kind = t.kind;
      adv.text = "only pass-through dims changed (rotary_dim " + std::to_string(s0.rotary_dim) +
                 " < head_dim " + std::to_string(s0.head_dim) + ", " + all +
                 " has every pair right): they must be copied bit for bit; a kernel written for "
                 "full rotary rotates or overwrites them";
      return;
    }
  for (const auto& t : trials)
    if (t.alive && t.kind == Advice::Kind::spec_mismatch) {
      const Hypothesis& h = hyps[t.hyp];
      adv.kind = t.kind;
      adv.keys = h.keys;
      std::string why = h.why;
      why[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(why[0])));
      adv.text = "the output matches " + h.what + ": " + all +
                 " is within the declared policy's bound there. " + why +
                 (h.keys.empty()
                      ? std::string()
                      : " (spec keys " + keys_json(h.keys) + " describe what the kernel computes)");
      return;
    }
  const Trial* best = nullptr;
  for (const Trial* t : decl)
    if (t->alive && (!t->lean || rc.leans_toward_zero()) && (!best || before(t, best))) best = t;
  if (!best) return;
  adv.kind = Advice::Kind::declaration;
  std::string py;
  changed_fields(declared, best->policy, adv.keys, py);
  const double ratio = best->width / width(declared, s0, d0, m_ref);
  std::string text;
  if (best->lean)
    text = std::to_string(rc.below()) + " of " + std::to_string(rc.counted()) +
           " outputs lie below the exact magnitude and ";
  text += all + " passes when declared with " + best->meaning + ": its bound is " +
          ratio_text(ratio) + "x the declared one here. If your kernel " +
          (best->lean ? "truncates on purpose" : "computes that way") + ", declare Policy(" + py +
          ") (spec keys " + keys_json(adv.keys) + ")";
  adv.text = std::move(text);
}

}  // namespace

Advice advise(const Policy& declared, const std::vector<RecordedVectors>& run,
              const AdviseOptions& options) {
  Advice adv;
  if (run.empty()) return adv;
  const std::size_t first = first_failing(run);
  const RopeSpec& s0 = run[first].spec;
  const Dtype d0 = run[first].dtype;
  const std::vector<Hypothesis> hyps = hypotheses(s0);
  std::vector<Trial> trials = all_trials(declared, run, hyps.size(), d0);
  adv.candidates = static_cast<std::int64_t>(trials.size());

  Recheck rc(run, hyps, trials);
  // The screen: the vectors that failed first.
  double m_ref = 1;
  for (std::size_t g = 0; g < run.size(); ++g)
    if (run[g].failing)
      run[g].failing([&](const std::vector<std::int64_t>& p, const double* x, const double* y) {
        for (std::int64_t m : p) m_ref = std::max(m_ref, std::fabs(static_cast<double>(m)));
        return rc.visit(g, p, x, y);
      });
  const std::vector<Trial*> decl = rank_declarations(trials, declared, s0, d0, m_ref);
  std::int64_t alive = 0, vectors = 0;
  for (const auto& t : trials) alive += t.alive ? 1 : 0;
  for (const auto& g : run) vectors += g.vectors;
  adv.vector_checks = rc.checks();
  if (alive == 0) return adv;
  if (alive * vectors > options.max_vector_checks) {
    adv.skipped = "no hint: re-checking " + std::to_string(alive) + " candidate(s) on " +
                  std::to_string(vectors) + " vectors exceeds the budget of " +
                  std::to_string(options.max_vector_checks) + " vector checks";
    return adv;
  }
  // The confirmation: every vector of the run, each candidate dropped at its first failure.
  rc.reset_lean();
  for (std::size_t g = 0; g < run.size() && rc.any_alive(); ++g)
    run[g].for_each([&](const std::vector<std::int64_t>& p, const double* x, const double* y) {
      return rc.visit(g, p, x, y);
    });
  adv.vector_checks = rc.checks();
  choose(adv, trials, decl, hyps, rc, declared, s0, d0, m_ref, vectors);
  return adv;
}

}  // namespace ropecheck::verify
