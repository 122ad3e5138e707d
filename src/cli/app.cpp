// The ropecheck command line as a library: main() and the eval-argument fuzz target
// (src/fuzz/fuzz_eval_args.cpp) build the same CLI11 app and map errors to the same exit codes.
#include <exception>
#include <iostream>

#include "cli.hpp"
#include "ropecheck/spec.hpp"

namespace ropecheck::cli {

void add_all(CLI::App& app) {
  app.require_subcommand(1);
  add_list(app);
  add_eval(app);
  add_report(app);
  add_check(app);
  add_validate(app);
}

int run(int argc, const char* const* argv) {
  CLI::App app{"ropecheck: a multiprecision correctness oracle for RoPE kernels"};
  add_all(app);
  try {
    app.parse(argc, argv);
    return 0;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "ropecheck: " << e.what() << "\n(run 'ropecheck --help' for usage)\n";
    return 2;
  } catch (const UsageError& e) {
    std::cerr << "ropecheck: " << e.what() << "\n";
    return 2;
  } catch (const SpecError& e) {
    std::cerr << "ropecheck: " << e.what() << "\n";
    return 2;
  } catch (const std::invalid_argument& e) {
    std::cerr << "ropecheck: invalid input: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "ropecheck: internal error: " << e.what() << "\n";
    return 3;
  }
}

}  // namespace ropecheck::cli
