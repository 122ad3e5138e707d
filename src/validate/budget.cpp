// Budgets of a validation run (run.hpp): cases per property, shrinking calls and wall time, the
// run's shared shrink-time pool; and which checks run (options.hpp: wanted).
#include <sys/mman.h>

#include <algorithm>
#include <new>

#include "ropecheck/validate/run.hpp"

namespace ropecheck::validate {

namespace props = ropecheck::properties;

int max_success_for(const std::string& budget) {
  // Cases per property and configuration. Each case is a few isolated plugin calls plus MP
  // reference evaluations; "standard" keeps a full plugin validation of all 8 configurations well
  // under a minute.
  if (budget == "quick") return 20;
  if (budget == "standard") return 100;  // RapidCheck's own default
  if (budget == "deep") return 1000;
  throw UsageError("--budget must be quick, standard or deep (got '" + budget + "')");
}

// Every property's shrinking draws from one pool of kShrinkPoolFactor times the per-property time.
// Calls alone did not bound the time: a call's cost grows with the case (a restricted kernel's
// shrink candidates are mostly rejected draws, thousands of picks each), and a kernel broken
// everywhere fails every property of every configuration (36 shrinks at quick). With the pool, a
// failing run costs its cases plus about pool / --threads of shrinking, and the last failures keep
// their first counterexample (said in their message). A verdict never depends on it: a property
// fails at its first failing case; only how small its counterexample gets does.
double shrink_seconds_for(const Options& o) {
  if (o.shrink_seconds >= 0) return o.shrink_seconds;
  if (o.budget == "quick") return 1;
  if (o.budget == "standard") return 3;
  return 20;
}

SharedPool::SharedPool(double seconds) {
  static_assert(std::atomic<std::int64_t>::is_always_lock_free);
  void* p = mmap(nullptr, sizeof(std::atomic<std::int64_t>), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::runtime_error("mmap of the shrink pool failed");
  pool_ = new (p) std::atomic<std::int64_t>(static_cast<std::int64_t>(seconds * 1e9));
}

SharedPool::~SharedPool() { munmap(pool_, sizeof(*pool_)); }

std::string shrink_note(const props::Verdict& v, const Options& o) {
  if (!v.shrink_budget_spent) return "";
  if (!v.shrink_out_of_time)
    return "\n  (shrinking stopped after its budget of " + std::to_string(kShrinkCalls) +
           " plugin calls: the smallest counterexample found so far)";
  const double s = shrink_seconds_for(o);
  if (v.shrink_seconds < 0.05 && v.shrink_seconds < s)
    return "\n  (not shrunk: the run's shrinking time, " + verify::fmt(kShrinkPoolFactor * s, 3) +
           " s in all (--shrink-seconds " + verify::fmt(s, 3) +
           " per property), was spent by earlier failures; the first counterexample found)";
  return "\n  (shrinking stopped after " + verify::fmt(v.shrink_seconds, 2) +
         " s, its wall-time budget (--shrink-seconds " + verify::fmt(s, 3) +
         "): the smallest counterexample found so far)";
}

bool wanted(const Options& o, const std::string& check) {
  return o.properties.empty() ||
         std::find(o.properties.begin(), o.properties.end(), check) != o.properties.end();
}

}  // namespace ropecheck::validate
