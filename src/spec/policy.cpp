// Names of the policy vocabulary (kernel.hpp): the angle recipes as reports, `check` and the
// plugin documentation spell them.
#include "ropecheck/kernel.hpp"

namespace ropecheck {

const char* name(AngleRecipe r) {
  switch (r) {
    case AngleRecipe::pow_product:
      return "pow_product";
    case AngleRecipe::hf_f32:
      return "hf_f32";
    case AngleRecipe::ladder_f32:
      return "ladder_f32";
  }
  return "?";
}

std::optional<AngleRecipe> parse_angle_recipe(std::string_view s) {
  for (AngleRecipe r : {AngleRecipe::pow_product, AngleRecipe::hf_f32, AngleRecipe::ladder_f32})
    if (s == name(r)) return r;
  return std::nullopt;
}

}  // namespace ropecheck
