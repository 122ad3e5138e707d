// The operation sequence of simd_sincos (contract and derivation: trig.hpp), written once over a
// target's f64 vector operations `O`, and the two table-row loops built on it. Included by
// trig.cpp (scalar O) and by each vector body file inside its target region (isa.hpp), so every
// target compiles its own copy; everything here has internal linkage. Needs trig.hpp and
// target.hpp included first (before the region).
//
// O provides: V (the f64 vector, double for the scalar form), M (a lane mask), set1, add, sub,
// mul, fma, neg, kbit(t, b) (bit b of the integer carried in the mantissa of t = k + 1.5*2^52) and
// select(m, a, b) (a where m); for the row loops also kLanes, load, store and beyond(x) (the lanes
// with !(|x| <= kSimdTrigLimit), NaN included, as a bit mask).

namespace ropecheck::kernels::simd {
namespace {

namespace trig_constants {
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;
constexpr double kRound = 0x1.8p52;
constexpr double kC1 = 0x1.921fb54442d18p+0, kC2 = 0x1.1a62633145c07p-54,
                 kC3 = -0x1.f1976b7ed8fbcp-110;
constexpr double kS[8] = {-0x1.5555555555555p-3,  0x1.1111111111111p-7,   -0x1.a01a01a01a01ap-13,
                          0x1.71de3a556c734p-19,  -0x1.ae64567f544e4p-26, 0x1.6124613a86d09p-33,
                          -0x1.ae7f3e733b81fp-41, 0x1.952c77030ad4ap-49};
constexpr double kC[8] = {0x1.5555555555555p-5,   -0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-16,
                          -0x1.27e4fb7789f5cp-22, 0x1.1eed8eff8d898p-29,  -0x1.93974a8c07c9dp-37,
                          0x1.ae7f3e733b81fp-45,  -0x1.6827863b97d97p-53};
}  // namespace trig_constants

// Steps 1 (reduction) and 2 (polynomials) of the derivation: r = r_hi + r_lo ~ x - k pi/2 and the
// sin/cos of r, before the quadrant.
template <class O>
inline void sincos_reduced(typename O::V x, typename O::V& t, typename O::V& sn,
                           typename O::V& cs) {
  namespace k = trig_constants;
  using V = typename O::V;
  t = O::add(O::mul(x, O::set1(k::kTwoOverPi)), O::set1(k::kRound));
  const V kk = O::sub(t, O::set1(k::kRound));
  const V nk = O::neg(kk);
  const V r1 = O::fma(nk, O::set1(k::kC1), x);
  const V p_hi = O::mul(kk, O::set1(k::kC2));
  const V p_lo = O::fma(kk, O::set1(k::kC2), O::neg(p_hi));
  const V r_hi = O::sub(r1, p_hi);
  const V bb = O::sub(r_hi, r1);
  const V e1 = O::add(O::sub(r1, O::sub(r_hi, bb)), O::sub(O::neg(p_hi), bb));
  const V r_lo = O::fma(nk, O::set1(k::kC3), O::sub(e1, p_lo));
  const V z = O::mul(r_hi, r_hi);
  const V z_lo = O::fma(r_hi, r_hi, O::neg(z));
  const V hz = O::mul(z, O::set1(0.5));
  V p = O::set1(k::kS[7]);
  for (int j = 6; j >= 0; --j) p = O::fma(p, z, O::set1(k::kS[j]));
  V q = O::set1(k::kC[7]);
  for (int j = 6; j >= 0; --j) q = O::fma(q, z, O::set1(k::kC[j]));
  const V s_tail = O::fma(O::mul(r_hi, z), p, O::sub(r_lo, O::mul(r_lo, hz)));
  sn = O::add(r_hi, s_tail);
  const V w = O::sub(O::set1(1.0), hz);
  const V e = O::sub(O::neg(hz), O::sub(w, O::set1(1.0)));
  const V c_tail =
      O::fma(O::mul(z, z), q, O::sub(O::sub(e, O::mul(z_lo, O::set1(0.5))), O::mul(r_hi, r_lo)));
  cs = O::add(w, c_tail);
}

// simd_sincos for |x| <= kSimdTrigLimit, lane by lane (step 3: the quadrant from the bits of t).
template <class O>
inline void sincos_body(typename O::V x, typename O::V& s_out, typename O::V& c_out) {
  using V = typename O::V;
  V t, sn, cs;
  sincos_reduced<O>(x, t, sn, cs);
  const auto odd = O::kbit(t, 0);
  const auto neg_s = O::kbit(t, 1);
  const auto neg_c = O::kbit(O::add(t, O::set1(1.0)), 1);
  const V s0 = O::select(odd, cs, sn), c0 = O::select(odd, sn, cs);
  s_out = O::select(neg_s, O::neg(s0), s0);
  c_out = O::select(neg_c, O::neg(c0), c0);
}

// SincosRowsFn (target.hpp): full vectors by sincos_body, the lanes beyond its range and the last
// np % kLanes pairs by simd_sincos (libm beyond the range), which gives the same bits.
template <class O>
void sincos_rows(const double* theta, std::int64_t np, double m, double* cb, double* sb) {
  using V = typename O::V;
  const V vm = O::set1(m);
  std::int64_t i = 0;
  for (; i + O::kLanes <= np; i += O::kLanes) {
    const V x = O::mul(vm, O::load(theta + i));
    V s, c;
    sincos_body<O>(x, s, c);
    O::store(sb + i, s);
    O::store(cb + i, c);
    const unsigned out = O::beyond(x);
    if (out)
      for (int l = 0; l < O::kLanes; ++l)
        if (out >> l & 1u) simd_sincos(m * theta[i + l], sb[i + l], cb[i + l]);
  }
  for (; i < np; ++i) simd_sincos(m * theta[i], sb[i], cb[i]);
}

// ComposeFn (target.hpp), the same two fmas as compose1 on every lane.
template <class O>
void compose_rows(std::int64_t np, const double* bc, const double* bs, const double* jc,
                  const double* js, double* cb, double* sb) {
  using V = typename O::V;
  std::int64_t i = 0;
  for (; i + O::kLanes <= np; i += O::kLanes) {
    const V c0 = O::load(bc + i), s0 = O::load(bs + i);
    const V c1 = O::load(jc + i), s1 = O::load(js + i);
    O::store(cb + i, O::fma(c0, c1, O::neg(O::mul(s0, s1))));
    O::store(sb + i, O::fma(s0, c1, O::mul(c0, s1)));
  }
  for (; i < np; ++i) compose1(bc[i], bs[i], jc[i], js[i], cb[i], sb[i]);
}

}  // namespace
}  // namespace ropecheck::kernels::simd
