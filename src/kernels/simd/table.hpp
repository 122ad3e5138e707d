// The per-token cos/sin table of one simd call: angles by the `scalar` recipe in f64
// (theta_ladder_f64: double(m) * theta'_i, or m_axis(i) * theta'_i per pair), cos/sin by the path's
// sincos rows (simd_sincos, trig.hpp), then one rounding of scale * cos (scale * sin) into the
// arithmetic type A (f32 for f32/f16/bf16, f64 for f64), s = magnitude_f64(spec).
// f32 tables of integer positions take their entries by angle addition (simd_step_sincos,
// trig.hpp; its 6.5 u64 is the policy's trig error), everything else one sincos per angle (2 u64).
// A token's entries depend on its position only (TokensAreIndependent), whatever the call's
// other tokens are.
#pragma once

#include "target.hpp"

#include "ropecheck/kernel.hpp"
#include "ropecheck/spec.hpp"

#include <cstdint>
#include <vector>

namespace ropecheck::kernels::simd {

template <class A>
class AngleTable {
 public:
  // pair_table: entries as the pair table (C[i], S[i]) rather than the interleaved C2/S2 (see
  // target.hpp).
  AngleTable(const RopeSpec& spec, const TensorArgs& a, const Target& target, bool pair_table);
  // Makes C()/S() the table of token t. Runs of equal 1-D positions keep the previous table.
  void at_token(std::int64_t t);
  const A* C() const { return C_.data(); }
  const A* S() const { return S_.data(); }

 private:
  void fill(std::int64_t t);
  void fill_per_pair(std::int64_t t);
  void fill_per_axis_stepped(std::int64_t t);
  void fill_1d_stepped(std::int64_t m);
  std::size_t step_row(std::int64_t j);
  void round_into_table(const double* cb, const double* sb);

  const RopeSpec& spec_;
  const TensorArgs& a_;
  const Target& target_;
  const bool pair_table_;
  const std::int64_t np_;
  const std::vector<double> theta_;  // theta'_i, i < np
  const double scale_;               // magnitude_f64(spec)
  // Multi-axis or real positions: every pair has its own angle m_axis(i) * theta'_i, formed here
  // (one f64 product, as in the 1-D rows) and passed to the rows with m = 1 (1 * angle is exact).
  const bool per_pair_;
  const bool stepped_;  // angle addition: A = f32 and integer positions
  std::vector<A> C_, S_;
  std::vector<double> cb_, sb_, angle_;
  // The base sincos(m0 theta) of the last 1-D position (shared by kSimdStep consecutive
  // positions), or of the current token's per-axis positions.
  std::vector<double> base_c_, base_s_;
  std::int64_t base_m_ = 0;
  bool have_base_ = false;
  // Step rows j in (-kSimdStep, kSimdStep): sincos(j theta_i) for every pair, computed when first
  // needed and shared by every token of the call, 1-D and per-axis alike.
  std::vector<double> step_c_, step_s_;
  std::vector<char> have_step_;
  // Per-axis: each pair's step (gathered from the rows) and whether its j is 0.
  std::vector<double> jc_, js_;
  std::vector<char> j_zero_;
};

extern template class AngleTable<float>;
extern template class AngleTable<double>;

}  // namespace ropecheck::kernels::simd
