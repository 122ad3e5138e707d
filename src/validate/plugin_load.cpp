// Loading a plugin and fitting a report's sweep to its declared domain (plugin_load.hpp).
#include "ropecheck/validate/plugin_load.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <sstream>

#include "ropecheck/reference/reference.hpp"
#include "ropecheck/validate/options.hpp"
#include "ropecheck/verify/verify.hpp"

namespace ropecheck::validate {

namespace ref = ropecheck::reference;

std::string resolve_plugin_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path abs = fs::absolute(fs::path(path), ec).lexically_normal();
  if (ec || path.empty()) throw UsageError("cannot use plugin '" + path + "': not a file path");
  if (!fs::exists(abs, ec))
    throw UsageError("cannot use plugin: no such file: " + abs.string() +
                     (fs::path(path).is_absolute()
                          ? std::string()
                          : " ('" + path + "' resolved against the working directory " +
                                fs::current_path(ec).string() + ")"));
  if (fs::is_directory(abs, ec))
    throw UsageError("cannot use plugin: " + abs.string() + " is a directory");
  return abs.string();
}

std::unique_ptr<plugin::PluginKernel> load_plugin(
    const std::string& path, const std::optional<std::pair<int, int>>& worker_fds, double timeout,
    std::uint64_t memory_limit) {
  plugin::Options po;
  po.timeout_s = timeout;
  po.memory_limit = memory_limit;
  std::unique_ptr<plugin::PluginKernel> pk;
  try {
    if (worker_fds) {
      pk = plugin::PluginKernel::attach(worker_fds->first, worker_fds->second, path, po);
    } else {
      pk = plugin::PluginKernel::load(resolve_plugin_path(path), po);
    }
  } catch (const plugin::LoadError& e) {
    throw UsageError(std::string("cannot use plugin: ") + e.what());
  }
  // Tables handed to plugins that take one: correctly rounded from the exact theta_i.
  pk->set_inv_freq_provider([](const RopeSpec& s) {
    plugin::InvFreqTables t;
    for (std::int64_t i = 0; i < s.n_pairs(); ++i) {
      const ref::Mp th = ref::inv_freq(s, i);
      t.f64.push_back(ref::round_to(th, Dtype::f64));
      t.f32.push_back(static_cast<float>(ref::round_to(th, Dtype::f32)));
    }
    return t;
  });
  return pk;
}

std::string describe_domain(const Domain& d) {
  std::ostringstream o;
  o << "head_dim ";
  if (d.head_dims.empty()) {
    o << "any";
  } else {
    o << "{";
    for (std::size_t i = 0; i < d.head_dims.size(); ++i) o << (i ? "," : "") << d.head_dims[i];
    o << "}";
  }
  const bool any_pos = d.min_position == std::numeric_limits<std::int64_t>::min() &&
                       d.max_position == std::numeric_limits<std::int64_t>::max();
  o << "; positions ";
  if (any_pos)
    o << "any int64";
  else
    o << "[" << d.min_position << ", " << d.max_position << "]";
  o << "; magnitude scale " << (d.magnitude_scale ? "yes" : "no (scale = 1)") << "; in-place "
    << (d.in_place ? "yes" : "no") << "; layouts bitwise symmetric "
    << (d.layouts_bitwise_symmetric ? "yes" : "no (compared within the bound)")
    << "; batch-invariant " << (d.batch_invariant ? "yes" : "no (compared within the bound)");
  return o.str();
}

namespace {

RopeSpec sweep_spec(std::int64_t hd, double base, Layout l) {
  RopeSpec s;
  s.head_dim = hd;
  s.base = base;
  s.layout = l;
  return s.normalized();
}

// Keeps the entries of `v` for which keep() holds; the others, as text, go to one note line.
template <class T, class Keep, class Text>
void narrow(std::vector<T>& v, Keep keep, Text text, const std::string& why,
            std::vector<std::string>& notes) {
  std::string dropped;
  std::vector<T> kept;
  for (const T& x : v) {
    if (keep(x))
      kept.push_back(x);
    else
      dropped += (dropped.empty() ? "" : ", ") + text(x);
  }
  if (!dropped.empty()) notes.push_back(dropped + ": " + why);
  v = std::move(kept);
}

}  // namespace

std::vector<std::string> restrict_to_domain(reports::Options& o, const Kernel& k,
                                            bool head_dims_given) {
  std::vector<std::string> notes;
  const Domain dom = k.domain();
  if (!dom.head_dims.empty() && !head_dims_given) o.head_dims = dom.head_dims;
  // One accepted (head dim, base, layout, dtype) is enough to keep each value: the sweep skips
  // the combinations supports() refuses and counts them (specs_supported).
  const auto any = [&](auto pred) {
    for (auto hd : o.head_dims)
      for (double b : o.bases)
        for (Layout l : o.layouts)
          for (Dtype d : o.dtypes)
            if (pred(hd, b, l, d) && k.supports(sweep_spec(hd, b, l), d)) return true;
    return false;
  };
  narrow(
      o.dtypes, [&](Dtype x) { return any([&](auto, auto, auto, Dtype d) { return d == x; }); },
      [](Dtype d) { return std::string(name(d)); }, "not declared by the kernel", notes);
  narrow(
      o.head_dims,
      [&](std::int64_t x) { return any([&](auto hd, auto, auto, auto) { return hd == x; }); },
      [](std::int64_t h) { return "head dim " + std::to_string(h); },
      "outside the kernel's declared domain", notes);
  narrow(
      o.layouts, [&](Layout x) { return any([&](auto, auto, Layout l, auto) { return l == x; }); },
      [](Layout l) { return std::string(name(l)); }, "layout not declared by the kernel", notes);
  narrow(
      o.bases, [&](double x) { return any([&](auto, double b, auto, auto) { return b == x; }); },
      [](double b) { return "base " + verify::fmt(b); }, "refused by the kernel's supports()",
      notes);
  if (o.dtypes.empty() || o.head_dims.empty() || o.layouts.empty() || o.bases.empty())
    throw UsageError("the kernel supports none of the report's specs (" +
                     (notes.empty() ? std::string("nothing left") : notes.front()) +
                     "); choose --dtypes, --head-dims, --bases, --layouts inside its domain");
  if (dom.max_position < o.max_position) {
    notes.push_back("positions above " + std::to_string(dom.max_position) +
                    ": outside the kernel's declared range (the sweep stops there)");
    o.max_position = dom.max_position;
  }
  if (dom.min_position > 0)
    notes.push_back("positions below " + std::to_string(dom.min_position) +
                    ": outside the kernel's declared range");
  return notes;
}

}  // namespace ropecheck::validate
