// What of a configuration's declared domain the directed differential reaches, as the summary's
// coverage lines say it, and the coverage gaps that fail a run: a variant supports() accepts only
// below kRealisticPairs pairs, where a bug of its own path could not show.
#pragma once

#include "ropecheck/kernel.hpp"

#include <string>
#include <vector>

namespace ropecheck::validate {

// The partial-rotary coverage of a configuration's directed specs: the partial specs the
// differential runs ("32/64, 64/128"), and whether a gap remains: the kernel accepts partial
// rotary (probed at 1 to 3 pairs) but no directed partial spec has >= 4 pairs.
struct PartialCoverage {
  std::string ran;  // "rd/hd, ..." (empty: none)
  std::string gap;  // non-empty: the coverage failure's reason
};
PartialCoverage partial_coverage(const Kernel& k, Dtype dt, Layout l,
                                 const std::vector<RopeSpec>& specs);

// The structural variants a configuration's directed specs ran at realistic sizes (odd head_dim,
// scale, in place, scaling kinds and the head dims each ran at), and a coverage gap: a variant
// supports() accepts only below 4 pairs (probed at 2 and 3 pairs). groups: the configuration's
// variant groups (differential_specs).
struct StructuralCoverage {
  std::string ran;
  std::string gap;
};
StructuralCoverage structural_coverage(const Kernel& k, Dtype dt, Layout l,
                                       const std::vector<RopeSpec>& specs,
                                       const std::vector<std::vector<RopeSpec>>& groups);

}  // namespace ropecheck::validate
