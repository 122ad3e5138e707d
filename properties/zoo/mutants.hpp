// The bug zoo: deliberately broken kernels modelled on real public RoPE bugs. Each declares the
// same precision policy as the correct baseline (f64 angle, table and arithmetic), i.e. each claims
// to be correct, and each must be caught by the property named in `expected`.
#pragma once

#include "ropecheck/kernel.hpp"
#include "ropecheck/properties.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ropecheck::zoo {

struct Mutant {
  std::string name;
  std::string modelled_on;                     // the real-world bug this imitates
  std::vector<properties::Property> expected;  // must each FAIL on this mutant
  std::shared_ptr<const Kernel> kernel;
  // Spec focus for the scaling / multi-axis mutants (properties::Options::focus_*): the mutant is
  // checked on specs of its variant (with variants enabled) so the fixed case budget reaches it.
  std::optional<ScalingKind> focus_scaling;
  std::optional<Layout> focus_layout;
};

// The zoo's unmutated kernel: a plain f64 loop that honours strides, layouts, partial rotary and
// in-place calls. It must pass every property (control: failures of mutants are the mutation's).
const Kernel& baseline();
// The scaling-aware unmutated kernel (every variant and layout; theta' and s from the reference,
// rounded once to f64): the control of the scaling mutants.
const Kernel& scaled_baseline();
// The baseline contracting to FMA in batched calls only: correct, last-bit batch-dependent.
// declared_batch_variant: whether its domain says so (Domain::batch_invariant = false).
const Kernel& batch_dependent(bool declared_batch_variant);
const std::vector<Mutant>& mutants();

}  // namespace ropecheck::zoo
