// Writes the tensor dumps the `ropecheck check` tests read. Outputs are the multiprecision
// reference correctly rounded into the dtype (an oracle independent of the code under test:
// `check` and the bounds), then corrupted in the ways real dumps go wrong:
//   good_f32.safetensors      correct; declared policy f64 angle/table/arithmetic (tight bound)
//   good_bf16_hf.safetensors  correct; bf16, [batch, heads, tokens, dim], int32 positions,
//                             default (production f32) policy
//   perturbed.safetensors     good_f32 with y[token 3][head 1][5] moved k ULP away from zero,
//                             k = ceil(bound / ulp) + 3: just a few ULP beyond the derived bound
//   sinflip.safetensors       y = R_{-m} x (sin sign flipped)
//   offbyone.safetensors      y = R_{m+1} x, positions say m
//   truncated.safetensors     good_f32 cut in the middle of the header
//   x.npy y.npy p.npy y_off.npy spec.json   the npy form (f16, [tokens, dim]); y_off off by one
//   mixed_bf16.safetensors    bf16 [batch 2, heads 3, tokens 20, dim 16] (bhtd), positions [2, 20]:
//                             every 5th vector corrupted (many failures, varied errors), one input
//                             with a NaN (skipped), two identical failing vectors at one position
//                             (a tie for the maxima): `check --threads` must not change a byte
//   overflow_{f16,bf16,f32}[_wrong_sign,_inf_where_finite].safetensors
//                             inputs near the dtype's largest value, so that some exact outputs
//                             lie beyond it: correct (the one rounding, +-inf included), one
//                             infinity's sign flipped, one finite output made +inf
//   empty.safetensors         a dump with 0 tokens; all_nonfinite.safetensors: every input has a
//                             NaN (nothing checked either way)
//   odd_full_{interleaved,half}[_passthrough].safetensors
//                             head_dim 65 at full rotary (rotary_dim 64): correct, and element 64
//                             (the one pass-through element) changed
#include <cmath>
#include <fstream>
#include <iostream>
#include <random>

#include "ropecheck/bounds.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/tensorio/tensorio.hpp"

using namespace ropecheck;
namespace ref = ropecheck::reference;
namespace tio = ropecheck::tensorio;

namespace {

const std::vector<std::int64_t> kPos = {0, 1, 5, 4096, 65537, -3};

// x: [T][H][D] values in dtype d; y = round_d(R_{m+shift} x) or R_{-m} x when flip.
std::vector<double> rotate(const RopeSpec& s, Dtype d, const std::vector<double>& x, std::int64_t T,
                           std::int64_t H, std::int64_t shift, bool flip) {
  std::vector<double> y(x.size());
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t h = 0; h < H; ++h) {
      const auto off = (t * H + h) * s.head_dim;
      std::vector<double> v(x.begin() + off, x.begin() + off + s.head_dim);
      const std::int64_t m = flip ? -kPos[t] : kPos[t] + shift;
      const auto r = ref::round_to(ref::apply_blocked(s, ref::Mp(m), v), d);
      std::copy(r.begin(), r.end(), y.begin() + off);
    }
  return y;
}

// y = round_d(R_m x) at positions pos (one per token).
std::vector<double> rotate(const RopeSpec& s, Dtype d, const std::vector<double>& x, std::int64_t T,
                           std::int64_t H, const std::vector<std::int64_t>& pos) {
  std::vector<double> y(x.size());
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t h = 0; h < H; ++h) {
      const auto off = (t * H + h) * s.head_dim;
      std::vector<double> v(x.begin() + off, x.begin() + off + s.head_dim);
      const auto r = ref::round_to(ref::apply_blocked(s, ref::Mp(pos[t]), v), d);
      std::copy(r.begin(), r.end(), y.begin() + off);
    }
  return y;
}

std::vector<double> random_x(std::size_t n, Dtype d, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-3.0, 3.0);
  std::vector<double> x(n);
  for (auto& v : x) v = round_to_dtype(u(rng), d);
  return x;
}

void write_mixed(const std::string& dir) {
  ref::set_precision_bits(ref::default_bits(Dtype::bf16));
  RopeSpec s;
  s.head_dim = 16;
  s.layout = Layout::half;
  s = s.normalized();
  const std::int64_t B = 2, H = 3, T = 20, D = s.head_dim;
  auto x = random_x(static_cast<std::size_t>(B * H * T * D), Dtype::bf16, 17);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(B * T));
  for (std::int64_t i = 0; i < B * T; ++i) pos[i] = (i * 37) % 23 * 1000 + i % 3;
  auto off = [&](std::int64_t b, std::int64_t h, std::int64_t t) {
    return ((b * H + h) * T + t) * D;
  };
  // The tie: (b 1, h 2, t 15) repeats (b 0, h 0, t 3), position and all.
  std::copy(x.begin() + off(0, 0, 3), x.begin() + off(0, 0, 3) + D, x.begin() + off(1, 2, 15));
  pos[1 * T + 15] = pos[0 * T + 3];
  std::vector<double> y(x.size());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t t = 0; t < T; ++t) {
        const auto o = off(b, h, t);
        std::vector<double> v(x.begin() + o, x.begin() + o + D);
        const auto r =
            ref::round_to(ref::apply_blocked(s, ref::Mp(pos[b * T + t]), v), Dtype::bf16);
        std::copy(r.begin(), r.end(), y.begin() + o);
        const std::int64_t k = (b * H + h) * T + t;
        if (k % 5 == 0)
          y[o + k % D] = round_to_dtype(y[o + k % D] + 0.01 * (k % 7 + 1), Dtype::bf16);
      }
  const auto tie = off(1, 2, 15);
  std::copy(y.begin() + off(0, 0, 3), y.begin() + off(0, 0, 3) + D, y.begin() + tie);
  y[off(0, 0, 3) + 2] = y[tie + 2] = round_to_dtype(y[tie + 2] + 0.5, Dtype::bf16);
  x[off(1, 0, 7) + 4] = NAN;
  tio::TensorFile f;
  f.metadata = {{"layout", "half"}, {"tensor_layout", "bhtd"}};
  f.tensors.push_back(tio::make_tensor("x", tio::ElemType::bf16, {B, H, T, D}, x));
  f.tensors.push_back(tio::make_tensor("y", tio::ElemType::bf16, {B, H, T, D}, y));
  f.tensors.push_back(tio::make_int_tensor("positions", tio::ElemType::i64, {B, T}, pos));
  tio::write_safetensors(dir + "/mixed_bf16.safetensors", f);
}

// x -> y with one positions tensor [T] and __metadata__ md, every tensor of dtype d as [T, H, D].
void write_xy(const std::string& path, Dtype d, std::int64_t T, std::int64_t H, std::int64_t D,
              const std::vector<double>& x, const std::vector<double>& y,
              const std::vector<std::int64_t>& pos, const std::map<std::string, std::string>& md) {
  const tio::ElemType e = d == Dtype::f16    ? tio::ElemType::f16
                          : d == Dtype::bf16 ? tio::ElemType::bf16
                                             : tio::ElemType::f32;
  tio::TensorFile f;
  f.metadata = md;
  f.tensors.push_back(tio::make_tensor("x", e, {T, H, D}, x));
  f.tensors.push_back(tio::make_tensor("y", e, {T, H, D}, y));
  f.tensors.push_back(tio::make_int_tensor("positions", tio::ElemType::i64, {T}, pos));
  tio::write_safetensors(path, f);
}

// Correct outputs beyond the dtype's range: inputs of magnitude 0.5 to 0.99 of its largest value,
// so that pairs whose rotation lines up with an axis exceed it (up to sqrt(2) x 0.99 x max), the
// others do not. Prints how many outputs are infinite.
void write_overflow(const std::string& dir, Dtype d) {
  ref::set_precision_bits(ref::default_bits(d));
  RopeSpec s;
  s.head_dim = 8;
  s.layout = Layout::half;
  s = s.normalized();
  const std::int64_t T = 4, H = 3, D = s.head_dim;
  const std::vector<std::int64_t> pos = {1, 2, 7, 1000};
  std::mt19937_64 rng(23);
  std::uniform_real_distribution<double> mag(0.5, 0.99);
  std::vector<double> x(static_cast<std::size_t>(T * H * D));
  for (auto& v : x) v = round_to_dtype((rng() & 1 ? 1 : -1) * mag(rng) * max_finite(d), d);
  const auto y = rotate(s, d, x, T, H, pos);
  // `inside`: the first output well inside the range (its correct rounding finite, far from it).
  std::int64_t inf = 0, inside = -1;
  for (std::size_t i = 0; i < y.size(); ++i) {
    inf += std::isinf(y[i]) ? 1 : 0;
    if (inside < 0 && std::fabs(y[i]) < max_finite(d) / 2) inside = static_cast<std::int64_t>(i);
  }
  const std::string stem = dir + "/overflow_" + name(d);
  const std::map<std::string, std::string> md = {{"layout", "half"}};
  write_xy(stem + ".safetensors", d, T, H, D, x, y, pos, md);
  auto flipped = y;
  for (auto& v : flipped)
    if (std::isinf(v)) {
      v = -v;
      break;
    }
  write_xy(stem + "_wrong_sign.safetensors", d, T, H, D, x, flipped, pos, md);
  auto made_inf = y;
  made_inf[static_cast<std::size_t>(inside)] = INFINITY;
  write_xy(stem + "_inf_where_finite.safetensors", d, T, H, D, x, made_inf, pos, md);
  std::cout << "overflow " << name(d) << ": " << inf << " of " << y.size()
            << " correct outputs are infinite; element " << inside << " made +inf\n";
}

// Nothing to check: no token at all, and tokens whose every input vector holds a NaN.
void write_nothing_checked(const std::string& dir) {
  const std::map<std::string, std::string> md = {{"layout", "half"}};
  write_xy(dir + "/empty.safetensors", Dtype::f32, 0, 2, 8, {}, {}, {}, md);
  std::vector<double> x(2 * 2 * 8, 1.0);
  for (std::size_t v = 0; v < 4; ++v) x[v * 8 + v] = NAN;
  write_xy(dir + "/all_nonfinite.safetensors", Dtype::f32, 2, 2, 8, x, x, {3, 4}, md);
}

// head_dim 65 at full rotary: rotary_dim 64, element 64 passes through (copied bit for bit).
void write_odd_full(const std::string& dir, Layout l) {
  ref::set_precision_bits(ref::default_bits(Dtype::f32));
  RopeSpec s;
  s.head_dim = 65;
  s.layout = l;
  s = s.normalized();
  const std::int64_t T = 3, H = 2, D = s.head_dim;
  const std::vector<std::int64_t> pos = {0, 9, 4096};
  const auto x = random_x(static_cast<std::size_t>(T * H * D), Dtype::f32, 29);
  auto y = rotate(s, Dtype::f32, x, T, H, pos);
  const std::string stem = dir + "/odd_full_" + name(l);
  const std::map<std::string, std::string> md = {{"layout", name(l)}};
  write_xy(stem + ".safetensors", Dtype::f32, T, H, D, x, y, pos, md);
  // Token 1, head 1: the pass-through element one f32 ulp off, every pair right.
  auto& e = y[static_cast<std::size_t>((1 * H + 1) * D + 64)];
  e = std::nextafter(static_cast<float>(e), INFINITY);
  write_xy(stem + "_passthrough.safetensors", Dtype::f32, T, H, D, x, y, pos, md);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: ropecheck_dumpgen OUTDIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  const std::int64_t T = static_cast<std::int64_t>(kPos.size()), H = 2, D = 64;
  RopeSpec s;
  s.head_dim = D;
  s.layout = Layout::half;
  s = s.normalized();
  ref::set_precision_bits(ref::default_bits(Dtype::f32));

  // ---- f32, tight declared policy -------------------------------------------------------------
  const auto x = random_x(static_cast<std::size_t>(T * H * D), Dtype::f32, 7);
  const auto y = rotate(s, Dtype::f32, x, T, H, 0, false);
  auto file = [&](const std::vector<double>& yy, const std::map<std::string, std::string>& md) {
    tio::TensorFile f;
    f.metadata = md;
    f.tensors.push_back(tio::make_tensor("x", tio::ElemType::f32, {T, H, D}, x));
    f.tensors.push_back(tio::make_tensor("y", tio::ElemType::f32, {T, H, D}, yy));
    f.tensors.push_back(tio::make_int_tensor("positions", tio::ElemType::i64, {T}, kPos));
    return f;
  };
  const std::map<std::string, std::string> tight = {{"layout", "half"},
                                                    {"base", "10000"},
                                                    {"angle_precision", "f64"},
                                                    {"table_precision", "f64"},
                                                    {"arithmetic_precision", "f64"},
                                                    {"angle_recipe", "pow_product"}};
  tio::write_safetensors(dir + "/good_f32.safetensors", file(y, tight));

  // One element a few ULP beyond the bound of its pair.
  {
    const std::int64_t t = 3, h = 1, j = 5;  // half layout: element 5 is pair 5's first element
    const auto off = (t * H + h) * D;
    Policy pol{Dtype::f64, Dtype::f64, Dtype::f64, AngleRecipe::pow_product, false, ""};
    const auto [a, b] = s.pair(j);
    const double sn = std::hypot(x[off + a], x[off + b]);
    const double bound = bounds::pair_error_bound(pol, s, Dtype::f32, j, kPos[t]).abs(sn);
    const double ulp = ref::ulp(y[off + j], Dtype::f32);
    const int k = static_cast<int>(std::ceil(bound / ulp)) + 3;
    auto yp = y;
    float v = static_cast<float>(yp[off + j]);
    for (int i = 0; i < k; ++i) v = std::nextafter(v, std::copysign(INFINITY, v));
    yp[off + j] = v;
    std::cout << "perturbed: token 3 head 1 element 5 by " << k << " ulp (bound " << bound / ulp
              << " ulp)\n";
    tio::write_safetensors(dir + "/perturbed.safetensors", file(yp, tight));
  }
  tio::write_safetensors(dir + "/sinflip.safetensors",
                         file(rotate(s, Dtype::f32, x, T, H, 0, true), tight));
  tio::write_safetensors(dir + "/offbyone.safetensors",
                         file(rotate(s, Dtype::f32, x, T, H, 1, false), tight));
  {
    std::ifstream in(dir + "/good_f32.safetensors", std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(dir + "/truncated.safetensors", std::ios::binary) << all.substr(0, 40);
  }

  // ---- bf16, HF layout [batch, heads, tokens, dim], int32 positions, default policy ----------
  {
    ref::set_precision_bits(ref::default_bits(Dtype::bf16));
    const std::int64_t B = 2;
    const auto xb = random_x(static_cast<std::size_t>(B * H * T * D), Dtype::bf16, 11);
    std::vector<double> yb(xb.size());
    for (std::int64_t bb = 0; bb < B; ++bb)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t t = 0; t < T; ++t) {
          const auto off = ((bb * H + h) * T + t) * D;
          std::vector<double> v(xb.begin() + off, xb.begin() + off + D);
          const auto r = ref::round_to(ref::apply_blocked(s, ref::Mp(kPos[t]), v), Dtype::bf16);
          std::copy(r.begin(), r.end(), yb.begin() + off);
        }
    tio::TensorFile f;
    f.metadata = {{"layout", "half"}};
    f.tensors.push_back(tio::make_tensor("q", tio::ElemType::bf16, {B, H, T, D}, xb));
    f.tensors.push_back(tio::make_tensor("q_out", tio::ElemType::bf16, {B, H, T, D}, yb));
    f.tensors.push_back(tio::make_int_tensor("positions", tio::ElemType::i32, {T}, kPos));
    tio::write_safetensors(dir + "/good_bf16_hf.safetensors", f);
  }

  // ---- npy, f16 [tokens, dim] ---------------------------------------------------------------
  {
    ref::set_precision_bits(ref::default_bits(Dtype::f16));
    const auto xh = random_x(static_cast<std::size_t>(T * D), Dtype::f16, 13);
    tio::write_npy(dir + "/x.npy", tio::make_tensor("x", tio::ElemType::f16, {T, D}, xh));
    tio::write_npy(dir + "/y.npy", tio::make_tensor("y", tio::ElemType::f16, {T, D},
                                                    rotate(s, Dtype::f16, xh, T, 1, 0, false)));
    tio::write_npy(dir + "/y_off.npy", tio::make_tensor("y", tio::ElemType::f16, {T, D},
                                                        rotate(s, Dtype::f16, xh, T, 1, 1, false)));
    tio::write_npy(dir + "/p.npy", tio::make_int_tensor("p", tio::ElemType::i64, {T}, kPos));
    std::ofstream(dir + "/spec.json") << R"({"layout": "half", "base": 10000})"
                                      << "\n";
  }
  write_mixed(dir);
  for (Dtype d : {Dtype::f16, Dtype::bf16, Dtype::f32}) write_overflow(dir, d);
  write_nothing_checked(dir);
  for (Layout l : {Layout::interleaved, Layout::half}) write_odd_full(dir, l);
  return 0;
}
