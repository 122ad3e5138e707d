// Error statistics of one kernel x dtype x bucket. Accumulators are filled per work unit and then
// merged in a fixed order, so the report is the same whatever thread ran which unit.
#pragma once

#include "ropecheck/reports/exact_sum.hpp"

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace ropecheck::reports {

// ULP histogram bins: [0] exactly 0, [1] (0, 1/2], [2] (1/2, 1], then (2^(k-3), 2^(k-2)] for
// k = 3..22 (up to 2^20), and a last bin for > 2^20 and non-finite.
inline constexpr int kUlpBins = 24;
int ulp_bin(double ulp_error);
std::string ulp_bin_label(int bin);

// Nearest-rank percentile (p in (0, 1]) of a sorted sample; NaN when empty.
double percentile_sorted(const std::vector<double>& sorted, double p);

// Percentiles of many non-negative values in bounded memory: a log histogram with 256 sub-bins
// per binade (keys ordered like the values). percentile() returns the upper edge of the bin that
// holds the nearest-rank percentile: at most 2^-8 relative (0.4%) above the exact value, never
// below it; exact for 0; +inf when the rank falls on a non-finite value.
class QuantileSketch {
 public:
  void add(double v);
  void merge(const QuantileSketch& o);
  double percentile(double p) const;
  std::int64_t count() const { return n_; }
  // Sparse bins (key -> count) for report JSON, so shard reports merge exactly.
  std::map<std::int32_t, std::int64_t> bins() const;
  void add_bin(std::int32_t key, std::int64_t count);

 private:
  // add() runs once per element of every sweep (a node allocation per new key made it a tenth of
  // the report's time): the keys add() produces live in per-binade blocks of counters, allocated
  // when first touched (a sketch sees a few dozen binades, not all 129); the keys only add_bin()
  // can produce (non-finite, and anything a hand-edited report holds) in a map.
  static constexpr std::int32_t kBlock = 256;  // = the sub-bins per binade
  static constexpr std::int32_t kDenseKeys = 1 + 129 * kBlock;
  template <class F>
  void for_each_bin(F f) const;  // (key, count) in key order, zero counts skipped
  std::int64_t& dense(std::int32_t key);
  std::vector<std::vector<std::int64_t>> blocks_;
  std::map<std::int32_t, std::int64_t> other_;
  std::int64_t n_ = 0;
};

// Where a maximum was attained: enough to reproduce it with `ropecheck eval`.
struct WorstCase {
  double value = -1;  // the statistic (ULP or per-pair error in u); -1 = none yet
  std::int64_t spec_index = -1;
  std::int64_t position = 0;
  std::int64_t element = -1;  // element index (ULP) or first element of the pair (pair error)
  std::int64_t pair_a = -1, pair_b = -1;
  double in_a = 0, in_b = 0;
  std::string expected;         // exact value, decimal (ULP) or "" for pair cases
  double expected_rounded = 0;  // correctly rounded exact value (ULP)
  double got = 0;               // kernel output at `element`
  double got_b = 0;             // second pair output (pair cases)
  // Strictly greater replaces: with a fixed merge order the first worst case wins,
  // deterministically.
  bool offer(double v) const {
    return v > value || (value < 0 && v >= 0) || (v != v && value == value);
  }
};

struct ErrorStats {
  std::int64_t n_vectors = 0, n_elements = 0, n_pairs = 0;
  QuantileSketch ulps;  // every element's ULP error, for percentiles
  // Sums are exact (ExactSum) so that merging in any order, across threads or shard reports,
  // gives the same bits.
  ExactSum sum_ulp, sum_ulp2;
  WorstCase worst_ulp;
  double max_abs = 0;
  ExactSum sum_err2, sum_exact2;  // NMSE numerator / denominator
  WorstCase worst_pair;
  ExactSum sum_pair2;
  std::int64_t not_correctly_rounded = 0, gt_1ulp = 0, gt_bound = 0;
  std::int64_t bound_pairs = 0;  // pairs that had a finite bound to compare against
  double max_utilization = -1;   // max over pairs of pair error / derived bound
  double bound_min_u = std::numeric_limits<double>::infinity(), bound_max_u = -1;
  // Angle-table error vs rotation error (see sweep.cpp): per pair, E_angle = recipe-faithful
  // exact rotation vs the exact spec, E_rot = kernel vs recipe-faithful exact rotation.
  double max_angle_u = 0, max_rot_u = 0;
  ExactSum sum_angle2, sum_rot2;
  // True when some pair's split came from the derived bound instead (sweep.cpp add_pairs: the
  // report does not reproduce that kernel's angle recipe for the spec).
  bool split_by_bound = false;
  std::array<std::int64_t, kUlpBins> hist{};

  void add_element(double ulp_error);
  // Appends o after *this. A worst case tied with ours replaces it only when its spec index is
  // lower, so folding shards in any order gives the worst case of the in-order fold.
  void merge(const ErrorStats& o);
};

// Per-octave series for the error-vs-position plots: octave 0 is position 0, octave k >= 1 holds
// positions [2^(k-1), 2^k).
int octave_of(std::int64_t position);
struct OctaveStats {
  std::int64_t n_pairs = 0;
  double max_pair_u = 0;
  ExactSum sum_pair2;
  void merge(const OctaveStats& o) {
    n_pairs += o.n_pairs;
    sum_pair2 += o.sum_pair2;
    if (o.max_pair_u > max_pair_u || o.max_pair_u != o.max_pair_u) max_pair_u = o.max_pair_u;
  }
};

// The FP8 cache bytes of one kernel x dtype x bucket x format (Options::fp8): every output element
// pushed through the FP8 chain (verify/fp8_chain.hpp: the output in its dtype, times the scale in
// f32, rounded once to nearest-even into the format) against
//   the ideal: the exact value times the exact scale, rounded once into the format; and
//   the accepted range: the chain's images of exact -+ P, P the kernel's derived pre-storage bound
//   (the fused check's rule: a byte outside it means the kernel broke its bound).
// Counts and maxima only, so shard reports merge exactly.
struct Fp8Stats {
  std::int64_t elements = 0;
  std::int64_t differ = 0;        // the kernel's byte is not the ideal one (value, NaN = NaN)
  std::int64_t max_ulps = 0;      // the largest distance from the ideal, in fp8 ulps (finite)
  std::int64_t undetermined = 0;  // the accepted range holds more than one byte
  std::int64_t outside = 0;       // the kernel's byte outside the accepted range
  std::int64_t overflowed = 0;    // the ideal is past the format's largest finite value
  void merge(const Fp8Stats& o) {
    elements += o.elements;
    differ += o.differ;
    max_ulps = max_ulps > o.max_ulps ? max_ulps : o.max_ulps;
    undetermined += o.undetermined;
    outside += o.outside;
    overflowed += o.overflowed;
  }
};

}  // namespace ropecheck::reports
