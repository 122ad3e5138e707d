// The report's charts as inline SVG (render.hpp): error vs position per octave, angle vs rotation
// per bucket, ULP histograms. Drawn from the document's numbers only.
#include "render.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <sstream>

namespace ropecheck::reports::detail {

using nlohmann::json;

namespace {

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                         "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

// An SVG coordinate.
std::string coord(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// 2^k as a context length is quoted: 1, 16, 256, 4k, 64k, 1M.
std::string pow2_label(int k) {
  static const char* kPrefix[] = {"", "k", "M", "G", "T", "P", "E"};
  return std::to_string(1LL << (k % 10)) + kPrefix[k / 10];
}

// A decade as an axis label: 0.01 ... 1000 written out, beyond that 1e4, 1e-3.
std::string decade_label(int e) {
  if (e < -2 || e > 3) return "1e" + std::to_string(e);
  char b[16];
  std::snprintf(b, sizeof b, "%.*f", e < 0 ? -e : 0, std::pow(10.0, e));
  return b;
}

// A chart's frame: a wide viewBox drawn at 100% width (the page's width decides the size), the
// plot area inside margins for the axis labels (left, bottom) and the legend (right).
struct Frame {
  static constexpr double W = 1000, H = 380, L = 70, R = 200, T = 26, B = 50;
  double x0, x1, y0, y1;  // data range: x in log2 or category index, y in log10
  double px(double x) const { return L + (x - x0) / (x1 - x0) * (W - L - R); }
  double py(double ly) const { return T + (y1 - std::clamp(ly, y0, y1)) / (y1 - y0) * (H - T - B); }
};

// Log10 range over the positive finite values: whole decades, at least one, plus a margin so that
// markers and lines at an extreme are drawn inside the plot area, not on its border.
std::pair<double, double> decades(const std::vector<double>& ys) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double y : ys)
    if (std::isfinite(y) && y > 0) lo = std::min(lo, y), hi = std::max(hi, y);
  if (!(hi > 0)) return {-2, 0};
  const double a = std::floor(std::log10(lo)), b = std::max(a + 1, std::ceil(std::log10(hi)));
  const double margin = 0.04 * (b - a);
  return {a - margin, b + margin};
}

void svg_open(std::ostream& o, const std::string& id, const std::string& title) {
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" data-chart=\"" << esc(id)
    << "\" width=\"100%\" viewBox=\"0 0 " << Frame::W << " " << Frame::H
    << "\" role=\"img\" font-family=\"sans-serif\"><title>" << esc(title) << "</title>";
}

// Plot area, horizontal decade grid with labels, and the y axis title.
void svg_y_axis(std::ostream& o, const Frame& f, const std::string& title) {
  const double r = f.W - f.R;
  o << "<rect class=\"plot-area\" x=\"" << f.L << "\" y=\"" << f.T << "\" width=\"" << r - f.L
    << "\" height=\"" << f.H - f.T - f.B << "\" fill=\"none\" stroke=\"#666\"/>";
  const int e0 = static_cast<int>(std::ceil(f.y0)), e1 = static_cast<int>(std::floor(f.y1));
  const int every = e1 - e0 > 10 ? 2 : 1;  // beyond ten decades the labels would touch
  for (int e = e0; e <= e1; ++e) {
    const double y = f.py(e);
    o << "<line x1=\"" << f.L << "\" x2=\"" << r << "\" y1=\"" << coord(y) << "\" y2=\"" << coord(y)
      << "\" stroke=\"#e4e4e4\"/>";
    if ((e - e0) % every == 0)
      o << "<text x=\"" << f.L - 6 << "\" y=\"" << coord(y + 4)
        << "\" font-size=\"13\" text-anchor=\"end\">" << decade_label(e) << "</text>";
  }
  const double mid = (f.T + f.H - f.B) / 2;
  o << "<text x=\"18\" y=\"" << coord(mid) << "\" font-size=\"13\" text-anchor=\"middle\" "
    << "transform=\"rotate(-90 18 " << coord(mid) << ")\">" << esc(title) << "</text>";
}

// Dotted horizontal lines at the storage rounding (1 u) and the headline's multiples of it.
void svg_storage_lines(std::ostream& o, const Frame& f, const json& factors) {
  std::vector<std::pair<double, std::string>> lines{{1.0, "1 u storage rounding"}};
  for (const auto& k : factors) lines.push_back({k.get<double>(), cell(k) + "x"});
  for (const auto& [v, label] : lines) {
    const double ly = std::log10(v);
    if (ly < f.y0 || ly > f.y1) continue;
    o << "<line x1=\"" << f.L << "\" x2=\"" << f.W - f.R << "\" y1=\"" << coord(f.py(ly))
      << "\" y2=\"" << coord(f.py(ly)) << "\" stroke=\"#999\" stroke-dasharray=\"2 3\"/>";
    o << "<text x=\"" << f.W - f.R - 4 << "\" y=\"" << coord(f.py(ly) - 3)
      << "\" font-size=\"11\" fill=\"#777\" text-anchor=\"end\">" << esc(label) << "</text>";
  }
}

// Octave ticks (labelled every few octaves) and dotted lines at the headline's contexts.
void svg_position_axis(std::ostream& o, const Frame& f, const json& contexts) {
  const int step = std::max(1, static_cast<int>(std::ceil((f.x1 - f.x0) / 10)));
  for (int k = static_cast<int>(f.x0); k <= static_cast<int>(f.x1); k += step)
    o << "<text x=\"" << coord(f.px(k)) << "\" y=\"" << f.H - f.B + 18
      << "\" font-size=\"13\" text-anchor=\"middle\">" << pow2_label(k) << "</text>";
  for (const auto& c : contexts) {
    const double lx = std::log2(c["context"].get<double>());
    if (lx <= f.x0 || lx > f.x1) continue;
    o << "<line x1=\"" << coord(f.px(lx)) << "\" x2=\"" << coord(f.px(lx)) << "\" y1=\"" << f.T
      << "\" y2=\"" << f.H - f.B << "\" stroke=\"#bbb\" stroke-dasharray=\"4 4\"/><text x=\""
      << coord(f.px(lx)) << "\" y=\"" << f.T - 6 << "\" font-size=\"12\" text-anchor=\"middle\">"
      << esc(cell(c["label"])) << "</text>";
  }
  o << "<text x=\"" << (f.L + f.W - f.R) / 2 << "\" y=\"" << f.H - 8
    << "\" font-size=\"13\" text-anchor=\"middle\">position (log scale; each step spans one octave "
       "[2^k, 2^(k+1)))</text>";
}

// Legend in the right margin: one colored line per kernel, then the line styles.
void svg_legend(std::ostream& o, const Frame& f, const std::vector<std::string>& kernels,
                const std::vector<std::pair<std::string, std::string>>& styles) {
  double y = f.T + 12;
  const double x = f.W - f.R + 16;
  for (std::size_t i = 0; i < kernels.size(); ++i, y += 20)
    o << "<line x1=\"" << x << "\" x2=\"" << x + 24 << "\" y1=\"" << y << "\" y2=\"" << y
      << "\" stroke=\"" << kColors[i % 8] << "\" stroke-width=\"3\"/><text x=\"" << x + 30
      << "\" y=\"" << y + 5 << "\" font-size=\"13\">" << esc(kernels[i]) << "</text>";
  y += 8;
  for (const auto& [dash, label] : styles) {
    o << "<line x1=\"" << x << "\" x2=\"" << x + 24 << "\" y1=\"" << y << "\" y2=\"" << y
      << "\" stroke=\"#333\" stroke-width=\"2\"" << dash << "/><text x=\"" << x + 30 << "\" y=\""
      << y + 5 << "\" font-size=\"12\">" << esc(label) << "</text>";
    y += 18;
  }
}

// The per-octave max and RMS pair errors of each kernel of one dtype (position 0 has no place on
// a log axis; it is in the tables).
struct OctaveSeries {
  std::string kernel;
  std::vector<std::array<double, 3>> pts;  // octave start, max u, RMS u
};
std::vector<OctaveSeries> octave_series(const json& r, const std::string& dtype) {
  std::vector<OctaveSeries> v;
  for (const auto& res : r["results"]) {
    if (res["dtype"] != dtype) continue;
    OctaveSeries s{res["kernel"].get<std::string>(), {}};
    for (const auto& o : res["octaves"])
      if (o["position_lo"].get<double>() >= 1)
        s.pts.push_back(
            {o["position_lo"].get<double>(), dbl_of(o["max_pair_u"]), dbl_of(o["rms_pair_u"])});
    v.push_back(s);
  }
  return v;
}

// A step line: value v over [2^k, 2^(k+1)) for each octave, broken where a value is 0 or not
// finite and where an octave holds no sample (a slope across it would invent data).
std::string step_path(const Frame& f, const std::vector<std::array<double, 3>>& pts, int which) {
  std::string d;
  bool open = false;
  double next_x = -1;
  for (const auto& p : pts) {
    const double v = p[which], x = std::log2(p[0]);
    if (x != next_x) open = false;
    next_x = x + 1;
    if (!(std::isfinite(v) && v > 0)) {
      open = false;
      continue;
    }
    const std::string y = coord(f.py(std::log10(v)));
    d += (open ? " L" : (d.empty() ? "M" : " M")) + coord(f.px(x)) + " " + y;
    d += " L" + coord(f.px(x + 1)) + " " + y;
    open = true;
  }
  return d;
}

// Max (solid) and RMS (dashed) per-pair error vs position for one dtype, kernels as series; empty
// when there is nothing to draw.
}  // namespace

std::string svg_error_vs_position(const json& r, const std::string& dtype) {
  const auto series = octave_series(r, dtype);
  std::vector<double> ys;
  double xmax = 1;
  for (const auto& s : series)
    for (const auto& p : s.pts) ys.push_back(p[1]), ys.push_back(p[2]), xmax = std::max(xmax, p[0]);
  const auto [y0, y1] = decades(ys);
  const Frame f{0, std::log2(xmax) + 1, y0, y1};
  std::ostringstream paths;
  std::vector<std::string> kernels;
  for (std::size_t i = 0; i < series.size(); ++i) {
    kernels.push_back(series[i].kernel);
    paths << "<g class=\"series\" data-series=\"" << esc(series[i].kernel) << "\">";
    for (int which : {1, 2}) {
      const std::string d = step_path(f, series[i].pts, which);
      if (d.empty()) continue;
      paths << "<path d=\"" << d << "\" fill=\"none\" stroke=\"" << kColors[i % 8]
            << "\" stroke-width=\"2\"" << (which == 2 ? " stroke-dasharray=\"6 4\"" : "") << "/>";
    }
    paths << "</g>";
  }
  if (paths.str().find("<path") == std::string::npos) return "";
  std::ostringstream o;
  svg_open(o, "error-" + dtype, "max and RMS per-pair error vs position, " + dtype);
  svg_y_axis(o, f, "per-pair error (u of " + dtype + ")");
  const json h = r.value("headline", json::object());
  svg_position_axis(o, f, h.value("contexts", json::array()));
  svg_storage_lines(o, f, h.value("factors", json::array()));
  o << paths.str();
  svg_legend(o, f, kernels, {{"", "max"}, {" stroke-dasharray=\"6 4\"", "RMS"}});
  o << "</svg>";
  return o.str();
}

namespace {

// The buckets that carry an angle/rotation split (position 0 has none: its angle is exact).
std::vector<std::string> split_buckets(const json& r) {
  std::vector<std::string> names;
  for (const auto& b : r["buckets"])
    if (b["sampled"].get<bool>() && b["lo"].get<std::int64_t>() > 0)
      names.push_back(b["name"].get<std::string>());
  return names;
}

}  // namespace

// Angle (solid, dots) and rotation (dashed, squares) RMS per-pair error by position bucket for one
// dtype, kernels as series: where the error comes from, and how that changes with position.
std::string svg_angle_split(const json& r, const std::string& dtype) {
  const auto names = split_buckets(r);
  std::vector<std::pair<std::string, std::vector<std::array<double, 2>>>> series;
  std::vector<double> ys;
  for (const auto& res : r["results"]) {
    if (res["dtype"] != dtype) continue;
    std::vector<std::array<double, 2>> pts(names.size(), {NAN, NAN});
    for (const auto& b : res["buckets"])
      for (std::size_t i = 0; i < names.size(); ++i)
        if (b["bucket"] == names[i]) {
          const auto& a = b["angle_vs_rotation"];
          pts[i] = {dbl_of(a["angle_rms_u"]), dbl_of(a["rotation_rms_u"])};
          ys.push_back(pts[i][0]), ys.push_back(pts[i][1]);
        }
    series.push_back({res["kernel"].get<std::string>(), pts});
  }
  const auto [y0, y1] = decades(ys);
  const Frame f{-0.5, std::max(0.5, names.size() - 0.5), y0, y1};
  std::ostringstream marks;
  std::vector<std::string> kernels;
  for (std::size_t k = 0; k < series.size(); ++k) {
    kernels.push_back(series[k].first);
    marks << "<g class=\"series\" data-series=\"" << esc(series[k].first) << "\">";
    for (int which : {0, 1}) {
      std::string d;
      for (std::size_t i = 0; i < names.size(); ++i) {
        const double v = series[k].second[i][which];
        if (!(std::isfinite(v) && v > 0)) continue;
        const double x = f.px(static_cast<double>(i)) + (which ? 4.0 : -4.0),
                     y = f.py(std::log10(v));
        d += (d.empty() ? "M" : " L") + coord(x) + " " + coord(y);
        marks << (which ? "<rect x=\"" + coord(x - 4) + "\" y=\"" + coord(y - 4) +
                              "\" width=\"8\" height=\"8\""
                        : "<circle cx=\"" + coord(x) + "\" cy=\"" + coord(y) + "\" r=\"4.5\"")
              << " fill=\"" << kColors[k % 8] << "\"/>";
      }
      if (!d.empty())
        marks << "<path d=\"" << d << "\" fill=\"none\" stroke=\"" << kColors[k % 8]
              << "\" stroke-width=\"2\"" << (which ? " stroke-dasharray=\"6 4\"" : "") << "/>";
    }
    marks << "</g>";
  }
  if (marks.str().find("<path") == std::string::npos &&
      marks.str().find("<circle") == std::string::npos &&
      marks.str().find("<rect") == std::string::npos)
    return "";
  std::ostringstream o;
  svg_open(o, "split-" + dtype,
           "angle vs rotation RMS per-pair error by position bucket, " + dtype);
  svg_y_axis(o, f, "RMS per-pair error (u of " + dtype + ")");
  for (std::size_t i = 0; i < names.size(); ++i)
    o << "<text x=\"" << coord(f.px(static_cast<double>(i))) << "\" y=\"" << f.H - f.B + 18
      << "\" font-size=\"13\" text-anchor=\"middle\">" << esc(names[i]) << "</text>";
  o << "<text x=\"" << (f.L + f.W - f.R) / 2 << "\" y=\"" << f.H - 8
    << "\" font-size=\"13\" text-anchor=\"middle\">position bucket</text>";
  o << marks.str();
  svg_legend(o, f, kernels,
             {{"", "angle (dots)"}, {" stroke-dasharray=\"6 4\"", "rotation (squares)"}});
  o << "</svg>";
  return o.str();
}

// Grouped bars: fraction of elements per ULP bin, one bar per kernel.
std::string svg_ulp_histogram(const json& r, const std::string& dtype) {
  std::vector<std::pair<std::string, std::vector<double>>> ks;
  std::vector<std::string> labels;
  for (const auto& res : r["results"]) {
    if (res["dtype"] != dtype) continue;
    std::vector<double> f;
    double total = 0;
    for (const auto& h : res["ulp_histogram"]) total += h["count"].get<double>();
    labels.clear();
    for (const auto& h : res["ulp_histogram"]) {
      f.push_back(total > 0 ? h["count"].get<double>() / total : 0.0);
      labels.push_back(h["bin"].get<std::string>());
    }
    ks.push_back({res["kernel"].get<std::string>(), f});
  }
  // Keep bins up to the last non-empty one.
  std::size_t nb = 0;
  for (const auto& k : ks)
    for (std::size_t i = 0; i < k.second.size(); ++i)
      if (k.second[i] > 0) nb = std::max(nb, i + 1);
  nb = std::max<std::size_t>(nb, 3);
  const double W = 640, H = 300, L = 50, R = 150, T = 20, B = 90;
  const double gw = (W - L - R) / static_cast<double>(nb);
  const double bw = gw * 0.8 / static_cast<double>(std::max<std::size_t>(ks.size(), 1));
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" data-chart=\"ulp-" << esc(dtype)
    << "\" width=\"100%\" viewBox=\"0 0 " << W << " " << H
    << "\" role=\"img\" font-family=\"sans-serif\">";
  o << "<title>ULP error histogram, " << esc(dtype) << "</title>";
  o << "<rect class=\"plot-area\" x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R
    << "\" height=\"" << H - T - B << "\" fill=\"none\" stroke=\"#888\"/>";
  for (int t = 0; t <= 4; ++t) {
    const double y = T + (H - T - B) * (1 - t / 4.0);
    o << "<text x=\"" << L - 5 << "\" y=\"" << coord(y + 4)
      << "\" font-size=\"11\" text-anchor=\"end\">" << t * 25 << "%</text>";
  }
  for (std::size_t i = 0; i < ks.size(); ++i) {
    o << "<g class=\"series\" data-series=\"" << esc(ks[i].first) << "\">";
    for (std::size_t b = 0; b < nb && b < ks[i].second.size(); ++b) {
      const double h = ks[i].second[b] * (H - T - B);
      o << "<rect x=\"" << coord(L + gw * b + gw * 0.1 + bw * i) << "\" y=\"" << coord(H - B - h)
        << "\" width=\"" << coord(bw) << "\" height=\"" << coord(h) << "\" fill=\""
        << kColors[i % 8] << "\"/>";
    }
    o << "</g>";
  }
  for (std::size_t b = 0; b < nb && b < labels.size(); ++b) {
    const double x = L + gw * (b + 0.5), y = H - B + 10;
    o << "<text x=\"" << coord(x) << "\" y=\"" << y << "\" font-size=\"10\" text-anchor=\"end\" "
      << "transform=\"rotate(-45 " << coord(x) << " " << y << ")\">" << esc(labels[b]) << "</text>";
  }
  for (std::size_t i = 0; i < ks.size(); ++i) {
    const double ly = T + 14 + 18.0 * static_cast<double>(i);
    o << "<rect x=\"" << W - R + 10 << "\" y=\"" << ly - 8 << "\" width=\"12\" height=\"10\" "
      << "fill=\"" << kColors[i % 8] << "\"/>";
    o << "<text x=\"" << W - R + 28 << "\" y=\"" << ly + 1 << "\" font-size=\"11\">"
      << esc(ks[i].first) << "</text>";
  }
  o << "</svg>";
  return o.str();
}

}  // namespace ropecheck::reports::detail
