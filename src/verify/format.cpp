#include "ropecheck/verify/verify.hpp"

#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

namespace ropecheck::verify {

std::string fmt(double v, int significant) {
  if (std::isnan(v)) return "nan";
  std::ostringstream o;
  o << std::setprecision(significant) << v;
  return o.str();
}

std::pair<std::string, std::string> fmt_apart(double a, double b, int significant) {
  for (int prec = significant;; ++prec) {
    std::string sa = fmt(a, prec), sb = fmt(b, prec);
    if (sa != sb || prec >= 17 || a == b || (std::isnan(a) && std::isnan(b))) return {sa, sb};
  }
}

std::pair<std::string, std::string> fmt_got_expected(double got, const Mp& expected) {
  auto s = fmt_apart(got, static_cast<double>(expected), 9);
  if (s.first != s.second || !std::isfinite(got) || reference::exact(got) == expected) return s;
  for (int prec = 18;; ++prec) {
    s = {reference::to_decimal(reference::exact(got), prec), reference::to_decimal(expected, prec)};
    if (s.first != s.second || prec >= 60) return s;
  }
}

std::string exceeded(double err, double bound, double unit, bool got_nan, bool got_inf) {
  if (std::isnan(err)) return got_nan ? "error is NaN (got a NaN output)" : "error is NaN";
  if (std::isinf(err))
    return got_inf ? "error is infinite (got an infinite output)" : "error is infinite";
  if (std::isnan(bound)) return "bound is NaN (error " + fmt(err, 17) + ")";
  if (unit > 0) {
    const auto [e, b] = fmt_apart(err / unit, bound / unit);
    if (e != b) return "error " + e + " u > bound " + b + " u";
  }
  const auto [e, b] = fmt_apart(err, bound);
  return "error " + e + " > bound " + b + " (absolute" +
         (unit > 0 ? ", both " + fmt(err / unit, 17) + " u" : ", the input pair is zero") + ")";
}

std::string relative_text(double err, double bound, double scale) {
  if (!(scale > 0) || !std::isfinite(err)) return "";
  return " (relative " + fmt(err / scale, 3) + " > " + fmt(bound / scale, 3) +
         "; scale s||x|| = " + fmt(scale, 4) + ")";
}

std::string explain_pair(const PairCheck& p, double x_a, double x_b, double got_a, double got_b,
                         const Mp& exact_a, const Mp& exact_b, double u) {
  const auto ga = fmt_got_expected(got_a, exact_a);
  const auto gb = fmt_got_expected(got_b, exact_b);
  const auto xs = fmt_apart(x_a, x_b, 9);
  // The verdict takes any non-finite output's error as infinite; a NaN output is said as such.
  const double err = p.got_nan ? std::numeric_limits<double>::quiet_NaN() : p.error_abs;
  return exceeded(err, p.bound_abs, p.scaled_norm * u, p.got_nan, p.got_inf) +
         relative_text(err, p.bound_abs, p.scaled_norm) + "; got (" + ga.first + ", " + gb.first +
         "), expected (" + ga.second + ", " + gb.second + ") from x = (" + xs.first + ", " +
         xs.second + ")" +
         (p.overflowed && std::isfinite(err)
              ? " (an output read as an overflow stands for the values that round to it)"
              : "");
}

std::string explain_passthrough(std::int64_t elem, double got, double input, Dtype d) {
  auto [gs, is] = fmt_apart(got, input, 9);
  if (gs == is) {  // NaN payloads, -0 vs +0: the bits tell them apart
    std::ostringstream g, i;
    g << std::hex << " (bits 0x" << bits_of(got, d) << ")";
    i << std::hex << " (bits 0x" << bits_of(input, d) << ")";
    gs += g.str();
    is += i.str();
  }
  return "pass-through element " + std::to_string(elem) + " changed: got " + gs + ", input " + is;
}

std::string Location::text() const {
  std::ostringstream o;
  auto sep = [&o, first = true]() mutable {
    if (!first) o << ", ";
    first = false;
  };
  if (!tensor.empty()) sep(), o << tensor;
  if (batch >= 0) sep(), o << "batch " << batch;
  if (token >= 0) {
    sep();
    o << "token " << token;
    if (!position.empty()) {
      o << " (position ";
      if (position.size() > 1) o << "(";
      for (std::size_t a = 0; a < position.size(); ++a) o << (a ? "," : "") << position[a];
      if (position.size() > 1) o << ")";
      o << ")";
    }
  } else if (!position.empty()) {
    sep();
    o << "position ";
    for (std::size_t a = 0; a < position.size(); ++a) o << (a ? "," : "") << position[a];
  }
  if (head >= 0) sep(), o << "head " << head;
  if (pair >= 0) {
    sep();
    o << "pair " << pair;
    if (elem_a >= 0) o << " (elements " << elem_a << ", " << elem_b << ")";
  } else if (elem_a >= 0) {
    sep();
    o << "element " << elem_a;
  }
  return o.str();
}

}  // namespace ropecheck::verify
