// Seeds, random inputs and kernel runs shared by the work units (sample.hpp).
#include "sample.hpp"

#include <cmath>

namespace ropecheck::reports::detail {

namespace {

// SplitMix64.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::uint64_t unit_seed(std::uint64_t seed, std::initializer_list<std::uint64_t> parts) {
  std::uint64_t h = mix(seed);
  for (auto p : parts) h = mix(h ^ p);
  return h;
}

std::vector<double> random_vector(std::mt19937_64& rng, std::int64_t n, Dtype d) {
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<double> x(static_cast<std::size_t>(n));
  for (auto& v : x) v = round_to_dtype(nd(rng), d);
  return x;
}

bool run_kernel(const Kernel& k, const RopeSpec& spec, Dtype d,
                const std::vector<std::int64_t>& positions, std::int64_t heads,
                const std::vector<std::vector<double>>& in, Outputs& out) {
  return run_kernel_status(k, spec, d, positions, heads, in, out) == KernelStatus::ok;
}

KernelStatus run_kernel_status(const Kernel& k, const RopeSpec& spec, Dtype d,
                               const std::vector<std::int64_t>& positions, std::int64_t heads,
                               const std::vector<std::vector<double>>& in, Outputs& out) {
  const std::int64_t n_tok = static_cast<std::int64_t>(positions.size());
  const std::int64_t hd = spec.head_dim;
  const auto n = static_cast<std::size_t>(n_tok * heads * hd);
  const int bytes = traits(d).bytes;
  // The dtype buffers of this thread, grown as needed and never shrunk.
  thread_local std::vector<unsigned char> bin, bout;
  if (bin.size() < n * bytes) bin.resize(n * bytes), bout.resize(n * bytes);
  for (std::int64_t v = 0; v < n_tok * heads; ++v)
    for (std::int64_t j = 0; j < hd; ++j) store(d, bin.data(), v * hd + j, in[v][j]);
  const KernelStatus st =
      apply_contiguous(k, spec, d, n_tok, heads, positions.data(), bin.data(), bout.data());
  if (st != KernelStatus::ok) return st;
  out.hd_ = static_cast<std::size_t>(hd);
  out.data_.reset(new double[n]);
  for (std::size_t i = 0; i < n; ++i)
    out.data_[i] = load(d, bout.data(), static_cast<std::int64_t>(i));
  return KernelStatus::ok;
}

bool run_kernel_per_position(const Kernel& k, const RopeSpec& spec, Dtype d,
                             const std::vector<std::int64_t>& positions, std::int64_t heads,
                             const std::vector<std::vector<double>>& in, Outputs& out,
                             std::vector<char>& served) {
  const auto hd = static_cast<std::size_t>(spec.head_dim);
  const auto h = static_cast<std::size_t>(heads);
  out.hd_ = hd;
  out.data_.reset(new double[positions.size() * h * hd]());
  served.assign(positions.size(), 0);
  bool any = false;
  Outputs one;
  for (std::size_t t = 0; t < positions.size(); ++t) {
    const std::vector<std::vector<double>> x(in.begin() + static_cast<std::ptrdiff_t>(t * h),
                                             in.begin() + static_cast<std::ptrdiff_t>((t + 1) * h));
    const KernelStatus st = run_kernel_status(k, spec, d, {positions[t]}, heads, x, one);
    if (st == KernelStatus::unsupported) continue;  // past its cache: that position only
    if (st != KernelStatus::ok) return false;       // an error is not a refusal: the unit fails
    std::copy(one.data_.get(), one.data_.get() + h * hd, out.data_.get() + t * h * hd);
    served[t] = 1;
    any = true;
  }
  return any;
}

}  // namespace ropecheck::reports::detail
