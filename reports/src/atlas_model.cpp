// Engine differences of a model atlas (report.hpp, engine_differences): where two engines running
// the same model spec compute different bits. Both engines get the same stored inputs at the same
// positions (in the spec's layout, permuted into an engine's own when it runs only the other one,
// as the atlas does); the outputs are compared bit for bit, and the largest disagreement is
// measured per rotated pair, |y_a - y_b| / (|x pair| u of the dtype). Which step differs is not
// observed but read off the two engines' declared policies (every field that differs), and
// labelled as inferred.
#include "document.hpp"
#include "ropecheck/reports/model_atlas.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace ropecheck::reports {

namespace {

using json = nlohmann::json;

// Positions spread log-uniformly over [0, max_position] (and 0, 1 and max_position itself), so
// every context scale of the atlas is represented.
std::vector<std::int64_t> diff_positions(std::int64_t max_position, std::mt19937_64& rng) {
  std::vector<std::int64_t> p{0, 1, max_position};
  std::uniform_real_distribution<double> u(0.0, std::log2(static_cast<double>(max_position) + 1));
  while (p.size() < 64) p.push_back(static_cast<std::int64_t>(std::exp2(u(rng))) - 1);
  for (auto& x : p) x = std::clamp<std::int64_t>(x, 0, max_position);
  return p;
}

// The engine's output for the spec in its layout (run), read back in the spec's layout.
bool run_engine(const Kernel& k, const RopeSpec& spec, Layout run, Dtype d,
                const std::vector<std::int64_t>& pos, const std::vector<double>& x,
                std::vector<double>& y) {
  RopeSpec rs = spec;
  rs.layout = run;
  const std::int64_t hd = spec.head_dim, n = static_cast<std::int64_t>(pos.size());
  const std::vector<std::int64_t> to = detail::layout_index_map(spec, run);
  const auto bytes = static_cast<std::size_t>(traits(d).bytes);
  std::vector<unsigned char> in(static_cast<std::size_t>(n * hd) * bytes), out(in.size());
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t j = 0; j < hd; ++j) store(d, in.data(), t * hd + to[j], x[t * hd + j]);
  if (apply_contiguous(k, rs, d, n, 1, pos.data(), in.data(), out.data()) != KernelStatus::ok)
    return false;
  y.resize(x.size());
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t j = 0; j < hd; ++j) y[t * hd + j] = load(d, out.data(), t * hd + to[j]);
  return true;
}

// The policy fields in which two engines differ: "recipe hf_f32 / ladder_f32; fused false / true".
std::string policy_difference(const Policy& a, const Policy& b) {
  const auto ja = policy_json(a), jb = policy_json(b);
  std::string s;
  for (auto it = ja.begin(); it != ja.end(); ++it) {
    if (it.key() == "notes" || !jb.contains(it.key()) || jb[it.key()] == it.value()) continue;
    s += (s.empty() ? "" : "; ") + it.key() + " " + it.value().dump() + " / " + jb[it.key()].dump();
  }
  return s.empty() ? "same declared policy: the order of operations inside a step" : s;
}

}  // namespace

json engine_differences(const RopeSpec& spec, const std::vector<DiffEngine>& engines,
                        const std::vector<Dtype>& dtypes, std::int64_t max_position,
                        std::uint64_t seed, json* pairs) {
  json rows = json::array();
  if (pairs) *pairs = json::array();
  std::mt19937_64 rng(seed);
  const auto pos = diff_positions(max_position, rng);
  const std::size_t hd = static_cast<std::size_t>(spec.head_dim);
  for (Dtype d : dtypes) {
    std::vector<double> x(pos.size() * hd);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (auto& v : x) v = round_to_dtype(u(rng), d);  // every engine reads the same values
    // Per engine and position: its output (one call per position: a refused position -- past the
    // engine's cache -- costs that position only) and whether it ran.
    std::vector<std::vector<double>> out(engines.size(), std::vector<double>(x.size()));
    std::vector<std::vector<char>> ran(engines.size(), std::vector<char>(pos.size(), 0));
    std::vector<bool> implements(engines.size());
    for (std::size_t e = 0; e < engines.size(); ++e) {
      const auto& en = engines[e];
      RopeSpec rs = spec;
      rs.layout = en.layout;
      implements[e] = en.kernel->supports(rs, d);
      if (!implements[e]) continue;
      std::vector<double> y;
      for (std::size_t t = 0; t < pos.size(); ++t) {
        const std::vector<double> xt(x.begin() + static_cast<std::ptrdiff_t>(t * hd),
                                     x.begin() + static_cast<std::ptrdiff_t>((t + 1) * hd));
        if (!run_engine(*en.kernel, spec, en.layout, d, {pos[t]}, xt, y)) continue;
        ran[e][t] = 1;
        std::copy(y.begin(), y.end(), out[e].begin() + static_cast<std::ptrdiff_t>(t * hd));
      }
    }
    const double ud = unit_roundoff(d);
    for (std::size_t a = 0; a < engines.size(); ++a)
      for (std::size_t b = a + 1; b < engines.size(); ++b) {
        if (!implements[a] || !implements[b]) continue;
        std::int64_t differ = 0, compared = 0, n_pos = 0;
        double worst = 0;
        std::int64_t worst_pos = 0;
        for (std::size_t t = 0; t < pos.size(); ++t) {
          if (!ran[a][t] || !ran[b][t]) continue;
          ++n_pos;
          for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
            const auto [p, q] = spec.pair(i);
            const std::size_t o = t * hd;
            const double dp = out[a][o + p] - out[b][o + p], dq = out[a][o + q] - out[b][o + q];
            differ += (dp != 0) + (dq != 0);
            compared += 2;
            const double n = std::hypot(x[o + p], x[o + q]);
            const double err = n > 0 ? std::hypot(dp, dq) / (n * ud) : 0;
            if (err > worst || std::isnan(err)) worst = err, worst_pos = pos[t];
          }
        }
        const json names = {engines[a].kernel->name(), engines[b].kernel->name()};
        if (pairs)
          pairs->push_back({{"dtype", name(d)},
                            {"engines", names},
                            {"positions_compared", n_pos},
                            {"elements_compared", compared},
                            {"elements_differing", differ}});
        if (differ == 0) continue;
        rows.push_back({{"dtype", name(d)},
                        {"engines", names},
                        {"elements_differing", differ},
                        {"elements_compared", compared},
                        {"max_pair_difference_u", worst},
                        {"at_position", worst_pos},
                        {"step_inferred", policy_difference(engines[a].kernel->policy(d),
                                                            engines[b].kernel->policy(d))}});
      }
  }
  return rows;
}

}  // namespace ropecheck::reports
