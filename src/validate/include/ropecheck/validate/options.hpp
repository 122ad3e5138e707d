// What a validation run is asked to do, below the command line: the settings `ropecheck validate`
// parses from its options (and rc.validate passes through it), and the error of bad usage.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ropecheck::validate {

// Bad usage or bad input (exit 2 at the command line, with the message on stderr).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Options {
  std::string plugin;  // the loaded path (resolved), or "rc.validate" when served
  // A worker already serving on these pipe ends (R, W): the Python module's rc.validate.
  std::optional<std::pair<int, int>> worker_fds;
  std::string budget = "standard";     // quick | standard | deep (max_success_for)
  std::string oracle = "fast";         // fast (two-tier) or mpfr (MPFR alone, same answers)
  double timeout = 10.0;               // seconds per plugin call
  std::uint64_t worker_memory = 8192;  // MiB the plugin worker may add (0: no limit)
  std::uint64_t seed = 1;
  // How the run was asked, for its replay lines: --hf-config (path, --seq-len, --hf-layer-type)
  // and --spec as given.
  std::string hf_path, hf_layer_type, spec;
  std::int64_t hf_seq_len = 0;
  std::vector<std::string> properties;  // only these checks (names; "Differential" included)
  bool verbose = false;                 // RapidCheck's full report with each failure
  int threads = 1;                      // processes running checks at once (forked_jobs.hpp)
  double shrink_seconds = -1;           // per failing property (< 0: by budget)
  // The run's shrink-time pool (SharedPool, shared with the forked runners); null: none.
  std::atomic<std::int64_t>* shrink_pool_ns = nullptr;
  std::string out;  // --out: the report set's directory (empty: none)
};

// --properties: whether a check (Differential or a property name) runs.
bool wanted(const Options& o, const std::string& check);

}  // namespace ropecheck::validate
