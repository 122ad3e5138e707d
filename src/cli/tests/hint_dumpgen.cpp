// Writes the wrong-declaration dumps of the hint tests (hint_tests.cmake): each the outputs of a
// kernel emulated as an engine computes them (src/verify/tests/emulated_rope.hpp, no reference,
// no bounds) with a declaration in __metadata__ that is not what the kernel does. Half layout,
// head_dim 64 (128 for rotary_dim), 2 heads, positions 0 ... 100000, base 10000.
//
//   bf16_table          cos/sin rounded to bf16, rotation in f32; declared f32 table
//   f16_table           the same with f16
//   f32_angle_as_f64    HF's f32 angle; declared an f64 angle (pow_product)
//   toward_zero         f32 rotation truncated into bf16 storage; declared nearest-even
//   base_off_by_one     base 10001; the spec says 10000
//   base_500000         base 500000; the spec says 10000
//   position_plus_one   rotated by m + 1
//   interleaved         pairs (2i, 2i+1); the spec says half
//   sin_negated         rotated by -m
//   rotary_dim_64       rotates 64 of 128; the spec says 128
//   passthrough_zeroed  rotary_dim 32 of 64 right, the pass-through dims zeroed
//   bf16_cache          an angle computed wholly in bf16 (a bug): no declaration may be advised
//   bf16_table_one_bad  bf16_table with the last vector's sin negated: nothing explains it all
//   qk_bf16_f16_tables  q from a bf16 table, k from an f16 table (two tensor pairs)
//   qk_bf16_table_k_sin_negated  q from a bf16 table, k rotated by -m: nothing explains both
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../../verify/tests/emulated_rope.hpp"
#include "ropecheck/tensorio/tensorio.hpp"

namespace tio = ropecheck::tensorio;
using namespace emulated;

namespace {

const std::vector<std::int64_t> kPos = {0, 1, 2, 7, 100, 1000, 4095, 4096, 30000, 100000};
constexpr std::int64_t kHeads = 2;

// The inputs and outputs of one tensor pair; last_negated: the last vector's sin negated.
void rotate_all(std::int64_t D, bool bf16, const Emu& e, bool last_negated, std::uint64_t seed,
                std::vector<double>& x, std::vector<double>& y) {
  const std::int64_t T = static_cast<std::int64_t>(kPos.size());
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-2, 2);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t h = 0; h < kHeads; ++h) {
      std::vector<double> v(static_cast<std::size_t>(D));
      for (auto& a : v)
        a = bf16 ? bf16_round(static_cast<float>(u(rng))) : static_cast<float>(u(rng));
      Emu k = e;
      if (last_negated && t == T - 1 && h == kHeads - 1) k.negate_sin = !k.negate_sin;
      const auto o = emulate(k, v.data(), kPos[t]);
      x.insert(x.end(), v.begin(), v.end());
      y.insert(y.end(), o.begin(), o.end());
    }
}

// q -> q_out and k -> k_out, each from its own kernel (f32 tensors).
void write_qk(const std::string& path, const Emu& eq, const Emu& ek,
              const std::map<std::string, std::string>& md) {
  const std::int64_t T = static_cast<std::int64_t>(kPos.size()), D = 64;
  std::vector<double> q, qo, k, ko;
  rotate_all(D, false, eq, false, 12, q, qo);
  rotate_all(D, false, ek, false, 13, k, ko);
  tio::TensorFile f;
  f.metadata = md;
  for (const auto& [n, v] : {std::pair{"q", &q}, {"q_out", &qo}, {"k", &k}, {"k_out", &ko}})
    f.tensors.push_back(tio::make_tensor(n, tio::ElemType::f32, {T, kHeads, D}, *v));
  f.tensors.push_back(tio::make_int_tensor("positions", tio::ElemType::i64, {T}, kPos));
  tio::write_safetensors(path, f);
}

void write(const std::string& path, std::int64_t D, bool bf16, const Emu& e,
           const std::map<std::string, std::string>& md, bool last_negated = false) {
  const std::int64_t T = static_cast<std::int64_t>(kPos.size());
  std::vector<double> x, y;
  rotate_all(D, bf16, e, last_negated, 11, x, y);
  tio::TensorFile f;
  f.metadata = md;
  const auto type = bf16 ? tio::ElemType::bf16 : tio::ElemType::f32;
  f.tensors.push_back(tio::make_tensor("x", type, {T, kHeads, D}, x));
  f.tensors.push_back(tio::make_tensor("y", type, {T, kHeads, D}, y));
  f.tensors.push_back(tio::make_int_tensor("positions", tio::ElemType::i64, {T}, kPos));
  tio::write_safetensors(path, f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: ropecheck_hint_dumpgen OUTDIR\n";
    return 2;
  }
  std::filesystem::create_directories(argv[1]);
  const std::string dir = std::string(argv[1]) + "/";
  const std::map<std::string, std::string> md = {{"layout", "half"}, {"base", "10000"}};
  auto with = [&](std::map<std::string, std::string> extra) {
    auto m = md;
    for (const auto& [k, v] : extra) m[k] = v;
    return m;
  };
  Emu e;
  {
    Emu k = e;
    k.table = Table::bf16;
    write(dir + "bf16_table.safetensors", 64, false, k, md);
    write(dir + "bf16_table_one_bad.safetensors", 64, false, k, md, true);
    k.table = Table::f16;
    write(dir + "f16_table.safetensors", 64, false, k, md);
    // Two tensor pairs: the hint must hold for both (a bf16 table covers the f16 one too); with
    // k's sin negated nothing does.
    Emu b = e, h = e, n = e;
    b.table = Table::bf16;
    h.table = Table::f16;
    n.angle = Angle::exact;
    n.negate_sin = true;
    write_qk(dir + "qk_bf16_f16_tables.safetensors", b, h, md);
    write_qk(dir + "qk_bf16_table_k_sin_negated.safetensors", b, n, md);
  }
  write(dir + "f32_angle_as_f64.safetensors", 64, false, e,
        with({{"angle_precision", "f64"}, {"angle_recipe", "pow_product"}}));
  {
    Emu k = e;
    k.out = Out::bf16_toward_zero;
    write(dir + "toward_zero.safetensors", 64, true, k, md);
  }
  Emu x = e;
  x.angle = Angle::exact;
  {
    Emu k = x;
    k.base = 10001;
    write(dir + "base_off_by_one.safetensors", 64, false, k, md);
    k.base = 500000;
    write(dir + "base_500000.safetensors", 64, false, k, md);
  }
  {
    Emu k = x;
    k.offset = 1;
    write(dir + "position_plus_one.safetensors", 64, false, k, md);
  }
  {
    Emu k = x;
    k.half = false;
    write(dir + "interleaved.safetensors", 64, false, k, md);
  }
  {
    Emu k = x;
    k.negate_sin = true;
    write(dir + "sin_negated.safetensors", 64, false, k, md);
  }
  {
    Emu k = x;
    k.head_dim = 128;
    k.rotary_dim = 64;
    write(dir + "rotary_dim_64.safetensors", 128, false, k, md);
  }
  {
    Emu k = e;
    k.rotary_dim = 32;
    k.zero_passthrough = true;
    write(dir + "passthrough_zeroed.safetensors", 64, false, k, with({{"rotary_dim", "32"}}));
  }
  {
    Emu k = e;
    k.angle = Angle::bf16;
    k.table = Table::bf16;
    k.bf16_arithmetic = true;
    k.out = Out::bf16;
    write(dir + "bf16_cache.safetensors", 64, true, k, md);
  }
  return 0;
}
