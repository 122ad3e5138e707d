// The layout and shift family: claims relating calls that differ in layout or position shift.
//   LayoutsArePermutations    K_half(P x) = P K_interleaved(x), bit for bit for kernels declaring
//                             layouts_bitwise_symmetric, else within twice the pair bound
//   ScoresDependOnlyOnOffset  <K(q,m),K(k,n)> and the same shifted by D both within the score
//                             bound of the exact s^2 q^T R_{n-m} k
// Rows of the table: table.hpp. Shared helpers: common.hpp.
#pragma once

#include "common.hpp"

namespace ropecheck::properties::detail {

// ---------------------------------------------------------------------------------------------
// LayoutsArePermutations: K_half(P x) == P K_interleaved(x), bit for bit (the same operations
// per pair, only the indexing differs). P gathers even then odd rotated indices.
template <Dtype D>
void layouts_are_permutations(const Kernel& k, g::Context& c) {
  g::SpecOptions o;
  o.force_layout = static_cast<int>(Layout::interleaved);
  RopeSpec si = g::spec(c, o), sh = si;
  sh.layout = Layout::half;
  if (!k.supports(si, D) || !k.supports(sh, D)) {
    const auto& both = c.domain.both_layouts;
    if (both.empty()) discard("no spec supported in both layouts");
    si = both[g::pick<std::size_t>(0, both.size() - 1)];
    sh = si;
    sh.layout = Layout::half;
  }
  std::int64_t nt = 0, nh = 0;  // not a structured binding: lambdas capture them (clang 14)
  std::tie(nt, nh) = g::counts(3, 2, si.head_dim);
  const std::int64_t d = si.head_dim, h = si.rotary_dim / 2;
  const auto pos = g::positions(c, nt, std::int64_t{1} << 31);
  const auto x = finite_input<D>(k.policy(D), si, nt * nh);
  auto P = [&](const std::vector<double>& v) {
    std::vector<double> r(v);
    for (std::int64_t vec = 0; vec < nt * nh; ++vec)
      for (std::int64_t j = 0; j < si.rotary_dim; ++j)
        r[vec * d + j] = v[vec * d + (j < h ? 2 * j : 2 * (j - h) + 1)];
    return r;
  };
  const auto yi = run<D>(k, c, si, nt, nh, pos, store_vec<D>(x));
  const auto yh = run<D>(k, c, sh, nt, nh, pos, store_vec<D>(P(x)));
  const auto Pyi = store_vec<D>(P(load_vec<D>(yi.data(), nt * nh * d)));
  if (k.domain().layouts_bitwise_symmetric) {
    for (std::size_t j = 0; j < yh.size(); ++j)
      if (!same_bits(yh[j], Pyi[j]))
        fail("K_half(Px)[" + std::to_string(j) + "] = " + hex(to_d<D>(yh[j])) +
             " != (P K_interleaved(x)) = " + hex(to_d<D>(Pyi[j])) +
             " bit for bit (declared bitwise symmetric) | " + ctx(si, pos));
    return;
  }
  // Without the declaration: within twice the pair bound (two compiled code paths may contract
  // to FMA differently).
  const auto Px = P(x);
  for (std::int64_t v = 0; v < nt * nh; ++v) {
    const std::int64_t off = v * d;
    const auto why = differ_beyond_twice_the_bound<D>(k.policy(D), sh, pos[v / nh], &Px[off],
                                                      &yh[off], &Pyi[off]);
    if (!why.empty())
      fail("vector " + std::to_string(v) + ": K_half(Px) and P K_interleaved(x): " + why + " | " +
           ctx(si, pos));
  }
}

// ---------------------------------------------------------------------------------------------
// ScoresDependOnlyOnOffset: <K(q,m),K(k,n)> and <K(q,m+D),K(k,n+D)> (exact MP dot products of
// the kernel outputs) each within the score bound of the exact s^2 q^T R_{n-m} k.
template <Dtype D>
void scores_depend_only_on_offset(const Kernel& k, g::Context& c) {
  const Policy pol = k.policy(D);
  const RopeSpec s = usable<D>(k, c);
  const std::int64_t L = std::int64_t{1} << 31;
  const std::int64_t m = g::position(c, L), n = g::position(c, L);
  // Both shifted positions stay in the declared range.
  const std::int64_t delta = g::shift_within(
      c, std::min(m, n), g::shift_within(c, std::max(m, n), g::position(c, L), L), L);
  const auto qk = finite_input<D>(k.policy(D), s, 2);
  const std::int64_t d = s.head_dim;
  const std::vector<double> q(qk.begin(), qk.begin() + d), kv(qk.begin() + d, qk.end());
  // Exact: rotated part s * <q_p, (s R_{n-m} k)_p>, pass-through part <q_j, k_j>.
  const auto r = reference::apply_blocked(s, Mp(n - m), kv);
  const Mp sm = mag(s);
  Mp exact_rot = 0, exact_pass = 0;
  for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
    const auto [a, b] = s.pair(i);
    exact_rot += sm * (ex(q[a]) * r[a] + ex(q[b]) * r[b]);
  }
  for (std::int64_t j : pass_dims(s)) exact_pass += ex(q[j]) * ex(kv[j]);
  for (std::int64_t shift : {std::int64_t{0}, delta}) {
    const std::vector<std::int64_t> pos = {m + shift, n + shift};
    const auto y = load_vec<D>(run<D>(k, c, s, 2, 1, pos, store_vec<D>(qk)).data(), 2 * d);
    Mp got_rot = 0, got_pass = 0;
    Mp bound = 0;
    for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
      const auto [a, b] = s.pair(i);
      got_rot += ex(y[a]) * ex(y[d + a]) + ex(y[b]) * ex(y[d + b]);
      bound += score_pair_bound<D>(pol, s, sm, i, pos[0], pos[1], q, kv);
    }
    // Pass-through dims carry no error budget; summed in the same order as exact_pass, so a
    // kernel that copies them exactly contributes exactly 0 here.
    for (std::int64_t j : pass_dims(s)) got_pass += ex(y[j]) * ex(y[d + j]);
    const Mp err = abs((got_rot - exact_rot) + (got_pass - exact_pass));
    if (!(err <= bound))
      fail("score at (m,n)=(" + std::to_string(pos[0]) + "," + std::to_string(pos[1]) +
           ") off the exact q^T R_{n-m} k by " + exceeds(err, bound) + " | " + describe(s));
  }
}

}  // namespace ropecheck::properties::detail
