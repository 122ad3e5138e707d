// Internal: what every work unit that runs a kernel shares (sample.cpp): reproducible seeds per
// unit, random inputs in a dtype, and one call of a kernel on a batch of vectors.
#pragma once

#include "ropecheck/kernel.hpp"

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <random>
#include <vector>

namespace ropecheck::reports::detail {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// SplitMix64 over the run's seed and the unit's fields: independent, reproducible seeds per work
// unit, whatever thread (or shard) runs it.
std::uint64_t unit_seed(std::uint64_t seed, std::initializer_list<std::uint64_t> parts);

// Random inputs: N(0, 1) rounded once into the dtype (activations after a norm layer are O(1)).
std::vector<double> random_vector(std::mt19937_64& rng, std::int64_t n, Dtype d);

// A kernel's outputs as doubles, vector v at [v]: one flat buffer (a vector per output vector, and
// fresh zeroed byte buffers per call, cost a tenth of the f64 sweep in allocation and page faults).
class Outputs {
 public:
  const double* operator[](std::size_t v) const { return data_.get() + v * hd_; }

 private:
  friend KernelStatus run_kernel_status(const Kernel&, const RopeSpec&, Dtype,
                                        const std::vector<std::int64_t>&, std::int64_t,
                                        const std::vector<std::vector<double>>&, Outputs&);
  friend bool run_kernel_per_position(const Kernel&, const RopeSpec&, Dtype,
                                      const std::vector<std::int64_t>&, std::int64_t,
                                      const std::vector<std::vector<double>>&, Outputs&,
                                      std::vector<char>&);
  std::unique_ptr<double[]> data_;  // not zeroed first: every element is written
  std::size_t hd_ = 0;
};

// Runs kernel k on `heads` vectors per position of one spec; returns the outputs as doubles, or
// false when the kernel reports unsupported/error.
bool run_kernel(const Kernel& k, const RopeSpec& spec, Dtype d,
                const std::vector<std::int64_t>& positions, std::int64_t heads,
                const std::vector<std::vector<double>>& in, Outputs& out);

// run_kernel's call with the kernel's status (ok: `out` holds the outputs).
KernelStatus run_kernel_status(const Kernel& k, const RopeSpec& spec, Dtype d,
                               const std::vector<std::int64_t>& positions, std::int64_t heads,
                               const std::vector<std::vector<double>>& in, Outputs& out);

// The same, one position per call, for a kernel that refused the whole batch (unsupported, not an
// error): an engine whose
// cache ends inside the sampled range (vLLM's max_position_embeddings rows) serves the positions
// below its extent. served[t]: position t ran (its outputs are in `out`; the others are 0).
// False when no position ran, or when a position returned an error.
bool run_kernel_per_position(const Kernel& k, const RopeSpec& spec, Dtype d,
                             const std::vector<std::int64_t>& positions, std::int64_t heads,
                             const std::vector<std::vector<double>>& in, Outputs& out,
                             std::vector<char>& served);

}  // namespace ropecheck::reports::detail
