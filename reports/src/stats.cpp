#include "ropecheck/reports/stats.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace ropecheck::reports {

int ulp_bin(double e) {
  if (!(e <= std::ldexp(1.0, 20))) return kUlpBins - 1;  // > 2^20 or NaN
  if (e == 0) return 0;
  if (e <= 0.5) return 1;
  if (e <= 1.0) return 2;
  // (2^(k-3), 2^(k-2)]: k - 2 = ceil(log2 e), computed exactly with frexp.
  int ex = 0;
  const double m = std::frexp(e, &ex);     // e = m 2^ex, m in [1/2, 1)
  const int c = (m == 0.5) ? ex - 1 : ex;  // ceil(log2 e)
  return c + 2;
}

std::string ulp_bin_label(int b) {
  if (b == 0) return "0";
  if (b == 1) return "(0, 0.5]";
  if (b == 2) return "(0.5, 1]";
  if (b == kUlpBins - 1) return "> 2^20 or non-finite";
  const int hi = b - 2;
  return "(2^" + std::to_string(hi - 1) + ", 2^" + std::to_string(hi) + "]";
}

double percentile_sorted(const std::vector<double>& v, double p) {
  if (v.empty()) return std::nan("");
  auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
  if (rank < 1) rank = 1;
  if (rank > v.size()) rank = v.size();
  return v[rank - 1];
}

namespace {
constexpr std::int32_t kSub = 256;
constexpr int kMinExp = -64, kMaxExp = 64;
constexpr std::int32_t kNonFinite = std::int32_t{1} << 30;
}  // namespace

void QuantileSketch::add(double v) {
  ++n_;
  std::int32_t key;
  if (!std::isfinite(v)) {
    key = kNonFinite;
  } else if (v <= 0) {
    key = 0;
  } else {
    int ex = 0;
    const double m = std::frexp(v, &ex);  // v = m 2^ex, m in [1/2, 1)
    if (ex < kMinExp) {
      key = 1;  // below 2^-65: lumped into the lowest bin (its upper edge is still tiny)
    } else if (ex > kMaxExp) {
      key = kNonFinite - 1;
    } else {
      const auto sub =
          std::min<std::int32_t>(kSub - 1, static_cast<std::int32_t>((m - 0.5) * 2 * kSub));
      key = 1 + (ex - kMinExp) * kSub + sub;
    }
  }
  ++bins_[key];
}

void QuantileSketch::merge(const QuantileSketch& o) {
  for (const auto& [k, c] : o.bins_) bins_[k] += c;
  n_ += o.n_;
}

double QuantileSketch::percentile(double p) const {
  if (n_ == 0) return std::nan("");
  auto rank = static_cast<std::int64_t>(std::ceil(p * static_cast<double>(n_)));
  rank = std::clamp<std::int64_t>(rank, 1, n_);
  std::int64_t seen = 0;
  for (const auto& [k, c] : bins_) {
    seen += c;
    if (seen < rank) continue;
    if (k == 0) return 0.0;
    if (k >= kNonFinite - 1) return std::numeric_limits<double>::infinity();
    const int ex = (k - 1) / kSub + kMinExp;
    const int sub = (k - 1) % kSub;
    return std::ldexp(0.5 + (sub + 1) / (2.0 * kSub), ex);  // upper edge of the bin
  }
  return std::numeric_limits<double>::infinity();
}

void ErrorStats::add_element(double e) {
  ++n_elements;
  ulps.add(e);
  sum_ulp += e;
  sum_ulp2 += e * e;
  ++hist[static_cast<std::size_t>(ulp_bin(e))];
  if (!(e <= 1.0)) ++gt_1ulp;
}

namespace {
// b replaces a when larger (NaN largest), or tied with a lower spec index: run() folds the units
// of a bucket in increasing spec order, so this is "the first worst case wins" there, and it makes
// merge() of shard reports (which fold in the order the files were given) agree with it.
void merge_worst(WorstCase& a, const WorstCase& b) {
  if (b.value < 0) return;
  const bool tie = b.value == a.value || (std::isnan(b.value) && std::isnan(a.value));
  if (a.offer(b.value) || (tie && b.spec_index < a.spec_index)) a = b;
}
}  // namespace

void ErrorStats::merge(const ErrorStats& o) {
  n_vectors += o.n_vectors;
  n_elements += o.n_elements;
  n_pairs += o.n_pairs;
  ulps.merge(o.ulps);
  sum_ulp += o.sum_ulp;
  sum_ulp2 += o.sum_ulp2;
  merge_worst(worst_ulp, o.worst_ulp);
  if (o.max_abs > max_abs || std::isnan(o.max_abs)) max_abs = o.max_abs;
  sum_err2 += o.sum_err2;
  sum_exact2 += o.sum_exact2;
  merge_worst(worst_pair, o.worst_pair);
  sum_pair2 += o.sum_pair2;
  not_correctly_rounded += o.not_correctly_rounded;
  gt_1ulp += o.gt_1ulp;
  gt_bound += o.gt_bound;
  bound_pairs += o.bound_pairs;
  if (o.max_utilization > max_utilization || std::isnan(o.max_utilization))
    max_utilization = o.max_utilization;
  bound_min_u = std::fmin(bound_min_u, o.bound_min_u);
  bound_max_u = std::fmax(bound_max_u, o.bound_max_u);
  max_angle_u = std::fmax(max_angle_u, o.max_angle_u);
  if (o.max_rot_u > max_rot_u || std::isnan(o.max_rot_u)) max_rot_u = o.max_rot_u;
  sum_angle2 += o.sum_angle2;
  sum_rot2 += o.sum_rot2;
  for (int i = 0; i < kUlpBins; ++i) hist[i] += o.hist[i];
}

int octave_of(std::int64_t m) {
  if (m < 0) m = -m;
  if (m == 0) return 0;
  return 64 - std::countl_zero(static_cast<std::uint64_t>(m));  // 1 -> 1, [2,3] -> 2, ...
}

}  // namespace ropecheck::reports
