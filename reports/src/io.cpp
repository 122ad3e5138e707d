// Atomic file output, the four report files, and the environment block.
#include "build_info.hpp"
#include "ropecheck/reports/report.hpp"

#include <fcntl.h>
#include <mpfr.h>
#include <sys/stat.h>
#include <unistd.h>
#include <Eigen/Core>
#include <boost/version.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>

namespace ropecheck::reports {

namespace fs = std::filesystem;

namespace {
[[noreturn]] void io_fail(const std::string& what, const fs::path& p, int err) {
  throw std::runtime_error(what + " '" + p.string() + "': " + std::strerror(err));
}
}  // namespace

void atomic_write(const fs::path& path, std::string_view data) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  // Same directory as the target so rename() is atomic (same filesystem).
  std::string tmpl = (dir / ("." + path.filename().string() + ".tmp.XXXXXX")).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) io_fail("cannot create a temporary file next to", path, errno);
  const fs::path tmp = tmpl;
  auto cleanup = [&](const std::string& what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    io_fail(what, path, err);
  };
  std::size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      cleanup("cannot write", errno);
    }
    off += static_cast<std::size_t>(n);
  }
  // mkstemp creates 0600; reports are for sharing.
  if (::fchmod(fd, 0644) != 0) cleanup("cannot chmod", errno);
  if (::fsync(fd) != 0) cleanup("cannot fsync", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    io_fail("cannot close", path, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    io_fail("cannot rename into", path, err);
  }
  // Make the rename itself durable.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_all(const nlohmann::json& report, const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw std::runtime_error("cannot create output directory '" + dir.string() + "'");
  // Render everything first: a rendering error must not leave a mix of old and new files.
  const std::string js = report.dump(1) + "\n";
  const std::string md = render_markdown(report);
  const std::string html = render_html(report);
  const std::string junit = render_junit(report);
  atomic_write(dir / "report.json", js);
  atomic_write(dir / "report.md", md);
  atomic_write(dir / "report.html", html);
  atomic_write(dir / "junit.xml", junit);
}

nlohmann::json environment(const Options& o) {
  nlohmann::json e;
  e["compiler"] = ROPECHECK_BUILD_COMPILER;
  e["build_type"] = ROPECHECK_BUILD_TYPE;
  e["flags"] = ROPECHECK_BUILD_FLAGS;
  e["git_commit"] = ROPECHECK_GIT_COMMIT;
  std::string cpu = "unknown";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      const auto p = line.find(':');
      if (p != std::string::npos) cpu = line.substr(p + 2);
      break;
    }
  e["cpu"] = cpu;
  e["hardware_threads"] = std::thread::hardware_concurrency();
  e["simd_path"] = o.simd_path;
  e["simd_best_path"] = o.simd_best_path;
  e["eigen"] = std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) +
               "." + std::to_string(EIGEN_MINOR_VERSION);
  e["boost"] = std::to_string(BOOST_VERSION / 100000) + "." +
               std::to_string(BOOST_VERSION / 100 % 1000) + "." +
               std::to_string(BOOST_VERSION % 100);
  e["mpfr"] = mpfr_get_version();
  return e;
}

}  // namespace ropecheck::reports
