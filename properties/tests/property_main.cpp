// GTest front end of the property suite for one storage dtype (ROPECHECK_TEST_DTYPE, one binary per
// dtype): registers <Suite>/<kernel>_<dtype>.<Property> for every built-in kernel x property at run
// time (kernels are run-time values), each evaluated by properties::check().
#include "ropecheck/kernels/registry.hpp"
#include "ropecheck/properties.hpp"

#include <gtest/gtest.h>

#include <iostream>

namespace {

constexpr ropecheck::Dtype kDtype = ropecheck::Dtype::ROPECHECK_TEST_DTYPE;

class PropertyTest : public testing::Test {
 public:
  PropertyTest(const ropecheck::Kernel* k, ropecheck::properties::Property p) : k_(k), p_(p) {}
  void TestBody() override {
    namespace P = ropecheck::properties;
    // Built-in kernels are checked on every scaling variant and layout they support.
    P::Options o;
    o.variants = true;
    const auto v = P::check(p_, *k_, kDtype, o);
    std::cout << "[cases] " << P::test_id("Properties", k_->name(), kDtype, p_) << " " << v.cases
              << "\n";
    switch (v.status) {
      case P::Status::passed:
        break;
      case P::Status::not_applicable:
        GTEST_SKIP() << v.message;
        break;
      case P::Status::gave_up:
        FAIL() << "gave up (too many discarded cases): " << v.message;
        break;
      case P::Status::failed:
        FAIL() << v.message << "\n" << v.details;
        break;
      case P::Status::mismatch:
        FAIL() << v.message;
        break;
    }
  }

 private:
  const ropecheck::Kernel* k_;
  ropecheck::properties::Property p_;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  for (const ropecheck::Kernel* k : ropecheck::builtin_kernels())
    for (auto p : ropecheck::properties::all_properties()) {
      const std::string suite = "Properties/" + k->name() + "_" + ropecheck::name(kDtype);
      testing::RegisterTest(suite.c_str(), ropecheck::properties::name(p), nullptr, nullptr,
                            __FILE__, __LINE__,
                            [k, p]() -> testing::Test* { return new PropertyTest(k, p); });
    }
  return RUN_ALL_TESTS();
}
