// The fused RoPE + FP8 quantization + cache-write check (fused.hpp says what is accepted and why).
#include "ropecheck/scan/fused.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <unordered_set>

#include "ropecheck/reference/reference.hpp"

namespace ropecheck::scan {

namespace tio = ropecheck::tensorio;

const char* name(ScaleGranularity g) {
  switch (g) {
    case ScaleGranularity::tensor:
      return "per_tensor";
    case ScaleGranularity::head:
      return "per_head";
    case ScaleGranularity::token_head:
      return "per_token_head";
  }
  return "?";
}

std::string describe(const FusedChain& c) {
  std::ostringstream o;
  o << "rotation -> " << (c.intermediate ? name(*c.intermediate) : "f32 (no intermediate)")
    << " -> " << (c.divide ? "/" : "*") << " scale (" << name(c.granularity) << ", f32) -> "
    << name(c.format) << " nearest-even, overflow " << name(c.overflow);
  if (c.row_offset) o << "; RoPE slice at element " << c.row_offset << " of each cache row";
  return o.str();
}

namespace {

using verify::chain_trace;

std::vector<unsigned char> read_all(const tio::TensorRef& t) {
  std::vector<unsigned char> b(static_cast<std::size_t>(t.numel() * tio::elem_bytes(t.type)));
  if (t.numel() > 0) t.read(0, t.numel(), b.data());
  return b;
}

std::vector<double> read_values(const tio::TensorRef& t) {
  const auto b = read_all(t);
  const int eb = tio::elem_bytes(t.type);
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = tio::decode(t.type, b.data() + i * eb);
  return v;
}

std::vector<std::int64_t> read_ints(const tio::TensorRef& t, const char* what) {
  if (t.type != tio::ElemType::i64 && t.type != tio::ElemType::i32)
    throw FusedError(std::string("tensor '") + what + "' must be I64 or I32, is " + t.type_name);
  const auto b = read_all(t);
  const int eb = tio::elem_bytes(t.type);
  std::vector<std::int64_t> v(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = tio::decode_int(t.type, b.data() + i * eb);
  return v;
}

// The dump's geometry, checked against the declaration.
struct Shape {
  std::int64_t T = 0, H = 1, D = 0, slots = 0, W = 0;
};

Shape shape_of(const FusedTensors& t, const FusedChain& c, const RopeSpec& spec) {
  Shape s;
  const auto& xs = t.x.shape;
  if (xs.size() != 2 && xs.size() != 3)
    throw FusedError("tensor 'x' must be [tokens, heads, head_dim] or [tokens, head_dim]");
  s.T = xs[0];
  s.H = xs.size() == 3 ? xs[1] : 1;
  s.D = xs.back();
  if (spec.n_axes() != 1) throw FusedError("fused dumps of multi-axis layouts are not supported");
  if (t.positions.numel() != s.T || t.slot_mapping.numel() != s.T)
    throw FusedError("'positions' and 'slot_mapping' must hold one value per token (" +
                     std::to_string(s.T) + ")");
  for (const auto* k : {&t.cache_before, &t.cache_after})
    if (k->type != tio::ElemType::u8)
      throw FusedError("tensor '" + k->name + "' must be F8_E4M3, F8_E5M2 or U8 bytes, is " +
                       k->type_name);
  const auto& ks = t.cache_after.shape;
  if (t.cache_before.shape != ks)
    throw FusedError("'cache_before' and 'cache_after' must have the same shape");
  const std::size_t lead = c.one_head_rows ? 1 : 2;  // trailing dims: [heads,] W
  if (ks.size() < lead + 1)
    throw FusedError(c.one_head_rows ? "the cache must be [slots, W] or [blocks, block_size, W]"
                                     : "the cache must be [slots, heads, W] or [blocks, "
                                       "block_size, heads, W]");
  s.W = ks.back();
  const std::int64_t Hc = c.one_head_rows ? 1 : ks[ks.size() - 2];
  if (Hc != s.H)
    throw FusedError("the cache has " + std::to_string(Hc) + " head(s) per row, 'x' has " +
                     std::to_string(s.H));
  s.slots = 1;
  for (std::size_t i = 0; i + lead < ks.size(); ++i) s.slots *= ks[i];
  if (c.row_offset < 0 || c.row_offset + s.D > s.W)
    throw FusedError("cache_row_offset " + std::to_string(c.row_offset) + " + head_dim " +
                     std::to_string(s.D) + " exceeds the cache row of " + std::to_string(s.W));
  const std::int64_t n = t.scale.numel();
  const std::int64_t want = c.granularity == ScaleGranularity::tensor ? 1
                            : c.granularity == ScaleGranularity::head ? s.H
                                                                      : s.T * s.H;
  if (n != want)
    throw FusedError("tensor 'scale' has " + std::to_string(n) + " value(s); scale_granularity " +
                     name(c.granularity) + " needs " + std::to_string(want));
  return s;
}

std::string hex_byte(unsigned b) {
  std::ostringstream o;
  o << "0x" << std::hex << (b < 16 ? "0" : "") << b;
  return o.str();
}

std::string num(double v) {
  std::ostringstream o;
  o.precision(9);
  o << v;
  return o.str();
}

}  // namespace

namespace {

// One written token's head vectors against the chain (appends findings, counts).
class TokenChecker {
 public:
  TokenChecker(const FusedChain& c, const verify::PairChecker& pc, const reference::Oracle& oracle,
               const Shape& s, int keep)
      : c_(c), pc_(pc), oracle_(oracle), s_(s), keep_(keep) {
    const RopeSpec& spec = pc.spec();
    pair_of_.assign(static_cast<std::size_t>(s.D), -1);
    for (std::int64_t i = 0; i < spec.n_pairs(); ++i) {
      const auto [a, b] = spec.pair(i);
      pair_of_[a] = pair_of_[b] = i;
    }
    mag_ = reference::magnitude(spec).convert_to<double>();
  }

  // x: the token's H x D input values; cache: the cache row bytes (H x W) after the call.
  void check(std::int64_t tok, std::int64_t pos, std::int64_t slot, const double* x,
             const unsigned char* row, const std::vector<double>& scales, FusedResult& r) {
    oracle_.at({pos}, rot_);
    pc_.bounds_at({pos}, bounds_);
    for (std::int64_t h = 0; h < s_.H; ++h) {
      const double* xv = x + h * s_.D;
      if (!std::all_of(xv, xv + s_.D, [](double e) { return std::isfinite(e); })) {
        ++r.skipped_nonfinite;
        continue;
      }
      rot_.apply(xv, exact_);
      const double scale = scales[static_cast<std::size_t>(
          c_.granularity == ScaleGranularity::tensor ? 0
          : c_.granularity == ScaleGranularity::head ? h
                                                     : tok * s_.H + h)];
      for (std::int64_t j = 0; j < s_.D; ++j) {
        const unsigned char b = row[h * s_.W + c_.row_offset + j];
        element(tok, pos, slot, h, j, xv, scale, b, r);
      }
    }
  }

 private:
  void element(std::int64_t tok, std::int64_t pos, std::int64_t slot, std::int64_t h,
               std::int64_t j, const double* xv, double scale, unsigned char b, FusedResult& r) {
    ++r.elements;
    const std::int64_t p = pair_of_[static_cast<std::size_t>(j)];
    const double v = p < 0 ? xv[j] : exact_.value(j);
    double P = 0;
    if (p >= 0) {
      const auto [a, bb] = pc_.spec().pair(p);
      P = bounds_[static_cast<std::size_t>(p)].pre_storage_abs(mag_ * std::hypot(xv[a], xv[bb]));
    }
    // Outward: the subtraction's rounding and the exact value's own (half an ulp of v).
    const double lo = std::nextafter(std::nextafter(v - P, -INFINITY), -INFINITY);
    const double hi = std::nextafter(std::nextafter(v + P, INFINITY), INFINITY);
    const ChainRange cr = chain_range(c_, lo, hi, scale);
    if (cr.lo != cr.hi || (cr.nan_ok && cr.lo <= cr.hi)) ++r.ties;
    const verify::ChainTrace ex = chain_trace(c_, v, scale);
    if (std::isnan(ex.c) || std::isinf(ex.c) || std::fabs(ex.q) > traits(c_.format).max_finite)
      ++r.overflowed;
    const double got = fp8_decode(c_.format, b);
    const bool ok = std::isnan(got) ? cr.nan_ok : got >= cr.lo && got <= cr.hi;
    if (ok) return;
    ++r.wrong;
    std::int64_t ulps = -1;
    if (std::isfinite(got) && std::isfinite(cr.lo) && std::isfinite(cr.hi))
      ulps = got < cr.lo ? fp8_rank(c_.format, cr.lo) - fp8_rank(c_.format, got)
                         : fp8_rank(c_.format, got) - fp8_rank(c_.format, cr.hi);
    r.max_ulps = std::max(r.max_ulps, ulps);
    if (static_cast<int>(r.findings.size()) >= keep_) return;
    std::ostringstream o;
    o << "token " << tok << " (position " << pos << ", slot " << slot << "), head " << h
      << ", element " << j << (p < 0 ? " (pass-through)" : "") << ": stored " << hex_byte(b)
      << " = " << num(got) << ", accepted [" << num(cr.lo) << ", " << num(cr.hi) << "]"
      << (cr.nan_ok ? " or NaN" : "") << (ulps > 0 ? ", off by " + std::to_string(ulps) : "")
      << (ulps > 0 ? " fp8 ulp(s)" : "") << "; exact " << num(v) << " +- P " << num(P)
      << ", its chain: " << (c_.intermediate ? name(*c_.intermediate) : "f32") << " " << num(ex.r)
      << ", " << (c_.divide ? "/" : "*") << " scale " << num(scale) << " = " << num(ex.q) << " -> "
      << num(ex.c) << " (" << hex_byte(fp8_encode(c_.format, ex.c)) << ")";
    r.findings.push_back(o.str());
  }

  const FusedChain& c_;
  const verify::PairChecker& pc_;
  const reference::Oracle& oracle_;
  const Shape& s_;
  int keep_;
  std::vector<std::int64_t> pair_of_;
  double mag_ = 1;
  reference::Rotation rot_;
  reference::ExactVector exact_;
  std::vector<bounds::PairBound> bounds_;
};

// The slot each token writes (-1: none), checked: in range, each slot at most once.
std::vector<std::int64_t> slots_of(const FusedTensors& t, const Shape& s) {
  std::vector<std::int64_t> slot = read_ints(t.slot_mapping, "slot_mapping");
  std::unordered_set<std::int64_t> seen;
  for (std::size_t i = 0; i < slot.size(); ++i) {
    if (slot[i] == -1) continue;
    if (slot[i] < -1 || slot[i] >= s.slots)
      throw FusedError("slot_mapping[" + std::to_string(i) + "] = " + std::to_string(slot[i]) +
                       " is outside the cache's " + std::to_string(s.slots) +
                       " slots (-1: no write)");
    if (!seen.insert(slot[i]).second)
      throw FusedError("slot " + std::to_string(slot[i]) +
                       " is named twice in slot_mapping: the dump cannot say which write stands");
  }
  return slot;
}

// Rows no token addresses must be unchanged; addressed rows' bytes outside the slice are counted.
void check_unaddressed(const std::vector<unsigned char>& before,
                       const std::vector<unsigned char>& after, const std::vector<bool>& addressed,
                       const Shape& s, int keep, FusedResult& r) {
  const std::int64_t row = s.H * s.W;
  for (std::int64_t k = 0; k < s.slots; ++k) {
    if (addressed[static_cast<std::size_t>(k)]) {
      r.unchecked_bytes += s.H * (s.W - s.D);
      continue;
    }
    std::int64_t changed = 0, first = -1;
    for (std::int64_t i = 0; i < row; ++i)
      if (before[k * row + i] != after[k * row + i]) {
        if (first < 0) first = i;
        ++changed;
      }
    if (!changed) continue;
    r.unaddressed_changed += changed;
    if (static_cast<int>(r.findings.size()) < keep)
      r.findings.push_back(
          "slot " + std::to_string(k) + " (no token addresses it): " + std::to_string(changed) +
          " byte(s) changed, first at head " + std::to_string(first / s.W) + " element " +
          std::to_string(first % s.W) + ": " + hex_byte(before[k * row + first]) + " -> " +
          hex_byte(after[k * row + first]));
  }
}

}  // namespace

FusedResult check_fused(const FusedTensors& t, const FusedChain& chain,
                        const verify::PairChecker& checker, const reference::Oracle& oracle,
                        int max_failures) {
  const Shape s = shape_of(t, chain, checker.spec());
  if (t.x.type != tio::ElemType::f64 && t.x.type != tio::ElemType::f32 &&
      t.x.type != tio::ElemType::f16 && t.x.type != tio::ElemType::bf16)
    throw FusedError("tensor 'x' must be F64/F32/F16/BF16, is " + t.x.type_name);
  if (t.scale.type != tio::ElemType::f32 && t.scale.type != tio::ElemType::f64)
    throw FusedError("tensor 'scale' must be F32 or F64, is " + t.scale.type_name);
  const std::vector<double> scales = read_values(t.scale);
  for (double sc : scales)
    if (!(sc > 0) || !std::isfinite(sc))
      throw FusedError("every scale must be finite and > 0, got " + num(sc));
  const std::vector<std::int64_t> pos = read_ints(t.positions, "positions");
  for (std::int64_t m : pos)  // the oracle's contract (oracle.hpp)
    if (m <= -(std::int64_t{1} << 62) || m >= (std::int64_t{1} << 62))
      throw FusedError("position " + std::to_string(m) + " is outside |m| < 2^62");
  const std::vector<std::int64_t> slot = slots_of(t, s);
  const std::vector<double> x = read_values(t.x);
  const std::vector<unsigned char> before = read_all(t.cache_before),
                                   after = read_all(t.cache_after);
  FusedResult r;
  r.tokens = s.T;
  std::vector<bool> addressed(static_cast<std::size_t>(s.slots), false);
  TokenChecker tc(chain, checker, oracle, s, max_failures);
  for (std::int64_t k = 0; k < s.T; ++k) {
    if (slot[k] < 0) continue;
    ++r.written_tokens;
    addressed[static_cast<std::size_t>(slot[k])] = true;
    tc.check(k, pos[k], slot[k], x.data() + k * s.H * s.D, after.data() + slot[k] * s.H * s.W,
             scales, r);
  }
  check_unaddressed(before, after, addressed, s, max_failures, r);
  return r;
}

}  // namespace ropecheck::scan
