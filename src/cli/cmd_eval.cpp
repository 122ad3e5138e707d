// `ropecheck eval`: one spec, a few positions and input rows -> the exact reference, its correct
// rounding, and optionally a kernel's output with its error, as one JSON object.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <optional>

#include "cli.hpp"
#include "ropecheck/fp8.hpp"
#include "ropecheck/kernels/engines.hpp"
#include "ropecheck/kernels/registry.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/verify/fp8_chain.hpp"
#include "ropecheck/verify/verify.hpp"

namespace ropecheck::cli {

namespace ref = ropecheck::reference;

namespace {

struct EvalOptions {
  // Sentinel for "not given", so an explicit --head-dim 0 reaches the spec validation and is
  // reported as such rather than as a missing option.
  static constexpr std::int64_t kUnset = std::numeric_limits<std::int64_t>::min();
  std::int64_t head_dim = kUnset;
  std::int64_t rotary_dim = 0;
  double base = 10000.0;
  double scale = 1.0;
  std::string layout;
  std::string dtype;
  std::string positions;
  std::string input;
  std::string kernel;
  int digits = 40;
  unsigned ref_bits = 0;
  HfConfigArg hf;
  // --fp8: the exact value's one correct rounding into an FP8 format (a fused cache's ideal),
  // after the exact scale (multiply or divide), with the overflow policy.
  Fp8Arg fp8;
};

// JSON has no inf/nan: they are written as the strings "inf", "-inf", "nan". Finite values are
// written by nlohmann-json with the shortest round-trip representation of the double.
nlohmann::ordered_json number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

nlohmann::ordered_json number_row(const std::vector<double>& row) {
  auto j = nlohmann::ordered_json::array();
  for (double v : row) j.push_back(number(v));
  return j;
}

// The spec: from --hf-config (a Hugging Face config.json; exclusive with the spec flags), or from
// --head-dim/--rotary-dim/--base/--layout.
RopeSpec eval_spec(const EvalOptions& o) {
  if (auto model = o.hf.read()) {
    RopeSpec s = *model;
    s.scale = o.scale;
    return s.normalized();
  }
  if (o.head_dim == EvalOptions::kUnset || o.layout.empty())
    throw UsageError("--head-dim and --layout are required (or --hf-config)");
  const auto layout = parse_layout(o.layout);
  if (!layout || is_multi_axis(*layout))
    throw UsageError("--layout must be " + layout_choices(/*one_d=*/true) + ", got '" + o.layout +
                     "' (multi-axis layouts come from --hf-config)");
  RopeSpec raw;
  raw.head_dim = o.head_dim;
  raw.rotary_dim = o.rotary_dim;
  raw.base = o.base;
  raw.scale = o.scale;
  raw.layout = *layout;
  return raw.normalized();  // throws SpecError -> exit 2
}

// --position: one entry per token. "M" is int64 where it parses as one (the reference alone also
// takes fractional M); on a multi-axis spec it is every axis's position (t = h = w). "t:h:w" gives
// each axis its own int64 position, exactly spec.n_axes() of them, so a token whose axes differ
// (an M-RoPE image patch) can be evaluated.
struct EvalPositions {
  std::vector<ref::Positions> axes;  // per token: one entry (broadcast) or n_axes entries
  std::vector<ref::Mp> flat;         // every position of every token and axis (seq_len)
  std::vector<std::string> flat_text;
  bool all_int = true, per_axis = false;
  nlohmann::ordered_json json = nlohmann::ordered_json::array();  // as given
};

ref::Positions parse_axis_positions(const std::string& f, std::int64_t n_axes, EvalPositions& p) {
  const auto parts = split(f, ':', "--position '" + f + "'");
  if (static_cast<std::int64_t>(parts.size()) != n_axes)
    throw UsageError("--position: '" + f + "' gives " + std::to_string(parts.size()) +
                     " axis positions, the spec has " + std::to_string(n_axes) +
                     (n_axes == 1 ? " position axis (write M)"
                                  : " position axes (write them as t:h:w, or one M for all)"));
  ref::Positions axes;
  auto row = nlohmann::ordered_json::array();
  for (const auto& part : parts) {
    long long v = 0;
    if (!parse_int64(part, v))
      throw UsageError("--position: '" + part + "' in '" + f +
                       "' is not an integer (per-axis positions are int64)");
    axes.push_back(ref::Mp(static_cast<std::int64_t>(v)));
    p.flat.push_back(axes.back());
    p.flat_text.push_back(part);
    row.push_back(v);
  }
  p.json.push_back(row);
  p.per_axis = true;
  return axes;
}

EvalPositions parse_positions(const std::string& text, std::int64_t n_axes) {
  EvalPositions p;
  for (const auto& f : split(text, ',', "--position")) {
    if (f.find(':') != std::string::npos) {
      p.axes.push_back(parse_axis_positions(f, n_axes, p));
      continue;
    }
    long long i = 0;
    if (parse_int64(f, i)) {
      p.axes.push_back({ref::Mp(static_cast<std::int64_t>(i))});
      p.json.push_back(i);
    } else {
      try {
        p.axes.push_back({ref::parse_decimal(f)});
      } catch (const std::exception&) {
        throw UsageError("--position: '" + f + "' is not a number");
      }
      p.all_int = false;
      p.json.push_back(f);
    }
    p.flat.push_back(p.axes.back().front());
    p.flat_text.push_back(f);
  }
  return p;
}

// The int64 positions of a kernel call: one per token, or, when any token gave per-axis
// positions, n_axes per token with the one-position tokens repeated on every axis.
std::vector<std::int64_t> kernel_positions(const EvalPositions& p, std::int64_t n_axes) {
  std::vector<std::int64_t> out;
  for (const auto& t : p.axes)
    for (std::int64_t a = 0; a < (p.per_axis ? n_axes : 1); ++a)
      out.push_back(t[t.size() == 1 ? 0 : static_cast<std::size_t>(a)].convert_to<std::int64_t>());
  return out;
}

// Dynamic NTK and LongRoPE: seq_len = max(position) + 1 over every token and axis unless
// --seq-len gives one (which must not be smaller), as transformers computes it; floor(max) + 1
// for fractional positions.
RopeSpec runtime_seq_len(const RopeSpec& spec, const EvalPositions& pos) {
  if (pos.flat.empty()) return spec;
  std::size_t at = 0;
  for (std::size_t i = 1; i < pos.flat.size(); ++i)
    if (pos.flat[i] > pos.flat[at]) at = i;
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
  const ref::Mp fl = floor(pos.flat[at]);
  const std::int64_t m = fl >= ref::Mp(kMax)   ? kMax
                         : fl <= ref::Mp(kMin) ? kMin
                                               : fl.convert_to<std::int64_t>();
  return with_runtime_seq_len(spec, m, "--seq-len", pos.flat_text[at]);
}

// --input rows: decimal text -> one correct rounding into the dtype (never via double first); one
// row per position, or one row broadcast to every position.
std::vector<std::vector<double>> parse_rows(const std::string& text, Dtype dtype,
                                            std::int64_t head_dim, std::size_t n_positions) {
  std::vector<std::vector<double>> rows;
  for (const auto& r : split(text, ';', "--input")) {
    std::vector<double> row;
    for (const auto& f : split(r, ',', "--input")) {
      ref::Mp v;
      try {
        v = ref::parse_decimal(f);
      } catch (const std::exception&) {
        throw UsageError("--input: '" + f + "' is not a finite number");
      }
      const double x = ref::round_to(v, dtype);
      if (!std::isfinite(x))
        throw UsageError("--input: '" + f + "' overflows " + std::string(name(dtype)));
      row.push_back(x);
    }
    if (static_cast<std::int64_t>(row.size()) != head_dim)
      throw UsageError("--input: a row has " + std::to_string(row.size()) +
                       " values, head_dim is " + std::to_string(head_dim));
    rows.push_back(std::move(row));
  }
  if (rows.size() != 1 && rows.size() != n_positions)
    throw UsageError("--input: give one row (broadcast) or one row per position (" +
                     std::to_string(n_positions) + "), got " + std::to_string(rows.size()));
  if (rows.size() == 1) rows.resize(n_positions, rows.front());
  return rows;
}

// --kernel: the built-in or engine kernel, checked against the spec, dtype and positions (none:
// nullptr).
const Kernel* eval_kernel(const EvalOptions& o, const RopeSpec& spec, Dtype dtype, bool all_int) {
  if (o.kernel.empty()) return nullptr;
  const Kernel* kernel = find_builtin_kernel(o.kernel);
  if (!kernel) kernel = find_engine_kernel(o.kernel);
  if (!kernel)
    throw UsageError("--kernel: no built-in or engine kernel named '" + o.kernel +
                     "' (see 'ropecheck list')");
  if (!all_int) throw UsageError("--kernel needs integer positions (kernels take int64 positions)");
  if (!kernel->supports(spec, dtype))
    throw UsageError("kernel '" + o.kernel + "' does not support this spec/dtype");
  return kernel;
}

nlohmann::ordered_json spec_json(const RopeSpec& spec, int digits) {
  nlohmann::ordered_json j = {{"head_dim", spec.head_dim}, {"rotary_dim", spec.rotary_dim},
                              {"base", spec.base},         {"layout", name(spec.layout)},
                              {"scale", spec.scale},       {"scaling", name(spec.scaling.kind)}};
  if (spec.scaling.kind != ScalingKind::none || !spec.sections.empty()) {
    // The variant's parameters and what they imply (exact magnitude, theta'), as decimal strings.
    j["description"] = describe(spec);
    if (!spec.sections.empty()) j["sections"] = spec.sections;
    j["magnitude"] = ref::to_decimal(ref::magnitude(spec), digits);
    auto th = nlohmann::ordered_json::array();
    for (const auto& t : ref::inv_freqs(spec)) th.push_back(ref::to_decimal(t, digits));
    j["inv_freq"] = th;
  }
  return j;
}

// The kernel's outputs for every row, with the largest ULP error and pair error over them
// (verify::compare_vector against the exact outputs).
nlohmann::ordered_json kernel_json(const Kernel& kernel, const RopeSpec& spec, Dtype dtype,
                                   const std::vector<std::vector<double>>& rows,
                                   const std::vector<std::int64_t>& positions, std::int64_t n_axes,
                                   const std::vector<ref::MpVector>& exact) {
  const auto n = static_cast<std::int64_t>(rows.size());
  const int bytes = traits(dtype).bytes;
  std::vector<unsigned char> in(static_cast<std::size_t>(n * spec.head_dim * bytes));
  std::vector<unsigned char> res(in.size());
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t j = 0; j < spec.head_dim; ++j)
      store(dtype, in.data(), t * spec.head_dim + j, rows[t][j]);
  TensorArgs args;
  args.dtype = dtype;
  args.n_tokens = n;
  args.n_heads = 1;
  args.positions = positions.data();
  args.in = in.data();
  args.out = res.data();
  args.token_stride = spec.head_dim;
  args.head_stride = spec.head_dim;
  args.n_axes = n_axes;
  if (kernel.apply(spec, args) != KernelStatus::ok)
    throw std::runtime_error("kernel '" + kernel.name() + "' failed");
  nlohmann::ordered_json kj{{"name", kernel.name()}, {"policy", policy_json(kernel.policy(dtype))}};
  kj["output"] = nlohmann::ordered_json::array();
  double max_ulp = 0, max_pair = 0;
  for (std::int64_t t = 0; t < n; ++t) {
    std::vector<double> got(static_cast<std::size_t>(spec.head_dim));
    for (std::int64_t j = 0; j < spec.head_dim; ++j)
      got[j] = load(dtype, res.data(), t * spec.head_dim + j);
    const auto e = verify::compare_vector(spec, dtype, rows[t], exact[t], got);
    max_ulp = std::max(max_ulp, e.max_ulp);
    max_pair = std::max(max_pair, e.max_pair_error_u);
    kj["output"].push_back(number_row(got));
  }
  kj["max_ulp"] = number(max_ulp);
  kj["max_pair_error_u"] = number(max_pair);
  return kj;
}

// "reference_fp8": each exact output, scaled exactly, rounded once into the --fp8 format.
nlohmann::ordered_json fp8_json(const EvalOptions& o, const std::vector<ref::MpVector>& exact) {
  const auto formats = o.fp8.parsed_formats();
  if (formats.size() != 1) throw UsageError("--fp8: give one format for eval");
  const Fp8Format f = formats.front();
  const Fp8Overflow ov = o.fp8.parsed_overflow();
  const bool divide = o.fp8.divide();
  o.fp8.check_scale();
  nlohmann::ordered_json j{{"format", name(f)},
                           {"overflow", name(ov)},
                           {"convention", o.fp8.convention},
                           {"scale", o.fp8.scale}};
  j["values"] = nlohmann::ordered_json::array();
  j["bytes"] = nlohmann::ordered_json::array();
  const ref::Mp s = ref::exact(o.fp8.scale);
  for (const auto& row : exact) {
    auto vals = nlohmann::ordered_json::array(), bytes = nlohmann::ordered_json::array();
    for (const auto& v : row) {
      const double c = verify::fp8_round_exact(divide ? ref::Mp(v / s) : ref::Mp(v * s), f, ov);
      vals.push_back(number(c));
      char hex[5];
      std::snprintf(hex, sizeof hex, "0x%02x", fp8_encode(f, c));
      bytes.push_back(hex);
    }
    j["values"].push_back(vals);
    j["bytes"].push_back(bytes);
  }
  return j;
}

int run_eval(const EvalOptions& o, const RunOptions& run) {
  const auto dtype = parse_dtype(o.dtype);
  if (!dtype) throw UsageError("--dtype must be one of f64, f32, f16, bf16, got '" + o.dtype + "'");
  if (o.digits < 1 || o.digits > 1000) throw UsageError("--digits must be in [1, 1000]");
  RopeSpec spec = eval_spec(o);
  const unsigned bits = o.ref_bits ? o.ref_bits : ref::default_bits(*dtype);
  if (bits < 64 || bits > 100000) throw UsageError("--ref-bits must be in [64, 100000]");
  ref::set_precision_bits(bits);
  const EvalPositions pos = parse_positions(o.positions, spec.n_axes());
  spec = runtime_seq_len(spec, pos);
  const auto rows = parse_rows(o.input, *dtype, spec.head_dim, pos.axes.size());
  const Kernel* kernel = eval_kernel(o, spec, *dtype, pos.all_int);
  if (run.eval_validate_only) return 0;  // every option parsed and validated (the fuzz target)

  nlohmann::ordered_json out;
  out["spec"] = spec_json(spec, o.digits);
  out["dtype"] = name(*dtype);
  out["reference_bits"] = ref::precision_bits();
  out["positions"] = pos.json;
  out["input"] = nlohmann::ordered_json::array();
  out["reference"] = nlohmann::ordered_json::array();
  out["reference_rounded"] = nlohmann::ordered_json::array();
  std::vector<ref::MpVector> exact;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const ref::Positions& axes = pos.axes[r];
    exact.push_back(axes.size() == 1 ? ref::apply_dense(spec, axes.front(), rows[r])
                                     : ref::apply_dense(spec, axes, rows[r]));
    out["input"].push_back(number_row(rows[r]));
    auto dec = nlohmann::ordered_json::array();
    for (const auto& v : exact.back()) dec.push_back(ref::to_decimal(v, o.digits));
    out["reference"].push_back(dec);
    out["reference_rounded"].push_back(number_row(ref::round_to(exact.back(), *dtype)));
  }
  if (!o.fp8.formats.empty()) out["reference_fp8"] = fp8_json(o, exact);
  if (kernel) {
    const std::int64_t n_axes = pos.per_axis ? spec.n_axes() : 1;
    out["kernel"] = kernel_json(*kernel, spec, *dtype, rows, kernel_positions(pos, spec.n_axes()),
                                n_axes, exact);
  }
  std::cout << out.dump(2) << "\n";
  return 0;
}

}  // namespace

void add_eval(CLI::App& app, int& status, const RunOptions& run) {
  auto opts = std::make_shared<EvalOptions>();
  auto* cmd = app.add_subcommand(
      "eval",
      "Exact reference (and optionally a kernel) for one spec, positions and inputs; prints JSON");
  auto* hf = add_hf_config_options(cmd, opts->hf,
                                   "Hugging Face config.json: rope_theta, rope_scaling/"
                                   "rope_parameters, head_dim, partial_rotary_factor, "
                                   "mrope_section -> the spec");
  cmd->add_option("--head-dim", opts->head_dim, "head dimension (>= 1)")->excludes(hf);
  cmd->add_option("--rotary-dim", opts->rotary_dim,
                  "rotated dims (even, <= head_dim; default head_dim rounded down to even)")
      ->excludes(hf);
  cmd->add_option("--base", opts->base, "frequency base (default 10000)")->excludes(hf);
  cmd->add_option("--scale", opts->scale, "magnitude scale s (default 1)");
  cmd->add_option("--layout", opts->layout, layout_choices(/*one_d=*/true))->excludes(hf);
  cmd->add_option("--dtype", opts->dtype, "f64 | f32 | f16 | bf16")->required();
  cmd->add_option("--position", opts->positions,
                  "position(s) M[,M...]; int64, or fractional for the reference alone; on a "
                  "multi-axis spec (M-RoPE, axial) t:h:w[,t:h:w...] gives each axis its own int64 "
                  "position, one M all of them")
      ->required();
  cmd->add_option("--input", opts->input,
                  "values v1,v2,...[;v1,v2,...]: one row per position, or one row for all")
      ->required();
  cmd->add_option("--kernel", opts->kernel,
                  "built-in or engine kernel to evaluate (see 'ropecheck list')");
  cmd->add_option("--digits", opts->digits,
                  "significant digits of the exact reference (default 40)");
  cmd->add_option("--ref-bits", opts->ref_bits,
                  "reference precision in bits (default max(2p+30, 160))");
  add_fp8_options(cmd, opts->fp8,
                  "also the exact output's one correct rounding into an FP8 format: e4m3fn | "
                  "e4m3fnuz | e5m2 (reference_fp8)");
  cmd->callback([opts, &status, run] { status = run_eval(*opts, run); });
}

}  // namespace ropecheck::cli
