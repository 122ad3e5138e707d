// The shape of the property table (table.hpp), free of any dtype: properties.cpp reads its names,
// families and applicability without compiling a property. Only the generator column depends on
// the storage dtype, so the table is instantiated once per dtype (props_<dtype>.cpp) and any
// instance answers the dtype-free questions.
#pragma once

#include "ropecheck/properties.hpp"

#include <array>
#include <cstddef>
#include <optional>

namespace ropecheck::properties::gen {
struct Context;
}

namespace ropecheck::properties::detail {

// The family a property belongs to: the file that defines it (lib/<family>.hpp).
enum class Family { algebraic, layout_shift, reference_bound, structure, multi_axis, backward };

// Applicability: what of the declared domain a property needs. domain.hpp not_applicable() names
// the declaration that rules it out when the domain lacks it.
enum class Needs {
  nothing,             // any declared domain
  position_zero,       // 0 among the declared positions
  opposite_positions,  // m and -m, m != 0, among the declared positions
  both_layouts,        // a spec supported in both the interleaved and the half layout
  partial_rotary,      // a probed spec with rotary_dim < head_dim
  in_place,            // Domain::in_place
  multi_axis,          // mrope, imrope or axial
  mrope_and_half,      // mrope or imrope, and the 1-D half spec of its head_dim and rotary_dim
  backward,            // Kernel::has_backward() (properties.cpp check())
};

// Draws one case through gen.hpp and checks the claim on it; RapidCheck calls it once per case.
using Generator = void (*)(const Kernel&, gen::Context&);

struct Row {
  Property id;
  const char* name;  // the enum value's name: test names, validate's columns, --property
  Family family;
  Needs needs;
  Generator generator;              // nullptr: a backward property run as `forward` ...
  std::optional<Property> forward;  // ... on backward_view(k) (properties.cpp check())
  const char* claim;
};

inline constexpr std::size_t kPropertyCount =
    static_cast<std::size_t>(Property::BackwardComposesAdditivelyPerAxis) + 1;
using Table = std::array<Row, kPropertyCount>;

inline constexpr std::size_t index(Property p) { return static_cast<std::size_t>(p); }

// Row i is the enum's value i, and a row without a generator runs a forward property that has one.
constexpr bool well_formed(const Table& t) {
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (index(t[i].id) != i) return false;
    if (!t[i].generator && !(t[i].forward && t[index(*t[i].forward)].generator)) return false;
  }
  return true;
}

// The table with storage dtype D's generators (table.hpp; one instance per props_<dtype>.cpp).
template <Dtype D>
const Table& table();
extern template const Table& table<Dtype::f64>();
extern template const Table& table<Dtype::f32>();
extern template const Table& table<Dtype::f16>();
extern template const Table& table<Dtype::bf16>();

}  // namespace ropecheck::properties::detail
