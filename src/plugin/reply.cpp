// Decoders of the worker's replies (reply.hpp): the descriptor at load time (Msg::hello, written
// field by field by worker.cpp send_hello), supports() and apply() answers.
#include "reply.hpp"

#include <cmath>

#include "worker.hpp"

namespace ropecheck::plugin {

ipc::Expect expect_hello() {
  ipc::Expect e{ipc::Msg::hello};
  e.or_load_error = true;
  e.max_len = kMaxHello;
  return e;
}

ipc::Expect expect_supports(std::uint32_t id) {
  ipc::Expect e{ipc::Msg::supports};
  e.id = id;
  e.min_len = e.max_len = 4;
  return e;
}

ipc::Expect expect_apply(std::uint32_t id, std::uint64_t result_bytes) {
  ipc::Expect e{ipc::Msg::apply};
  e.id = id;
  e.min_len = sizeof(ApplyReply) + result_bytes;
  e.max_len = e.min_len + kMaxDetail;
  return e;
}

namespace {

[[noreturn]] void refuse(const std::string& m) { throw LoadError(m); }

bool valid_precision(std::int32_t p) { return p >= 0 && p < ROPECHECK_DTYPE_COUNT; }

// The ABI's recipe values are AngleRecipe's (plugin.h: "values equal ropecheck's C++ enums"), and
// every recipe the host knows is declarable.
static_assert(ROPECHECK_RECIPE_POW_PRODUCT == static_cast<int>(AngleRecipe::pow_product) &&
              ROPECHECK_RECIPE_HF_F32 == static_cast<int>(AngleRecipe::hf_f32) &&
              ROPECHECK_RECIPE_LADDER_F32 == static_cast<int>(AngleRecipe::ladder_f32) &&
              ROPECHECK_RECIPE_INV_FREQ_F64 == static_cast<int>(AngleRecipe::inv_freq_f64) &&
              ROPECHECK_RECIPE_FAST_POWF_F32 == static_cast<int>(AngleRecipe::fast_powf_f32) &&
              ROPECHECK_RECIPE_FAST_POWF_LADDER_F32 ==
                  static_cast<int>(AngleRecipe::fast_powf_ladder_f32) &&
              ROPECHECK_RECIPE_VLLM_F32 == static_cast<int>(AngleRecipe::vllm_f32));
static_assert(ROPECHECK_RECIPE_VLLM_F32 + 1 == static_cast<int>(kAllAngleRecipes.size()),
              "a recipe of AngleRecipe has no ROPECHECK_RECIPE_* value");

// The declared policy of dtype i, checked: precisions and recipe in range, trig_error >= 0.
Policy declared_policy(const Descriptor& d, const ropecheck_policy& p, int i) {
  // ABI 2 had no trig_error (reserved bytes, 0) and no ladder, inv_freq_f64, fast_powf or vllm
  // recipes; ABI 3's recipes are appended, the last one is the largest value.
  const double trig = d.abi_version >= 3 ? p.trig_error : 0.0;
  const std::int32_t max_recipe =
      d.abi_version >= 3 ? ROPECHECK_RECIPE_VLLM_F32 : ROPECHECK_RECIPE_HF_F32;
  const char* dtype = ropecheck::name(static_cast<Dtype>(i));
  if (!valid_precision(p.angle) || !valid_precision(p.table) || !valid_precision(p.arithmetic) ||
      p.recipe < ROPECHECK_RECIPE_POW_PRODUCT || p.recipe > max_recipe)
    refuse("plugin '" + d.name + "' declares an invalid precision policy for dtype " + dtype);
  // ABI 2's bytes here were reserved (0); read them as the ABI 3 rounding mask either way, so a
  // non-zero value in an ABI 2 descriptor is refused rather than silently ignored.
  if ((p.rounding & ~ROPECHECK_ROUNDING_ALL) != 0)
    refuse("plugin '" + d.name + "' declares rounding " + std::to_string(p.rounding) +
           " for dtype " + dtype +
           " (a mask of ROPECHECK_ROUNDING_TABLE_TOWARD_ZERO 1, _OUTPUT_TOWARD_ZERO 2 and "
           "_TRIG_ARGUMENT_TURNS_F32 4)");
  if (!std::isfinite(trig) || trig < 0)
    refuse("plugin '" + d.name + "' declares trig_error " + std::to_string(trig) + " for dtype " +
           dtype + " (must be finite and >= 0; 0 means the default 2)");
  Policy out{static_cast<Precision>(p.angle),
             static_cast<Precision>(p.table),
             static_cast<Precision>(p.arithmetic),
             static_cast<AngleRecipe>(p.recipe),
             p.fused != 0,
             "third-party plugin (declared policy)",
             trig == 0 ? 2.0 : trig};
  if (p.rounding & ROPECHECK_ROUNDING_TABLE_TOWARD_ZERO) out.table_rounding = Rounding::toward_zero;
  if (p.rounding & ROPECHECK_ROUNDING_OUTPUT_TOWARD_ZERO)
    out.output_rounding = Rounding::toward_zero;
  if (p.rounding & ROPECHECK_ROUNDING_TRIG_ARGUMENT_TURNS_F32)
    out.trig_argument = TrigArgument::turns_f32;
  return out;
}

// Field by field as send_hello writes them; false when the reply is short.
bool read_descriptor_fields(ipc::Reader& rd, Descriptor& d) {
  std::int32_t has_supports = 0, n_hd = 0;
  bool ok = rd.get(d.abi_version) && rd.get_string(d.name) && rd.get_string(d.description) &&
            rd.get(d.dtypes) && rd.get(d.layouts) && rd.get(has_supports) && rd.get(n_hd);
  d.has_supports = has_supports != 0;
  // load_plugin's limit; each dim must be in the payload before it is read.
  ok = ok && n_hd >= 0 && n_hd <= 100000;
  for (std::int32_t i = 0; ok && i < n_hd; ++i) {
    std::int64_t v = 0;
    ok = rd.get(v);
    d.head_dims.push_back(v);
  }
  for (int i = 0; ok && i < ROPECHECK_DTYPE_COUNT; ++i) {
    ropecheck_policy p{};
    ok = rd.get(p);
    if (ok && (d.dtypes & ROPECHECK_DTYPE_BIT(i)) != 0) d.policies[i] = declared_policy(d, p, i);
  }
  std::int32_t has_backward = 0;
  ok = ok && rd.get(d.scalings) && rd.get(d.flags) && rd.get(d.min_position) &&
       rd.get(d.max_position) && rd.get(has_backward) && rd.at_end();
  d.has_backward = has_backward == 1;
  return ok && (has_backward == 0 || has_backward == 1);
}

}  // namespace

Descriptor read_descriptor(const std::vector<char>& payload, const std::string& path) {
  ipc::Reader rd(payload);
  Descriptor d;
  if (!read_descriptor_fields(rd, d))
    refuse("plugin '" + path + "': malformed descriptor reply (" + std::to_string(payload.size()) +
           " bytes)");
  if (d.abi_version < 3) {
    // ABI 2 always passed scale != 1 and knew no position range: keep that meaning.
    d.flags |= ROPECHECK_FLAG_MAGNITUDE_SCALE;
    d.min_position = d.max_position = 0;
  }
  if (d.min_position > d.max_position)
    refuse("plugin '" + d.name + "' declares min_position " + std::to_string(d.min_position) +
           " > max_position " + std::to_string(d.max_position));
  if ((d.dtypes & ROPECHECK_DTYPE_BIT_ALL) == 0)
    refuse("plugin '" + d.name + "' declares no supported dtype");
  if ((d.layouts & ROPECHECK_LAYOUT_BIT_ALL) == 0)
    refuse("plugin '" + d.name + "' declares no supported layout");
  return d;
}

std::optional<bool> read_supports_reply(const std::vector<char>& payload) {
  ipc::Reader rd(payload);
  std::int32_t v = 0;
  if (!rd.get(v) || !rd.at_end() || (v != 0 && v != 1)) return std::nullopt;
  return v != 0;
}

namespace {
// The kinds the worker's guards report (worker.cpp check_guards; kernel_error from serve()).
bool guard_kind(std::int32_t k) {
  using F = FaultKind;
  for (F f : {F::out_of_bounds_write, F::unwritten_output, F::input_modified, F::kernel_error})
    if (k == static_cast<std::int32_t>(f)) return true;
  return false;
}
}  // namespace

ApplyOutcome read_apply_reply(const std::vector<char>& payload, std::uint64_t result_bytes) {
  ipc::Reader rd(payload);
  ApplyReply ar{};
  ApplyOutcome out;
  const char* detail = nullptr;
  const char* result = nullptr;
  if (!rd.get(ar)) {
    out.violation = "a reply shorter than its header";
  } else if (ar.detail_len > kMaxDetail || !(detail = rd.take(ar.detail_len))) {
    out.violation = "a message of " + std::to_string(ar.detail_len) + " bytes";
  } else if (ar.result_bytes != result_bytes || !(result = rd.take(ar.result_bytes))) {
    out.violation = "a result of " + std::to_string(ar.result_bytes) +
                    " bytes where the call's output has " + std::to_string(result_bytes);
  } else if (!rd.at_end()) {
    out.violation = "bytes after the result";
  } else if (ar.fault_kind != 0 && !guard_kind(ar.fault_kind)) {
    out.violation = "fault kind " + std::to_string(ar.fault_kind);
  }
  if (!out.violation.empty()) return out;
  if (ar.fault_kind != 0) {
    out.fault.emplace();
    out.fault->kind = static_cast<FaultKind>(ar.fault_kind);
    out.fault->detail.assign(detail, ar.detail_len);
    return out;
  }
  if (ar.status == ROPECHECK_UNSUPPORTED)
    out.status = KernelStatus::unsupported;
  else if (ar.status == ROPECHECK_OK)
    out.status = KernelStatus::ok;
  out.result = result;
  return out;
}

}  // namespace ropecheck::plugin
