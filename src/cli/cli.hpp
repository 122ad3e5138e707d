// Shared pieces of the ropecheck subcommands.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "ropecheck/kernel.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace ropecheck::cli {

// Bad usage or bad input: the message goes to stderr and the process exits with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Splits "a,b,c" (sep ',') or "r1;r2" (sep ';'); empty fields are errors.
std::vector<std::string> split(const std::string& s, char sep, const std::string& what);
// Strict integer / finite-double parsing (whole string, no trailing garbage).
bool parse_int64(const std::string& s, long long& out);
double parse_finite_double(const std::string& s, const std::string& what);

nlohmann::ordered_json policy_json(const Policy& p);

void add_list(CLI::App& app);
void add_eval(CLI::App& app);
void add_report(CLI::App& app);
void add_check(CLI::App& app);
void add_validate(CLI::App& app);

}  // namespace ropecheck::cli
