// What the report tests' broken kernels do to a correct kernel's output: every f32 element times
// (1 + 2^-6), rounded back to f32 -- about 2^18 ulps, far outside any derived bound.
#pragma once

#include "ropecheck/dtype.hpp"
#include "ropecheck/kernel.hpp"

#include <cstdint>

namespace ropecheck::reports::test {

inline void skew_f32_outputs(const RopeSpec& spec, const TensorArgs& a) {
  for (std::int64_t t = 0; t < a.n_tokens; ++t)
    for (std::int64_t h = 0; h < a.n_heads; ++h)
      for (std::int64_t j = 0; j < spec.head_dim; ++j) {
        const std::int64_t i = t * a.token_stride + h * a.head_stride + j;
        store(Dtype::f32, a.out, i,
              round_to_dtype(load(Dtype::f32, a.out, i) * (1 + 0x1p-6), Dtype::f32));
      }
}

}  // namespace ropecheck::reports::test
