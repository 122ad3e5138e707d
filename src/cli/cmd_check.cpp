// `ropecheck check`: validates tensors recorded from any framework against the multiprecision
// reference, within the derived per-pair bound of ropecheck::bounds for the DECLARED policy of
// the kernel that produced them. Every failure is located (tensor, batch, token, head, pair,
// elements).
//
// Inputs:
//   --tensors dump.safetensors  tensors x -> y (and/or q -> q_out, k -> k_out, grad_y -> grad_x),
//                               positions;
//                               spec from __metadata__ (string values) and/or --spec JSON
//   --input x.npy --output y.npy --positions p.npy --spec spec.json
//   (--spec: a file or the JSON text itself, '{"layout": "half"}', as `validate --spec`)
//
// positions: shape [tokens] or [batch, tokens], int64 or int32. Multi-axis layouts (mrope, imrope,
// axial) also take one position per axis, axis-major as HF's position_ids: [axes, tokens] or
// [axes, batch, tokens]; a 1-D positions tensor then drives every axis (t = h = w).
//
// Files: this one (options, inputs, output), check_spec.cpp (spec keys -> spec, policy and fused
// chain, shared with `validate --spec`) and src/scan (the scan of one tensor pair, shared with
// the Python module). Speed: one oracle Rotation per token,
// shared by its heads (reference/oracle.hpp), chunks of tokens on --threads workers, merged in
// chunk order so the output is the same for any thread count. Memory: the files are never read
// whole: headers are validated against the file size (tensorio::open_*), the data is read chunk by
// chunk.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <thread>

#include "check_spec.hpp"
#include "cli.hpp"
#include "ropecheck/reference/oracle.hpp"
#include "ropecheck/reference/reference.hpp"
#include "ropecheck/reports/report.hpp"
#include "ropecheck/scan/fused.hpp"
#include "ropecheck/scan/scan.hpp"
#include "ropecheck/tensorio/tensorio.hpp"
#include "ropecheck/verify/verify.hpp"

namespace ropecheck::cli {

namespace ref = ropecheck::reference;
namespace tio = ropecheck::tensorio;
using scan::PairResult;

namespace {

struct CheckOptions {
  std::string tensors, spec, input, output, positions, out_dir;
  HfConfigArg hf;
  std::uint64_t max_bytes = std::uint64_t{4} << 30;
  int max_failures = 10;
  std::string oracle = "fast";
  unsigned threads = 0;               // 0: every hardware thread
  std::int64_t chunk_vectors = 1024;  // a testing knob: results must not depend on it
};

// ---- tensors ----------------------------------------------------------------------------------

std::optional<Dtype> dtype_of_elem(tio::ElemType e) {
  switch (e) {
    case tio::ElemType::f64:
      return Dtype::f64;
    case tio::ElemType::f32:
      return Dtype::f32;
    case tio::ElemType::f16:
      return Dtype::f16;
    case tio::ElemType::bf16:
      return Dtype::bf16;
    default:
      return std::nullopt;
  }
}

// ---- inputs, output -----------------------------------------------------------------------------

// The tensors stay in their files (tensorio::open_*): only the headers are read here.
struct Inputs {
  Keys keys;  // __metadata__ (safetensors)
  std::vector<std::pair<std::string, std::pair<tio::TensorRef, tio::TensorRef>>> pairs;
  std::vector<bool> backward;  // per pair: grad_y -> grad_x (checked against s R(m)^T grad_y)
  tio::TensorRef pos;
  std::string source;
};

Inputs read_safetensors_inputs(const std::string& path, const tio::Limits& lim) {
  Inputs in;
  in.source = path;
  auto f = tio::open_safetensors(path, lim);
  in.keys = f.metadata;
  const tio::TensorRef* p = f.find("positions");
  if (!p) throw UsageError(path + ": no tensor named 'positions'");
  in.pos = *p;
  for (auto [x, y] :
       {std::pair<const char*, const char*>{"x", "y"}, {"q", "q_out"}, {"k", "k_out"}}) {
    const tio::TensorRef* a = f.find(x);
    const tio::TensorRef* b = f.find(y);
    if (a && !b) throw UsageError(path + ": tensor '" + x + "' without its output '" + y + "'");
    if (a && b) in.pairs.push_back({std::string(x) + " -> " + y, {*a, *b}});
  }
  in.backward.assign(in.pairs.size(), false);
  // A backward dump: the upstream gradient grad_y and the kernel's grad_x = s R(m)^T grad_y.
  const tio::TensorRef* gy = f.find("grad_y");
  const tio::TensorRef* gx = f.find("grad_x");
  if (gy && !gx) throw UsageError(path + ": tensor 'grad_y' without its output 'grad_x'");
  if (gx && !gy) throw UsageError(path + ": tensor 'grad_x' without its input 'grad_y'");
  if (gy && gx) {
    in.pairs.push_back({"grad_y -> grad_x", {*gy, *gx}});
    in.backward.push_back(true);
  }
  if (in.pairs.empty())
    throw UsageError(path + ": no tensor pair x/y, q/q_out, k/k_out or grad_y/grad_x to check");
  return in;
}

Inputs read_npy_inputs(const CheckOptions& o, const tio::Limits& lim) {
  if (o.input.empty() || o.output.empty() || o.positions.empty())
    throw UsageError("the .npy form needs --input, --output and --positions");
  if (o.spec.empty() && o.hf.path.empty())
    throw UsageError("the .npy form needs --spec spec.json (or --hf-config config.json)");
  Inputs in;
  in.source = o.input;
  auto a = tio::open_npy(o.input, lim);
  auto b = tio::open_npy(o.output, lim);
  a.name = "input";
  b.name = "output";
  in.pos = tio::open_npy(o.positions, lim);
  in.pairs.push_back({"input -> output", {a, b}});
  in.backward.push_back(false);
  return in;
}

Inputs read_inputs(const CheckOptions& o) {
  tio::Limits lim;
  lim.max_bytes = o.max_bytes;
  const bool st = !o.tensors.empty();
  const bool npy = !o.input.empty() || !o.output.empty() || !o.positions.empty();
  if (st == npy)
    throw UsageError(
        "give either --tensors FILE.safetensors or --input/--output/--positions .npy files");
  try {
    return st ? read_safetensors_inputs(o.tensors, lim) : read_npy_inputs(o, lim);
  } catch (const tio::FormatError& e) {
    // An .npy file given to --tensors: its magic says so; name the form that reads it.
    std::ifstream f(o.tensors, std::ios::binary);
    char magic[6] = {};
    if (st && f.read(magic, 6) && std::string(magic, 6) == "\x93NUMPY")
      throw UsageError("--tensors reads a safetensors file, and '" + o.tensors +
                       "' is an .npy file: give --input x.npy --output y.npy --positions "
                       "positions.npy --spec spec.json");
    throw UsageError(e.what());
  }
}

// The spec and policy of the inputs: __metadata__, overridden by --spec, and/or --hf-config.
Resolved resolve_inputs(const CheckOptions& o, Inputs& in) {
  const Keys spec_keys = o.spec.empty() ? Keys{} : read_spec_arg(o.spec);
  for (const auto& [k, v] : spec_keys) in.keys[k] = v;
  const std::string keys_seq_len_from =
      spec_keys.count("seq_len") ? spec_arg_name(o.spec) : "__metadata__ of '" + in.source + "'";
  const auto& x0 = in.pairs.front().second.first;
  if (x0.shape.empty()) throw UsageError("tensor '" + x0.name + "' is a scalar");
  const std::optional<RopeSpec> hf = o.hf.read();
  if (hf && hf->head_dim != x0.shape.back())
    throw UsageError("--hf-config: head_dim " + std::to_string(hf->head_dim) +
                     " does not match the last dimension of the tensors (" +
                     std::to_string(x0.shape.back()) + ")");
  Resolved r = resolve(in.keys, x0.shape.back(), x0.shape.size(), hf, keys_seq_len_from);
  const std::int64_t given_seq_len = r.spec.scaling.seq_len;
  r.spec = runtime_seq_len(r.spec, in.pos, r.seq_len_from);
  r.seq_len_from_positions = given_seq_len == 0 && r.spec.scaling.seq_len != 0;
  return r;
}

// The figures of one tensor pair (docs/check.md, "check.json"); a maximum is null when no pair was
// measured.
nlohmann::json result_json(const PairResult& p) {
  const verify::Summary& s = p.summary;
  const auto figure = [&s](double v) { return s.any ? nlohmann::json(v) : nlohmann::json(); };
  return {{"tensors", p.name},
          {"passed", p.passed()},
          {"coverage", p.coverage().empty() ? nlohmann::json() : nlohmann::json(p.coverage())},
          {"vectors", p.vectors},
          {"checked", s.vectors},
          {"skipped_nonfinite_input", p.skipped_nonfinite},
          {"failures", s.failures},
          {"overflowed_elements", s.overflowed},
          {"max_pair_error_u", figure(s.max_error_u)},
          {"max_bound_utilization", figure(s.max_utilization)},
          {"max_pair_error_at", s.max_error_at.text()},
          {"max_bound_utilization_at", s.max_utilization_at.text()},
          {"worst", s.max_utilization_at.text()},  // the older name of max_bound_utilization_at
          {"located", p.located()}};
}

// The table (one row per tensor pair, each maximum with its own location), the notes and the
// located failures. Returns whether anything failed.
bool print_results(const std::vector<PairResult>& results, const verify::Advice& advice) {
  std::cout << std::left << std::setw(18) << "tensors" << std::setw(9) << "vectors" << std::setw(9)
            << "checked" << std::setw(8) << "result" << std::setw(14) << "max err [u]"
            << "max err/bound\n";
  bool any_fail = false;
  for (const auto& p : results) {
    const verify::Summary& s = p.summary;
    any_fail = any_fail || !p.passed();
    const std::string util = verify::fmt_apart(s.max_utilization, 1.0).first;
    // No pair measured: no maxima (not a 0 that reads like a perfect result).
    std::cout << std::left << std::setw(18) << p.name << std::setw(9) << p.vectors << std::setw(9)
              << s.vectors << std::setw(8) << (p.passed() ? "pass" : "FAIL") << std::setw(14)
              << (s.any ? verify::fmt(s.max_error_u) : "-") << (s.any ? util : "-") << "\n";
    // The largest error and the largest share of the bound are often different pairs (the bound
    // grows with the position).
    if (s.any)
      std::cout << "  max err [u]   " << verify::fmt(s.max_error_u) << " at "
                << s.max_error_at.text() << "\n"
                << "  max err/bound " << util << " at " << s.max_utilization_at.text() << "\n";
  }
  for (const auto& p : results) {
    if (p.name == "grad_y -> grad_x")
      std::cout << "note: grad_y -> grad_x is a backward, checked against s R(m)^T grad_y = "
                   "s R(-m) grad_y: its positions are shown negated\n";
    if (p.skipped_nonfinite)
      std::cout << "note: " << p.name << ": " << p.skipped_nonfinite
                << " vector(s) with non-finite input not checked\n";
    if (p.summary.overflowed)
      std::cout << "note: " << p.name << ": " << p.summary.overflowed
                << " output element(s) read as an overflow (+-inf, or the largest finite value "
                   "under output_rounding toward_zero): the values that round to it, 0 error where "
                   "it is the exact value's correct rounding, the bound judges the rest\n";
    for (const auto& l : p.located()) std::cout << l << "\n";
    const auto shown = static_cast<std::int64_t>(p.summary.findings.size());
    if (p.summary.failures > shown)
      std::cout << "... " << p.summary.failures - shown << " more failure(s) in " << p.name << "\n";
  }
  if (!advice.text.empty()) std::cout << "hint: " << advice.text << "\n";
  if (!advice.skipped.empty()) std::cout << "note: " << advice.skipped << "\n";
  std::cout << (any_fail ? "\nFAIL" : "\nPASS")
            << ": bound = ropecheck::bounds per-pair bound for the declared policy\n";
  return any_fail;
}

// The hint of a failing run (verify::advise): a declaration or spec mismatch under which every
// vector of every tensor pair passes, re-checked on all of them.
verify::Advice advise_run(const Inputs& in, const Resolved& r,
                          const std::vector<PairResult>& results) {
  if (std::all_of(results.begin(), results.end(),
                  [](const PairResult& p) { return p.summary.passed(); }))
    return {};
  std::vector<verify::RecordedVectors> run;
  for (std::size_t i = 0; i < in.pairs.size(); ++i) {
    const auto& xy = in.pairs[i].second;
    const verify::PairChecker c(r.policy, r.spec, *dtype_of_elem(xy.first.type));
    run.push_back(scan::recorded_vectors(results[i], xy.first, xy.second, in.pos, r.tensor_layout,
                                         c, in.backward[i]));
  }
  const auto start = std::chrono::steady_clock::now();
  verify::Advice a = verify::advise(r.policy, run);
  // On stderr, as the scan's speed: the cost of the hint next to the run's.
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "ropecheck check: hint: " << a.candidates << " candidates, " << a.vector_checks
            << " vector re-checks in " << verify::fmt(s, 3) << " s\n";
  return a;
}

// Every pair of the inputs, each scanned with all threads; the oracle is shared by all of them.
std::vector<PairResult> check_pairs(const CheckOptions& o, const Inputs& in, const Resolved& r,
                                    const ref::Oracle& oracle) {
  scan::ScanOptions so;
  so.threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  so.chunk_vectors = o.chunk_vectors;
  so.max_failures = o.max_failures;
  std::vector<PairResult> results;
  const auto start = std::chrono::steady_clock::now();
  std::int64_t vectors = 0;
  for (std::size_t i = 0; i < in.pairs.size(); ++i) {
    const auto& [label, xy] = in.pairs[i];
    so.backward = in.backward[i];
    const auto d = dtype_of_elem(xy.first.type);
    if (!d)
      throw UsageError("tensor '" + xy.first.name + "' must be F64/F32/F16/BF16, is " +
                       xy.first.type_name);
    const verify::PairChecker checker(r.policy, r.spec, *d);
    results.push_back(
        scan::scan_pair(label, xy.first, xy.second, in.pos, r.tensor_layout, checker, oracle, so));
    vectors += results.back().vectors;
  }
  // On stderr: stdout and check.json are the same for any thread count; the speed is not.
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "ropecheck check: " << vectors << " vectors in " << verify::fmt(s, 3) << " s ("
            << std::llround(s > 0 ? vectors / s : 0) << " vectors/s, " << so.threads << " thread"
            << (so.threads == 1 ? "" : "s") << ")\n";
  return results;
}

// ---- fused RoPE + FP8 quantization + cache write (scan/fused.hpp) ------------------------------

int run_fused(const CheckOptions& o, const tio::TensorFileRef& f) {
  Keys keys = f.metadata;
  if (!o.spec.empty())
    for (const auto& [k, v] : read_spec_arg(o.spec)) keys[k] = v;
  scan::FusedTensors t;
  for (auto [name, into] : {std::pair{"x", &t.x},
                            {"positions", &t.positions},
                            {"slot_mapping", &t.slot_mapping},
                            {"cache_before", &t.cache_before},
                            {"cache_after", &t.cache_after},
                            {"scale", &t.scale}}) {
    const tio::TensorRef* r = f.find(name);
    if (!r)
      throw UsageError(o.tensors + ": a fused cache dump needs a tensor named '" + name + "'");
    *into = *r;
  }
  const scan::FusedChain chain = fused_chain(keys);
  for (const auto* k : {&t.cache_before, &t.cache_after})
    if (k->type_name != "U8" && parse_fp8_format(k->type_name) != chain.format &&
        !(k->type_name == "F8_E4M3" && chain.format == Fp8Format::e4m3fnuz))
      throw UsageError("tensor '" + k->name + "' is " + k->type_name + ", declared fp8_format " +
                       name(chain.format));
  if (t.x.shape.empty()) throw UsageError("tensor 'x' is a scalar");
  const auto d = dtype_of_elem(t.x.type);
  if (!d) throw UsageError("tensor 'x' must be F64/F32/F16/BF16, is " + t.x.type_name);
  const Resolved r = resolve(keys, t.x.shape.back(), t.x.shape.size(), o.hf.read());
  ref::set_precision_bits(ref::default_bits(*d));
  const ref::Oracle oracle(r.spec,
                           o.oracle == "mpfr" ? ref::OracleMode::mpfr : ref::OracleMode::fast);
  const verify::PairChecker checker(r.policy, r.spec, *d);
  scan::FusedResult res;
  try {
    res = scan::check_fused(t, chain, checker, oracle, o.max_failures);
  } catch (const scan::FusedError& e) {
    throw UsageError(o.tensors + ": " + e.what());
  }
  std::cout << "ropecheck check: " << o.tensors
            << " (fused RoPE + FP8 quantization + cache write)\n"
            << "spec: " << describe(r.spec) << ", input dtype " << name(*d) << "\n"
            << "declared policy: " << describe(r.policy) << "\n"
            << "declared chain: " << scan::describe(chain) << "\n\n"
            << res.written_tokens << " of " << res.tokens << " token(s) write a slot; "
            << res.elements << " element(s) checked, " << res.wrong << " outside the accepted range"
            << (res.wrong ? " (up to " : "")
            << (res.wrong ? std::to_string(res.max_ulps) + " fp8 ulps)" : "") << "; " << res.ties
            << " with more than one byte accepted (the derived bound spans a rounding boundary: "
               "near a tie, or a long position's angle error); "
            << res.overflowed << " past the format's max; " << res.unaddressed_changed
            << " byte(s) changed in slots no token addresses; " << res.unchecked_bytes
            << " byte(s) of addressed rows outside the RoPE slice not checked\n";
  if (res.skipped_nonfinite)
    std::cout << "note: " << res.skipped_nonfinite
              << " written head vector(s) with a non-finite input not checked\n";
  if (res.elements == 0)
    std::cout << "FAIL "
              << verify::nothing_checked(
                     "no token writes a slot, or every written input is non-finite", "the chain")
              << "\n";
  for (const auto& l : res.findings) std::cout << "FAIL " << l << "\n";
  std::cout << (res.passed() ? "\nPASS" : "\nFAIL")
            << ": each stored byte is the declared chain's image of the exact rotation within "
               "its derived bound\n";
  if (!o.out_dir.empty()) {
    std::filesystem::create_directories(o.out_dir);
    const nlohmann::json doc{{"command", "check"},
                             {"source", o.tensors},
                             {"fused_chain", scan::describe(chain)},
                             {"elements", res.elements},
                             {"wrong", res.wrong},
                             {"max_fp8_ulps", res.max_ulps},
                             {"near_boundary", res.ties},
                             {"overflowed", res.overflowed},
                             {"unaddressed_bytes_changed", res.unaddressed_changed},
                             {"skipped_nonfinite_vectors", res.skipped_nonfinite},
                             {"findings", res.findings},
                             {"passed", res.passed()}};
    reports::atomic_write(std::filesystem::path(o.out_dir) / "check.json", doc.dump(2) + "\n");
  }
  std::cout.flush();
  return res.passed() ? 0 : 1;
}

int run_check(const CheckOptions& o) {
  if (!o.tensors.empty() && o.input.empty() && o.output.empty() && o.positions.empty()) {
    tio::Limits lim;
    lim.max_bytes = o.max_bytes;
    // One header read decides the kind of dump; a read error of the fused check itself is not
    // caught here (it is exit 2 with its own message, not a retry as an ordinary dump).
    std::optional<tio::TensorFileRef> f;
    try {
      f = tio::open_safetensors(o.tensors, lim);
    } catch (const tio::FormatError&) {
      // not a safetensors file: read_inputs below says what it is
    }
    if (f && f->find("cache_after")) return run_fused(o, *f);
  }
  Inputs in = read_inputs(o);
  const Resolved r = resolve_inputs(o, in);
  const auto& x0 = in.pairs.front().second.first;
  const auto d = dtype_of_elem(x0.type);
  if (!d) throw UsageError("tensor '" + x0.name + "' must be F64/F32/F16/BF16, is " + x0.type_name);
  ref::set_precision_bits(ref::default_bits(*d));
  const ref::Oracle oracle(r.spec,
                           o.oracle == "mpfr" ? ref::OracleMode::mpfr : ref::OracleMode::fast);

  std::cout << "ropecheck check: " << in.source << "\n"
            << "spec: " << describe(r.spec) << ", dtype " << name(*d) << ", tensor_layout "
            << r.tensor_layout << "\n";
  if (r.seq_len_from_positions)
    std::cout << "seq_len " << r.spec.scaling.seq_len
              << " = max(position) + 1, the length transformers computes at run time (none "
                 "given)\n";
  std::cout << "declared policy: " << describe(r.policy) << "\n\n";
  const std::vector<PairResult> results = check_pairs(o, in, r, oracle);
  const verify::Advice advice = advise_run(in, r, results);
  const bool any_fail = print_results(results, advice);
  std::cout << "oracle: " << o.oracle << ", " << oracle.vectors() << " vector(s), "
            << oracle.fallbacks() << " answered by MPFR\n";
  if (!o.out_dir.empty()) {
    nlohmann::json jres = nlohmann::json::array();
    for (const auto& p : results) jres.push_back(result_json(p));
    std::filesystem::create_directories(o.out_dir);
    const nlohmann::json jor{
        {"mode", o.oracle}, {"vectors", oracle.vectors()}, {"mpfr_fallbacks", oracle.fallbacks()}};
    nlohmann::json doc{{"command", "check"}, {"source", in.source}, {"spec", describe(r.spec)},
                       {"dtype", name(*d)},  {"results", jres},     {"oracle", jor},
                       {"passed", !any_fail}};
    doc["hint"] = advice.text;
    doc["hint_keys"] = nlohmann::json::object();
    for (const auto& [k, v] : advice.keys) doc["hint_keys"][k] = v;
    reports::atomic_write(std::filesystem::path(o.out_dir) / "check.json", doc.dump(2) + "\n");
  }
  std::cout.flush();
  return any_fail ? 1 : 0;  // as `report`: 1 = a check failed (bad usage is 2, thrown above)
}

}  // namespace

void add_check(CLI::App& app, int& status) {
  auto o = std::make_shared<CheckOptions>();
  auto* cmd = app.add_subcommand(
      "check", "Check recorded RoPE tensors (safetensors or .npy) against the exact reference");
  cmd->add_option("--tensors", o->tensors,
                  "safetensors dump with x, y (or q/q_out, k/k_out, grad_y/grad_x), positions");
  cmd->add_option("--spec", o->spec,
                  "spec JSON, as text ('{...}') or a file (keys as the safetensors "
                  "__metadata__; overrides it)");
  cmd->add_option("--input", o->input, ".npy input (f64/f32/f16)");
  cmd->add_option("--output", o->output, ".npy output recorded from the kernel");
  cmd->add_option("--positions", o->positions, ".npy positions (int64/int32)");
  cmd->add_option("--max-bytes", o->max_bytes,
                  "refuse a file whose header (safetensors JSON, npy dict) is larger than this; "
                  "the data is streamed (default 4 GiB)");
  cmd->add_option("--max-failures", o->max_failures,
                  "located failures printed per tensor (default 10)");
  cmd->add_option("--out", o->out_dir, "write check.json here");
  cmd->add_option(
         "--oracle", o->oracle,
         "fast (double-double, MPFR where it cannot certify; default) or mpfr (MPFR only); "
         "both give the same answers")
      ->check(CLI::IsMember({"fast", "mpfr"}));
  cmd->add_option("--threads", o->threads,
                  "worker threads (default 0: every hardware thread); the output does not depend "
                  "on it");
  // Hidden: the determinism test makes chunks small so that threads interleave.
  cmd->add_option("--chunk-vectors", o->chunk_vectors, "head vectors per work chunk")
      ->check(CLI::PositiveNumber)
      ->group("");
  add_hf_config_options(
      cmd, o->hf, "RoPE spec from a Hugging Face config.json (spec keys, if any, must agree)");
  cmd->callback([o, &status] {
    try {
      status = run_check(*o);
    } catch (const tio::FormatError& e) {  // also a file that shrank while it was read
      throw UsageError(e.what());
    } catch (const scan::ScanError& e) {
      throw UsageError(e.what());
    }
  });
}

}  // namespace ropecheck::cli
