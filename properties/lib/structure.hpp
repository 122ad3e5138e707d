// The structure family: claims about what a call touches, bit for bit.
//   PassThroughIsExact       dims >= rotary_dim come out as they went in (any bit pattern)
//   InputUntouched           out-of-place leaves the input alone and writes nothing in gaps or
//                            guard regions (padded strides)
//   InPlaceEqualsOutOfPlace  out == in gives the out-of-place result
//   TokensAreIndependent     a batch equals its tokens and heads alone; permuting tokens permutes
//                            the results (within twice the pair bound for a batch-variant kernel)
// Rows of the table: table.hpp. Shared helpers: common.hpp; the special-value policy of
// pass-through: algebraic.hpp.
#pragma once

#include "common.hpp"

#include <numeric>

namespace ropecheck::properties::detail {

// ---------------------------------------------------------------------------------------------
// PassThroughIsExact: dims >= rotary_dim hold arbitrary bit patterns (incl. inf, NaN, -0,
// subnormals) and come out bit for bit (NaN stays NaN); rotated dims finite.
template <Dtype D>
void pass_through_is_exact(const Kernel& k, g::Context& c) {
  g::SpecOptions o;
  o.force_partial = true;
  const RopeSpec s = usable<D>(k, c, o);
  if (s.rotary_dim >= s.head_dim) discard("no partial rotary spec drawn");
  std::int64_t nt = 0, nh = 0;  // not a structured binding: lambdas capture them (clang 14)
  std::tie(nt, nh) = g::counts(3, 2, s.head_dim);
  const std::int64_t d = s.head_dim;
  const auto pos = g::positions(c, nt, std::int64_t{1} << 31);
  auto x = finite_input<D>(k.policy(D), s, nt * nh);
  for (std::int64_t v = 0; v < nt * nh; ++v)
    for (std::int64_t j : pass_dims(s)) x[v * d + j] = g::any_bits(D);
  const auto in = store_vec<D>(x);
  const auto out = run<D>(k, c, s, nt, nh, pos, in);
  for (std::int64_t v = 0; v < nt * nh; ++v)
    for (std::int64_t j : pass_dims(s)) {
      const auto xi = in[v * d + j], yo = out[v * d + j];
      const bool ok = same_bits(xi, yo) || (std::isnan(to_d<D>(xi)) && std::isnan(to_d<D>(yo)));
      if (!ok)
        fail("pass-through vector " + std::to_string(v) + " dim " + std::to_string(j) + ": " +
             hex(to_d<D>(xi)) + " -> " + hex(to_d<D>(yo)) + " | " + ctx(s, pos));
    }
}

// Strided layout with guard regions around the tensor (llama.cpp test-backend-ops idea): the
// kernel must touch only its output elements.
struct Strided {
  std::int64_t nt, nh, d, hs, ts, guard = 16;
  std::int64_t size() const { return 2 * guard + nt * ts; }
  std::int64_t idx(std::int64_t t, std::int64_t h, std::int64_t j) const {
    return guard + t * ts + h * hs + j;
  }
  bool is_elem(std::int64_t p) const {
    p -= guard;
    if (p < 0 || p >= nt * ts) return false;
    const std::int64_t r = p % ts;
    return r < nh * hs && r % hs < d;
  }
};

inline Strided gen_strided(const RopeSpec& s) {
  Strided st;
  std::tie(st.nt, st.nh) = g::counts(3, 3, s.head_dim);
  st.d = s.head_dim;
  st.hs = s.head_dim + g::pick(0, 3);
  st.ts = st.nh * st.hs + g::pick(0, 5);
  return st;
}

template <Dtype D>
TensorArgs strided_args(const Strided& st, const std::vector<std::int64_t>& pos, const T<D>* in,
                        T<D>* out) {
  TensorArgs a;
  a.dtype = D;
  a.n_tokens = st.nt;
  a.n_heads = st.nh;
  a.positions = pos.data();
  a.in = in + st.guard;
  a.out = out + st.guard;
  a.token_stride = st.ts;
  a.head_stride = st.hs;
  return a;
}

// ---------------------------------------------------------------------------------------------
// InputUntouched: out-of-place leaves the input buffer bit for bit unchanged, and writes
// nothing outside its output elements (gaps between heads/tokens and guard regions).
template <Dtype D>
void input_untouched(const Kernel& k, g::Context& c) {
  const RopeSpec s = usable<D>(k, c);
  const Strided st = gen_strided(s);
  const auto pos = g::positions(c, st.nt, std::int64_t{1} << 31);
  const auto in0 =
      store_vec<D>(finite_input<D>(k.policy(D), s, (st.size() + s.head_dim - 1) / s.head_dim));
  std::vector<T<D>> in(in0.begin(), in0.begin() + st.size());
  const std::vector<T<D>> copy = in;
  const T<D> sentinel = to_st<D>(round_to_dtype(-1234.5678, D));
  std::vector<T<D>> out(static_cast<std::size_t>(st.size()), sentinel);
  apply_checked(k, c, s, strided_args<D>(st, pos, in.data(), out.data()));
  for (std::int64_t p = 0; p < st.size(); ++p) {
    if (!same_bits(in[p], copy[p]))
      fail("input element " + std::to_string(p - st.guard) + " modified | " + ctx(s, pos));
    if (!st.is_elem(p) && !same_bits(out[p], sentinel))
      fail("write outside the output tensor at offset " + std::to_string(p - st.guard) + " | " +
           ctx(s, pos));
  }
}

// InPlaceEqualsOutOfPlace: out == in gives the out-of-place result bit for bit, and leaves the
// buffer's gaps alone.
template <Dtype D>
void in_place_equals_out_of_place(const Kernel& k, g::Context& c) {
  const RopeSpec s = usable<D>(k, c);
  const Strided st = gen_strided(s);
  const auto pos = g::positions(c, st.nt, std::int64_t{1} << 31);
  const auto in0 =
      store_vec<D>(finite_input<D>(k.policy(D), s, (st.size() + s.head_dim - 1) / s.head_dim));
  const std::vector<T<D>> in(in0.begin(), in0.begin() + st.size());
  std::vector<T<D>> out(in.size(), to_st<D>(0.0));
  apply_checked(k, c, s, strided_args<D>(st, pos, in.data(), out.data()));
  std::vector<T<D>> buf = in;
  apply_checked(k, c, s, strided_args<D>(st, pos, buf.data(), buf.data()));
  for (std::int64_t p = 0; p < st.size(); ++p) {
    if (st.is_elem(p) && !same_bits(buf[p], out[p]))
      fail("in-place " + hex(to_d<D>(buf[p])) + " != out-of-place " + hex(to_d<D>(out[p])) +
           " at offset " + std::to_string(p - st.guard) + " | " + ctx(s, pos));
    if (!st.is_elem(p) && !same_bits(buf[p], in[p]))
      fail("in-place call wrote outside the tensor at offset " + std::to_string(p - st.guard) +
           " | " + ctx(s, pos));
  }
}

// ---------------------------------------------------------------------------------------------
// TokensAreIndependent: each (token, head) result equals the single-token single-head call, and
// permuting the tokens permutes the results. Bit for bit, unless the domain declares the kernel
// batch-variant (PyTorch's CPU loops, a vectorised body with a scalar tail): then within twice
// the pair bound, which a token reading another token's position or data still exceeds.
template <Dtype D>
void tokens_are_independent(const Kernel& k, g::Context& c) {
  const RopeSpec s = usable<D>(k, c);
  std::int64_t nt = 0, nh = 0;
  std::tie(nt, nh) = g::counts(5, 3, s.head_dim, 1 << 12);
  nt = std::max<std::int64_t>(nt, 2);
  const std::int64_t d = s.head_dim;
  const bool bitwise = k.domain().batch_invariant;
  const auto pos = g::positions(c, nt, std::int64_t{1} << 31);
  const auto x = finite_input<D>(k.policy(D), s, nt * nh);
  const auto in = store_vec<D>(x);
  const auto out = run<D>(k, c, s, nt, nh, pos, in);
  // Vector v of `got` against vector v of `out`, both at position m.
  auto compare = [&](const T<D>* got, std::int64_t v, std::int64_t m, const std::string& what) {
    const std::int64_t off = v * d;
    if (!bitwise) {
      const auto why = differ_beyond_twice_the_bound<D>(k.policy(D), s, m, &x[off], got, &out[off]);
      if (!why.empty())
        fail(what + " (declared batch-variant, compared within twice the bound): " + why + " | " +
             ctx(s, pos));
      return;
    }
    for (std::int64_t j = 0; j < d; ++j)
      if (!same_bits(got[j], out[off + j]))
        fail(what + ", dim " + std::to_string(j) + ": " + hex(to_d<D>(got[j])) + " != batched " +
             hex(to_d<D>(out[off + j])) + " | " + ctx(s, pos));
  };
  for (std::int64_t t = 0; t < nt; ++t)
    for (std::int64_t h = 0; h < nh; ++h) {
      const std::int64_t v = t * nh + h;
      const std::vector<T<D>> one(in.begin() + v * d, in.begin() + (v + 1) * d);
      const auto single = run<D>(k, c, s, 1, 1, {pos[t]}, one);
      compare(single.data(), v, pos[t],
              "token " + std::to_string(t) + " head " + std::to_string(h) + " alone");
    }
  std::vector<std::int64_t> perm(static_cast<std::size_t>(nt));
  std::iota(perm.begin(), perm.end(), 0);
  for (std::int64_t i = nt - 1; i > 0; --i) std::swap(perm[i], perm[g::pick<std::int64_t>(0, i)]);
  std::vector<T<D>> pin;
  std::vector<std::int64_t> ppos;
  for (auto t : perm) {
    pin.insert(pin.end(), in.begin() + t * nh * d, in.begin() + (t + 1) * nh * d);
    ppos.push_back(pos[t]);
  }
  const auto pout = run<D>(k, c, s, nt, nh, ppos, pin);
  for (std::int64_t r = 0; r < nt; ++r)
    for (std::int64_t h = 0; h < nh; ++h)
      compare(&pout[(r * nh + h) * d], perm[r] * nh + h, pos[perm[r]],
              "permuting tokens changed token " + std::to_string(perm[r]) + " head " +
                  std::to_string(h));
}

}  // namespace ropecheck::properties::detail
