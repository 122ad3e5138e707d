// Names of the policy vocabulary (policy.hpp): the angle recipes as reports, `check` and the
// plugin documentation spell them; the one-line and the JSON form of a policy.
#include "ropecheck/policy.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace ropecheck {

const char* name(AngleRecipe r) {
  switch (r) {
    case AngleRecipe::pow_product:
      return "pow_product";
    case AngleRecipe::hf_f32:
      return "hf_f32";
    case AngleRecipe::ladder_f32:
      return "ladder_f32";
    case AngleRecipe::inv_freq_f64:
      return "inv_freq_f64";
    case AngleRecipe::fast_powf_f32:
      return "fast_powf_f32";
    case AngleRecipe::fast_powf_ladder_f32:
      return "fast_powf_ladder_f32";
    case AngleRecipe::vllm_f32:
      return "vllm_f32";
  }
  return "?";
}

std::optional<AngleRecipe> parse_angle_recipe(std::string_view s) {
  for (AngleRecipe r : kAllAngleRecipes)
    if (s == name(r)) return r;
  return std::nullopt;
}

std::string angle_recipe_names() {
  std::string out;
  for (std::size_t i = 0; i < kAllAngleRecipes.size(); ++i) {
    if (i > 0) out += i + 1 == kAllAngleRecipes.size() ? " or " : ", ";
    out += name(kAllAngleRecipes[i]);
  }
  return out;
}

const char* name(Rounding r) { return r == Rounding::toward_zero ? "toward_zero" : "nearest_even"; }

std::optional<Rounding> parse_rounding(std::string_view s) {
  for (Rounding r : {Rounding::nearest_even, Rounding::toward_zero})
    if (s == name(r)) return r;
  return std::nullopt;
}

const char* name(TrigArgument t) { return t == TrigArgument::turns_f32 ? "turns_f32" : "exact"; }

std::optional<TrigArgument> parse_trig_argument(std::string_view s) {
  for (TrigArgument t : {TrigArgument::exact, TrigArgument::turns_f32})
    if (s == name(t)) return t;
  return std::nullopt;
}

std::string describe(const Policy& p) {
  // trig_error with the fewest digits that read back as itself ("2", "6.5").
  std::string te;
  for (int prec = 1; prec <= 17; ++prec) {
    std::ostringstream t;
    t.precision(prec);
    t << p.trig_error;
    te = t.str();
    if (std::strtod(te.c_str(), nullptr) == p.trig_error) break;
  }
  std::ostringstream o;
  o << "angle " << name(p.angle) << ", table " << name(p.table) << ", arithmetic "
    << name(p.arithmetic) << ", recipe " << name(p.recipe) << ", fused "
    << (p.fused ? "true" : "false") << ", trig_error " << te;
  if (p.table_rounding != Rounding::nearest_even)
    o << ", table_rounding " << name(p.table_rounding);
  if (p.output_rounding != Rounding::nearest_even)
    o << ", output_rounding " << name(p.output_rounding);
  if (p.trig_argument != TrigArgument::exact) o << ", trig_argument " << name(p.trig_argument);
  return o.str();
}

nlohmann::ordered_json policy_json(const Policy& p) {
  return {{"angle", name(p.angle)},
          {"table", name(p.table)},
          {"arithmetic", name(p.arithmetic)},
          {"recipe", name(p.recipe)},
          {"fused", p.fused},
          {"trig_error", p.trig_error},
          {"table_rounding", name(p.table_rounding)},
          {"output_rounding", name(p.output_rounding)},
          {"trig_argument", name(p.trig_argument)},
          {"notes", p.notes}};
}

float fast_powf_f32_inv_freq(double base, std::int64_t pair, std::int64_t rotary_dim,
                             double linear_factor) {
  const float rcp_theta = 1.0f / static_cast<float>(base);  // FlashInfer's host: 1.0f / theta
  const float y = static_cast<float>(2 * pair) / static_cast<float>(rotary_dim);
  const float lg = static_cast<float>(std::log2(static_cast<double>(rcp_theta)));
  const float z = y * lg;
  float f = static_cast<float>(std::exp2(static_cast<double>(z)));
  if (linear_factor != 0) f = f * (1.0f / static_cast<float>(linear_factor));
  return f;
}

float fast_powf_ladder_f32_inv_freq(double base, std::int64_t j, std::int64_t dim) {
  const float ts = std::pow(static_cast<float>(base), -2.0f / static_cast<float>(dim));
  const float lg = static_cast<float>(std::log2(static_cast<double>(ts)));
  const float z = static_cast<float>(j) * lg;
  return static_cast<float>(std::exp2(static_cast<double>(z)));
}

double turns_f32_angle(float x) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const float c = static_cast<float>(1.0 / kTwoPi);
  const float t = x * c;
  // 2pi t within 2^-52 relative (the double nearest 2pi, one rounding of the product): the model
  // claims no more.
  return kTwoPi * static_cast<double>(t);
}

}  // namespace ropecheck
