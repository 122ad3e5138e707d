// The engine atlas: one kernel per production engine's RoPE recipe (src/kernels/engines/), each
// computing what that engine computes, in its order and types, with its provenance (upstream file
// and commit, how the emulation is checked against the real code, what is modelled).
#pragma once

#include "ropecheck/kernel.hpp"

#include <string>
#include <vector>

namespace ropecheck {

struct Provenance {
  std::string engine;    // the project and path, e.g. "Hugging Face transformers (eager)"
  std::string upstream;  // "owner/repo path/to/file @ <commit>" that the emulation follows
  // How the emulation is checked against the real code: "bit for bit against real PyTorch
  // (ctest engines_torch)", "golden set made by <repo> @ <commit> (N outputs)", or why it cannot
  // be.
  std::string checked;
  // Non-empty when part of the recipe is modelled rather than reproduced, e.g. "GPU fast-math trig
  // modelled: ...; bit-exact only on the device". Reports print it beside the engine's figures.
  std::string modelled;
};

class EngineKernel : public Kernel {
 public:
  virtual Provenance provenance() const = 0;
};

// Registry order = atlas order.
const std::vector<const EngineKernel*>& engine_kernels();
const EngineKernel* find_engine_kernel(const std::string& name);  // nullptr if absent

}  // namespace ropecheck
