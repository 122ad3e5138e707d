// The one tolerance table of ropecheck: a first-order error bound for one rotated pair of a kernel
// output, derived from the kernel's declared precision Policy, the spec, the storage dtype and the
// position. Every tolerance — the properties, the reports, `check`, `validate`, the kernel unit
// tests — comes from here (mostly through ropecheck::verify); there are no per-test numbers. The
// derivation is written out in bounds.cpp next to the code that evaluates it; a new angle recipe
// adds its term there (section 1) and its name in policy.hpp.
//
// Units: every relative term is in units of the storage dtype's unit roundoff u = 2^-p and is
// relative to s * ||x_pair|| (the exact output pair's norm). Depends on the core only (no GTest,
// no RapidCheck, no reference).
#pragma once

#include "ropecheck/dtype.hpp"
#include "ropecheck/kernel.hpp"  // Policy, AngleRecipe (plain data; no link dependency on kernels)
#include "ropecheck/spec.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace ropecheck::bounds {

// Explicit slack for what the first-order analysis drops (gamma_k = ku/(1-ku) vs ku,
// (1+e)^k - 1 vs ke, exp(e ln b) - 1 vs e ln b). Every dropped term is O(u^2) relative to a kept
// term with u <= 2^-11 for the precisions we bound, so a factor (1 + 2^-10) covers it with a wide
// margin. Not tuned: it is the same for every kernel, dtype and property.
inline constexpr double kSlack = 1.0 / 1024.0;

// Where |dphi| comes from: the angle recipe's own roundings.
struct AngleBound {
  double rel = 0;    // relative error of the computed angle, |dphi| <= rel * |m| * theta_i
  double theta = 0;  // theta_i in double (only used to scale rel; 1 ulp off is inside kSlack)
  double rad = 0;    // the bound on |dphi| in radians: rel * |m| * theta_i
};

struct PairBound {
  // Terms in units of u_storage, relative to s * ||x_pair||.
  double angle = 0;         // min(|dphi|, 2): rotation by a wrong angle (norm-preserving)
  double trig = 0;          // cos/sin evaluation + rounding into the table (+ into arithmetic)
  double arithmetic = 0;    // the two products and the add/sub (or FMA), input conversion
  double scale = 0;         // multiplying s in (0 when s is a power of two or 1)
  double storage = 0;       // the final rounding into the storage dtype (exactly 1)
  double second_order = 0;  // (trig + arith)(storage + trig) cross terms, see bounds.cpp
  // Absolute (value units) per-pair error from gradual underflow of the storage and arithmetic
  // formats; divided by s * ||x_pair|| when a total is asked for.
  double underflow_abs = 0;
  // Same, for the part that happens before the final storage rounding.
  double underflow_pre_abs = 0;
  double u = 0;  // unit roundoff of the storage dtype
  AngleBound angle_detail;

  // Full bound on ||got_pair - exact_pair|| / (s ||x_pair||) in units of u, for a pair whose
  // exact output norm is scaled_norm = s * ||x_pair||. +inf when scaled_norm == 0 and the
  // underflow term is not 0 (the caller then compares absolute errors, see abs()).
  double total_u(double scaled_norm) const;
  // Absolute bound on ||got_pair - exact_pair||.
  double abs(double scaled_norm) const;
  // Bound on | ||got_pair|| - s ||x_pair|| | and on the deviation of the kernel's matrix from
  // s * orthogonal: everything except the angle term (a rotation by a wrong angle is still a
  // rotation), absolute.
  double norm_abs(double scaled_norm) const;
  // Absolute bound on one component's error *before* the storage rounding (for the faithful
  // rounding check: got_j must be one of the two storage neighbours of the exact value when this
  // is below the distance to a rounding boundary).
  double pre_storage_abs(double scaled_norm) const;
  std::string describe() const;
};

// Bound on the angle error of `policy`'s recipe for pair `pair` at integer position `position`.
AngleBound angle_error_bound(const Policy& policy, const RopeSpec& spec, std::int64_t pair,
                             double position);

// The table entry. spec must be normalized. position is a real number (|m| as double is exact for
// |m| < 2^53; larger |m| only loosens nothing, since the recipe's own m-rounding term is included).
PairBound pair_error_bound(const Policy& policy, const RopeSpec& spec, Dtype d, std::int64_t pair,
                           double position);

// pair_error_bound for every pair of one (policy, spec, dtype) with the position-free work (pow,
// log, the scaled theta ladder) done once: at(pair, m) is pair_error_bound(policy, spec, d, pair,
// m) bit for bit (one code path computes both). For front ends that ask per position and pair.
class PairBounds {
 public:
  PairBounds(const Policy& policy, const RopeSpec& spec, Dtype d);
  PairBound at(std::int64_t pair, double position) const;

  // What the angle bound of one pair needs beyond |m| (bounds.cpp).
  struct AngleTerms {
    double theta = 0;             // AngleBound::theta
    bool ladder = false;          // ladder_f32 on the unscaled / linear / freq_factors ladder
    double rel = 0, rel_big = 0;  // rel for |m| <= m_big and above
    double m_big = 0;             // 2^digits(angle precision), 2^24 for the ladder
    double ladder_theta_max = 0;  // the ladder's relative bound is inf above 2^127 / this
    double turns = 0;             // trig_argument turns_f32: the argument's relative error
  };

 private:
  PairBound position_free_;  // every term but the angle's
  std::vector<AngleTerms> angle_;
};

// Two kernel applications K(K(x,a),b) against the exact s^2 R_{a+b} x, per pair, absolute:
//   ||e|| <= s * E_a + E_b(z)      (E_a: pair bound of the first call at s||x_p||,
//                                   E_b(z): pair bound of the second call at s||z_p||)
// The first call's error is rotated and scaled by s by the second (exact) map; the second call's
// error is relative to its actual input z = K(x,a). Inverse: the same with b = -a.
double composition_abs(const PairBound& first, double first_scaled_norm, const PairBound& second,
                       double second_scaled_norm, double scale);

// Score <K(q,m),K(k,n)> against the exact s^2 q^T R_{n-m} k, one pair's contribution, absolute:
//   |<q^,k^> - <q,k>| <= Eq ||k_exact|| + ||q_exact|| Ek + Eq Ek
// with ||q_exact|| = s||q_p||, Eq = the q pair bound (absolute). Summed over pairs by the caller.
double score_pair_abs(const PairBound& bq, double q_scaled_norm, const PairBound& bk,
                      double k_scaled_norm);

}  // namespace ropecheck::bounds
