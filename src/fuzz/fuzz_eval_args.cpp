// libFuzzer target: `ropecheck eval` argument parsing and validation, through the same CLI11 app
// and exit-code mapping as main() (ropecheck::cli::run). The input is split at '\n' into at most
// 24 argv entries after "ropecheck eval". Exit 0 (valid) or 2 (bad usage/input, with a message)
// are the only acceptable outcomes (the evaluation itself is skipped, see below); 3 ("internal
// error": an exception nobody mapped) or a crash is a finding. stdout/stderr are muted so the
// fuzzer is not I/O bound.
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Parse and validate only: the exact evaluation of an accepted spec costs milliseconds (MP
  // trig), which would cut the fuzzer to a few hundred inputs per second; the arithmetic has its
  // own tests and property suite.
  std::vector<std::string> args{"ropecheck", "eval"};
  std::string cur;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      args.push_back(cur);
      cur.clear();
      if (args.size() > 26) return 0;
    } else {
      cur += static_cast<char>(data[i]);
    }
  }
  args.push_back(cur);
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  auto* out = std::cout.rdbuf(nullptr);
  auto* err = std::cerr.rdbuf(nullptr);
  ropecheck::cli::RunOptions opts;
  opts.eval_validate_only = true;  // parse and validate, no reference evaluation
  const int rc = ropecheck::cli::run(static_cast<int>(argv.size()), argv.data(), opts);
  std::cout.rdbuf(out);
  std::cerr.rdbuf(err);
  std::cout.clear();
  std::cerr.clear();
  FUZZ_REQUIRE(rc == 0 || rc == 2);
  return 0;
}
