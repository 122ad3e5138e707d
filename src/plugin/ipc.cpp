#include "ipc.hpp"

#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <ctime>

namespace ropecheck::plugin::ipc {

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

namespace {
// Waits until fd is ready for `events` or the deadline passes.
IoResult wait_fd(int fd, short events, double deadline) {
  for (;;) {
    const double left = deadline - now_s();
    if (left <= 0) return IoResult::timeout;
    pollfd p{fd, events, 0};
    const int ms = static_cast<int>(std::min(left * 1000.0 + 1.0, 2.0e9));
    const int r = poll(&p, 1, ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      return IoResult::error;
    }
    if (r == 0) continue;  // re-check the deadline
    return IoResult::ok;   // readable, writable, or HUP/ERR: the read/write below tells which
  }
}

// Without a deadline (the worker's side) a blocking read/write needs no poll first: it waits by
// itself, and a HUP/ERR shows in its result as it would after poll. A non-blocking descriptor
// answers EAGAIN, and the loop then polls. With a deadline, poll always comes first.
bool forever(double deadline) { return deadline >= 1e299; }
}  // namespace

IoResult write_all(int fd, const void* data, std::size_t n, double deadline) {
  const char* p = static_cast<const char*>(data);
  bool wait = !forever(deadline);
  while (n > 0) {
    if (wait)
      if (auto w = wait_fd(fd, POLLOUT, deadline); w != IoResult::ok) return w;
    wait = !forever(deadline);
    const ssize_t k = ::write(fd, p, n);
    if (k < 0) {
      if (errno == EAGAIN) wait = true;
      if (errno == EINTR || errno == EAGAIN) continue;
      return errno == EPIPE ? IoResult::eof : IoResult::error;
    }
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return IoResult::ok;
}

IoResult read_all(int fd, void* data, std::size_t n, double deadline) {
  char* p = static_cast<char*>(data);
  bool wait = !forever(deadline);
  while (n > 0) {
    if (wait)
      if (auto w = wait_fd(fd, POLLIN, deadline); w != IoResult::ok) return w;
    wait = !forever(deadline);
    const ssize_t k = ::read(fd, p, n);
    if (k < 0) {
      if (errno == EAGAIN) wait = true;
      if (errno == EINTR || errno == EAGAIN) continue;
      return IoResult::error;
    }
    if (k == 0) return IoResult::eof;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return IoResult::ok;
}

// Header and payload in one writev: the reader, woken by the first bytes, then finds the whole
// message in the pipe (two writes cost it a second wake-up per message, and with it a context
// switch each way: most of a validate run's system time went there).
IoResult send(int fd, Msg type, const std::vector<char>& payload, double deadline) {
  char head[12];
  const auto t = static_cast<std::uint32_t>(type);
  const std::uint64_t len = payload.size();
  std::memcpy(head, &t, 4);
  std::memcpy(head + 4, &len, 8);
  iovec v[2] = {{head, sizeof head}, {const_cast<char*>(payload.data()), payload.size()}};
  int first = 0;  // v[first..1] is what is left to write
  bool wait = !forever(deadline);
  while (first < 2) {
    if (wait)
      if (auto w = wait_fd(fd, POLLOUT, deadline); w != IoResult::ok) return w;
    wait = !forever(deadline);
    const ssize_t k = ::writev(fd, v + first, 2 - first);
    if (k < 0) {
      if (errno == EAGAIN) wait = true;
      if (errno == EINTR || errno == EAGAIN) continue;
      return errno == EPIPE ? IoResult::eof : IoResult::error;
    }
    auto done = static_cast<std::size_t>(k);
    while (first < 2 && done >= v[first].iov_len) done -= v[first++].iov_len;
    if (first < 2) {
      v[first].iov_base = static_cast<char*>(v[first].iov_base) + done;
      v[first].iov_len -= done;
    }
  }
  return IoResult::ok;
}

IoResult recv(int fd, Msg& type, std::vector<char>& payload, std::uint64_t max_len,
              double deadline) {
  char head[12];
  if (auto r = read_all(fd, head, sizeof head, deadline); r != IoResult::ok) return r;
  std::uint32_t t = 0;
  std::uint64_t len = 0;
  std::memcpy(&t, head, 4);
  std::memcpy(&len, head + 4, 8);
  if (len > max_len) return IoResult::error;
  type = static_cast<Msg>(t);
  payload.resize(len);
  return read_all(fd, payload.data(), len, deadline);
}

}  // namespace ropecheck::plugin::ipc
