// The oracle: exact angles in multiprecision (MPFR through Boost.Multiprecision, et_off), the
// dense block-diagonal rotation R_m written down as the math defines it, and one correct rounding
// into each dtype. Depends on ropecheck::core only (spec.hpp, dtype.hpp).
//
// Map (all in reference.cpp):
//   precision        default_bits / set_precision_bits / precision_bits (process-wide, Boost's)
//   exact numerics   exact, parse_decimal, to_decimal
//   theta ladder     inv_freq(s), magnitude, angle: the scaling variants in compute_ladder and
//                    attention_factor (a new ScalingKind adds its case there)
//   rotation         rotation, apply_dense (the definition), apply_blocked / apply_cached (fast,
//                    same block entries); pairs and axes come from RopeSpec::pair / pair_axis, so
//                    a new layout touches spec.cpp, not this module
//   rounding         round_to, ulp: from the dtype's traits, so a new dtype touches dtype.hpp
// Comparing a kernel's output with these values is ropecheck::verify's job.
#pragma once

#include "ropecheck/dtype.hpp"
#include "ropecheck/spec.hpp"

#include <boost/multiprecision/eigen.hpp>
#include <boost/multiprecision/mpfr.hpp>

#include <Eigen/Core>

#include <cstdint>
#include <string>
#include <vector>

namespace ropecheck::reference {

using Mp = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<0>,
                                         boost::multiprecision::et_off>;
using MpVector = Eigen::Matrix<Mp, Eigen::Dynamic, 1>;
using MpMatrix = Eigen::Matrix<Mp, Eigen::Dynamic, Eigen::Dynamic>;

// ---- precision -------------------------------------------------------------------------------
// Boost 1.74 keeps one process-wide default precision for variable-precision MPFR numbers, so the
// reference precision is process-wide too: set it once (CLI flag / test main) before computing.
// Default: max(2p + 30, 160) bits, p = the dtype's digits (160 for every dtype we have).
unsigned default_bits(Dtype d);
void set_precision_bits(unsigned bits);  // actual precision is >= bits (Boost counts digits10)
unsigned precision_bits();               // the actual MPFR precision of new numbers

// ---- exact numerics --------------------------------------------------------------------------
Mp exact(double v);  // the double's exact value
// Parses a decimal (e.g. "12", "-3.25", "1e6") at the current precision; throws on garbage.
Mp parse_decimal(const std::string& s);
std::string to_decimal(const Mp& v, int significant_digits);

// theta'_i: the ladder base^(-2j/dim) of the spec's layout with the spec's frequency scaling
// variant applied, computed in MP (never via double; parameters given as doubles are taken
// exactly). For ScalingKind::none, theta_i = base^(-2i/rotary_dim).
Mp inv_freq(const RopeSpec& spec, std::int64_t pair);
// All pairs at once (cached per spec and precision).
std::vector<Mp> inv_freqs(const RopeSpec& spec);
// The magnitude s = scale * attention factor of the variant (YaRN, LongRoPE), in MP.
Mp magnitude(const RopeSpec& spec);
// m * theta_i in MP; m may be fractional.
Mp angle(const RopeSpec& spec, std::int64_t pair, const Mp& position);

// Multi-axis positions: one MP position per axis (spec.n_axes() of them); pair i turns by
// positions[spec.pair_axis(i)] * theta'_i. The single-position overloads below use the same
// position on every axis (t = h = w), which is what a 1-D call of a multi-axis spec means.
using Positions = std::vector<Mp>;

// Dense head_dim x head_dim R_m: s * 2x2 rotation blocks at the layout's pair indices, identity
// on pass-through dims. spec must be normalized.
MpMatrix rotation(const RopeSpec& spec, const Mp& position);
MpMatrix rotation(const RopeSpec& spec, const Positions& positions);
// R_m x by dense matrix-vector product; x holds dtype values exactly (as doubles).
MpVector apply_dense(const RopeSpec& spec, const Mp& position, const std::vector<double>& x);
MpVector apply_dense(const RopeSpec& spec, const Positions& positions,
                     const std::vector<double>& x);
// The backward by its definition: grad_x = R_m^T g (s R^T: the same magnitude), dense. The
// properties and `check` evaluate it as the rotation at -m (R_m^T = R_{-m}: each block's angle is
// m theta'_i, odd in m); reference_self_checks shows the two equal for every layout and variant.
MpVector apply_dense_transpose(const RopeSpec& spec, const Positions& positions,
                               const std::vector<double>& g);
// The same result using the block structure (O(head_dim)); cross-checked against apply_dense.
// The block entries s*cos, s*sin are rotation()'s, bit for bit; each output is then one rounding
// of s cos x_a - s sin x_b (resp. s sin x_a + s cos x_b) instead of the dense sum's several.
MpVector apply_blocked(const RopeSpec& spec, const Mp& position, const std::vector<double>& x);
MpVector apply_blocked(const RopeSpec& spec, const Positions& positions,
                       const std::vector<double>& x);
// apply_blocked with the block entries cached per (spec, position, precision) in a small
// per-thread most-recently-used list (kTrigCacheEntries positions): the fast oracle for sweeps
// that evaluate many vectors at the same positions. Same values as apply_blocked, bit for bit.
inline constexpr std::size_t kTrigCacheEntries = 64;
MpVector apply_cached(const RopeSpec& spec, const Mp& position, const std::vector<double>& x);
MpVector apply_cached(const RopeSpec& spec, const Positions& positions,
                      const std::vector<double>& x);

// ---- one correct rounding ---------------------------------------------------------------------
// Round-to-nearest-even of an exact value into dtype d, with d's subnormals and overflow to +-inf,
// returned as the double holding the dtype value exactly. Rounds once, from the MP value.
double round_to(const Mp& v, Dtype d);
std::vector<double> round_to(const MpVector& v, Dtype d);
// ulp of a value y of dtype d: 2^(max(e(y), emin) - p + 1); for |y| = inf, the ulp at emax.
double ulp(double y, Dtype d);

}  // namespace ropecheck::reference
