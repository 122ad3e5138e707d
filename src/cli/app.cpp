// The ropecheck command line as a library: main() and the eval-argument fuzz target
// (src/fuzz/fuzz_eval_args.cpp) build the same CLI11 app and map errors to the same exit codes.
#include <exception>
#include <iostream>
#include <string>
#include <typeinfo>

#include "cli.hpp"
#include "ropecheck/spec.hpp"
#include "ropecheck/validate/options.hpp"

namespace ropecheck::cli {

void add_all(CLI::App& app, int& status, const RunOptions& opts) {
  app.require_subcommand(1);
  add_list(app, status);
  add_eval(app, status, opts);
  add_report(app, status);
  add_check(app, status);
  add_validate(app, status);
}

int run(int argc, const char* const* argv, const RunOptions& opts) {
  CLI::App app{"ropecheck: a multiprecision correctness oracle for RoPE kernels"};
  int status = 0;
  add_all(app, status, opts);
  try {
    app.parse(argc, argv);
    return status;
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
  } catch (const validate::UsageError& e) {  // the same, from the validation module
    std::cerr << "ropecheck: " << e.what() << "\n";
    return 2;
  } catch (const SpecError& e) {
    std::cerr << "ropecheck: " << e.what() << "\n";
    return 2;
  } catch (const std::invalid_argument& e) {
    std::cerr << "ropecheck: invalid input: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    // Exit 3 is ropecheck's own bug: say at least what was thrown.
    const std::string what = e.what();
    std::cerr << "ropecheck: internal error: " << (what.empty() ? typeid(e).name() : what)
              << " (a bug of ropecheck: please report it with the command line)\n";
    return 3;
  }
}

}  // namespace ropecheck::cli
