#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "cli.hpp"
#include "ropecheck/hf_config.hpp"

namespace ropecheck::cli {

std::vector<std::string> split(const std::string& s, char sep, const std::string& what) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else if (c != ' ' && c != '\t') {
      cur += c;
    }
  }
  out.push_back(cur);
  for (const auto& f : out)
    if (f.empty()) throw UsageError(what + ": empty field in '" + s + "'");
  return out;
}

std::pair<int, int> parse_worker_fds(const std::string& text) {
  const auto parts = split(text, ',', "--worker-fds");
  long long r = -1, w = -1;
  if (parts.size() != 2 || !parse_int64(parts[0], r) || !parse_int64(parts[1], w) || r < 0 ||
      w < 0 || r > 65535 || w > 65535)
    throw UsageError("--worker-fds: expected R,W (two file descriptors), got '" + text + "'");
  return {static_cast<int>(r), static_cast<int>(w)};
}

bool parse_int64(const std::string& s, long long& out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  out = std::strtoll(s.c_str(), &end, 10);
  return errno == 0 && end == s.c_str() + s.size();
}

double parse_finite_double(const std::string& s, const std::string& what) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v))
    throw UsageError(what + ": expected a finite number, got '" + s + "'");
  return v;
}

std::optional<RopeSpec> HfConfigArg::read() const {
  if (path.empty()) return std::nullopt;
  HfConfigOptions h;
  h.seq_len = seq_len;
  h.layer_type = layer_type;
  return read_hf_config(path, h);
}

CLI::Option* add_hf_config_options(CLI::App* cmd, HfConfigArg& arg, const std::string& what) {
  CLI::Option* hf = cmd->add_option("--hf-config", arg.path, what);
  cmd->add_option("--seq-len", arg.seq_len,
                  "current sequence length for dynamic NTK / LongRoPE (with --hf-config)");
  cmd->add_option("--hf-layer-type", arg.layer_type,
                  "full_attention or sliding_attention: the layers whose RoPE to read from a "
                  "config with one per layer type (Gemma 3, transformers 5 rope_parameters)");
  return hf;
}

std::vector<Fp8Format> Fp8Arg::parsed_formats() const {
  std::vector<Fp8Format> out;
  if (formats.empty()) return out;
  for (const auto& s : split(formats, ',', "--fp8")) {
    const auto f = parse_fp8_format(s);
    if (!f) throw UsageError("--fp8: '" + s + "' is not e4m3fn, e4m3fnuz or e5m2");
    if (std::find(out.begin(), out.end(), *f) != out.end())
      throw UsageError("--fp8: '" + s + "' given twice");
    out.push_back(*f);
  }
  return out;
}

Fp8Overflow Fp8Arg::parsed_overflow() const {
  const auto ov = parse_fp8_overflow(overflow);
  if (!ov) throw UsageError("--fp8-overflow must be saturate, nan or inf");
  return *ov;
}

bool Fp8Arg::divide() const {
  if (convention != "multiply" && convention != "divide")
    throw UsageError("--fp8-convention must be multiply or divide");
  return convention == "divide";
}

void Fp8Arg::check_scale() const {
  if (!(scale > 0) || !std::isfinite(scale)) throw UsageError("--fp8-scale must be finite and > 0");
}

void add_fp8_options(CLI::App* cmd, Fp8Arg& arg, const std::string& what) {
  cmd->add_option("--fp8", arg.formats, what);
  cmd->add_option("--fp8-scale", arg.scale, "FP8 quantization scale (default 1)");
  cmd->add_option("--fp8-convention", arg.convention,
                  "multiply (default; FlashInfer) or divide (vLLM): q = value * "
                  "scale or value / scale");
  cmd->add_option("--fp8-overflow", arg.overflow, "saturate (default) | nan | inf (e5m2)");
}

RopeSpec with_runtime_seq_len(RopeSpec spec, std::int64_t max_position,
                              const std::string& seq_len_from,
                              const std::string& max_position_text) {
  const ScalingKind kind = spec.scaling.kind;
  if (kind != ScalingKind::dynamic && kind != ScalingKind::longrope) return spec;
  const std::string pos =
      max_position_text.empty() ? std::to_string(max_position) : max_position_text;
  if (max_position == std::numeric_limits<std::int64_t>::max())
    throw UsageError("scaling " + std::string(name(kind)) + ": the largest position " + pos +
                     " leaves no int64 sequence length max(position) + 1");
  const std::int64_t implied = max_position + 1;  // transformers: torch.max(position_ids) + 1
  std::int64_t& seq_len = spec.scaling.seq_len;
  if (seq_len == 0) {
    if (implied > 0) seq_len = implied;
    return spec;
  }
  if (seq_len < implied)
    throw UsageError("seq_len " + std::to_string(seq_len) + " (from " + seq_len_from +
                     ") is smaller than max(position) + 1 = " + std::to_string(implied) +
                     " (largest position " + pos + "): a token at position p implies a " +
                     "sequence length > p; give seq_len >= " + std::to_string(implied) +
                     " or leave it out (transformers uses max(position) + 1)");
  return spec;
}

}  // namespace ropecheck::cli
