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

std::int64_t& QuantileSketch::dense(std::int32_t key) {
  if (blocks_.empty()) blocks_.resize((kDenseKeys + kBlock - 1) / kBlock);
  auto& block = blocks_[static_cast<std::size_t>(key / kBlock)];
  if (block.empty()) block.assign(kBlock, 0);
  return block[static_cast<std::size_t>(key % kBlock)];
}

void QuantileSketch::add(double v) {
  ++n_;
  std::int32_t key;
  if (!std::isfinite(v)) {
    ++other_[kNonFinite];
    return;
  } else if (v <= 0) {
    key = 0;
  } else {
    // v = m 2^ex, m in [1/2, 1): frexp's answer, read from the bits (v > 0 finite; a subnormal
    // v, ex < -1021, is below kMinExp whatever its m).
    const auto bits = std::bit_cast<std::uint64_t>(v);
    const int biased = static_cast<int>(bits >> 52);
    const int ex = biased == 0 ? kMinExp - 1 : biased - 1022;
    if (ex < kMinExp) {
      key = 1;  // below 2^-65: lumped into the lowest bin (its upper edge is still tiny)
    } else if (ex > kMaxExp) {
      ++other_[kNonFinite - 1];
      return;
    } else {
      // The sub-bin floor((m - 1/2) 2 kSub) of m = (1 + f) / 2: floor(kSub f), the top 8 bits of
      // the fraction f.
      static_assert(kSub == 256);
      const auto sub = static_cast<std::int32_t>((bits & 0x000fffffffffffffULL) >> 44);
      key = 1 + (ex - kMinExp) * kSub + sub;
    }
  }
  ++dense(key);
}

void QuantileSketch::add_bin(std::int32_t key, std::int64_t count) {
  if (key >= 0 && key < kDenseKeys)
    dense(key) += count;
  else
    other_[key] += count;
  n_ += count;
}

template <class F>
void QuantileSketch::for_each_bin(F f) const {
  auto it = other_.begin();
  for (; it != other_.end() && it->first < 0; ++it) f(it->first, it->second);
  for (std::size_t b = 0; b < blocks_.size(); ++b)
    for (std::size_t i = 0; i < blocks_[b].size(); ++i)
      if (blocks_[b][i]) f(static_cast<std::int32_t>(b * kBlock + i), blocks_[b][i]);
  for (; it != other_.end(); ++it) f(it->first, it->second);
}

std::map<std::int32_t, std::int64_t> QuantileSketch::bins() const {
  std::map<std::int32_t, std::int64_t> out;
  for_each_bin([&](std::int32_t k, std::int64_t c) { out.emplace_hint(out.end(), k, c); });
  return out;
}

void QuantileSketch::merge(const QuantileSketch& o) {
  for (std::size_t b = 0; b < o.blocks_.size(); ++b)
    for (std::size_t i = 0; i < o.blocks_[b].size(); ++i)
      if (o.blocks_[b][i]) dense(static_cast<std::int32_t>(b * kBlock + i)) += o.blocks_[b][i];
  for (const auto& [k, c] : o.other_) other_[k] += c;
  n_ += o.n_;
}

double QuantileSketch::percentile(double p) const {
  if (n_ == 0) return std::nan("");
  auto rank = static_cast<std::int64_t>(std::ceil(p * static_cast<double>(n_)));
  rank = std::clamp<std::int64_t>(rank, 1, n_);
  std::int64_t seen = 0;
  std::int32_t key = 0;
  bool found = false;
  for_each_bin([&](std::int32_t k, std::int64_t c) {
    if (found) return;
    seen += c;
    if (seen >= rank) key = k, found = true;
  });
  if (!found) return std::numeric_limits<double>::infinity();
  if (key == 0) return 0.0;
  if (key >= kNonFinite - 1) return std::numeric_limits<double>::infinity();
  const int ex = (key - 1) / kSub + kMinExp;
  const int sub = (key - 1) % kSub;
  return std::ldexp(0.5 + (sub + 1) / (2.0 * kSub), ex);  // upper edge of the bin
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
  split_by_bound = split_by_bound || o.split_by_bound;
  for (int i = 0; i < kUlpBins; ++i) hist[i] += o.hist[i];
}

int octave_of(std::int64_t m) {
  if (m < 0) m = -m;
  if (m == 0) return 0;
  return 64 - std::countl_zero(static_cast<std::uint64_t>(m));  // 1 -> 1, [2,3] -> 2, ...
}

}  // namespace ropecheck::reports
