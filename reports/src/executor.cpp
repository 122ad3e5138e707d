// The executor: shard filter, thread pool, stop polling and progress (executor.hpp).
#include "executor.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

namespace ropecheck::reports::detail {

namespace {

// GoogleTest's sharding protocol: this run keeps the units whose work-list index is shard_index
// mod shard_count (unit seeds do not depend on the index, so a unit computes the same numbers in
// any shard); merge.cpp joins the shard reports.
std::vector<Unit> shard_units(const std::vector<Unit>& all, const Options& o) {
  if (o.shard_count <= 1) return all;
  std::vector<Unit> mine;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (i % static_cast<std::size_t>(o.shard_count) == static_cast<std::size_t>(o.shard_index))
      mine.push_back(all[i]);
  return mine;
}

// What each kind of unit computes (sweep.cpp).
struct RunUnit {
  const Plan& plan;
  UnitResult operator()(const SafeContextUnit& w) const {
    return safe_context_search(plan.main, static_cast<std::size_t>(w.kernel), w.dtype);
  }
  UnitResult operator()(const ScoreOffsetUnit& w) const {
    return score_offset_search(plan.main, static_cast<std::size_t>(w.kernel), w.dtype);
  }
  UnitResult operator()(const SpecialValuesUnit& w) const {
    return special_values(plan.main, static_cast<std::size_t>(w.kernel), w.dtype);
  }
  UnitResult operator()(const SweepUnit& w) const {
    return sweep_unit(plan.main, w.dtype, w.spec, w.bucket);
  }
  UnitResult operator()(const VariantSafeContextUnit& w) const {
    return safe_context_search(plan.variants[w.variant], static_cast<std::size_t>(w.kernel),
                               w.dtype);
  }
  UnitResult operator()(const VariantSweepUnit& w) const {
    return sweep_unit(plan.variants[w.variant], w.dtype, 0, w.bucket);
  }
};

// The shared state of the worker threads: the next unit to take, which units finished, the first
// error, and whether a stop was requested.
class Pool {
 public:
  Pool(const Plan& plan, Executed& ex, const Progress& progress)
      : plan_(plan), ex_(ex), progress_(progress), finished_(ex.units.size()) {}

  void worker() {
    const Options& o = plan_.main.o;
    const std::size_t n = ex_.units.size();
    for (;;) {
      // Polled between work units only: a unit's result is all or nothing, and the whole report
      // is dropped on a stop, so the previous report on disk stays the one a reader sees.
      if (o.stop && o.stop()) {
        stopped_ = true;
        next_ = n;
      }
      const std::size_t i = next_++;
      if (i >= n) return;
      try {
        ex_.results[i] = std::visit(RunUnit{plan_}, ex_.units[i]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
        next_ = n;
      }
      finished_[i] = true;
      report_progress(++done_, n);
    }
  }

  // After the workers joined: the first error, or Interrupted saying where the run stopped.
  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
    if (stopped_) throw Interrupted(stop_message());
  }

 private:
  void report_progress(std::size_t n_done, std::size_t n) {
    if (!progress_ || n_done * 10 / n == (n_done - 1) * 10 / n) return;
    std::lock_guard<std::mutex> lock(mu_);
    progress_("report: " + std::to_string(n_done) + "/" + std::to_string(n) + " work units done");
  }

  // The count, and the first unit (in work-list order) that did not finish.
  std::string stop_message() const {
    const std::size_t n = ex_.units.size();
    std::size_t n_done = 0, first_open = n;
    for (std::size_t i = 0; i < n; ++i) {
      if (finished_[i])
        ++n_done;
      else if (first_open == n)
        first_open = i;
    }
    std::string msg =
        "stopped after " + std::to_string(n_done) + " of " + std::to_string(n) + " work units";
    if (first_open < n) msg += "; first unfinished: " + unit_name(plan_, ex_.units[first_open]);
    return msg;
  }

  const Plan& plan_;
  Executed& ex_;
  const Progress& progress_;
  std::atomic<std::size_t> next_{0}, done_{0};
  std::atomic<bool> stopped_{false};
  std::vector<std::atomic<bool>> finished_;
  std::mutex mu_;
  std::exception_ptr error_;
};

}  // namespace

Executed execute(const Plan& plan, const Progress& progress) {
  const Options& o = plan.main.o;
  Executed ex;
  ex.units = shard_units(plan.units, o);
  ex.units_total = plan.units.size();
  ex.results.resize(ex.units.size());
  ex.threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  ex.threads = std::min<unsigned>(ex.threads, static_cast<unsigned>(ex.units.size()));
  Pool pool(plan, ex, progress);
  {
    std::vector<std::thread> threads;
    for (unsigned t = 1; t < ex.threads; ++t) threads.emplace_back([&pool] { pool.worker(); });
    pool.worker();
    for (auto& t : threads) t.join();
  }
  pool.rethrow();
  return ex;
}

}  // namespace ropecheck::reports::detail
