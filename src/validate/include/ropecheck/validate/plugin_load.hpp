// Loading a plugin for `validate` and `report --plugin` (one path for both): from a shared object,
// or attached to a worker that already serves (the Python module's rc.validate and rc.report),
// with correctly rounded inv_freq tables for plugins that take one; and what of a report's sweep
// lies inside the plugin's declared domain.
#pragma once

#include "ropecheck/plugin/host.hpp"
#include "ropecheck/reports/report.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ropecheck::validate {

// A plugin path is a file path: resolved against the working directory (absolute, lexically
// normalized) before dlopen, which would otherwise search the library path for a bare name
// ("libmykernel.so" in the current directory was "cannot open shared object file"). UsageError
// naming the absolute path when no such file exists.
std::string resolve_plugin_path(const std::string& path);

// UsageError (exit 2) when the plugin cannot be used. worker_fds: the two descriptors (R, W) of a
// worker that serves already (plugin::serve); path then only names it. memory_limit: bytes the
// worker may add (plugin::Options::memory_limit; 0: none).
std::unique_ptr<plugin::PluginKernel> load_plugin(
    const std::string& path, const std::optional<std::pair<int, int>>& worker_fds, double timeout,
    std::uint64_t memory_limit);

// The declared domain in one line, as the properties read it.
std::string describe_domain(const Domain& d);

// Narrows a report's sweep to what the kernel declares: the dtypes, head dims, bases and layouts
// its supports() accepts (head dims: its declared list when it has one and none were asked for),
// positions up to its max_position. Returns one line per thing left out ("f64, f16: not declared
// by the kernel"); UsageError when nothing of the sweep is inside the domain.
std::vector<std::string> restrict_to_domain(reports::Options& o, const Kernel& k,
                                            bool head_dims_given);

}  // namespace ropecheck::validate
