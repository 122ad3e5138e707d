// The scan's walk over a dump (scan_pair): every tensor layout, chunking and thread count visits
// every head vector once, at its own batch row's positions, and names a broken element where it
// lies. The dumps are built here from logical (batch, token, head) vectors whose outputs are the
// exact rotation rounded once into f32 (reference::round_to): within any bound, so a correct dump
// must pass, and an element moved by 1.0 (inputs in [-1, 1]) is far outside it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ropecheck/reference/oracle.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/scan/scan.hpp"
#include "ropecheck/tensorio/tensorio.hpp"
#include "ropecheck/verify/verify.hpp"

namespace {

namespace tio = ropecheck::tensorio;
namespace ref = ropecheck::reference;
using ropecheck::Dtype;

constexpr std::int64_t kB = 2, kT = 5, kH = 3, kD = 10;

ropecheck::RopeSpec test_spec() {
  ropecheck::RopeSpec s;
  s.head_dim = kD;
  s.rotary_dim = 8;  // elements 8, 9 pass through
  s.layout = ropecheck::Layout::half;
  return s.normalized();
}

// Logical dump: x[b][t][h][j] and positions[b][t]; y is filled by the tests.
struct Logical {
  std::int64_t B = kB;
  std::vector<double> x, y;  // index ((b * T + t) * H + h) * D + j
  std::vector<std::int64_t> pos;
  std::size_t at(std::int64_t b, std::int64_t t, std::int64_t h, std::int64_t j = 0) const {
    return static_cast<std::size_t>(((b * kT + t) * kH + h) * kD + j);
  }
};

Logical make_inputs(std::int64_t B) {
  Logical l;
  l.B = B;
  std::mt19937_64 rng(40);
  std::uniform_real_distribution<double> u(-1, 1);
  l.x.resize(static_cast<std::size_t>(B * kT * kH * kD));
  for (auto& e : l.x) e = static_cast<float>(u(rng));
  // Each batch row its own positions (row 1 is not row 0's): a walk that reads row 0's positions
  // for every row rotates row 1 by the wrong angles.
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < kT; ++t) l.pos.push_back(3 + 7 * t + 1000 * b);
  return l;
}

// y = s R(sign * m) x rounded once into f32 (sign -1: a backward's grad_x).
void fill_outputs(Logical& l, const ropecheck::RopeSpec& spec, int sign) {
  const ref::Oracle oracle(spec);
  l.y.assign(l.x.size(), 0.0);
  for (std::int64_t b = 0; b < l.B; ++b)
    for (std::int64_t t = 0; t < kT; ++t) {
      const auto rot = oracle.at({sign * l.pos[static_cast<std::size_t>(b * kT + t)]});
      for (std::int64_t h = 0; h < kH; ++h) {
        const auto e = rot.apply(&l.x[l.at(b, t, h)]);
        for (std::int64_t j = 0; j < kD; ++j)
          l.y[l.at(b, t, h, j)] = ref::round_to(e.mp(j), Dtype::f32);
      }
    }
}

// The logical values stored in `layout` order, with that layout's shape.
std::vector<double> store(const Logical& l, const std::vector<double>& v, const std::string& layout,
                          std::vector<std::int64_t>& shape) {
  std::vector<double> out;
  auto put = [&](std::int64_t b, std::int64_t t, std::int64_t h) {
    for (std::int64_t j = 0; j < kD; ++j) out.push_back(v[l.at(b, t, h, j)]);
  };
  if (layout == "bhtd") {
    shape = {l.B, kH, kT, kD};
    for (std::int64_t b = 0; b < l.B; ++b)
      for (std::int64_t h = 0; h < kH; ++h)
        for (std::int64_t t = 0; t < kT; ++t) put(b, t, h);
    return out;
  }
  shape = layout == "bthd"  ? std::vector<std::int64_t>{l.B, kT, kH, kD}
          : layout == "thd" ? std::vector<std::int64_t>{kT, kH, kD}
                            : std::vector<std::int64_t>{kT, kD};
  for (std::int64_t b = 0; b < l.B; ++b)
    for (std::int64_t t = 0; t < kT; ++t)
      for (std::int64_t h = 0; h < (layout == "td" ? 1 : kH); ++h) put(b, t, h);
  return out;
}

ropecheck::scan::PairResult scan(const Logical& l, const std::string& layout,
                                 const ropecheck::scan::ScanOptions& o) {
  const ropecheck::RopeSpec spec = test_spec();
  std::vector<std::int64_t> shape;
  const auto xs = store(l, l.x, layout, shape);
  const auto ys = store(l, l.y, layout, shape);
  const tio::Tensor x = tio::make_tensor("x", tio::ElemType::f32, shape, xs);
  const tio::Tensor y = tio::make_tensor("y", tio::ElemType::f32, shape, ys);
  const std::vector<std::int64_t> pshape =
      l.B > 1 ? std::vector<std::int64_t>{l.B, kT} : std::vector<std::int64_t>{kT};
  const tio::Tensor p = tio::make_int_tensor("positions", tio::ElemType::i64, pshape, l.pos);
  const ropecheck::Policy f64{
      Dtype::f64, Dtype::f64, Dtype::f64, ropecheck::AngleRecipe::pow_product, false, "test"};
  const ropecheck::verify::PairChecker pc(f64, spec, Dtype::f32);
  const ref::Oracle oracle(spec);
  auto ref_of = [](const tio::Tensor& t) {
    return tio::memory_tensor(t.name, t.type, t.shape, t.data.data());
  };
  return ropecheck::scan::scan_pair("x -> y", ref_of(x), ref_of(y), ref_of(p), layout, pc, oracle,
                                    o);
}

struct Case {
  std::string layout;
  std::int64_t B;
};
// Batched layouts with two rows, the unbatched ones with one (td: one head).
const std::vector<Case> kCases = {{"bthd", kB}, {"bhtd", kB}, {"thd", 1}, {"td", 1}};
// Chunk sizes: one vector (a token's heads split), 2 (split, a partial last run), 4 (one token per
// chunk), 7 (two whole tokens; the last chunk of a row shorter) and everything in one chunk.
const std::vector<std::int64_t> kChunks = {1, 2, 4, 7, 1024};

std::int64_t heads(const Case& c) { return c.layout == "td" ? 1 : kH; }

std::string label(const Case& c, std::int64_t chunk, unsigned threads) {
  return c.layout + " chunk " + std::to_string(chunk) + " threads " + std::to_string(threads);
}

TEST(Scan, EveryLayoutAndChunkingVisitsEveryVectorOnce) {
  for (const Case& c : kCases) {
    Logical l = make_inputs(c.B);
    fill_outputs(l, test_spec(), +1);
    for (std::int64_t chunk : kChunks)
      for (unsigned threads : {1u, 3u}) {
        ropecheck::scan::ScanOptions o;
        o.chunk_vectors = chunk, o.threads = threads;
        const auto r = scan(l, c.layout, o);
        const std::string at = label(c, chunk, threads);
        const std::int64_t n = c.B * kT * heads(c);
        EXPECT_EQ(r.vectors, n) << at;
        EXPECT_EQ(r.summary.vectors, n) << at;
        EXPECT_EQ(r.summary.pairs, n * 4) << at;
        EXPECT_EQ(r.skipped_nonfinite, 0) << at;
        EXPECT_TRUE(r.summary.passed())
            << at << ": " << (r.located().empty() ? "" : r.located()[0]);
      }
  }
}

// One output element moved far outside the bound is one finding, at its own batch row, token,
// position, head, pair and elements, whatever the layout and chunking; a pass-through element
// changed is named as such.
TEST(Scan, NamesTheBrokenElementWhereItLies) {
  struct Where {
    std::int64_t b, t, h, j;
  };
  // First vector, last vector (the last token of the last row), one inside; j = 6 is pair 2 of
  // the half layout at rotary_dim 8 (elements 2, 6), j = 9 a pass-through element.
  const std::vector<Where> spots = {{0, 0, 0, 0}, {1, 4, 2, 6}, {1, 2, 1, 3}, {0, 3, 2, 9}};
  for (const Case& c : kCases)
    for (Where w : spots) {
      if (w.b >= c.B || w.h >= heads(c)) continue;
      Logical l = make_inputs(c.B);
      fill_outputs(l, test_spec(), +1);
      l.y[l.at(w.b, w.t, w.h, w.j)] += 1.0;
      const ropecheck::RopeSpec spec = test_spec();
      for (std::int64_t chunk : kChunks)
        for (unsigned threads : {1u, 3u}) {
          ropecheck::scan::ScanOptions o;
          o.chunk_vectors = chunk, o.threads = threads;
          const auto r = scan(l, c.layout, o);
          const std::string at = label(c, chunk, threads) + " spot b" + std::to_string(w.b) + " t" +
                                 std::to_string(w.t) + " h" + std::to_string(w.h) + " j" +
                                 std::to_string(w.j);
          ASSERT_EQ(r.summary.failures, 1) << at;
          ASSERT_EQ(r.summary.findings.size(), 1u) << at;
          const auto& f = r.summary.findings[0];
          EXPECT_EQ(f.where.batch, c.B > 1 ? w.b : -1) << at;
          EXPECT_EQ(f.where.token, w.t) << at;
          EXPECT_EQ(f.where.position,
                    std::vector<std::int64_t>{l.pos[static_cast<std::size_t>(w.b * kT + w.t)]})
              << at;
          EXPECT_EQ(f.where.head, w.h) << at;
          if (spec.is_passthrough(w.j)) {
            EXPECT_EQ(f.kind, ropecheck::verify::FindingKind::passthrough_changed) << at;
            EXPECT_NE(f.what.find("element " + std::to_string(w.j)), std::string::npos) << at;
          } else {
            EXPECT_EQ(f.kind, ropecheck::verify::FindingKind::exceeds_bound) << at;
            const std::int64_t i = w.j % 4;  // half layout at rotary_dim 8: pair (i, i + 4)
            EXPECT_EQ(f.where.pair, i) << at;
            EXPECT_EQ(f.where.elem_a, i) << at;
            EXPECT_EQ(f.where.elem_b, i + 4) << at;
          }
        }
    }
}

// A vector whose input holds a non-finite element has no relative error: it is skipped and
// counted (any element, the last one too), in whichever chunk it lies; the rest is checked.
TEST(Scan, CountsAndSkipsNonFiniteInputs) {
  for (const Case& c : kCases) {
    Logical l = make_inputs(c.B);
    fill_outputs(l, test_spec(), +1);
    const std::int64_t H = heads(c), lastb = c.B - 1;
    l.x[l.at(lastb, 4, H - 1, kD - 1)] = std::numeric_limits<double>::quiet_NaN();
    l.x[l.at(lastb, 3, 0, 0)] = std::numeric_limits<double>::infinity();
    for (std::int64_t chunk : kChunks)
      for (unsigned threads : {1u, 3u}) {
        ropecheck::scan::ScanOptions o;
        o.chunk_vectors = chunk, o.threads = threads;
        const auto r = scan(l, c.layout, o);
        const std::string at = label(c, chunk, threads);
        EXPECT_EQ(r.vectors, c.B * kT * H) << at;
        EXPECT_EQ(r.skipped_nonfinite, 2) << at;
        EXPECT_EQ(r.summary.vectors, c.B * kT * H - 2) << at;
        EXPECT_TRUE(r.summary.passed()) << at;
      }
  }
}

// backward: y = s R(-m) x is the correct grad_x; the same dump read forward fails, and a forward
// dump read as backward fails (the positions are not 0).
TEST(Scan, BackwardNegatesEveryPosition) {
  for (const Case& c : kCases) {
    Logical back = make_inputs(c.B), fwd = make_inputs(c.B);
    fill_outputs(back, test_spec(), -1);
    fill_outputs(fwd, test_spec(), +1);
    ropecheck::scan::ScanOptions o;
    o.chunk_vectors = 4, o.threads = 2, o.backward = true;
    const auto ok = scan(back, c.layout, o);
    EXPECT_TRUE(ok.summary.passed()) << c.layout;
    EXPECT_EQ(ok.summary.vectors, c.B * kT * heads(c)) << c.layout;
    EXPECT_FALSE(scan(fwd, c.layout, o).summary.passed()) << c.layout;
    if (!ok.summary.passed()) continue;
    o.backward = false;
    EXPECT_FALSE(scan(back, c.layout, o).summary.passed()) << c.layout;
  }
}

// Multi-axis positions (mrope: t, h, w per token), given one per axis and batch row as
// [A, B, T] (HF's position_ids, axis-major) or shared by the rows as [A, T]: every vector is
// rotated by its own row's three positions, so a correct dump passes; the same dump with the
// positions of two rows exchanged on one axis fails.
TEST(Scan, MultiAxisPositionsAreAxisMajor) {
  constexpr std::int64_t A = 3, B = 2, T = 4, H = 2, D = 12;
  ropecheck::RopeSpec spec;
  spec.head_dim = D;
  spec.layout = ropecheck::Layout::mrope;
  spec.sections = {2, 2, 2};
  spec = spec.normalized();
  const ref::Oracle oracle(spec);
  const ropecheck::Policy f64{
      Dtype::f64, Dtype::f64, Dtype::f64, ropecheck::AngleRecipe::pow_product, false, "test"};
  const ropecheck::verify::PairChecker pc(f64, spec, Dtype::f32);
  std::mt19937_64 rng(41);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> x(static_cast<std::size_t>(B * T * H * D));  // bthd
  for (auto& e : x) e = static_cast<float>(u(rng));
  for (bool shared : {false, true}) {
    // pos[(a * B + b) * T + t] (shared: row 0's for every row)
    std::vector<std::int64_t> pos;
    for (std::int64_t a = 0; a < A; ++a)
      for (std::int64_t b = 0; b < (shared ? 1 : B); ++b)
        for (std::int64_t t = 0; t < T; ++t) pos.push_back(5 + 11 * t + 300 * a + 5000 * b);
    auto p_of = [&](std::int64_t a, std::int64_t b, std::int64_t t) {
      return pos[static_cast<std::size_t>((a * (shared ? 1 : B) + (shared ? 0 : b)) * T + t)];
    };
    std::vector<double> y(x.size());
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < T; ++t) {
        const auto rot = oracle.at({p_of(0, b, t), p_of(1, b, t), p_of(2, b, t)});
        for (std::int64_t h = 0; h < H; ++h) {
          const std::size_t off = static_cast<std::size_t>(((b * T + t) * H + h) * D);
          const auto e = rot.apply(&x[off]);
          for (std::int64_t j = 0; j < D; ++j)
            y[off + static_cast<std::size_t>(j)] = ref::round_to(e.mp(j), Dtype::f32);
        }
      }
    const std::vector<std::int64_t> shape = {B, T, H, D};
    const std::vector<std::int64_t> pshape =
        shared ? std::vector<std::int64_t>{A, T} : std::vector<std::int64_t>{A, B, T};
    const tio::Tensor xt = tio::make_tensor("x", tio::ElemType::f32, shape, x);
    const tio::Tensor yt = tio::make_tensor("y", tio::ElemType::f32, shape, y);
    auto run = [&](const std::vector<std::int64_t>& p) {
      const tio::Tensor pt = tio::make_int_tensor("positions", tio::ElemType::i64, pshape, p);
      auto ref_of = [](const tio::Tensor& t) {
        return tio::memory_tensor(t.name, t.type, t.shape, t.data.data());
      };
      ropecheck::scan::ScanOptions o;
      o.chunk_vectors = 3, o.threads = 2;
      return ropecheck::scan::scan_pair("x -> y", ref_of(xt), ref_of(yt), ref_of(pt), "bthd", pc,
                                        oracle, o);
    };
    const auto ok = run(pos);
    EXPECT_TRUE(ok.summary.passed())
        << (shared ? "[A, T] " : "[A, B, T] ") << (ok.located().empty() ? "" : ok.located()[0]);
    EXPECT_EQ(ok.summary.vectors, B * T * H);
    if (shared) continue;
    std::vector<std::int64_t> swapped = pos;  // axis 1: rows 0 and 1 exchanged
    for (std::int64_t t = 0; t < T; ++t)
      std::swap(swapped[static_cast<std::size_t>((1 * B + 0) * T + t)],
                swapped[static_cast<std::size_t>((1 * B + 1) * T + t)]);
    EXPECT_FALSE(run(swapped).summary.passed());
  }
}

}  // namespace
