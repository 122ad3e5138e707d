// run_forked_jobs (forked_jobs.hpp): a parent that hands out job indices over pipes and collects
// the answers with poll(); runners forked from it that compute jobs until told to stop.
// Wire format, both directions on a pipe per runner: parent -> runner  [i32 job] (-1: stop);
// runner -> parent  [u8 kind][u64 length][text], kind 0 = result, 1 = error, 2 = usage error.
#include "forked_jobs.hpp"

#include "ropecheck/validate/options.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <stdexcept>

namespace ropecheck::validate {

namespace {

bool write_full(int fd, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool read_full(int fd, void* data, std::size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

enum Kind : std::uint8_t { kResult = 0, kError = 1, kUsage = 2 };

bool send_answer(int fd, Kind kind, const std::string& text) {
  const std::uint64_t len = text.size();
  return write_full(fd, &kind, 1) && write_full(fd, &len, sizeof len) &&
         write_full(fd, text.data(), text.size());
}

// The runner's whole life; leaves only through _exit.
[[noreturn]] void runner_main(int in, int out, const ForkedJobs& jobs) {
  // A runner whose parent died (Ctrl-C, a crash) must not keep a plugin worker busy.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::string start_error;
  Kind start_kind = kError;
  try {
    if (jobs.runner_start) jobs.runner_start();
  } catch (const UsageError& e) {
    start_error = e.what();
    start_kind = kUsage;
  } catch (const std::exception& e) {
    start_error = e.what();
  }
  for (;;) {
    std::int32_t i = -1;
    if (!read_full(in, &i, sizeof i) || i < 0) break;
    Kind kind = kResult;
    std::string text;
    if (!start_error.empty()) {
      kind = start_kind;
      text = start_error;
    } else {
      try {
        text = jobs.run(i);
      } catch (const UsageError& e) {
        kind = kUsage;
        text = e.what();
      } catch (const std::exception& e) {
        kind = kError;
        text = e.what();
      }
    }
    if (!send_answer(out, kind, text)) break;
  }
  try {
    if (jobs.runner_end) jobs.runner_end();
  } catch (...) {
  }
  std::fflush(stderr);
  _exit(0);
}

struct Runner {
  pid_t pid = -1;
  int to = -1, from = -1;  // the parent's ends
  int job = -1;            // the job it computes, -1 when idle
};

// Ends the runners however the run ends: a polite stop when they are idle, SIGKILL otherwise.
class Runners {
 public:
  std::vector<Runner> r;
  ~Runners() {
    for (Runner& x : r) {
      if (x.to >= 0) {
        if (x.job >= 0) {
          kill(x.pid, SIGKILL);
        } else {
          const std::int32_t stop = -1;
          write_full(x.to, &stop, sizeof stop);
        }
        close(x.to);
      }
      if (x.from >= 0) close(x.from);
      if (x.pid > 0) {
        int st = 0;
        while (waitpid(x.pid, &st, 0) < 0 && errno == EINTR) {
        }
      }
    }
  }
};

void spawn(Runners& rs, int processes, const ForkedJobs& jobs) {
  // Nothing buffered may be written twice (once by a runner).
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  for (int k = 0; k < processes; ++k) {
    int down[2], up[2];
    if (pipe2(down, O_CLOEXEC) != 0) throw std::runtime_error("validate: cannot create a pipe");
    if (pipe2(up, O_CLOEXEC) != 0) {
      close(down[0]);
      close(down[1]);
      throw std::runtime_error("validate: cannot create a pipe");
    }
    const pid_t pid = fork();
    if (pid < 0) {
      for (int fd : {down[0], down[1], up[0], up[1]}) close(fd);
      throw std::runtime_error(std::string("validate: cannot fork a runner: ") + strerror(errno));
    }
    if (pid == 0) {
      // Only its own pipe ends: an inherited end of another runner's pipe would hide that
      // runner's EOF.
      for (const Runner& o : rs.r) {
        close(o.to);
        close(o.from);
      }
      close(down[1]);
      close(up[0]);
      runner_main(down[0], up[1], jobs);
    }
    close(down[0]);
    close(up[1]);
    rs.r.push_back({pid, down[1], up[0], -1});
  }
}

}  // namespace

std::vector<std::optional<std::string>> run_forked_jobs(int n, int processes,
                                                        const ForkedJobs& jobs) {
  std::vector<std::optional<std::string>> results(static_cast<std::size_t>(n));
  if (processes <= 1 || n <= 1) {
    for (int i = 0; i < n; ++i) {
      if (!jobs.wanted(i)) continue;
      results[static_cast<std::size_t>(i)] = jobs.run(i);
      jobs.done(i, *results[static_cast<std::size_t>(i)]);
    }
    return results;
  }
  Runners rs;
  spawn(rs, std::min(processes, n), jobs);
  int next = 0;
  auto dispatch = [&](Runner& r) {
    while (next < n && !jobs.wanted(next)) ++next;
    r.job = -1;
    if (next >= n) return;
    const std::int32_t i = next++;
    if (!write_full(r.to, &i, sizeof i))
      throw std::runtime_error("validate: a runner process stopped taking jobs");
    r.job = i;
  };
  for (Runner& r : rs.r) dispatch(r);
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Runner*> busy;
    for (Runner& r : rs.r)
      if (r.job >= 0) {
        fds.push_back({r.from, POLLIN, 0});
        busy.push_back(&r);
      }
    if (fds.empty()) break;
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("validate: poll failed");
    }
    for (std::size_t k = 0; k < fds.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Runner& r = *busy[k];
      std::uint8_t kind = 0;
      std::uint64_t len = 0;
      std::string text;
      bool ok = read_full(r.from, &kind, 1) && read_full(r.from, &len, sizeof len);
      if (ok) {
        text.resize(len);
        ok = read_full(r.from, text.data(), len);
      }
      if (!ok)
        throw std::runtime_error("validate: a runner process ended while checking job " +
                                 std::to_string(r.job) + " (a bug of ropecheck: please report)");
      if (kind == kUsage) throw UsageError(text);
      if (kind != kResult) throw std::runtime_error(text);
      const int i = r.job;
      results[static_cast<std::size_t>(i)] = std::move(text);
      jobs.done(i, *results[static_cast<std::size_t>(i)]);
      dispatch(r);
    }
  }
  return results;
}

}  // namespace ropecheck::validate
