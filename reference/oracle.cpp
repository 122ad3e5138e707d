// The two-tier oracle (see oracle.hpp for the contract).
#include "ropecheck/reference/oracle.hpp"

#include <stdexcept>
#include <string>

namespace ropecheck::reference {

struct Oracle::Impl {
  RopeSpec spec;
  OracleMode mode;
};

Oracle::Oracle(const RopeSpec& spec, OracleMode mode) : impl_(new Impl{spec, mode}) {}
Oracle::~Oracle() = default;
const RopeSpec& Oracle::spec() const { return impl_->spec; }
OracleMode Oracle::mode() const { return impl_->mode; }

Rotation Oracle::at(const std::vector<std::int64_t>& positions) const {
  const RopeSpec& spec = impl_->spec;
  if (positions.size() != 1 && static_cast<std::int64_t>(positions.size()) != spec.n_axes())
    throw std::invalid_argument("oracle: " + std::to_string(positions.size()) +
                                " positions given, the spec has " + std::to_string(spec.n_axes()) +
                                " axes");
  Rotation r;
  r.oracle_ = this;
  r.positions_ = positions;
  r.mpfr_only_ = true;
  return r;
}

void Rotation::apply(const double* x, ExactVector& out) const {
  const auto n = static_cast<std::size_t>(oracle_->spec().head_dim);
  out.rot_ = this;
  out.x_.assign(x, x + n);
  out.mp_.reset();
  out.fast_ = false;
  oracle_->vectors_.fetch_add(1, std::memory_order_relaxed);
  out.fall_back();
}

ExactVector Rotation::apply(const double* x) const {
  ExactVector v;
  apply(x, v);
  return v;
}

ExactVector::ExactVector() = default;
ExactVector::~ExactVector() = default;
ExactVector::ExactVector(ExactVector&&) noexcept = default;
ExactVector& ExactVector::operator=(ExactVector&&) noexcept = default;

void ExactVector::fall_back() const {
  if (mp_) return;
  const RopeSpec& spec = rot_->oracle_->spec();
  Positions p;
  const auto& pos = rot_->positions_;
  for (std::int64_t a = 0; a < spec.n_axes(); ++a)
    p.push_back(Mp(static_cast<long long>(pos.size() == 1 ? pos[0] : pos[a])));
  mp_ = std::make_unique<MpVector>(apply_cached(spec, p, x_));
  rot_->oracle_->fallbacks_.fetch_add(1, std::memory_order_relaxed);
}

double ExactVector::diff(std::int64_t j, double got) const {
  fall_back();
  return static_cast<double>(exact(got) - (*mp_)(j));
}

double ExactVector::rounded(std::int64_t j, Dtype d) const {
  fall_back();
  return round_to((*mp_)(j), d);
}

const Mp& ExactVector::mp(std::int64_t j) const {
  fall_back();
  return (*mp_)(j);
}

const MpVector& ExactVector::mp_all() const {
  fall_back();
  return *mp_;
}

}  // namespace ropecheck::reference
