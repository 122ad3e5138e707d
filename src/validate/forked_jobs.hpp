// Independent jobs on several processes, results in job order: `validate --threads N` (run.cpp).
//
// Why forked processes and not std::thread (or a thread pool library): the jobs are property
// checks, and the property engine is not thread-safe here. Debian's RapidCheck keeps its
// generation context in process-wide statics (rc::detail::ImplicitParam / ImplicitScope, no
// thread_local: `readelf -s librapidcheck.a` shows no TLS symbol), so two checks on two threads
// would draw from each other's generators. The reference precision is process-wide too (Boost's
// default precision), and a plugin worker serves one call at a time. A process per runner gives
// each its own RapidCheck, its own precision and its own plugin worker with no locks; a job costs
// one pipe round trip, and results are plain data (JSON text) anyway.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ropecheck::validate {

struct ForkedJobs {
  // Computes job i, in a runner process (or in this one when there is one runner). The text is
  // the job's whole result. An exception ends the run (rethrown in this process, as UsageError
  // when it was one).
  std::function<std::string(int)> run;
  // Asked in this process before job i is handed out, in job order: false skips it (its result
  // stays empty). Lets a job's outcome cancel later ones (a crashed configuration).
  std::function<bool(int)> wanted;
  // Called in this process with each result as it arrives (any order), before later dispatches.
  std::function<void(int, const std::string&)> done;
  // Runs in each runner process before its first job (e.g. loads its own plugin worker), and at
  // its end (releases it); the runner then leaves with _exit, running no destructor of objects
  // it inherited (the parent's plugin worker belongs to the parent).
  std::function<void()> runner_start, runner_end;
};

// Runs jobs 0..n-1 on `processes` runners (1: in this process, in order). Jobs are handed out in
// index order to whichever runner is free; the results are indexed, so the output does not depend
// on `processes` or on timing. Returns each job's result (nullopt: skipped by `wanted`).
std::vector<std::optional<std::string>> run_forked_jobs(int n, int processes,
                                                        const ForkedJobs& jobs);

}  // namespace ropecheck::validate
