#include "table.hpp"

#include "../common.hpp"
#include "trig.hpp"

#include <cmath>
#include <type_traits>

namespace ropecheck::kernels::simd {

template <class A>
AngleTable<A>::AngleTable(const RopeSpec& spec, const TensorArgs& a, const Target& target,
                          bool pair_table)
    : spec_(spec),
      a_(a),
      target_(target),
      pair_table_(pair_table),
      np_(spec.n_pairs()),
      theta_(theta_ladder_f64(spec)),
      scale_(magnitude_f64(spec)),
      per_pair_((a.n_axes != 1 && spec.n_axes() != 1) || a.real_positions),
      stepped_(std::is_same_v<A, float> && !a.real_positions),
      C_(spec.rotary_dim),
      S_(spec.rotary_dim),
      cb_(np_),
      sb_(np_),
      angle_(per_pair_ ? np_ : 0),
      base_c_(stepped_ ? np_ : 0),
      base_s_(stepped_ ? np_ : 0) {
  if (stepped_) {
    step_c_.resize((2 * kSimdStep - 1) * np_);
    step_s_.resize((2 * kSimdStep - 1) * np_);
    have_step_.assign(2 * kSimdStep - 1, 0);
  }
  if (stepped_ && per_pair_) {
    jc_.resize(np_);
    js_.resize(np_);
    j_zero_.resize(np_);
  }
}

template <class A>
void AngleTable<A>::at_token(std::int64_t t) {
  const std::int64_t* p = a_.positions;
  if (per_pair_ || t == 0 || p[t * a_.n_axes] != p[(t - 1) * a_.n_axes]) fill(t);
}

template <class A>
void AngleTable<A>::fill(std::int64_t t) {
  if (stepped_ && per_pair_) return fill_per_axis_stepped(t);
  if (per_pair_) return fill_per_pair(t);
  const std::int64_t m = a_.positions[t * a_.n_axes];
  if (stepped_ && std::fabs(static_cast<double>(m)) < kSimdStepLimit) return fill_1d_stepped(m);
  target_.sincos_rows(theta_.data(), np_, static_cast<double>(m), cb_.data(), sb_.data());
  round_into_table(cb_.data(), sb_.data());
}

// Real positions, or multi-axis integer positions into an f64 table: one sincos per angle.
template <class A>
void AngleTable<A>::fill_per_pair(std::int64_t t) {
  for (std::int64_t i = 0; i < np_; ++i)
    angle_[i] = position_of(spec_, a_, t, spec_.pair_axis(i)) * theta_[i];
  target_.sincos_rows(angle_.data(), np_, 1.0, cb_.data(), sb_.data());
  round_into_table(cb_.data(), sb_.data());
}

// The 1-D form of simd_step_sincos: the base row is reused while m0 stays the same.
template <class A>
void AngleTable<A>::fill_1d_stepped(std::int64_t m) {
  const std::int64_t j = m % kSimdStep, m0 = m - j;
  if (!have_base_ || base_m_ != m0) {
    target_.sincos_rows(theta_.data(), np_, static_cast<double>(m0), base_c_.data(),
                        base_s_.data());
    base_m_ = m0;
    have_base_ = true;
  }
  if (j == 0) return round_into_table(base_c_.data(), base_s_.data());
  const std::size_t r = step_row(j);
  target_.compose(np_, base_c_.data(), base_s_.data(), step_c_.data() + r, step_s_.data() + r,
                  cb_.data(), sb_.data());
  round_into_table(cb_.data(), sb_.data());
}

// simd_step_sincos pair by pair, each pair with its axis' position: the bases m0 theta_i per token
// (one sincos per token, as before the angle addition), the steps from the shared rows;
// bit-identical to the 1-D form when the axes agree.
template <class A>
void AngleTable<A>::fill_per_axis_stepped(std::int64_t t) {
  for (std::int64_t i = 0; i < np_; ++i) {
    const std::int64_t m = a_.positions[t * a_.n_axes + spec_.pair_axis(i)];
    const bool direct = !(std::fabs(static_cast<double>(m)) < kSimdStepLimit);
    const std::int64_t j = direct ? 0 : m % kSimdStep;
    angle_[i] = static_cast<double>(m - j) * theta_[i];
    j_zero_[i] = j == 0;
    const std::size_t r = j == 0 ? 0 : step_row(j);
    jc_[i] = j == 0 ? 1.0 : step_c_[r + i];  // j = 0: replaced by the base below
    js_[i] = j == 0 ? 0.0 : step_s_[r + i];
  }
  target_.sincos_rows(angle_.data(), np_, 1.0, base_c_.data(), base_s_.data());
  target_.compose(np_, base_c_.data(), base_s_.data(), jc_.data(), js_.data(), cb_.data(),
                  sb_.data());
  // j = 0 is the base itself, as in the 1-D form (also keeps the sign of a zero sine).
  for (std::int64_t i = 0; i < np_; ++i)
    if (j_zero_[i]) {
      cb_[i] = base_c_[i];
      sb_[i] = base_s_[i];
    }
  round_into_table(cb_.data(), sb_.data());
}

// The offset of step row j (computed on first use).
template <class A>
std::size_t AngleTable<A>::step_row(std::int64_t j) {
  const std::size_t row = static_cast<std::size_t>(j + kSimdStep - 1);
  if (!have_step_[row]) {
    target_.sincos_rows(theta_.data(), np_, static_cast<double>(j), step_c_.data() + row * np_,
                        step_s_.data() + row * np_);
    have_step_[row] = 1;
  }
  return row * static_cast<std::size_t>(np_);
}

template <class A>
void AngleTable<A>::round_into_table(const double* cb, const double* sb) {
  target_.fill<A>()(np_, scale_, pair_table_, cb, sb, C_.data(), S_.data());
}

template class AngleTable<float>;
template class AngleTable<double>;

}  // namespace ropecheck::kernels::simd
