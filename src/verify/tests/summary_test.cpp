// verify::Summary: the running figures of add_pair / add_finding and the chunk merge (append).
// The contract (verify.hpp): each maximum with the location of its first occurrence, NaN worse
// than any number and the first NaN kept; constrained maxima over the pairs that are not
// unconstrained; the smallest |position| of an unconstrained pair; the first `keep` findings and
// every failure counted; and append(later) gives what one
// pass over both in order gives. The expectations below are computed from that contract over a
// drawn event list, then compared with one pass and with every split of it merged by append.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ropecheck/verify/verify.hpp"

namespace {

using ropecheck::verify::Finding;
using ropecheck::verify::Location;
using ropecheck::verify::PairCheck;
using ropecheck::verify::Summary;

struct Event {
  PairCheck p;
  Location at;
};

// Values from a small set so that ties are frequent; NaNs and unconstrained pairs (with negative
// positions) mixed in; an event fails (a finding) when its error exceeds its bound.
std::vector<Event> draw(std::uint64_t seed, int n, bool with_nan) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> v(0, 6), pick(0, 9);
  std::vector<Event> ev;
  for (int k = 0; k < n; ++k) {
    Event e;
    e.p.error_u = v(rng) * 0.5;
    e.p.utilization = v(rng) * 0.25;
    if (with_nan && pick(rng) == 0) e.p.error_u = std::numeric_limits<double>::quiet_NaN();
    if (with_nan && pick(rng) == 0) e.p.utilization = std::numeric_limits<double>::quiet_NaN();
    e.p.unconstrained = pick(rng) < 3;
    e.p.bound_abs = 1;
    e.p.error_abs = e.p.utilization;  // fails when utilization > 1 (or NaN)
    e.at.token = k;
    const std::int64_t m = 10 + v(rng) * 100 + k;
    e.at.position = {pick(rng) < 5 ? -m : m};
    ev.push_back(e);
  }
  return ev;
}

Summary run(const std::vector<Event>& ev, std::size_t from, std::size_t to, std::size_t keep) {
  Summary s;
  s.keep = keep;
  for (std::size_t k = from; k < to; ++k) {
    s.add_pair(ev[k].p, ev[k].at);
    if (!ev[k].p.within()) s.add_finding(Finding{{}, ev[k].at, "event " + std::to_string(k)});
  }
  return s;
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

void expect_same(const Summary& a, const Summary& b, const std::string& at) {
  EXPECT_EQ(a.vectors, b.vectors) << at;
  EXPECT_EQ(a.pairs, b.pairs) << at;
  EXPECT_EQ(a.failures, b.failures) << at;
  EXPECT_EQ(a.any, b.any) << at;
  EXPECT_TRUE(same(a.max_error_u, b.max_error_u)) << at;
  EXPECT_EQ(a.max_error_at.token, b.max_error_at.token) << at;
  EXPECT_TRUE(same(a.max_utilization, b.max_utilization)) << at;
  EXPECT_EQ(a.max_utilization_at.token, b.max_utilization_at.token) << at;
  EXPECT_TRUE(same(a.max_error_u_constrained, b.max_error_u_constrained)) << at;
  EXPECT_TRUE(same(a.max_utilization_constrained, b.max_utilization_constrained)) << at;
  EXPECT_EQ(a.unconstrained_pairs, b.unconstrained_pairs) << at;
  EXPECT_EQ(a.min_unconstrained_position, b.min_unconstrained_position) << at;
  ASSERT_EQ(a.findings.size(), b.findings.size()) << at;
  for (std::size_t k = 0; k < a.findings.size(); ++k)
    EXPECT_EQ(a.findings[k].what, b.findings[k].what) << at;
  EXPECT_EQ(a.hint, b.hint) << at;
}

// The figures from the contract, over events [0, n).
struct Want {
  double max_e = 0, max_u = 0, max_e_c = 0, max_u_c = 0;
  std::int64_t at_e = -1, at_u = -1, unconstrained = 0, min_pos = -1, failures = 0;
};

Want want(const std::vector<Event>& ev) {
  Want w;
  auto first_max = [&](auto field, bool constrained_only, std::int64_t* at) {
    double best = 0;
    bool seen = false;
    for (std::size_t k = 0; k < ev.size(); ++k) {
      if (constrained_only && ev[k].p.unconstrained) continue;
      const double x = field(ev[k].p);
      if (std::isnan(x)) {  // the first NaN is the maximum
        if (at) *at = static_cast<std::int64_t>(k);
        return x;
      }
    }
    for (std::size_t k = 0; k < ev.size(); ++k) {
      if (constrained_only && ev[k].p.unconstrained) continue;
      const double x = field(ev[k].p);
      if (!seen || x > best) {
        best = x, seen = true;
        if (at) *at = static_cast<std::int64_t>(k);
      }
    }
    return best;
  };
  auto e = [](const PairCheck& p) { return p.error_u; };
  auto u = [](const PairCheck& p) { return p.utilization; };
  w.max_e = first_max(e, false, &w.at_e);
  w.max_u = first_max(u, false, &w.at_u);
  w.max_e_c = first_max(e, true, nullptr);
  w.max_u_c = first_max(u, true, nullptr);
  for (const Event& x : ev) {
    if (!x.p.within()) ++w.failures;
    if (!x.p.unconstrained) continue;
    ++w.unconstrained;
    const std::int64_t m = std::llabs(x.at.position[0]);
    if (w.min_pos < 0 || m < w.min_pos) w.min_pos = m;
  }
  return w;
}

TEST(VerifySummary, OnePassGivesTheFiguresOfTheContract) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const auto ev = draw(seed, 30, seed % 2 == 0);
    const Summary s = run(ev, 0, ev.size(), 4);
    const Want w = want(ev);
    const std::string at = "seed " + std::to_string(seed);
    EXPECT_EQ(s.pairs, 30) << at;
    EXPECT_TRUE(s.any) << at;
    EXPECT_TRUE(same(s.max_error_u, w.max_e)) << at;
    EXPECT_EQ(s.max_error_at.token, w.at_e) << at;
    EXPECT_TRUE(same(s.max_utilization, w.max_u)) << at;
    EXPECT_EQ(s.max_utilization_at.token, w.at_u) << at;
    EXPECT_TRUE(same(s.max_error_u_constrained, w.max_e_c)) << at;
    EXPECT_TRUE(same(s.max_utilization_constrained, w.max_u_c)) << at;
    EXPECT_EQ(s.unconstrained_pairs, w.unconstrained) << at;
    EXPECT_EQ(s.min_unconstrained_position, w.min_pos) << at;
    EXPECT_EQ(s.failures, w.failures) << at;
    EXPECT_EQ(s.findings.size(), std::min<std::size_t>(4, static_cast<std::size_t>(w.failures)))
        << at;
  }
}

// Chunks merged in order by append: the one-pass figures for every split into two and three.
TEST(VerifySummary, AppendOfEverySplitIsOnePass) {
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const auto ev = draw(100 + seed, 24, seed % 3 != 0);
    const Summary whole = run(ev, 0, ev.size(), 3);
    for (std::size_t i = 0; i <= ev.size(); ++i)
      for (std::size_t j = i; j <= ev.size(); j += 5) {
        Summary m = run(ev, 0, i, 3);
        m.append(run(ev, i, j, 3));
        m.append(run(ev, j, ev.size(), 3));
        expect_same(m, whole,
                    "seed " + std::to_string(seed) + " split " + std::to_string(i) + "," +
                        std::to_string(j));
      }
  }
}

// A kernel exact everywhere (every error and utilization 0) still has its maxima located, at the
// first pair, also when the chunk before it recorded no pair (e.g. all its inputs non-finite).
TEST(VerifySummary, AllZeroMaximaAreLocatedAtTheFirstPairAfterAnEmptyChunk) {
  auto ev = draw(7, 10, false);
  for (auto& e : ev) e.p.error_u = e.p.utilization = e.p.error_abs = 0;
  for (std::size_t i = 0; i <= ev.size(); ++i) {
    Summary m = run(ev, 0, i, 3);
    m.append(run(ev, i, ev.size(), 3));
    EXPECT_EQ(m.max_error_at.token, 0) << "split " << i;
    EXPECT_EQ(m.max_utilization_at.token, 0) << "split " << i;
  }
}

}  // namespace
