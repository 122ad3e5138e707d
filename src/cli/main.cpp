// ropecheck: precision oracle for RoPE kernels. Exit codes: 0 success, 1 a check failed,
// 2 bad usage or bad input (never a crash).
#include <exception>
#include <iostream>

#include "cli.hpp"
#include "ropecheck/spec.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ropecheck: a multiprecision correctness oracle for RoPE kernels"};
  app.require_subcommand(1);
  ropecheck::cli::add_list(app);
  ropecheck::cli::add_eval(app);
  ropecheck::cli::add_report(app);
  ropecheck::cli::add_check(app);
  ropecheck::cli::add_validate(app);
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
  } catch (const ropecheck::cli::UsageError& e) {
    std::cerr << "ropecheck: " << e.what() << "\n";
    return 2;
  } catch (const ropecheck::SpecError& e) {
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
