// The two-tier oracle: a fast path in double-double arithmetic with a rigorous a-priori error
// bound per element, and the MPFR reference (reference.hpp) as the accurate path, taken only where
// the fast path cannot certify an answer. Every answer is a double that equals, bit for bit, what
// the MPFR-only path gives (a Ziv rounding test decides, per element, whether the fast value's
// error interval rounds to one double); the MPFR path is forced with OracleMode::mpfr.
//
// Contract (the error analysis is in oracle.cpp, next to the code it bounds):
//   valid input     integer positions |m| < 2^62, spec normalized, any finite x
//   fast path       cos, sin of m theta_i to <= 2^-100 absolute (theta_i: the MPFR ladder's value,
//                   reduced mod 2 pi in 192-bit fixed point), s * (c x_a - s x_b) to
//                   <= 2^-98.5 s (|x_a| + |x_b|); plus the MPFR path's own rounding (a few
//                   2^-precision relative, and 2^-precision |m theta_i| for its angle).
//   fallback        when a rounding test fails (an answer within the error of a rounding
//                   boundary), an input is not finite or outside [2^-900, 2^900] in magnitude, or
//                   the magnitude s is not in [2^-900, 2^900]: the vector is recomputed by
//                   reference::apply_cached (its trig shared per position) and answered from MP.
//   f64             a difference of an f64 output from its exact value is ~2^-54 |x|, below the
//                   fast path's resolution: f64 answers fall back by design (counted like all).
// Objects: an Oracle per spec (immutable after construction, shared by threads; counters are
// atomic), a Rotation per position tuple (the per-pair cos/sin every head at that position shares;
// immutable), an ExactVector per input vector (one thread; its MPFR fallback is lazy).
#pragma once

#include "ropecheck/dtype.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/spec.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace ropecheck::reference {

enum class OracleMode { fast, mpfr };

class ExactVector;
class Rotation;

class Oracle {
 public:
  // spec must be normalized. The MPFR ladder and the fixed-point constants are computed here, at
  // the current reference precision (precision_bits()).
  // error_scale multiplies every error bound of the fast path: 1 in every real use; the
  // cross-check test sets it below 1 to show that an understated bound is caught.
  explicit Oracle(const RopeSpec& spec, OracleMode mode = OracleMode::fast,
                  double error_scale = 1.0);
  ~Oracle();
  Oracle(const Oracle&) = delete;
  Oracle& operator=(const Oracle&) = delete;

  const RopeSpec& spec() const;
  OracleMode mode() const;

  // The rotation at one position tuple: positions holds 1 value (every axis there) or
  // spec.n_axes() values. Throws std::invalid_argument for another count.
  Rotation at(const std::vector<std::int64_t>& positions) const;
  // The same into `out`, reusing its storage (no allocation once it has held this spec's).
  void at(const std::vector<std::int64_t>& positions, Rotation& out) const;

  // cos and sin of m theta_p for pair `pair` (theta_p: the MPFR ladder's value, the number the
  // MPFR path multiplies by m; the angle m theta_p exact, not rounded), each a double-double
  // hi + lo within kSinCosError of the exact value (steps 1-4 of the analysis in oracle.cpp). No
  // magnitude, no error_scale, not counted. False, nothing written, in mode mpfr or for
  // |m| > 2^62. The report's recipe reference (reports/src/recipe.cpp) builds on it.
  static constexpr double kSinCosError = 0x1p-100;
  bool sincos(std::int64_t pair, std::int64_t m, double c[2], double s[2]) const;

  // Vectors answered so far; how many of them needed MPFR because the fast path could not
  // certify an answer (diff / rounded; a function of the vector alone, so the count is the same
  // whatever the threads or chunking); and how many had their MP values asked for by mp() /
  // mp_all() without such a fallback (messages: depends on how many findings are explained).
  std::int64_t vectors() const { return vectors_.load(std::memory_order_relaxed); }
  std::int64_t fallbacks() const { return fallbacks_.load(std::memory_order_relaxed); }
  std::int64_t mp_requests() const { return mp_requests_.load(std::memory_order_relaxed); }

  struct Impl;

 private:
  friend class Rotation;
  friend class ExactVector;
  std::unique_ptr<Impl> impl_;
  mutable std::atomic<std::int64_t> vectors_{0}, fallbacks_{0}, mp_requests_{0};
};

// cos/sin of every pair at one position tuple (double-double, with their error bound). Holds a
// pointer to its Oracle, which must outlive it (and every ExactVector made from it).
class Rotation {
 public:
  // The exact rotation of x (spec.head_dim values, exact dtype values as doubles). `out` is reused
  // (no allocation once it has held a vector of this size).
  void apply(const double* x, ExactVector& out) const;
  ExactVector apply(const double* x) const;
  const std::vector<std::int64_t>& positions() const { return positions_; }

 private:
  friend class Oracle;
  friend class ExactVector;
  const Oracle* oracle_ = nullptr;
  std::vector<std::int64_t> positions_;                  // one per axis
  std::vector<double> c_hi_, c_lo_, s_hi_, s_lo_, err_;  // per pair; err_: absolute bound
  bool mpfr_only_ = false;  // the fast path cannot serve this position (mode, huge positions)
};

// R_m x for one vector: each answer a double identical to the MPFR path's.
class ExactVector {
 public:
  ExactVector();
  ~ExactVector();
  ExactVector(ExactVector&&) noexcept;
  ExactVector& operator=(ExactVector&&) noexcept;

  std::int64_t size() const { return static_cast<std::int64_t>(x_.size()); }
  // RN_double(got - exact_j), as static_cast<double>(exact(got) - mp(j)) gives it. The sign of a
  // zero difference is not specified. got must be finite.
  double diff(std::int64_t j, double got) const;
  // round_to(mp(j), d): exact_j rounded once into d.
  double rounded(std::int64_t j, Dtype d) const;
  // RN_double(exact_j) (= rounded(j, Dtype::f64)).
  double value(std::int64_t j) const { return rounded(j, Dtype::f64); }
  // The MP value (computes the MPFR vector on first use: messages, decimal strings). Counted as
  // an mp_request, not as a fallback.
  const Mp& mp(std::int64_t j) const;
  const MpVector& mp_all() const;
  bool used_mpfr() const { return mp_ != nullptr; }
  // Diagnostics (tests, benchmarks): the fast value of element j, hi + lo, and its error bound;
  // valid = false when the vector has no fast value (mode mpfr, input or position out of range).
  struct FastValue {
    double hi = 0, lo = 0, err = 0;
    bool valid = false;
  };
  FastValue fast_value(std::int64_t j) const;

 private:
  friend class Rotation;
  void fall_back(bool certificate) const;
  // The oracle and positions (copied: an ExactVector may outlive the Rotation that made it).
  const Oracle* oracle_ = nullptr;
  std::vector<std::int64_t> positions_;
  std::vector<double> x_;                 // the input (for the fallback)
  std::vector<double> hi_, lo_, err_;     // fast value hi + lo, |exact - (hi + lo)| <= err
  bool fast_ = false;                     // hi_/lo_/err_ are valid
  mutable std::unique_ptr<MpVector> mp_;  // the MPFR vector, once computed
};

// The rounding test of the fast path (oracle.cpp, step 7), one definition used by ExactVector and
// exposed for the tests of its contract: for a fast value hi + lo with |v - (hi + lo)| <= err,
// the answer EVERY such v gives, or nullopt (ask MPFR) when some v could give another.
namespace detail {
// RN_double(got - v). The sign of a zero difference is not specified.
std::optional<double> certify_difference(double got, double hi, double lo, double err);
// round_to(v, d).
std::optional<double> certify_rounding(double hi, double lo, double err, Dtype d);
}  // namespace detail

}  // namespace ropecheck::reference
