// The exact analyses beside the sweep (sweep.hpp): special values (+-0, +-inf, NaN and subnormal
// inputs against the documented policy) and the dynamic-NTK composition table.
#include "sweep.hpp"

#include "ropecheck/reference/reference.hpp"
#include "ropecheck/verify/verify.hpp"
#include "sample.hpp"

#include <cmath>
#include <limits>

namespace ropecheck::reports::detail {

namespace ref = ropecheck::reference;
using ref::Mp;

// ---- special values -----------------------------------------------------------------------------
// The policy documented by the property suite (ZeroPositionIsIdentity and the special-value
// tests):
//   finite inputs at m = 0: output == input bit for bit, except that the sign of a zero is not
//   part of the contract (properties/lib/algebraic.hpp);
//   finite inputs (incl. +-0, subnormals) at m != 0: outputs finite, within the derived bound;
//   a NaN or +-inf in a pair at m = 0: each output is its own input or NaN (a NaN stays NaN);
//   at m != 0: both outputs NaN when a NaN is in the pair, both non-finite for an inf;
//   every other pair is unaffected (bit-identical to the run with that pair zeroed).
namespace {

struct SpecialInput {
  const char* what;
  double a, b;
};

std::vector<SpecialInput> special_inputs(const Policy& pol, Dtype d) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double sub = min_subnormal(d);
  // Largest values well inside the range of both the storage and the declared arithmetic format
  // (table_f32 on f64 data cannot hold f64 magnitudes beyond f32's range; that is its policy).
  const Dtype range_d = traits(pol.arithmetic).emax < traits(d).emax ? pol.arithmetic : d;
  const double big = round_to_dtype(max_finite(range_d) / 4, d);
  return {{"+0, +0", 0.0, 0.0},
          {"-0, -0", -0.0, -0.0},
          {"+0, -0", 0.0, -0.0},
          {"-0, 1", -0.0, 1.0},
          {"subnormal, subnormal", sub, -3 * sub},
          {"subnormal, 1", sub, 1.0},
          {"max/4, max/4", big, big},
          {"+inf, 1", inf, 1.0},
          {"1, -inf", 1.0, -inf},
          {"NaN, 1", nan, 1.0},
          {"1, NaN", 1.0, nan}};
}

// Does the output pair g follow the policy for input pair x at position m? Sets `expect` to the
// policy's wording.
bool follows_policy(const verify::PairChecker& pc, const std::vector<double>& x, const double* g,
                    std::int64_t m, std::string& expect) {
  const Dtype d = pc.dtype();
  const Policy& pol = pc.policy();
  const bool finite_in = std::isfinite(x[0]) && std::isfinite(x[1]);
  const bool has_nan = std::isnan(x[0]) || std::isnan(x[1]);
  // A kernel whose declared arithmetic is narrower than the storage (table_f32 on f64)
  // computes x*1 - y*0 = round_A(x) at m = 0 (the property suite's rule).
  const bool narrow = traits(pol.arithmetic).digits < traits(d).digits;
  auto same = [&](double got, double in) {
    const double want = narrow ? round_to_dtype(in, pol.arithmetic) : in;
    return want == 0 ? got == 0 : (narrow ? got == want : bits_of(got, d) == bits_of(in, d));
  };
  bool ok = true;
  if (finite_in && m == 0) {
    // Zeros stay zero but their sign is not part of the contract (x*1 - (-0)*0 = +0 in IEEE).
    expect = narrow ? "input rounded to the arithmetic format (zeros: any sign)"
                    : "input bit for bit (zeros: any sign)";
    for (int j = 0; j < 2; ++j) ok = ok && same(g[j], x[j]);
  } else if (finite_in) {
    expect = "finite, within the derived bound";
    const auto y = ref::apply_blocked(pc.spec(), Mp(static_cast<long long>(m)), x);
    const auto p = pc.check(0, static_cast<double>(m), x[0], x[1], g[0], g[1], y[0], y[1]);
    ok = p.finite && p.within();
  } else if (m == 0) {
    // R_0 x = x mathematically; IEEE gives x - inf*0 = NaN. Either, never another value.
    expect = "each output its own input or NaN";
    for (int j = 0; j < 2; ++j) ok = ok && (std::isnan(g[j]) || same(g[j], x[j]));
    if (std::isnan(x[0])) ok = ok && std::isnan(g[0]);
    if (std::isnan(x[1])) ok = ok && std::isnan(g[1]);
  } else {
    // Both outputs mix both inputs with cos, sin != 0: a NaN makes both NaN, an inf makes
    // both non-finite; never a finite number.
    expect = has_nan ? "both outputs NaN" : "both outputs non-finite";
    for (int j = 0; j < 2; ++j) ok = ok && (has_nan ? std::isnan(g[j]) : !std::isfinite(g[j]));
  }
  return ok;
}

}  // namespace

SpecialValues special_values(const Setup& S, std::size_t k, int di) {
  const Dtype d = S.o.dtypes[di];
  const Kernel& K = *S.kernels[k];
  RopeSpec spec;
  spec.head_dim = 8;
  spec.base = 10000;
  spec.layout = Layout::interleaved;
  spec = spec.normalized();
  SpecialValues out;
  const auto inputs = special_inputs(K.policy(d), d);
  if (!K.supports(spec, d)) return out;
  const verify::PairChecker pc(K.policy(d), spec, d);
  for (std::int64_t m : {std::int64_t{0}, std::int64_t{1000}}) {
    for (const auto& c : inputs) {
      // Pair 0 holds the case; pairs 1..3 hold ordinary values to check isolation.
      std::vector<double> x{c.a, c.b, 0.5, -1.25, 2.0, 0.75, -0.375, 1.5};
      for (auto& v : x) v = std::isfinite(v) ? round_to_dtype(v, d) : v;
      std::vector<double> x0 = x;
      x0[0] = x0[1] = 0;
      Outputs o1, o0;
      if (!run_kernel(K, spec, d, {m}, 1, {x}, o1) || !run_kernel(K, spec, d, {m}, 1, {x0}, o0))
        continue;
      const double* g = o1[0];
      SpecialCase sc{c.what, m, x[0], x[1], g[0], g[1], {}, true, false};
      bool ok = follows_policy(pc, x, g, m, sc.policy);
      for (int j = 2; j < 8; ++j)
        sc.other_pairs_unaffected =
            sc.other_pairs_unaffected && bits_of(g[j], d) == bits_of(o0[0][j], d);
      if (!sc.other_pairs_unaffected) sc.policy += "; other pairs unaffected";
      sc.follows_policy = ok && sc.other_pairs_unaffected;
      if (!sc.follows_policy) ++out.violations;
      out.cases.push_back(std::move(sc));
    }
  }
  return out;
}

// ---- dynamic NTK composition --------------------------------------------------------------------
// Dynamic NTK is length-dependent: R_a R_b = R_{a+b} holds for rotations from one table (one
// sequence length), not across tables built for different lengths. A KV cache rotated while the
// sequence was L0 tokens long and a query rotated after it grew to L use different bases once
// L > L0: the relative angle of a pair at offset c then carries a * (theta_i(L) - theta_i(L0))
// for the cached token's position a. Exact (MP) ladders, no kernel involved.
DynamicComposition dynamic_composition() {
  const RopeSpec base = [] {
    for (const auto& vc : variant_cases())
      if (vc.spec.scaling.kind == ScalingKind::dynamic) return vc.spec;
    return RopeSpec{};
  }();
  const std::int64_t L0 = base.scaling.max_position_embeddings;
  DynamicComposition dc{base, L0, {}};
  dc.spec.scaling.seq_len = L0;
  const auto th0 = ref::inv_freqs(dc.spec);
  for (std::int64_t L : {L0 / 2, L0 - 1, L0, L0 + 1, L0 + L0 / 8, 2 * L0, 8 * L0}) {
    RopeSpec s = base;
    s.scaling.seq_len = L;
    const auto th = ref::inv_freqs(s);
    ref::Mp worst(0);
    for (std::size_t i = 0; i < th.size(); ++i) {
      const ref::Mp dlt = abs((th[i] - th0[i]) * ref::Mp(static_cast<long long>(L0 - 1)));
      if (dlt > worst) worst = dlt;
    }
    dc.rows.push_back({L, dynamic_base_f64(s), static_cast<double>(worst), worst == 0});
  }
  return dc;
}

}  // namespace ropecheck::reports::detail
