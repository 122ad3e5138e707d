// Writes the scaling-variant and multi-axis dumps the `ropecheck check` tests read.
//
// Independent of the code under test: neither the spec library's f64 formulas nor the reference
// are used. Each recipe is transcribed here from its source (HF modeling_rope_utils
// _compute_yarn_parameters, Qwen2-VL apply_multimodal_rotary_pos_emb, Qwen3-VL
// apply_interleaved_mrope, CogVideoX get_3d_rotary_pos_embed) and evaluated in long double
// (64-bit significand). The f32 outputs are the long-double results cast to float: the
// long-double result is within ~|m| theta 2^-63 (angle) + a few 2^-64 (products) of the exact
// value, i.e. < 1e-13 relative for |m| < 2^18, so the cast gives the correctly rounded f32 except
// when the exact value lies within 1e-13 relative of an f32 rounding boundary (probability
// ~2^-20 per element, and even then the result is one of the two faithful neighbours, which the
// declared f32 policy's bound covers by orders of magnitude). A bug in `check`, in the reference's
// variant formulas or in the spec parsing of the metadata keys makes the *good* dumps fail.
//
//   yarn_good[_meta].safetensors   DeepSeek-style YaRN (factor 40, original 4096, mscale 1,
//                                  mscale_all_dim 0.707), half layout, head_dim 64; _meta carries
//                                  the spec in __metadata__, the plain one only the tensors (for
//                                  --hf-config deepseek_yarn.json)
//   yarn_wrong_mscale[_meta]       the same, magnitude 0.1 ln f + 1 (mscale/mscale_all_dim
//                                  ignored: HF's default get_mscale(factor))
//   mrope_good[_meta]              Qwen2-VL M-RoPE [16,24,24], base 1e6, head_dim 128, per-axis
//                                  positions [3, tokens] with t != h != w
//   mrope_swapped_hw_meta          the same, h and w positions swapped
//   imrope_good_meta               Qwen3-VL interleaved M-RoPE [24,20,20], base 5e6
//   imrope_as_mrope_meta           the same tensors rotated with M-RoPE's contiguous sections
//   axial_good_meta                CogVideoX 3-D axial (t 8, h 12, w 12 pairs), head_dim 64
//   axial_neox_pairing_meta        the same with NeoX (i, i + d/2) pairing hard-coded
//   longrope_long[_meta]           Phi-3.5-style LongRoPE (the factors of hf/phi35_longrope.json,
//                                  original 4096, max 131072), positions up to 20000 and so the
//                                  long factors (HF: seq_len = max(position_ids) + 1 > 4096); no
//                                  seq_len in the metadata
//   longrope_seq_len_4096_meta     the same with seq_len 4096 in the metadata (too small: refused)
//   dynamic_long_meta              HF dynamic NTK (factor 2, L0 4096, head_dim 64), positions up
//                                  to 8000: base' for seq_len 8001; no seq_len in the metadata
//   worst_at                       plain half RoPE, f32, head_dim 8: exact outputs nudged by a few
//                                  ulps, a small error at position 1 (small bound) and a larger
//                                  one at position 100000 (larger bound), so the largest error
//                                  and the largest share of the bound are different vectors
//   nan_output                     the exact outputs of worst_at with one NaN (token 1, elem 1)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ropecheck/tensorio/tensorio.hpp"

namespace tio = ropecheck::tensorio;
using LD = long double;

namespace {

const LD kPi = 3.141592653589793238462643383279502884L;

// One rotation recipe: per pair (element a, element b, theta, axis) and a magnitude.
struct Recipe {
  std::vector<std::int64_t> a, b, axis;
  std::vector<LD> theta;
  LD magnitude = 1;
  std::int64_t head_dim = 0;
};

// 1-D ladder theta_i = base^(-2i/dim), i < dim/2 (HF: 1 / base^(arange(0, dim, 2) / dim)).
std::vector<LD> ladder(LD base, std::int64_t dim) {
  std::vector<LD> t;
  for (std::int64_t i = 0; i < dim / 2; ++i) t.push_back(1 / std::pow(base, LD(2 * i) / dim));
  return t;
}

// HF _compute_yarn_parameters (transformers modeling_rope_utils), truncate = true.
struct Yarn {
  LD base = 10000, factor = 40, mscale = 1, mscale_all_dim = 0.707L;
  std::int64_t dim = 64, original = 4096;
  LD beta_fast = 32, beta_slow = 1;
  std::vector<LD> inv_freq() const {
    const auto corr_dim = [&](LD rot) {
      return (dim * std::log(LD(original) / (rot * 2 * kPi))) / (2 * std::log(base));
    };
    LD low = std::floor(corr_dim(beta_fast)), high = std::ceil(corr_dim(beta_slow));
    low = std::max<LD>(low, 0);
    high = std::min<LD>(high, LD(dim - 1));
    if (low == high) high += 0.001L;
    std::vector<LD> out;
    const auto th = ladder(base, dim);
    for (std::int64_t i = 0; i < dim / 2; ++i) {
      const LD ramp = std::clamp((LD(i) - low) / (high - low), LD(0), LD(1));
      const LD extrap_factor = 1 - ramp;
      out.push_back(th[i] / factor * (1 - extrap_factor) + th[i] * extrap_factor);
    }
    return out;
  }
  static LD get_mscale(LD scale, LD m) { return scale <= 1 ? 1 : 0.1L * m * std::log(scale) + 1; }
  LD attention_factor() const {
    return get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim);
  }
};

Recipe half_recipe(std::int64_t hd, const std::vector<LD>& theta) {
  Recipe r;
  r.head_dim = hd;
  r.theta = theta;
  const auto n = static_cast<std::int64_t>(theta.size());
  for (std::int64_t i = 0; i < n; ++i) r.a.push_back(i), r.b.push_back(i + n), r.axis.push_back(0);
  return r;
}

// Qwen2-VL: rotate_half pairing over the head, one ladder; pair i takes its cos/sin from axis
// t, h or w by contiguous chunks of mrope_section (torch.split of the half-dim cos table).
Recipe mrope(std::int64_t hd, LD base, const std::vector<std::int64_t>& sec, bool interleaved) {
  Recipe r = half_recipe(hd, ladder(base, hd));
  for (std::int64_t i = 0; i < hd / 2; ++i) {
    if (interleaved) {
      // Qwen3-VL apply_interleaved_mrope: freqs_t[..., 1:3*sec[1]:3] = freqs_h, [2:3*sec[2]:3] = w.
      r.axis[i] = (i % 3 == 1 && i < 3 * sec[1]) ? 1 : (i % 3 == 2 && i < 3 * sec[2]) ? 2 : 0;
    } else {
      r.axis[i] = i < sec[0] ? 0 : i < sec[0] + sec[1] ? 1 : 2;
    }
  }
  return r;
}

// CogVideoX get_3d_rotary_pos_embed: per axis its own ladder base^(-2j/dim_axis), dim_axis = 2 *
// pairs of the axis, interleaved (repeat_interleave) pairs, t then h then w.
Recipe axial(std::int64_t hd, LD base, const std::vector<std::int64_t>& sec, bool neox) {
  Recipe r;
  r.head_dim = hd;
  std::int64_t i = 0;
  for (std::size_t ax = 0; ax < sec.size(); ++ax)
    for (std::int64_t j = 0; j < sec[ax]; ++j, ++i) {
      r.theta.push_back(1 / std::pow(base, LD(2 * j) / (2 * sec[ax])));
      r.axis.push_back(static_cast<std::int64_t>(ax));
      r.a.push_back(neox ? i : 2 * i);
      r.b.push_back(neox ? i + hd / 2 : 2 * i + 1);
    }
  return r;
}

// HF _compute_longrope_parameters: theta_i = 1 / (ext_i base^(2i/dim)), ext = long_factor iff
// seq_len > original; attention factor sqrt(1 + ln(max / original) / ln(original)) when
// max > original (Phi-3: factor = max_position_embeddings / original_max_position_embeddings).
Recipe longrope(std::int64_t hd, LD base, const std::vector<LD>& ext, std::int64_t original,
                std::int64_t max_pos) {
  std::vector<LD> th = ladder(base, hd);
  for (std::size_t i = 0; i < th.size(); ++i) th[i] /= ext[i];
  Recipe r = half_recipe(hd, th);
  const LD f = LD(max_pos) / LD(original);
  r.magnitude = f <= 1 ? 1 : std::sqrt(1 + std::log(f) / std::log(LD(original)));
  return r;
}

// HF _compute_dynamic_ntk_parameters: base' = base ((f L / L0) - (f - 1))^(dim / (dim - 2)),
// L = seq_len if seq_len > L0 else L0.
Recipe dynamic_ntk(std::int64_t hd, LD base, LD factor, std::int64_t l0, std::int64_t seq_len) {
  const LD L = seq_len > l0 ? LD(seq_len) : LD(l0);
  const LD b = base * std::pow(factor * L / LD(l0) - (factor - 1), LD(hd) / LD(hd - 2));
  return half_recipe(hd, ladder(b, hd));
}

// positions: axis-major [A][T]. x: [T][H][D].
std::vector<double> rotate(const Recipe& r, const std::vector<double>& x, std::int64_t T,
                           std::int64_t H, const std::vector<std::vector<std::int64_t>>& pos) {
  std::vector<double> y(x);  // pass-through dims (none in these specs) stay
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t off = (t * H + h) * r.head_dim;
      for (std::size_t i = 0; i < r.theta.size(); ++i) {
        const LD ang = LD(pos[static_cast<std::size_t>(r.axis[i])][t]) * r.theta[i];
        const LD c = std::cos(ang), s = std::sin(ang);
        const LD xa = x[off + r.a[i]], xb = x[off + r.b[i]];
        y[off + r.a[i]] = static_cast<float>(r.magnitude * (xa * c - xb * s));
        y[off + r.b[i]] = static_cast<float>(r.magnitude * (xa * s + xb * c));
      }
    }
  return y;
}

std::vector<double> random_x(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-3.0, 3.0);
  std::vector<double> x(n);
  for (auto& v : x) v = static_cast<float>(u(rng));
  return x;
}

void write(const std::string& path, const std::map<std::string, std::string>& md,
           const std::vector<double>& x, const std::vector<double>& y, std::int64_t T,
           std::int64_t H, std::int64_t D, const std::vector<std::vector<std::int64_t>>& pos) {
  tio::TensorFile f;
  f.metadata = md;
  f.tensors.push_back(tio::make_tensor("x", tio::ElemType::f32, {T, H, D}, x));
  f.tensors.push_back(tio::make_tensor("y", tio::ElemType::f32, {T, H, D}, y));
  std::vector<std::int64_t> flat;
  for (const auto& p : pos) flat.insert(flat.end(), p.begin(), p.end());
  if (pos.size() == 1)
    f.tensors.push_back(tio::make_int_tensor("positions", tio::ElemType::i64, {T}, flat));
  else
    f.tensors.push_back(tio::make_int_tensor("positions", tio::ElemType::i64,
                                             {static_cast<std::int64_t>(pos.size()), T}, flat));
  tio::write_safetensors(path, f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: ropecheck_variant_dumpgen OUTDIR\n";
    return 2;
  }
  const std::string dir = std::string(argv[1]) + "/";
  const std::int64_t H = 2;

  // ---- DeepSeek-style YaRN ---------------------------------------------------------------------
  {
    const std::vector<std::vector<std::int64_t>> pos = {{0, 1, 7, 4096, 50000, 163839}};
    const std::int64_t T = 6, D = 64;
    const Yarn y;
    Recipe good = half_recipe(D, y.inv_freq());
    good.magnitude = y.attention_factor();
    Recipe wrong = good;
    wrong.magnitude = Yarn::get_mscale(y.factor, 1);  // mscale / mscale_all_dim ignored
    const auto x = random_x(static_cast<std::size_t>(T * H * D), 21);
    const std::map<std::string, std::string> md = {{"layout", "half"},
                                                   {"base", "10000"},
                                                   {"scaling", "yarn"},
                                                   {"factor", "40"},
                                                   {"original_max_position_embeddings", "4096"},
                                                   {"mscale", "1"},
                                                   {"mscale_all_dim", "0.707"}};
    const auto yg = rotate(good, x, T, H, pos), yw = rotate(wrong, x, T, H, pos);
    write(dir + "yarn_good_meta.safetensors", md, x, yg, T, H, D, pos);
    write(dir + "yarn_wrong_mscale_meta.safetensors", md, x, yw, T, H, D, pos);
    write(dir + "yarn_good.safetensors", {}, x, yg, T, H, D, pos);
    write(dir + "yarn_wrong_mscale.safetensors", {}, x, yw, T, H, D, pos);
    std::cout << "yarn: attention factor " << static_cast<double>(good.magnitude) << ", wrong "
              << static_cast<double>(wrong.magnitude) << "\n";
  }

  // ---- M-RoPE / interleaved M-RoPE, distinct per-axis positions -------------------------------
  // Text tokens (t = h = w), then image patches (t fixed, h and w on the grid), then a video frame.
  const std::vector<std::vector<std::int64_t>> pos3 = {
      {0, 1, 2, 2, 2, 2, 9, 300}, {0, 1, 2, 2, 3, 4, 9, 17}, {0, 1, 2, 5, 2, 3, 11, 40}};
  const std::int64_t T3 = 8;
  {
    const std::int64_t D = 128;
    const auto x = random_x(static_cast<std::size_t>(T3 * H * D), 22);
    const Recipe r = mrope(D, 1000000, {16, 24, 24}, false);
    const std::map<std::string, std::string> md = {
        {"layout", "mrope"}, {"base", "1000000"}, {"sections", "16,24,24"}};
    const auto yg = rotate(r, x, T3, H, pos3);
    write(dir + "mrope_good_meta.safetensors", md, x, yg, T3, H, D, pos3);
    write(dir + "mrope_good.safetensors", {}, x, yg, T3, H, D, pos3);
    const std::vector<std::vector<std::int64_t>> swapped = {pos3[0], pos3[2], pos3[1]};
    write(dir + "mrope_swapped_hw_meta.safetensors", md, x, rotate(r, x, T3, H, swapped), T3, H, D,
          pos3);
  }
  {
    const std::int64_t D = 128;
    const auto x = random_x(static_cast<std::size_t>(T3 * H * D), 23);
    const std::map<std::string, std::string> md = {
        {"layout", "imrope"}, {"base", "5000000"}, {"sections", "24,20,20"}};
    write(dir + "imrope_good_meta.safetensors", md, x,
          rotate(mrope(D, 5000000, {24, 20, 20}, true), x, T3, H, pos3), T3, H, D, pos3);
    write(dir + "imrope_as_mrope_meta.safetensors", md, x,
          rotate(mrope(D, 5000000, {24, 20, 20}, false), x, T3, H, pos3), T3, H, D, pos3);
  }
  {
    const std::int64_t D = 64;
    const auto x = random_x(static_cast<std::size_t>(T3 * H * D), 24);
    const std::map<std::string, std::string> md = {
        {"layout", "axial"}, {"base", "10000"}, {"sections", "8,12,12"}};
    write(dir + "axial_good_meta.safetensors", md, x,
          rotate(axial(D, 10000, {8, 12, 12}, false), x, T3, H, pos3), T3, H, D, pos3);
    write(dir + "axial_neox_pairing_meta.safetensors", md, x,
          rotate(axial(D, 10000, {8, 12, 12}, true), x, T3, H, pos3), T3, H, D, pos3);
  }

  // ---- LongRoPE beyond original_max_position_embeddings, no seq_len in the metadata -----------
  {
    const std::int64_t D = 96, T = 6;
    const std::vector<std::vector<std::int64_t>> pos = {{0, 1, 4095, 4096, 5000, 20000}};
    // hf/phi35_longrope.json: short_factor 1.00, 1.01, ..., long_factor 1 + 1.25 i (exact).
    std::string short_text, long_text;
    std::vector<LD> long_f;
    for (std::int64_t i = 0; i < D / 2; ++i) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.2f", i ? "," : "", 1 + 0.01 * static_cast<double>(i));
      short_text += buf;
      long_f.push_back(1 + 1.25L * LD(i));
      std::snprintf(buf, sizeof buf, "%s%.2f", i ? "," : "", static_cast<double>(long_f.back()));
      long_text += buf;
    }
    const auto x = random_x(static_cast<std::size_t>(T * H * D), 25);
    // transformers: seq_len = max(position_ids) + 1 = 20001 > 4096 -> the long factors.
    const auto y = rotate(longrope(D, 10000, long_f, 4096, 131072), x, T, H, pos);
    std::map<std::string, std::string> md = {{"layout", "half"},
                                             {"base", "10000"},
                                             {"scaling", "longrope"},
                                             {"original_max_position_embeddings", "4096"},
                                             {"max_position_embeddings", "131072"},
                                             {"short_factor", short_text},
                                             {"long_factor", long_text}};
    write(dir + "longrope_long_meta.safetensors", md, x, y, T, H, D, pos);
    write(dir + "longrope_long.safetensors", {}, x, y, T, H, D, pos);
    md["seq_len"] = "4096";
    write(dir + "longrope_seq_len_4096_meta.safetensors", md, x, y, T, H, D, pos);
  }

  // ---- dynamic NTK beyond max_position_embeddings, no seq_len in the metadata -----------------
  {
    const std::int64_t D = 64, T = 4;
    const std::vector<std::vector<std::int64_t>> pos = {{0, 17, 4096, 8000}};
    const auto x = random_x(static_cast<std::size_t>(T * H * D), 26);
    const std::map<std::string, std::string> md = {{"layout", "half"},
                                                   {"base", "10000"},
                                                   {"scaling", "dynamic"},
                                                   {"factor", "2"},
                                                   {"max_position_embeddings", "4096"}};
    write(dir + "dynamic_long_meta.safetensors", md, x,
          rotate(dynamic_ntk(D, 10000, 2, 4096, 8001), x, T, H, pos), T, H, D, pos);
  }

  // ---- the largest error and the largest share of the bound at different vectors -------------
  {
    const std::int64_t D = 8, T = 2, H1 = 1;
    const std::vector<std::vector<std::int64_t>> pos = {{1, 100000}};
    const auto x = random_x(static_cast<std::size_t>(T * H1 * D), 27);
    auto y = rotate(half_recipe(D, ladder(10000, D)), x, T, H1, pos);
    // Element 0 (pair 0) of each token moved up by f32 ulps: 8 at position 1 (about 2 u, a fifth
    // of its bound), 40 at 100000 (about 5 u, a smaller share of its larger bound).
    const auto nudge = [&](std::int64_t t, int ulps) {
      float v = static_cast<float>(y[static_cast<std::size_t>(t * D)]);
      for (int k = 0; k < ulps; ++k) v = std::nextafter(v, INFINITY);
      y[static_cast<std::size_t>(t * D)] = v;
    };
    auto y_nan = y;
    y_nan[static_cast<std::size_t>(D + 1)] = NAN;  // token 1, element 1 (pair 1)
    write(dir + "nan_output.safetensors", {{"layout", "half"}}, x, y_nan, T, H1, D, pos);
    nudge(0, 8);
    nudge(1, 40);
    write(dir + "worst_at.safetensors", {{"layout", "half"}}, x, y, T, H1, D, pos);
  }
  return 0;
}
