#include "ropecheck/regimes.hpp"

#include <cmath>
#include <numbers>
#include <sstream>

namespace ropecheck {

Llama3Bands llama3_bands(const RopeSpec& s) {
  // HF _compute_llama3_parameters: wavelen = 2 pi / theta_i; < orig / high: unscaled; > orig /
  // low: divided by factor; between: interpolated (spec.cpp llama3_theta, the same tests).
  Llama3Bands b;
  const Scaling& sc = s.scaling;
  const double orig = static_cast<double>(sc.original_max_position_embeddings);
  for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
    const auto [j, dim] = s.ladder(i);
    const double theta = std::pow(s.base, -2.0 * static_cast<double>(j) / static_cast<double>(dim));
    const double wavelen = 2 * std::numbers::pi / theta;
    if (wavelen < orig / sc.high_freq_factor)
      ++b.high;
    else if (wavelen > orig / sc.low_freq_factor)
      ++b.low;
    else
      ++b.mid;
  }
  return b;
}

std::string scaling_regime(const RopeSpec& s) {
  const Scaling& sc = s.scaling;
  std::ostringstream o;
  switch (sc.kind) {
    case ScalingKind::none:
      return "none";
    case ScalingKind::linear: {
      int e = 0;
      const bool pow2 = std::frexp(sc.factor, &e) == 0.5;
      return pow2 ? "linear factor a power of two" : "linear factor not a power of two";
    }
    case ScalingKind::dynamic:
      // seq_len 0 (none given) builds the table for L0 itself: the "at" regime.
      if (sc.seq_len > 0 && sc.seq_len < sc.max_position_embeddings)
        return "dynamic below trained length";
      if (sc.seq_len > sc.max_position_embeddings) return "dynamic above trained length";
      return "dynamic at trained length";
    case ScalingKind::yarn:
      o << "yarn truncate=" << (sc.truncate ? "on" : "off") << " factor="
        << (sc.attention_factor                        ? "explicit"
            : sc.mscale != 0 && sc.mscale_all_dim != 0 ? "mscale pair"
                                                       : "derived");
      return o.str();
    case ScalingKind::llama3: {
      const Llama3Bands b = llama3_bands(s);
      o << "llama3 bands " << b.populated() << " (high " << b.high << " mid " << b.mid << " low "
        << b.low << ")";
      return o.str();
    }
    case ScalingKind::freq_factors:
      return "freq_factors";
    case ScalingKind::longrope:
      // HF Phi-3: the long factors strictly beyond the original context.
      return sc.seq_len > sc.original_max_position_embeddings ? "longrope long side"
                                                              : "longrope short side";
  }
  return "unknown";
}

std::vector<std::int64_t> realistic_head_dims(const Domain& d) {
  return d.head_dims.empty() ? std::vector<std::int64_t>{64, 80, 96, 128, 256} : d.head_dims;
}

}  // namespace ropecheck
