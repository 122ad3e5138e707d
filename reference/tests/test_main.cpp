// Shared main for the reference tests: fixes the MP precision and RapidCheck's case count and seed
// before any test runs, so a default run is fast and reproducible.
#include "ropecheck/reference/reference.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  // Dense MP products are slow: a small fixed number of cases per property keeps the default run
  // to seconds. An explicit RC_PARAMS (e.g. a deep run with max_success=1000) takes precedence.
  // RapidCheck reads RC_PARAMS once, at its first property, which is after this point.
  setenv("RC_PARAMS", "max_success=100 seed=20240611", /*overwrite=*/0);
  ropecheck::reference::set_precision_bits(
      ropecheck::reference::default_bits(ropecheck::Dtype::f64));
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
